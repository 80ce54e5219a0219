//! Exporters: a [`Table`] of results in, bytes out. They know nothing about
//! benchmarks, so `report`, `compare` and `check` share them, and each format
//! is tested on its own.
//!
//! A cell carries both its value and how humans should read it: the text
//! formats print the text, CSV and JSON the raw value, so scripts never have to
//! parse "97.3%" or "3.48x". Raw-only columns (an interval's bounds, already
//! shown as "±" in a human cell) appear in CSV and JSON alone.

use anyhow::Result;
use serde_json::{json, Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Align {
    Left,
    Right,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Column {
    /// Machine name: CSV header and JSON key.
    pub key: String,
    /// Human header for the table and markdown formats.
    pub title: String,
    pub align: Align,
    /// False for columns only CSV and JSON carry.
    pub human: bool,
    /// JSON only: the value sits in the row's object named `.0`, under `.1`
    /// (a verdict's `parts`), where CSV has a column of its own.
    pub json_in: Option<(String, String)>,
}

impl Column {
    pub(crate) fn text(key: &str, title: &str) -> Self {
        Column { key: key.into(), title: title.into(), align: Align::Left, human: true, json_in: None }
    }
    pub(crate) fn num(key: &str, title: &str) -> Self {
        Column { key: key.into(), title: title.into(), align: Align::Right, human: true, json_in: None }
    }
    /// A number for scripts only; the human formats leave it out.
    pub(crate) fn raw(key: &str) -> Self {
        Column { human: false, ..Column::num(key, key) }
    }
    /// In JSON, `field` of the row's object `object` instead of a key of its own.
    pub(crate) fn in_json_object(self, object: &str, field: &str) -> Self {
        Column { json_in: Some((object.into(), field.into())), ..self }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    Text(String),
    /// A number and its human rendering (units, rounding).
    Num {
        value: f64,
        text: String,
    },
    /// No value; `text` says why for humans ("-", "missing", "oom").
    Empty(String),
}

impl Cell {
    pub(crate) fn text(s: impl Into<String>) -> Self {
        Cell::Text(s.into())
    }
    pub(crate) fn num(value: f64, text: impl Into<String>) -> Self {
        Cell::Num { value, text: text.into() }
    }
    pub(crate) fn none() -> Self {
        Cell::Empty("-".into())
    }
    pub(crate) fn empty(why: impl Into<String>) -> Self {
        Cell::Empty(why.into())
    }
    /// What the table and markdown formats print.
    pub(crate) fn display(&self) -> &str {
        match self {
            Cell::Text(s) | Cell::Num { text: s, .. } | Cell::Empty(s) => s,
        }
    }
}

/// Rows of cells under named columns, with a title and free-text notes
/// (excluded rows, warnings) that belong with the numbers.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Table {
    pub title: String,
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<Cell>>,
    pub notes: Vec<String>,
}

impl Table {
    /// The table without its raw-only columns, as the human formats print it.
    pub(crate) fn human(&self) -> Table {
        let pick = |cells: &[Cell]| self.human_cells(cells).cloned().collect();
        Table {
            title: self.title.clone(),
            columns: self.columns.iter().filter(|c| c.human).cloned().collect(),
            rows: self.rows.iter().map(|r| pick(r)).collect(),
            notes: self.notes.clone(),
        }
    }

    /// The columns the human formats print.
    fn human_columns(&self) -> impl Iterator<Item = &Column> {
        self.columns.iter().filter(|c| c.human)
    }

    /// A row's cells under `human_columns`, borrowed: a table of 200,000
    /// rows is printed without a copy of it.
    fn human_cells<'a>(&'a self, row: &'a [Cell]) -> impl Iterator<Item = &'a Cell> {
        row.iter().zip(&self.columns).filter(|(_, c)| c.human).map(|(cell, _)| cell)
    }
}

pub(crate) trait Exporter {
    fn export(&self, table: &Table) -> Result<Vec<u8>>;
}

/// The output formats (`--format`), a word of the command line's vocabulary.
pub use crate::config::Format;

pub(crate) fn exporter(format: Format) -> Box<dyn Exporter> {
    match format {
        Format::Table => Box::new(TextExporter),
        Format::Markdown => Box::new(MarkdownExporter),
        Format::Csv => Box::new(CsvExporter),
        Format::Json => Box::new(JsonExporter),
    }
}

fn width(s: &str) -> usize {
    s.chars().count()
}

/// Longest cell a terminal or markdown table shows whole; a longer one (a
/// 100,000-character label) is cut with an ellipsis. CSV and JSON keep it.
const MAX_CELL: usize = 60;

/// A cell as a table line can hold it: control characters escaped (a
/// newline in a label must not break the row) and cut at `MAX_CELL`.
/// Borrowed when it needs neither, as almost every cell.
fn shown(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) && s.char_indices().nth(MAX_CELL).is_none() {
        return std::borrow::Cow::Borrowed(s);
    }
    let escaped: String =
        s.chars().flat_map(|c| if c.is_control() { c.escape_default().collect::<Vec<_>>() } else { vec![c] }).collect();
    std::borrow::Cow::Owned(match escaped.char_indices().nth(MAX_CELL) {
        Some((at, _)) => format!("{}…", &escaped[..at]),
        None => escaped,
    })
}

/// Appends `s` padded with spaces to `w` characters.
fn pad(out: &mut String, s: &str, w: usize, align: Align) {
    let fill = w.saturating_sub(width(s));
    if align == Align::Right {
        out.extend(std::iter::repeat_n(' ', fill));
    }
    out.push_str(s);
    if align == Align::Left {
        out.extend(std::iter::repeat_n(' ', fill));
    }
}

/// Aligned columns separated by two spaces, a dashed rule under the header,
/// no trailing blanks (so snapshot tests and diffs stay clean).
pub(crate) struct TextExporter;

impl Exporter for TextExporter {
    fn export(&self, t: &Table) -> Result<Vec<u8>> {
        let columns: Vec<&Column> = t.human_columns().collect();
        let mut widths: Vec<usize> = columns.iter().map(|c| width(&c.title)).collect();
        for row in &t.rows {
            for (w, cell) in widths.iter_mut().zip(t.human_cells(row)) {
                *w = (*w).max(width(&shown(cell.display())));
            }
        }
        let mut out = String::new();
        // Every line is at most this long: the output is allocated once.
        let line_len = widths.iter().sum::<usize>() + 2 * widths.len() + 1;
        out.reserve(
            line_len * (t.rows.len() + 2) + t.title.len() + t.notes.iter().map(|n| n.len() + 1).sum::<usize>() + 3,
        );
        let line = |out: &mut String, cells: &mut dyn Iterator<Item = (&str, Align)>| {
            let start = out.len();
            for (i, ((s, a), w)) in cells.zip(&widths).enumerate() {
                if i > 0 {
                    out.push_str("  ");
                }
                pad(out, s, *w, a);
            }
            out.truncate(start + out[start..].trim_end().len());
            out.push('\n');
        };
        if !t.title.is_empty() {
            out.push_str(&t.title);
            out.push_str("\n\n");
        }
        line(&mut out, &mut columns.iter().map(|c| (c.title.as_str(), c.align)));
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        out.push_str(&rule.join("  "));
        out.push('\n');
        for row in &t.rows {
            let cells: Vec<std::borrow::Cow<str>> = t.human_cells(row).map(|c| shown(c.display())).collect();
            line(&mut out, &mut cells.iter().zip(&columns).map(|(c, col)| (c.as_ref(), col.align)));
        }
        if !t.notes.is_empty() {
            out.push('\n');
            for n in &t.notes {
                out.push_str(n);
                out.push('\n');
            }
        }
        Ok(out.into_bytes())
    }
}

/// Markdown cells cannot contain a bare `|` or a newline.
fn md_escape(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

pub(crate) struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    fn export(&self, t: &Table) -> Result<Vec<u8>> {
        let mut out = String::new();
        if !t.title.is_empty() {
            out.push_str(&format!("**{}**\n\n", md_escape(&t.title)));
        }
        let head: Vec<String> = t.human_columns().map(|c| md_escape(&c.title)).collect();
        out.push_str(&format!("| {} |\n", head.join(" | ")));
        let rule: Vec<&str> = t
            .human_columns()
            .map(|c| match c.align {
                Align::Left => "---",
                Align::Right => "--:",
            })
            .collect();
        out.push_str(&format!("|{}|\n", rule.join("|")));
        for row in &t.rows {
            let cells: Vec<String> = t.human_cells(row).map(|c| md_escape(&shown(c.display()))).collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        if !t.notes.is_empty() {
            out.push('\n');
            for n in &t.notes {
                out.push_str(&format!("- {}\n", md_escape(n)));
            }
        }
        Ok(out.into_bytes())
    }
}

/// Shortest text that parses back to the same f64 (Rust's `Display`), so
/// CSV and JSON lose no precision and never print units.
fn raw(cell: &Cell) -> String {
    match cell {
        Cell::Text(s) => s.clone(),
        Cell::Num { value, .. } => format!("{value}"),
        Cell::Empty(_) => String::new(),
    }
}

/// Header of column keys, then raw values; notes are not part of the data
/// (the command prints them on stderr).
pub(crate) struct CsvExporter;

impl Exporter for CsvExporter {
    fn export(&self, t: &Table) -> Result<Vec<u8>> {
        let mut w = csv::Writer::from_writer(vec![]);
        w.write_record(t.columns.iter().map(|c| c.key.as_str()))?;
        for row in &t.rows {
            // Labels, hosts and notes are user text: never a formula in a spreadsheet.
            w.write_record(row.iter().map(|c| match c {
                Cell::Text(s) => crate::results::csv::escape_cell(s).into_owned(),
                other => raw(other),
            }))?;
        }
        w.into_inner().map_err(|e| anyhow::anyhow!("flushing CSV: {e}"))
    }
}

pub(crate) struct JsonExporter;

impl Exporter for JsonExporter {
    fn export(&self, t: &Table) -> Result<Vec<u8>> {
        let rows: Vec<Value> = t
            .rows
            .iter()
            .map(|row| {
                let mut m = Map::new();
                for (col, cell) in t.columns.iter().zip(row) {
                    let v = match cell {
                        Cell::Text(s) => Value::String(s.clone()),
                        // Counts print as 64, not 64.0.
                        Cell::Num { value, .. } if value.fract() == 0.0 && value.abs() < 9e15 => json!(*value as i64),
                        // NaN and infinities have no JSON form.
                        Cell::Num { value, .. } if value.is_finite() => json!(value),
                        Cell::Num { .. } | Cell::Empty(_) => Value::Null,
                    };
                    match &col.json_in {
                        Some((object, field)) => {
                            let o = m.entry(object.clone()).or_insert_with(|| Value::Object(Map::new()));
                            if let Value::Object(o) = o {
                                o.insert(field.clone(), v);
                            }
                        }
                        None => {
                            m.insert(col.key.clone(), v);
                        }
                    }
                }
                Value::Object(m)
            })
            .collect();
        let doc = json!({ "title": t.title, "rows": rows, "notes": t.notes });
        let mut bytes = serde_json::to_vec_pretty(&doc)?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        Table {
            title: "Demo".into(),
            columns: vec![Column::text("name", "name"), Column::num("rate", "img/s"), Column::num("eff", "eff")],
            rows: vec![
                vec![Cell::text("a|b"), Cell::num(1234.5, "1234"), Cell::num(0.975, "97.5%")],
                vec![Cell::text("long name"), Cell::num(51.25, "51.2"), Cell::none()],
            ],
            notes: vec!["one note".into()],
        }
    }

    fn s(e: &dyn Exporter, t: &Table) -> String {
        String::from_utf8(e.export(t).unwrap()).unwrap()
    }

    #[test]
    fn a_long_or_multiline_cell_is_cut_and_escaped_in_tables_and_kept_in_csv_and_json() {
        let label = format!("box\n{}", "x".repeat(100_000));
        let t = Table {
            title: String::new(),
            columns: vec![Column::text("label", "label"), Column::num("n", "n")],
            rows: vec![vec![Cell::text(label.clone()), Cell::num(1.0, "1")]],
            notes: vec![],
        };
        for e in [&TextExporter as &dyn Exporter, &MarkdownExporter] {
            let out = s(e, &t);
            let row = out.lines().find(|l| l.contains("box")).unwrap();
            assert!(row.contains("box\\n") && row.contains('…') && row.chars().count() < 100, "{row}");
        }
        assert!(s(&CsvExporter, &t).contains(&label));
        let v: serde_json::Value = serde_json::from_str(&s(&JsonExporter, &t)).unwrap();
        assert_eq!(v["rows"][0]["label"], label);
    }

    #[test]
    fn text_aligns_columns_without_trailing_blanks() {
        let want = "Demo\n\n\
                    name       img/s    eff\n\
                    ---------  -----  -----\n\
                    a|b         1234  97.5%\n\
                    long name   51.2      -\n\
                    \n\
                    one note\n";
        assert_eq!(s(&TextExporter, &sample()), want);
    }

    #[test]
    fn text_leaves_out_raw_columns_between_others_and_keeps_a_blank_row_its_own_line() {
        let t = Table {
            title: String::new(),
            columns: vec![Column::text("a", "a"), Column::raw("x"), Column::num("b", "b")],
            rows: vec![
                vec![Cell::text("p"), Cell::num(9.0, "raw"), Cell::num(2.0, "2")],
                vec![Cell::text(""), Cell::num(9.0, "raw"), Cell::empty("")],
                vec![Cell::text("q"), Cell::num(9.0, "raw"), Cell::num(30.0, "30")],
            ],
            notes: vec![],
        };
        assert_eq!(s(&TextExporter, &t), "a   b\n-  --\np   2\n\nq  30\n");
    }

    #[test]
    fn markdown_escapes_pipes_and_right_aligns_numbers() {
        let want = "**Demo**\n\n\
                    | name | img/s | eff |\n\
                    |---|--:|--:|\n\
                    | a\\|b | 1234 | 97.5% |\n\
                    | long name | 51.2 | - |\n\
                    \n\
                    - one note\n";
        assert_eq!(s(&MarkdownExporter, &sample()), want);
    }

    #[test]
    fn csv_has_raw_values_and_keys() {
        assert_eq!(s(&CsvExporter, &sample()), "name,rate,eff\na|b,1234.5,0.975\nlong name,51.25,\n");
    }

    #[test]
    fn json_has_numbers_nulls_and_notes() {
        let v: Value = serde_json::from_slice(&JsonExporter.export(&sample()).unwrap()).unwrap();
        assert_eq!(v["rows"][0]["rate"], json!(1234.5));
        assert_eq!(v["rows"][0]["rate"].to_string(), "1234.5");
        assert_eq!(v["rows"][1]["eff"], Value::Null);
        assert_eq!(v["notes"][0], "one note");
        assert_eq!(v["title"], "Demo");
    }

    #[test]
    fn raw_columns_reach_csv_and_json_only() {
        let mut t = sample();
        t.columns.push(Column::raw("rate_lo"));
        for (row, lo) in t.rows.iter_mut().zip([1200.0, 50.0]) {
            row.push(Cell::num(lo, "unused"));
        }
        assert_eq!(s(&TextExporter, &t), s(&TextExporter, &sample()));
        assert_eq!(s(&MarkdownExporter, &t), s(&MarkdownExporter, &sample()));
        assert!(s(&CsvExporter, &t).starts_with("name,rate,eff,rate_lo\na|b,1234.5,0.975,1200\n"));
        let v: Value = serde_json::from_slice(&JsonExporter.export(&t).unwrap()).unwrap();
        assert_eq!(v["rows"][1]["rate_lo"], json!(50));
    }

    #[test]
    fn a_column_may_sit_in_a_json_object_and_keep_its_own_csv_column() {
        let t = Table {
            columns: vec![
                Column::text("config", "config"),
                Column::num("a_pct", "a").in_json_object("parts", "a"),
                Column::num("b_pct", "b").in_json_object("parts", "b"),
            ],
            rows: vec![vec![Cell::text("x"), Cell::num(1.5, "1.5"), Cell::none()]],
            ..Default::default()
        };
        assert!(s(&CsvExporter, &t).starts_with("config,a_pct,b_pct\nx,1.5,\n"));
        let v: Value = serde_json::from_slice(&JsonExporter.export(&t).unwrap()).unwrap();
        assert_eq!(v["rows"][0]["parts"], json!({"a": 1.5, "b": null}));
        assert!(v["rows"][0].get("a_pct").is_none());
    }

    #[test]
    fn whole_numbers_are_json_integers() {
        let t = Table {
            columns: vec![Column::num("n", "n")],
            rows: vec![vec![Cell::num(64.0, "64")]],
            ..Default::default()
        };
        let text = String::from_utf8(JsonExporter.export(&t).unwrap()).unwrap();
        assert!(text.contains("\"n\": 64\n"), "{text}");
    }

    #[test]
    fn non_finite_numbers_become_null_in_json() {
        let t = Table {
            columns: vec![Column::num("x", "x")],
            rows: vec![vec![Cell::num(f64::NAN, "nan")]],
            ..Default::default()
        };
        let v: Value = serde_json::from_slice(&JsonExporter.export(&t).unwrap()).unwrap();
        assert_eq!(v["rows"][0]["x"], Value::Null);
    }
}
