//! `diagnose`: which node or GPU of a fleet is slow. Every measured row is
//! held against the baseline of its configuration (model, image size,
//! precision, strategy, devices, batch, set-up, implementation and GPU
//! model): the `--baseline` file's median, else the fleet's own median over
//! the other rows of that configuration. SuperBench's approach, with
//! gpubench's two gates: a row is slow when it is more than `--max-drop`
//! below the baseline *and* its 95 % interval lies wholly below the
//! baseline's, so one noisy run on a shared node is not a defect. Besides:
//! a utilization spread or memory imbalance across a run's own devices
//! (dp's master is expected to be heavier and is not judged), interference
//! the run recorded, and cells that failed or never produced a row.
//!
//! A fleet median needs 3 rows of a configuration or more (with two, either
//! could be the slow one); fewer are noted, not judged.
use std::collections::BTreeMap;

use crate::metrics::interval::Interval;
use crate::report::export::{Cell, Column, Table};
use crate::report::format::fmt_rate;
use crate::report::summary::{median, ConfigKey, Run};
use crate::results::Fields;
use crate::results::Status;

/// A row's own devices differing by more than this in mean utilization (points).
const UTIL_SPREAD_PTS: f64 = 20.0;
/// Peak memory max ÷ min across a run's devices above this (not for dp).
const MEM_IMBALANCE: f64 = 1.25;
/// A ddp rank computing this much longer than the ranks' median (%).
const STRAGGLER_PCT: f64 = 10.0;

/// One configuration as diagnose compares it: the configuration, the
/// implementation and the GPU model (or CPU).
type Key = (ConfigKey, String, String);

fn key_of(r: &Run) -> Key {
    (ConfigKey::of(&r.row), r.row.implementation().to_string(), r.row.device_name().to_string())
}

/// A baseline: the median throughput and the interval it carries.
#[derive(Debug, Clone, Copy)]
struct Base {
    median: f64,
    interval: Option<Interval>,
    /// Rows it is the median of.
    n: usize,
}

fn interval_of(r: &Run) -> Option<Interval> {
    Some(Interval { lo: r.row.throughput_ci95_lo()?, hi: r.row.throughput_ci95_hi()? })
}

/// The median of `rows`' throughputs, with the middle row's interval (the
/// two middle rows' hull for an even count).
fn base_of(rows: &[&Run]) -> Option<Base> {
    let mut v: Vec<(f64, &Run)> = rows.iter().filter_map(|r| Some((r.row.throughput_img_s()?, *r))).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = v.len();
    let mid: Vec<&Run> = if n % 2 == 1 { vec![v[n / 2].1] } else { vec![v[n / 2 - 1].1, v[n / 2].1] };
    let ivs: Vec<Interval> = mid.iter().filter_map(|r| interval_of(r)).collect();
    let interval = (ivs.len() == mid.len()).then(|| Interval {
        lo: ivs.iter().map(|i| i.lo).fold(f64::INFINITY, f64::min),
        hi: ivs.iter().map(|i| i.hi).fold(f64::NEG_INFINITY, f64::max),
    });
    let median = median(&v.iter().map(|x| x.0).collect::<Vec<_>>())?;
    Some(Base { median, interval, n })
}

/// Where a row ran, as a person looks for it: the host, and its GPUs.
fn place(r: &Run) -> String {
    let host = if r.row.host().is_empty() { "(no host)".to_string() } else { r.row.host().to_string() };
    match r.row.devices().strip_prefix("cuda:") {
        Some(list) if list.contains(',') => format!("{host} GPUs {list}"),
        Some(one) => format!("{host} GPU {one}"),
        None => host,
    }
}

fn config_words(k: &ConfigKey) -> String {
    let mut s = format!("{} {}", k.model, k.precision);
    if let Some(b) = k.batch_per_device {
        s += &format!(" b{b}");
    }
    s += &format!(" {} ×{}", k.strategy, k.n_devices);
    let v = k.variant();
    if !v.is_empty() {
        s += &format!(" {v}");
    }
    s
}

/// What was found about one row.
#[derive(Debug, Clone)]
pub(crate) struct Finding {
    pub place: String,
    pub config: String,
    pub throughput: Option<f64>,
    pub baseline: Option<f64>,
    pub reasons: Vec<String>,
}

/// The fleet's verdict.
#[derive(Debug, Clone, Default)]
pub(crate) struct Diagnosis {
    /// Every judged row, defective or not.
    pub findings: Vec<Finding>,
    pub notes: Vec<String>,
}

impl Diagnosis {
    pub(crate) fn defective(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| !f.reasons.is_empty())
    }

    pub(crate) fn exit_code(&self) -> i32 {
        i32::from(self.defective().next().is_some())
    }

    /// One line per defective node or GPU and configuration.
    pub(crate) fn lines(&self) -> Vec<String> {
        self.defective().map(|f| format!("{}: {}: {}", f.place, f.config, f.reasons.join("; "))).collect()
    }

    pub(crate) fn table(&self) -> Table {
        let columns = vec![
            Column::text("place", "node / GPU"),
            Column::text("config", "configuration"),
            Column::num("throughput_img_s", "img/s"),
            Column::num("baseline_img_s", "baseline"),
            Column::num("delta", "Δ"),
            Column::text("verdict", "verdict"),
        ];
        let rows = self
            .findings
            .iter()
            .map(|f| {
                let num = |v: Option<f64>| v.map_or(Cell::none(), |t| Cell::num(t, fmt_rate(t)));
                let delta = match (f.throughput, f.baseline) {
                    (Some(t), Some(b)) if b > 0.0 => {
                        let d = t / b - 1.0;
                        Cell::num(d, format!("{:+.1}%", 100.0 * d))
                    }
                    _ => Cell::none(),
                };
                let verdict = if f.reasons.is_empty() { "ok".to_string() } else { f.reasons.join("; ") };
                vec![
                    Cell::text(&f.place),
                    Cell::text(&f.config),
                    num(f.throughput),
                    num(f.baseline),
                    delta,
                    Cell::text(verdict),
                ]
            })
            .collect();
        Table { title: "gpubench diagnose".into(), columns, rows, notes: self.notes.clone() }
    }
}

/// Judges `runs` against `baseline` (else against the fleet's own medians).
pub(crate) fn diagnose(runs: &[Run], baseline: Option<&[Run]>, max_drop: f64) -> Diagnosis {
    // Runs only: a device's peak or an all-reduce curve is no configuration.
    let measured = |r: &&Run| r.row.implementation().is_measured() && !r.row.is_peak() && !r.row.is_allreduce();
    let mut by_key: BTreeMap<Key, Vec<&Run>> = BTreeMap::new();
    for r in runs.iter().filter(measured) {
        by_key.entry(key_of(r)).or_default().push(r);
    }
    let mut base_rows: BTreeMap<Key, Vec<&Run>> = BTreeMap::new();
    for r in baseline.unwrap_or_default().iter().filter(measured).filter(|r| r.is_ok()) {
        base_rows.entry(key_of(r)).or_default().push(r);
    }
    let source = if baseline.is_some() { "the baseline" } else { "the fleet median" };
    let mut d = Diagnosis::default();
    for (k, rows) in &by_key {
        let words = config_words(&k.0);
        let ok: Vec<&Run> = rows.iter().copied().filter(|r| r.is_ok()).collect();
        let base = match baseline {
            Some(_) => base_rows.get(k).and_then(|b| base_of(b)),
            None if ok.len() >= 3 => base_of(&ok),
            None => None,
        };
        if base.is_none() && !ok.is_empty() {
            d.notes.push(match baseline {
                Some(_) => format!("{words} on {}: not in the baseline, not judged for speed", k.2),
                None => format!("{words} on {}: {} ok row(s), a fleet median needs 3", k.2, ok.len()),
            });
        }
        for r in rows {
            let row = &r.row;
            let mut reasons = vec![];
            match row.status() {
                Status::Ok => {}
                Status::Missing => reasons.push(format!("missing: {}", row.error())),
                Status::Oom if !ok.is_empty() => reasons.push("out of memory where the others fit".to_string()),
                Status::Oom => {}
                s => reasons.push(format!("{s}: {}", row.error())),
            }
            if let (Some(b), Some(t), true) = (base, row.throughput_img_s(), r.is_ok()) {
                let below = t < b.median * (1.0 - max_drop);
                let apart = match (interval_of(r), b.interval) {
                    (Some(mine), Some(theirs)) => Some(mine.hi < theirs.lo),
                    _ => None,
                };
                if below && apart != Some(false) {
                    let how = match apart {
                        Some(_) => "intervals apart".to_string(),
                        None => "no interval to compare".to_string(),
                    };
                    reasons.push(format!(
                        "{:.0}% below {source} ({} vs {} img/s, {} row(s)), {how}",
                        100.0 * (1.0 - t / b.median),
                        fmt_rate(t),
                        fmt_rate(b.median),
                        b.n
                    ));
                }
            }
            if let Some(s) = row.util_spread_pct().filter(|&s| s > UTIL_SPREAD_PTS) {
                reasons.push(format!("utilization differs by {s:.0} points across its devices"));
            }
            if row.strategy() != "dp" {
                if let Some(m) = row.mem_imbalance().filter(|&m| m > MEM_IMBALANCE) {
                    reasons.push(format!("peak memory ×{m:.2} across its devices"));
                }
            }
            if let (Some(rank), Some(x)) =
                (row.slowest_rank(), row.rank_compute_excess_pct().filter(|&x| x > STRAGGLER_PCT))
            {
                reasons.push(format!("rank {rank} computes {x:.0}% longer than the other ranks' median (a straggler)"));
            }
            if !row.interference().is_empty() {
                reasons.push(format!("disturbed: {}", row.interference()));
            }
            d.findings.push(Finding {
                place: place(r),
                config: words.clone(),
                throughput: row.throughput_img_s().filter(|_| r.is_ok()),
                baseline: base.map(|b| b.median),
                reasons,
            });
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::summary::tests::{row, runs_of};

    fn fleet(scale: &[(usize, f64)]) -> Vec<Run> {
        let rows = (0..5)
            .map(|i| {
                let f = scale.iter().find(|(h, _)| *h == i).map_or(1.0, |s| s.1);
                let mut r = row("single", 1, 1000.0 * f);
                r.host = format!("node-0{i}");
                r.devices = "cuda:3".into();
                r.device_kind = "cuda".into();
                r.throughput_ci95_lo = Some(990.0 * f);
                r.throughput_ci95_hi = Some(1010.0 * f);
                r
            })
            .collect();
        runs_of(rows)
    }

    #[test]
    fn the_slow_gpu_is_named_and_an_even_fleet_passes() {
        let d = diagnose(&fleet(&[]), None, 0.05);
        assert_eq!(d.exit_code(), 0, "{:?}", d.lines());
        let d = diagnose(&fleet(&[(2, 0.82)]), None, 0.05);
        assert_eq!(d.exit_code(), 1);
        let lines = d.lines();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].starts_with("node-02 GPU 3: "), "{lines:?}");
        assert!(
            lines[0].contains("18% below the fleet median (820 vs 1000 img/s, 5 row(s)), intervals apart"),
            "{lines:?}"
        );
        // Within --max-drop, or with overlapping intervals: not a defect.
        assert_eq!(diagnose(&fleet(&[(2, 0.97)]), None, 0.05).exit_code(), 0);
        let mut wide = fleet(&[(2, 0.9)]);
        wide[2].edit(|r| r.throughput_ci95_hi = Some(1005.0));
        assert_eq!(diagnose(&wide, None, 0.05).exit_code(), 0, "its interval reaches the fleet's");
    }

    #[test]
    fn failures_imbalance_and_small_fleets() {
        let mut f = fleet(&[]);
        f[1].edit(|r| r.status = Status::Missing);
        f[1].edit(|r| r.error = "cell 1 left no file".into());
        f[4].edit(|r| r.mem_imbalance = Some(1.5));
        f[4].edit(|r| r.slowest_rank = Some(3));
        f[4].edit(|r| r.rank_compute_excess_pct = Some(25.0));
        let d = diagnose(&f, None, 0.05);
        let lines = d.lines();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].contains("missing: cell 1 left no file") && lines[1].contains("peak memory ×1.50"));
        assert!(lines[1].contains("rank 3 computes 25% longer than the other ranks' median"), "{lines:?}");
        let two = runs_of(fleet(&[(1, 0.5)]).into_iter().take(2).map(|r| r.row.unpack()).collect());
        let d = diagnose(&two, None, 0.05);
        assert_eq!(d.exit_code(), 0);
        assert!(d.notes[0].contains("a fleet median needs 3"), "{:?}", d.notes);
        // A baseline file judges even one row.
        let base = fleet(&[]);
        let one = runs_of(vec![fleet(&[(0, 0.5)])[0].row.unpack()]);
        assert_eq!(diagnose(&one, Some(&base), 0.05).exit_code(), 1);
    }
}
