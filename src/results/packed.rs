//! A results row kept compactly, for commands that hold a whole file of
//! them (`report`, `check`, `diagnose`, `compare`).
//!
//! A `Row` is 2 KB in memory whatever it holds: 132 columns, most of them
//! `Option<f64>` at 16 bytes and `String` at 24, when a row of a results
//! file fills about 56 and is some 700 bytes of CSV. `Packed` keeps only
//! the columns that have a value: a bit per column, one 8-byte word per
//! filled column, and the row's text in one string. Every column reads
//! through `Fields`, the same way as from a `Row`; the columns! list in
//! `columns.rs` makes both, so a new column needs nothing here.
use super::columns::{COLUMNS, RESULTS};
use super::{Implementation, Mode, Status};

/// Words of the bitmap of filled columns.
const BITMAP: usize = COLUMNS.div_ceil(64);

/// The columns a command keeps of the rows it loads (`Row::pack_only`):
/// `check` reads a few dozen of the 132, and a file of 200,000 rows is
/// smaller by the rest.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Columns([u64; BITMAP]);

impl Columns {
    pub(crate) const ALL: Columns = Columns([u64::MAX; BITMAP]);

    /// The columns of these header names. A name that is no column keeps
    /// nothing; `unknown` lists such names, for the tests of each list.
    pub(crate) fn named(names: &[&str]) -> Columns {
        let mut m = [0; BITMAP];
        for i in RESULTS.iter().enumerate().filter(|(_, c)| names.contains(&c.name)).map(|(i, _)| i) {
            m[i / 64] |= 1 << (i % 64);
        }
        Columns(m)
    }

    /// These columns and `other`'s.
    pub(crate) fn with(self, other: Columns) -> Columns {
        let mut m = self.0;
        m.iter_mut().zip(other.0).for_each(|(a, b)| *a |= b);
        Columns(m)
    }

    #[cfg(test)]
    pub(crate) fn unknown<'a>(names: &[&'a str]) -> Vec<&'a str> {
        names.iter().copied().filter(|n| !RESULTS.iter().any(|c| c.name == *n)).collect()
    }

    fn has(&self, i: usize) -> bool {
        self.0[i / 64] & (1 << (i % 64)) != 0
    }
}

/// A row with only its filled columns (`row.pack()`), read through
/// `Fields`; `unpack` gives the `Row` back, equal to the one packed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Packed {
    filled: [u64; BITMAP],
    /// One word per filled column, in column order.
    words: Box<[u64]>,
    /// The text columns' values, one after the other; their words say where.
    text: Box<str>,
    /// What was kept: a column left out reads as empty, so debug builds and
    /// the unit tests (release ones too, as CI runs them) stop at any read of
    /// one, where a command's list missed a column it uses.
    #[cfg(any(test, debug_assertions))]
    kept: Columns,
}

impl Packed {
    /// The word of column `i`, None when the column is empty.
    pub(super) fn word(&self, i: usize) -> Option<u64> {
        #[cfg(any(test, debug_assertions))]
        assert!(self.kept.has(i), "column {} is read but was not loaded", RESULTS[i].name);
        self.raw(i)
    }

    /// `word`, for `unpack`, which reads every column whether kept or not.
    pub(super) fn raw(&self, i: usize) -> Option<u64> {
        let (w, bit) = (i / 64, i % 64);
        if self.filled[w] & (1 << bit) == 0 {
            return None;
        }
        let before: u32 = self.filled[..w].iter().map(|x| x.count_ones()).sum::<u32>()
            + (self.filled[w] & ((1 << bit) - 1)).count_ones();
        Some(self.words[before as usize])
    }

    pub(super) fn text(&self) -> &str {
        &self.text
    }
}

/// Builds a `Packed` column by column, in column order.
pub(super) struct Packer {
    keep: Columns,
    filled: [u64; BITMAP],
    words: Vec<u64>,
    text: String,
}

impl Packer {
    pub(super) fn new(keep: Columns) -> Packer {
        Packer { keep, filled: [0; BITMAP], words: vec![], text: String::new() }
    }

    pub(super) fn put<T: Value>(&mut self, i: usize, v: &T) {
        if !self.keep.has(i) {
            return;
        }
        if let Some(w) = v.pack(&mut self.text) {
            self.filled[i / 64] |= 1 << (i % 64);
            self.words.push(w);
        }
    }

    pub(super) fn finish(self) -> Packed {
        Packed {
            filled: self.filled,
            words: self.words.into(),
            text: self.text.into(),
            #[cfg(any(test, debug_assertions))]
            kept: self.keep,
        }
    }
}

/// A column's type: how it reads (`View`), from a `Row`'s field or from a
/// packed word, and how it packs into one. An empty value packs into none.
pub(crate) trait Value {
    type View<'a>
    where
        Self: 'a;
    fn view(&self) -> Self::View<'_>;
    /// The value's word, None when empty; text goes into `text`.
    fn pack(&self, text: &mut String) -> Option<u64>;
    fn unpack(word: Option<u64>, text: &str) -> Self::View<'_>;
    fn own(view: Self::View<'_>) -> Self;
}

impl Value for String {
    type View<'a> = &'a str;
    fn view(&self) -> &str {
        self
    }
    /// Where the text starts in the row's text, and its length (32 bits each).
    fn pack(&self, text: &mut String) -> Option<u64> {
        if self.is_empty() {
            return None;
        }
        let start = text.len() as u64;
        text.push_str(self);
        Some(start << 32 | self.len() as u64)
    }
    fn unpack(word: Option<u64>, text: &str) -> &str {
        word.map_or("", |w| {
            let start = (w >> 32) as usize;
            &text[start..start + (w & 0xffff_ffff) as usize]
        })
    }
    fn own(view: &str) -> String {
        view.to_string()
    }
}

/// Scalars: Copy types whose word is their bits.
macro_rules! scalar {
    ($t:ty, $to:expr, $from:expr) => {
        impl Value for Option<$t> {
            type View<'a> = Option<$t>;
            fn view(&self) -> Option<$t> {
                *self
            }
            fn pack(&self, _: &mut String) -> Option<u64> {
                self.map($to)
            }
            fn unpack(word: Option<u64>, _: &str) -> Option<$t> {
                word.map($from)
            }
            fn own(view: Option<$t>) -> Self {
                view
            }
        }
    };
}
scalar!(f64, f64::to_bits, f64::from_bits);
scalar!(u64, |v| v, |w| w);
scalar!(u32, u64::from, |w| w as u32);
scalar!(bool, u64::from, |w| w != 0);

/// Columns that always have a value: the default packs into no word.
macro_rules! plain {
    ($t:ty, $to:expr, $from:expr) => {
        impl Value for $t {
            type View<'a> = $t;
            fn view(&self) -> $t {
                *self
            }
            fn pack(&self, _: &mut String) -> Option<u64> {
                (*self != <$t>::default()).then(|| $to(*self))
            }
            fn unpack(word: Option<u64>, _: &str) -> $t {
                word.map_or_else(<$t>::default, $from)
            }
            fn own(view: $t) -> Self {
                view
            }
        }
    };
}
plain!(u32, u64::from, |w| w as u32);
plain!(Status, |s| Status::ALL.iter().position(|&x| x == s).unwrap_or_default() as u64, |w| Status::ALL[w as usize]);
plain!(Mode, |m| Mode::ALL.iter().position(|&x| x == m).unwrap_or_default() as u64, |w| Mode::ALL[w as usize]);
plain!(Implementation, |s| Implementation::ALL.iter().position(|&x| x == s).unwrap_or_default() as u64, |w| {
    Implementation::ALL[w as usize]
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::csv::Row;
    use crate::results::Fields;

    #[test]
    fn a_packed_row_reads_and_unpacks_as_the_row() {
        let row = Row {
            schema_version: 5,
            run_id: "abc".into(),
            host: "node-1".into(),
            label: "V100 ×4 \"box\"".into(),
            implementation: Implementation::Pytorch,
            n_devices: 4,
            image_size: Some(224),
            channels_last: Some(false),
            throughput_img_s: Some(1234.5),
            loss_last: Some(f64::NAN),
            step_ms_std: Some(0.0),
            seed: Some(u64::MAX),
            status: Status::Oom,
            note: "ünïcode, and a comma".into(),
            ..Default::default()
        };
        let p = row.pack();
        assert_eq!(
            (p.run_id(), p.host(), p.label(), p.note()),
            ("abc", "node-1", "V100 ×4 \"box\"", row.note.as_str())
        );
        assert_eq!((p.mode(), p.error()), (Mode::Train, ""));
        assert_eq!(
            (p.implementation(), p.status(), p.n_devices(), p.schema_version()),
            (Implementation::Pytorch, Status::Oom, 4, 5)
        );
        assert_eq!((p.image_size(), p.channels_last(), p.cudnn_benchmark()), (Some(224), Some(false), None));
        assert_eq!(
            (p.throughput_img_s(), p.step_ms_std(), p.step_ms_mean(), p.seed()),
            (Some(1234.5), Some(0.0), None, Some(u64::MAX))
        );
        assert!(p.loss_last().unwrap().is_nan());
        // NaN is not equal to itself: compare the rest whole.
        let back = p.unpack();
        assert!(back.loss_last.unwrap().is_nan());
        assert_eq!(Row { loss_last: None, ..back }, Row { loss_last: None, ..row.clone() });
        // Only the filled columns take words.
        assert_eq!(p.words.len(), 14);
        // The defaults take none, and an empty row packs into nothing.
        assert_eq!(Row::default().pack().words.len(), 0);
        assert_eq!(Row::default().pack().unpack(), Row::default());
    }

    #[test]
    fn only_the_columns_kept_are_packed() {
        let row =
            Row { model: "resnet50".into(), note: "long".into(), throughput_img_s: Some(1.0), ..Default::default() };
        let p = row.pack_only(Columns::named(&["model", "throughput_img_s"]));
        assert_eq!((p.model(), p.throughput_img_s(), p.words.len()), ("resnet50", Some(1.0), 2));
        assert_eq!(p.unpack(), Row { note: String::new(), ..row });
        assert_eq!(Columns::unknown(&["model", "no_such_column"]), ["no_such_column"]);
    }

    #[test]
    #[should_panic(expected = "column note is read but was not loaded")]
    fn a_column_left_out_cannot_be_read_in_the_tests() {
        Row { note: "x".into(), ..Default::default() }.pack_only(Columns::named(&["model"])).note();
    }

    #[test]
    fn every_column_of_a_full_row_survives_packing() {
        // Each column filled with a value of its own: a mix-up of words shows as a difference.
        let mut text = String::new();
        let header = Row::header();
        for (i, name) in header.split(',').enumerate() {
            text.push_str(if i == 0 { "" } else { "," });
            text.push_str(&match name {
                "schema_version" => "5".to_string(),
                "impl" => "published".to_string(),
                "status" => "diverged".to_string(),
                "mode" => "infer".to_string(),
                "channels_last" | "cudnn_benchmark" | "deterministic" | "in_place" => "true".to_string(),
                _ => format!("{}", i + 1),
            });
        }
        let file = format!("{header}\n{text}\n");
        let rows = crate::results::csv::parse_rows(std::path::Path::new("full.csv"), file.as_bytes()).unwrap();
        let row = &rows[0].1;
        let p = row.pack();
        assert_eq!(p.words.len(), COLUMNS);
        assert_eq!(&p.unpack(), row);
        assert_eq!(
            (p.model(), p.throughput_img_s(), p.source()),
            (row.model.as_str(), row.throughput_img_s, row.source.as_str())
        );
    }
}
