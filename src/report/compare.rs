//! `compare`: result sets side by side (a V100 box against a K80 box, today
//! against last month, a measurement against a published figure), joined on
//! the config key. A config missing from a set is shown as missing, never
//! dropped. Figures carry their 95 % intervals, and a ratio whose two
//! throughputs' intervals overlap is shown as `≈`: noise, not a ranking.

use anyhow::Result;
use std::collections::{BTreeMap, BTreeSet};

use crate::error::usage;
use crate::report::export::{Cell, Column, Table};
use crate::report::format::{fmt_pct, fmt_rate, fmt_ratio};
use crate::report::summary::{
    cell_spread, column_median, disturbed_notes, excluded_notes, file_stem, spread_bounds, status_counts, summarize,
    ConfigKey, Group, Run, Scope, Spread, INTERVAL_NOTE, PUBLISHED, PUBLISHED_NOTE, SCALING_NOTE,
};
use crate::report::verdict::{self, ExpectFn, Verdict};
use crate::results::long::DeviceData;
use crate::results::Fields;
use crate::results::Implementation;

/// The rows of one file that share a name.
#[derive(Debug, Clone)]
pub(crate) struct Set {
    pub name: String,
    pub file: std::path::PathBuf,
    pub members: Vec<usize>,
}

/// Splits each file's runs into sets named by `label`, else `device_name`,
/// else the file name, so one file holding a K80 and a P100 gives two sets.
/// The same name from two files (today's and last month's unlabelled runs
/// on one box) gets the file name appended; published sets say so.
pub(crate) fn partition_sets(runs: &[Run]) -> Vec<Set> {
    let mut sets: Vec<(std::path::PathBuf, String, Vec<usize>)> = vec![];
    // A device's peak and an all-reduce curve travel beside the runs but are
    // no configuration: they make no set of their own.
    for (i, r) in runs.iter().enumerate().filter(|(_, r)| !r.row.is_peak() && !r.row.is_allreduce()) {
        let base = if !r.row.label().is_empty() {
            r.row.label().to_string()
        } else if !r.row.device_name().is_empty() {
            r.row.device_name().to_string()
        } else {
            file_stem(&r.file)
        };
        // PyTorch's own runs of a machine are a set of their own, beside
        // gpubench's, never repeats of them.
        let base = match r.row.implementation() {
            Implementation::Gpubench | Implementation::Published => base,
            other => format!("{base} [{other}]"),
        };
        match sets.iter_mut().find(|(f, n, _)| **f == *r.file && *n == base) {
            Some(s) => s.2.push(i),
            None => sets.push((r.file.to_path_buf(), base, vec![i])),
        }
    }
    let mut out: Vec<Set> = vec![];
    for (file, base, members) in &sets {
        let clash = sets.iter().filter(|(_, n, _)| n == base).count() > 1;
        let mut name = if clash { format!("{base} ({})", file_stem(file)) } else { base.clone() };
        let mut k = 2;
        while out.iter().any(|s| s.name == name) {
            name = format!("{base} #{k}");
            k += 1;
        }
        if members.iter().all(|&i| runs[i].row.implementation() == PUBLISHED) {
            name.push_str(" [published]");
        }
        out.push(Set { name, file: file.clone(), members: members.clone() });
    }
    out
}

/// Longest set name used as a column header; longer ones become letters.
const MAX_NAME_IN_HEADER: usize = 20;

/// A, B, ..., Z, AA, AB, ...
fn letter(i: usize) -> String {
    let mut n = i + 1;
    let mut s = String::new();
    while n > 0 {
        s.insert(0, (b'A' + ((n - 1) % 26) as u8) as char);
        n = (n - 1) / 26;
    }
    s
}

/// The joined view: every config any set has, and each set's group for it.
pub(crate) struct Comparison {
    pub sets: Vec<Set>,
    pub configs: Vec<ConfigKey>,
    /// `groups[set]`, by config.
    pub groups: Vec<BTreeMap<ConfigKey, Group>>,
}

pub(crate) fn compare(runs: &[Run], devices: &DeviceData) -> Result<Comparison> {
    let sets = partition_sets(runs);
    if sets.len() < 2 {
        return Err(usage(format!(
            "compare needs at least two result sets, found one ({}); give two files, or one file whose rows have \
             different labels or device names",
            sets.first().map_or("none", |s| s.name.as_str())
        )));
    }
    let groups: Vec<BTreeMap<ConfigKey, Group>> = sets
        .iter()
        .map(|s| {
            summarize(runs, &s.members, |_| Scope::default(), devices).into_iter().map(|g| (g.key.clone(), g)).collect()
        })
        .collect();
    let configs: BTreeSet<ConfigKey> = groups.iter().flat_map(|m| m.keys().cloned()).collect();
    Ok(Comparison { sets, configs: configs.into_iter().collect(), groups })
}

impl Comparison {
    pub(crate) fn throughput(&self, set: usize, key: &ConfigKey) -> Option<f64> {
        self.groups[set].get(key).and_then(|g| g.throughput)
    }

    pub(crate) fn throughput_ci(&self, set: usize, key: &ConfigKey) -> Option<Spread> {
        self.groups[set].get(key).and_then(|g| g.throughput_ci)
    }

    /// Set `set`'s throughput over the first set's, and whether the two
    /// cannot be told apart (their intervals overlap).
    pub(crate) fn ratio(&self, set: usize, key: &ConfigKey) -> Option<(f64, bool)> {
        match (self.throughput(set, key), self.throughput(0, key)) {
            (Some(a), Some(b)) if b > 0.0 => {
                let same = match (self.throughput_ci(set, key), self.throughput_ci(0, key)) {
                    (Some(x), Some(y)) => x.overlaps(&y),
                    _ => false,
                };
                Some((a / b, same))
            }
            _ => None,
        }
    }

    pub(crate) fn table(&self, runs: &[Run]) -> Table {
        let load = self.configs.iter().any(ConfigKey::is_infer);
        let variant = ConfigKey::any_variant(&self.configs);
        let mut columns = ConfigKey::columns(load, variant);
        // Long names would make every column as wide as the name: then the
        // headers use letters, spelled out in the notes. Keys keep the names.
        let short = self.sets.iter().all(|s| s.name.chars().count() <= MAX_NAME_IN_HEADER);
        let head: Vec<String> =
            (0..self.sets.len()).map(|i| if short { self.sets[i].name.clone() } else { letter(i) }).collect();
        for (s, h) in self.sets.iter().zip(&head) {
            columns.push(Column::num(&format!("{}:throughput_img_s", s.name), &format!("{h} img/s")));
            columns.push(Column::num(&format!("{}:scaling_efficiency", s.name), &format!("{h} scaling")));
        }
        // Energy only where some set measured it, so tables without it keep their shape.
        let energy =
            (0..self.sets.len()).any(|i| self.configs.iter().any(|k| self.img_per_joule(runs, i, k).is_some()));
        if energy {
            for (s, h) in self.sets.iter().zip(&head) {
                columns.push(Column::num(&format!("{}:img_per_joule", s.name), &format!("{h} img/J")));
            }
        }
        let first = &self.sets[0].name;
        for (s, h) in self.sets.iter().zip(&head).skip(1) {
            columns.push(Column::num(&format!("{}/{first}:throughput_ratio", s.name), &format!("{h} / {}", head[0])));
        }
        for s in &self.sets {
            columns.push(Column::raw(&format!("{}:throughput_ci95_lo", s.name)));
            columns.push(Column::raw(&format!("{}:throughput_ci95_hi", s.name)));
        }
        for s in self.sets.iter().skip(1) {
            columns.push(Column::raw(&format!("{}/{first}:indistinguishable", s.name)));
        }

        let rows = self
            .configs
            .iter()
            .map(|k| {
                let mut row = k.cells(load, variant);
                for m in &self.groups {
                    match m.get(k) {
                        None => row.extend([Cell::empty("missing"), Cell::empty("missing")]),
                        Some(g) if g.throughput.is_none() => {
                            let why = if g.excluded.is_empty() { "-".into() } else { status_counts(runs, &g.excluded) };
                            row.extend([Cell::empty(why), Cell::none()]);
                        }
                        Some(g) => row.extend([
                            cell_spread(g.throughput, g.throughput_ci, fmt_rate),
                            cell_spread(g.efficiency, g.efficiency_ci, fmt_pct),
                        ]),
                    }
                }
                if energy {
                    for i in 0..self.sets.len() {
                        row.push(
                            self.img_per_joule(runs, i, k).map_or(Cell::none(), |e| Cell::num(e, format!("{e:.3}"))),
                        );
                    }
                }
                let ratios: Vec<Option<(f64, bool)>> = (1..self.sets.len()).map(|i| self.ratio(i, k)).collect();
                for r in &ratios {
                    row.push(match r {
                        Some((x, true)) => Cell::num(*x, format!("≈{}", fmt_ratio(*x))),
                        Some((x, false)) => Cell::num(*x, fmt_ratio(*x)),
                        None => Cell::none(),
                    });
                }
                for i in 0..self.sets.len() {
                    row.extend(spread_bounds(self.throughput_ci(i, k)));
                }
                for r in &ratios {
                    row.push(match r {
                        Some((_, same)) => Cell::text(if *same { "yes" } else { "no" }),
                        None => Cell::none(),
                    });
                }
                row
            })
            .collect();

        let names: Vec<&str> = self.sets.iter().map(|s| s.name.as_str()).collect();
        let mut notes: Vec<String> = if short {
            vec![]
        } else {
            self.sets.iter().zip(&head).map(|(s, h)| format!("{h} = {} ({})", s.name, s.file.display())).collect()
        };
        notes.extend([
            "joined on model, image size, precision, strategy, devices and batch/dev; medians over repeats".to_string(),
            "'missing': the set has no run of that config".to_string(),
            SCALING_NOTE.to_string(),
        ]);
        if self.groups.iter().any(|m| m.values().any(|g| g.throughput_ci.is_some())) {
            notes.push(INTERVAL_NOTE.to_string());
        }
        if self.configs.iter().any(|k| (1..self.sets.len()).any(|i| self.ratio(i, k).is_some_and(|r| r.1))) {
            notes.push("≈: the two throughputs' 95 % intervals overlap, so the ratio is not a ranking".to_string());
        }
        if self.sets.iter().any(|s| s.name.ends_with("[published]")) {
            notes.push(PUBLISHED_NOTE.to_string());
        }
        for (s, m) in self.sets.iter().zip(&self.groups) {
            let hw: BTreeSet<&str> = s.members.iter().map(|&i| runs[i].row.device_name()).collect();
            if hw.len() > 1 {
                let hw: Vec<&str> = hw.into_iter().collect();
                notes.push(format!(
                    "set {} mixes hardware ({}); label the runs to keep them apart",
                    s.name,
                    hw.join(", ")
                ));
            }
            notes.extend(excluded_notes(runs, m.values().flat_map(|g| g.excluded.iter().copied())));
            notes.extend(disturbed_notes(runs, m.values()));
        }
        Table { title: format!("gpubench compare: {}", names.join(" vs ")), columns, rows, notes }
    }

    /// Each set's verdicts (why its multi-device configurations fall short of
    /// ideal scaling against its own 1-device run), the set named first.
    pub(crate) fn verdicts(&self, runs: &[Run], expect: ExpectFn) -> Vec<Verdict> {
        let mut out = vec![];
        for (s, m) in self.sets.iter().zip(&self.groups) {
            let groups: Vec<Group> = m.values().cloned().collect();
            for mut v in verdict::verdicts(runs, &groups, expect) {
                v.config = format!("{}: {}", s.name, v.config);
                v.sentence = format!("{}: {}", s.name, v.sentence);
                out.push(v);
            }
        }
        out
    }

    /// A set's median images per joule for a config, when its rows have energy.
    pub(crate) fn img_per_joule(&self, runs: &[Run], set: usize, key: &ConfigKey) -> Option<f64> {
        self.groups[set].get(key).and_then(|g| column_median(runs, &g.pooled, |r| r.img_per_joule()))
    }

    /// Per config with at least one value: each set's throughput.
    pub(crate) fn chart_data(&self) -> (Vec<ConfigKey>, Vec<Vec<Option<f64>>>) {
        let mut keys = vec![];
        let mut values = vec![];
        for k in &self.configs {
            let v: Vec<Option<f64>> = (0..self.sets.len()).map(|i| self.throughput(i, k)).collect();
            if v.iter().any(Option::is_some) {
                keys.push(k.clone());
                values.push(v);
            }
        }
        (keys, values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::export::{Exporter, TextExporter};
    use crate::report::summary::tests::row;

    fn run(file: &str, mut r: crate::results::csv::Row, label: &str) -> Run {
        r.label = label.into();
        Run { file: std::path::Path::new(file).into(), line: 2, row: r.pack() }
    }

    #[test]
    fn sets_split_by_label_then_device_then_file() {
        let mut k80 = row("single", 1, 50.0);
        k80.device_name = "Tesla K80".into();
        let mut nameless = row("single", 1, 10.0);
        nameless.device_name.clear();
        let runs = vec![
            run("a.csv", row("single", 1, 1.0), "box A"),
            run("a.csv", k80, ""),
            run("b.csv", row("single", 1, 2.0), ""),
            run("c/old.csv", row("single", 1, 3.0), ""),
            run("d.csv", nameless, ""),
        ];
        let names: Vec<String> = partition_sets(&runs).into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["box A", "Tesla K80", "Tesla V100 (b)", "Tesla V100 (old)", "d"]);
    }

    #[test]
    fn published_sets_are_marked() {
        let mut p = row("single", 1, 51.9);
        p.implementation = PUBLISHED;
        let runs = vec![run("ref.csv", p, "tf_cnn_benchmarks K80"), run("mine.csv", row("single", 1, 60.0), "")];
        let names: Vec<String> = partition_sets(&runs).into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["tf_cnn_benchmarks K80 [published]", "Tesla V100"]);
    }

    #[test]
    fn peaks_and_all_reduce_curves_make_no_set() {
        let mut peak = row("single", 1, 0.0);
        peak.mode = crate::results::Mode::Peak;
        peak.label = "other".into();
        let mut ar = row("single", 2, 0.0);
        ar.mode = crate::results::Mode::Allreduce;
        let runs = vec![run("a.csv", row("single", 1, 1.0), ""), run("a.csv", peak, ""), run("b.csv", ar, "")];
        let sets = partition_sets(&runs);
        assert_eq!((sets.len(), sets[0].members.clone()), (1, vec![0]));
    }

    #[test]
    fn pytorch_runs_of_a_machine_are_their_own_set() {
        let mut p = row("single", 1, 30.0);
        p.implementation = Implementation::Pytorch;
        let runs = vec![run("sweep.csv", row("single", 1, 31.0), ""), run("sweep.csv", p, "")];
        let sets = partition_sets(&runs);
        let names: Vec<&str> = sets.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["Tesla V100", "Tesla V100 [pytorch]"]);
        assert_eq!((sets[0].members.clone(), sets[1].members.clone()), (vec![0], vec![1]));
    }

    #[test]
    fn gaps_are_shown_as_missing_and_ratios_computed() {
        let runs = vec![
            run("v100.csv", row("single", 1, 400.0), "V100"),
            run("v100.csv", row("ddp", 2, 760.0), "V100"),
            run("k80.csv", row("single", 1, 50.0), "K80"),
        ];
        let c = compare(&runs, &DeviceData::default()).unwrap();
        let text = String::from_utf8(TextExporter.export(&c.table(&runs)).unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "gpubench compare: V100 vs K80");
        assert_eq!(
            lines[2],
            "model     image  precision  strategy  devices  batch/dev  V100 img/s  V100 scaling  K80 img/s  K80 scaling  K80 / V100"
        );
        assert_eq!(
            lines[4],
            "resnet50    224  fp32       single          1         64         400        100.0%       50.0       100.0%       0.12x"
        );
        assert_eq!(
            lines[5],
            "resnet50    224  fp32       ddp             2         64         760         95.0%    missing      missing           -"
        );
    }

    #[test]
    fn overlapping_intervals_are_marked_indistinguishable() {
        let with_ci = |thr: f64, half: f64, label: &str| {
            let mut r = row("single", 1, thr);
            (r.throughput_ci95_lo, r.throughput_ci95_hi) = (Some(thr - half), Some(thr + half));
            run(&format!("{label}.csv"), r, label)
        };
        let runs = vec![with_ci(400.0, 10.0, "A"), with_ci(405.0, 10.0, "B"), with_ci(300.0, 5.0, "C")];
        let c = compare(&runs, &DeviceData::default()).unwrap();
        let key = &c.configs[0];
        assert_eq!(c.ratio(1, key).map(|r| r.1), Some(true));
        assert_eq!(c.ratio(2, key).map(|r| r.1), Some(false));
        let text = String::from_utf8(TextExporter.export(&c.table(&runs)).unwrap()).unwrap();
        let line = text.lines().nth(4).unwrap();
        assert!(line.contains("400 ±10*") && line.contains("≈1.01x") && line.ends_with(" 0.75x"), "{line}");
        let csv = String::from_utf8(crate::report::export::CsvExporter.export(&c.table(&runs)).unwrap()).unwrap();
        assert!(csv.lines().next().unwrap().ends_with("B/A:indistinguishable,C/A:indistinguishable"), "{csv}");
        assert!(csv.lines().nth(1).unwrap().ends_with(",390,410,395,415,295,305,yes,no"), "{csv}");
    }

    #[test]
    fn long_set_names_become_letters_in_headers() {
        let mut p = row("single", 1, 51.9);
        p.implementation = PUBLISHED;
        let runs =
            vec![run("ref.csv", p, "tf_cnn_benchmarks GCE K80 synthetic"), run("k.csv", row("single", 1, 50.0), "")];
        let t = compare(&runs, &DeviceData::default()).unwrap().table(&runs);
        let titles: Vec<&str> = t.columns.iter().skip(6).filter(|c| c.human).map(|c| c.title.as_str()).collect();
        assert_eq!(titles, ["A img/s", "A scaling", "B img/s", "B scaling", "B / A"]);
        assert_eq!(t.notes[0], "A = tf_cnn_benchmarks GCE K80 synthetic [published] (ref.csv)");
        assert_eq!(t.columns[6].key, "tf_cnn_benchmarks GCE K80 synthetic [published]:throughput_img_s");
        assert_eq!((letter(0), letter(25), letter(26)), ("A".into(), "Z".into(), "AA".into()));
    }

    #[test]
    fn each_set_gets_its_verdicts_and_energy_when_measured() {
        let with = |strategy: &str, n: u32, thr: f64, step: f64, e: f64, label: &str| {
            let mut r = row(strategy, n, thr);
            (r.step_ms_p50, r.img_per_joule, r.data_wait_ms) = (Some(step), Some(e), Some(0.0));
            run(&format!("{label}.csv"), r, label)
        };
        let runs = vec![
            with("single", 1, 400.0, 160.0, 1.0, "A"),
            with("ddp", 2, 760.0, 168.0, 0.9, "A"),
            with("single", 1, 50.0, 1280.0, 0.2, "B"),
        ];
        let c = compare(&runs, &DeviceData::default()).unwrap();
        let v = c.verdicts(&runs, &verdict::no_curve);
        assert_eq!(v.len(), 1, "only set A has a multi-device configuration");
        assert!(v[0].sentence.starts_with("A: ddp on 2 devices reaches 1.90x of single (95 %)"), "{}", v[0].sentence);
        assert!(v[0].sentence.ends_with("energy: 0.900 img/J against 1.00 for single (0.90x)"), "{}", v[0].sentence);
        let t = c.table(&runs);
        let col = t.columns.iter().position(|c| c.key == "B:img_per_joule").expect("an energy column per set");
        assert_eq!(t.rows[0][col].display(), "0.200");
        // Without energy anywhere, no energy columns.
        let plain = vec![run("a.csv", row("single", 1, 1.0), "A"), run("b.csv", row("single", 1, 2.0), "B")];
        let t = compare(&plain, &DeviceData::default()).unwrap().table(&plain);
        assert!(t.columns.iter().all(|c| !c.key.ends_with("img_per_joule")));
    }

    #[test]
    fn one_set_is_a_usage_error() {
        let runs = vec![run("a.csv", row("single", 1, 1.0), "")];
        let err = compare(&runs, &DeviceData::default()).err().unwrap();
        assert_eq!(crate::error::exit_code(&err), 2);
    }
}
