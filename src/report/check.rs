//! `check`: the CI gate. For every configuration of one implementation (`--impl`, default gpubench; other rows
//! are left out with a note, never pooled as repeats, since they are different workloads) each chosen metric
//! (`--metric throughput,scaling,step-p50,step-p90,latency-p99`; default throughput and scaling) gets a verdict: regressed,
//! improved, unchanged, or missing from the current results.
//!
//! Like criterion, a change must clear two bars to count: the medians differ by more than `--max-drop` (default
//! 5%, a relative noise threshold; `5%` or `0.05`), and the change is significant. When both sides have at least
//! two runs, significance is Welch's t-test (two-sided p < `--alpha`, default 0.05); otherwise it is the two
//! sides' intervals not overlapping (a run's own 95 % interval from `metrics::interval`, or the spread of a
//! side's repeats; scaling's propagated from both throughputs). Only a metric with neither (step p90 of single
//! runs, rows written before intervals existed) is decided by the threshold alone. Methods and reasons:
//! `report::significance`. Scaling divides each N-device run by the median of its own side's 1-device group, so
//! its spread is the N-device runs' spread.
//!
//! Rows that recorded interference (another process, a throttled GPU) still count, but a verdict resting on
//! one says so, and the notes name the row and what disturbed it.
//!
//! Exit codes: 0 when nothing regressed, 1 when something did (or, with `--strict`, a configuration is missing),
//! 2 for unusable input (no configuration in common). `--format markdown` gives a pull-request comment;
//! `.ci/examples/gpu-regression.yml` is an example workflow for a self-hosted GPU runner.

use anyhow::Result;
use std::collections::{BTreeMap, BTreeSet};

use crate::error::usage;
use crate::metrics::interval::Interval;
use crate::report::export::{Cell, Column, Table};
use crate::report::format::{fmt_ms, fmt_pct, fmt_rate};
use crate::report::significance::{intervals_apart, welch_t_test};
use crate::report::summary::{
    baseline_of, disturbed_notes, excluded_notes, status_counts, summarize, ConfigKey, Group, Run, Scope,
};
use crate::results::long::DeviceData;
use crate::results::Fields;
use crate::results::Implementation;

/// The columns `check` reads (a file's rows are loaded with these alone):
/// the configuration, the implementation and the outcome, and the metrics.
#[rustfmt::skip]
pub(crate) const COLUMNS: &[&str] = &[
    // ConfigKey: the workload, the set-up words, ddp's communication, a serving load
    "model", "image_size", "precision", "strategy", "n_devices", "batch_per_device", "channels_last",
    "cudnn_benchmark", "deterministic", "grad_accum", "data", "variant", "device_kind", "backend", "comm_hook",
    "mode", "scenario", "streams", "fps", "offered_rate",
    // who, where, how it ended
    "impl", "device_name", "status", "error", "interference", "run_id", "mem_imbalance",
    // the metrics and their intervals
    "throughput_img_s", "throughput_per_device_img_s", "throughput_ci95_lo", "throughput_ci95_hi", "step_ms_p50",
    "step_ms_p90", "step_ms_p50_ci95_lo", "step_ms_p50_ci95_hi", "latency_ms_p99",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Metric {
    /// Images per second (higher is better).
    Throughput,
    /// Throughput over devices x the 1-device throughput (higher is better).
    Scaling,
    /// Median step time in ms (lower is better).
    StepP50,
    /// 90th-percentile step time in ms (lower is better).
    StepP90,
    /// Serving rows: 99th-percentile latency in ms (lower is better).
    LatencyP99,
}

impl Metric {
    pub(crate) const ALL: [Metric; 5] =
        [Metric::Throughput, Metric::Scaling, Metric::StepP50, Metric::StepP90, Metric::LatencyP99];

    /// As on the command line (`--metric`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Metric::Throughput => "throughput",
            Metric::Scaling => "scaling",
            Metric::StepP50 => "step-p50",
            Metric::StepP90 => "step-p90",
            Metric::LatencyP99 => "latency-p99",
        }
    }

    pub(crate) fn higher_is_better(self) -> bool {
        matches!(self, Metric::Throughput | Metric::Scaling)
    }

    pub(crate) fn title(self) -> &'static str {
        match self {
            Metric::Throughput => "img/s",
            Metric::Scaling => "scaling",
            Metric::StepP50 => "step p50 ms",
            Metric::StepP90 => "step p90 ms",
            Metric::LatencyP99 => "p99 ms",
        }
    }

    pub(crate) fn fmt(self, v: f64) -> String {
        match self {
            Metric::Throughput => fmt_rate(v),
            Metric::Scaling => fmt_pct(v),
            Metric::StepP50 | Metric::StepP90 | Metric::LatencyP99 => fmt_ms(v),
        }
    }

    /// One value per ok run of group `g`. Scaling divides each run by the
    /// median of the side's own 1-device group, so its spread is the N-device
    /// runs' spread.
    fn samples(self, runs: &[Run], groups: &[Group], gi: usize) -> Option<Vec<f64>> {
        let g = &groups[gi];
        let pick = |f: fn(&Run) -> Option<f64>| -> Vec<f64> { g.pooled.iter().filter_map(|&i| f(&runs[i])).collect() };
        let v = match self {
            Metric::Throughput => pick(|r| r.row.throughput_img_s()),
            Metric::StepP50 => pick(|r| r.row.step_ms_p50()),
            Metric::StepP90 => pick(|r| r.row.step_ms_p90()),
            Metric::LatencyP99 => pick(|r| r.row.latency_ms_p99()),
            Metric::Scaling => {
                let base = groups[baseline_of(groups, gi)?].throughput?;
                let n = g.key.n_devices as f64;
                pick(|r| r.row.throughput_img_s()).into_iter().map(|t| t / (n * base)).collect()
            }
        };
        (!v.is_empty()).then_some(v)
    }

    /// Group `g`'s 95 % interval for this metric, for sides without repeats
    /// to test: the group's (repeats' or one run's), or one run's step p50.
    fn interval(self, runs: &[Run], g: &Group) -> Option<Interval> {
        match self {
            Metric::Throughput => g.throughput_ci.map(|s| s.ci),
            Metric::Scaling => g.efficiency_ci.map(|s| s.ci),
            Metric::StepP50 => match g.pooled.as_slice() {
                [one] => {
                    let r = &runs[*one].row;
                    Some(Interval { lo: r.step_ms_p50_ci95_lo()?, hi: r.step_ms_p50_ci95_hi()? })
                }
                _ => None,
            },
            Metric::StepP90 | Metric::LatencyP99 => None,
        }
    }
}

/// How a change's significance was judged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Test {
    /// Welch's t-test over repeats: the two-sided p-value.
    Welch(f64),
    /// The two sides' 95 % intervals: true when they do not overlap.
    Intervals(bool),
    /// Nothing to test against: the threshold alone decides.
    None,
}

impl Test {
    fn significant(self, alpha: f64) -> bool {
        match self {
            Test::Welch(p) => p < alpha,
            Test::Intervals(apart) => apart,
            Test::None => true,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Gate {
    Regressed,
    Missing,
    Improved,
    Unchanged,
}

impl Gate {
    pub(crate) fn word(self) -> &'static str {
        match self {
            Gate::Regressed => "REGRESSED",
            Gate::Missing => "missing",
            Gate::Improved => "improved",
            Gate::Unchanged => "unchanged",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Finding {
    pub key: ConfigKey,
    /// None for a config missing from the current results.
    pub metric: Option<Metric>,
    pub baseline: Option<f64>,
    pub current: Option<f64>,
    pub runs: (usize, usize),
    /// (current - baseline) / baseline.
    pub change: Option<f64>,
    pub test: Test,
    pub verdict: Gate,
    /// Why a config is missing.
    pub why: String,
    /// Ok runs behind this finding that recorded interference, both sides.
    pub disturbed: usize,
}

#[derive(Debug, Clone)]
pub(crate) struct CheckOptions {
    pub metrics: Vec<Metric>,
    /// Relative worsening tolerated as noise, e.g. 0.05.
    pub max_drop: f64,
    /// Significance level of the t-test.
    pub alpha: f64,
    pub strict: bool,
    /// Only rows of this implementation are judged (`gpubench` or `pytorch`):
    /// the two are different workloads and must not pool as repeats.
    pub implementation: Implementation,
}

pub(crate) struct CheckReport {
    pub findings: Vec<Finding>,
    pub notes: Vec<String>,
    pub strict: bool,
}

/// Decides one metric of one config from the two sides' samples, and their
/// intervals where a side has too few samples for Welch's test.
pub(crate) fn decide(
    metric: Metric,
    base: &[f64],
    cur: &[f64],
    intervals: Option<(Interval, Interval)>,
    max_drop: f64,
    alpha: f64,
) -> (Gate, f64, Test) {
    let (mb, mc) = (
        crate::report::summary::median(base).unwrap_or(f64::NAN),
        crate::report::summary::median(cur).unwrap_or(f64::NAN),
    );
    let change = (mc - mb) / mb;
    let worse_by = if metric.higher_is_better() { -change } else { change };
    let test = match (welch_t_test(base, cur), intervals) {
        (Some(w), _) => Test::Welch(w.p),
        (None, Some((a, b))) => Test::Intervals(intervals_apart(&a, &b)),
        (None, None) => Test::None,
    };
    let significant = test.significant(alpha);
    let verdict = if !change.is_finite() {
        Gate::Unchanged
    } else if worse_by > max_drop && significant {
        Gate::Regressed
    } else if -worse_by > max_drop && significant {
        Gate::Improved
    } else {
        Gate::Unchanged
    };
    (verdict, change, test)
}

pub(crate) fn check(base_runs: &[Run], cur_runs: &[Run], opts: &CheckOptions) -> Result<CheckReport> {
    let none = DeviceData::default();
    let mut notes = vec![];
    let mut side = |runs: &[Run]| -> Vec<Group> {
        let (mine, other): (Vec<usize>, Vec<usize>) =
            (0..runs.len()).partition(|&i| runs[i].row.implementation() == opts.implementation);
        if !other.is_empty() {
            let f = runs.first().map_or(String::new(), |r| r.file.display().to_string());
            notes.push(format!(
                "{f}: {} row(s) of other implementations left out; this check judges impl {}",
                other.len(),
                opts.implementation
            ));
        }
        summarize(runs, &mine, |_| Scope::default(), &none)
    };
    let (bg, cg) = (side(base_runs), side(cur_runs));
    for (runs, groups) in [(base_runs, &bg), (cur_runs, &cg)] {
        if groups.iter().all(|g| g.ok.is_empty()) {
            let f = runs.first().map_or(String::new(), |r| r.file.display().to_string());
            return Err(usage(format!(
                "{f}: no row of impl {} has status ok, so there is nothing to check against",
                opts.implementation
            )));
        }
    }
    let cur_index: BTreeMap<&ConfigKey, usize> = cg.iter().enumerate().map(|(i, g)| (&g.key, i)).collect();
    let base_keys: BTreeSet<&ConfigKey> = bg.iter().filter(|g| !g.ok.is_empty()).map(|g| &g.key).collect();
    if !base_keys.iter().any(|k| cur_index.get(k).is_some_and(|&i| !cg[i].ok.is_empty())) {
        let f = |runs: &[Run]| runs.first().map_or(String::new(), |r| r.file.display().to_string());
        return Err(usage(format!(
            "no config of {} appears in {}: nothing to compare (configs match on model, image size, precision, \
             strategy, devices and batch/dev)",
            f(base_runs),
            f(cur_runs)
        )));
    }

    let mut findings = vec![];
    for (bi, b) in bg.iter().enumerate() {
        if b.ok.is_empty() {
            notes.push(format!("not checked: {} has no ok run in the baseline", b.key.describe()));
            continue;
        }
        let ci = cur_index.get(&b.key).copied();
        let missing_why = match ci {
            None => Some("not in current".to_string()),
            Some(i) if cg[i].ok.is_empty() => {
                Some(format!("no ok run in current ({})", status_counts(cur_runs, &cg[i].excluded)))
            }
            _ => None,
        };
        if let Some(why) = missing_why {
            findings.push(Finding {
                key: b.key.clone(),
                metric: None,
                baseline: None,
                current: None,
                runs: (b.ok.len(), 0),
                change: None,
                test: Test::None,
                verdict: Gate::Missing,
                why,
                disturbed: b.disturbed.len(),
            });
            continue;
        }
        let ci = ci.unwrap();
        for &m in &opts.metrics {
            if m == Metric::Scaling && b.key.n_devices <= 1 {
                continue; // 100% by definition
            }
            let (Some(bs), Some(cs)) = (m.samples(base_runs, &bg, bi), m.samples(cur_runs, &cg, ci)) else {
                notes.push(format!(
                    "{} not checked for {}: {}",
                    m.title(),
                    b.key.describe(),
                    if m == Metric::Scaling {
                        "no 1-device run to scale from on both sides"
                    } else {
                        "no values on both sides"
                    }
                ));
                continue;
            };
            let intervals = m.interval(base_runs, b).zip(m.interval(cur_runs, &cg[ci]));
            let (verdict, change, test) = decide(m, &bs, &cs, intervals, opts.max_drop, opts.alpha);
            findings.push(Finding {
                key: b.key.clone(),
                metric: Some(m),
                baseline: crate::report::summary::median(&bs),
                current: crate::report::summary::median(&cs),
                runs: (bs.len(), cs.len()),
                change: change.is_finite().then_some(change),
                test,
                verdict,
                why: String::new(),
                disturbed: b.disturbed.len() + cg[ci].disturbed.len(),
            });
        }
    }
    findings.sort_by(|a, b| (a.verdict, &a.key, a.metric).cmp(&(b.verdict, &b.key, b.metric)));

    let new: Vec<String> =
        cg.iter().filter(|g| !base_keys.contains(&g.key) && !g.ok.is_empty()).map(|g| g.key.describe()).collect();
    if !new.is_empty() {
        notes.push(format!("only in current, not checked: {}", new.join("; ")));
    }
    let hw = |runs: &[Run]| -> BTreeSet<String> { runs.iter().map(|r| r.row.device_name().to_string()).collect() };
    let (hb, hc) = (hw(base_runs), hw(cur_runs));
    if hb != hc {
        let j = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
        notes.push(format!("baseline ran on {}, current on {}: differences may be the hardware's", j(&hb), j(&hc)));
    }
    notes.extend(excluded_notes(base_runs, bg.iter().flat_map(|g| g.excluded.iter().copied())));
    notes.extend(excluded_notes(cur_runs, cg.iter().flat_map(|g| g.excluded.iter().copied())));
    notes.extend(disturbed_notes(base_runs, bg.iter()));
    notes.extend(disturbed_notes(cur_runs, cg.iter()));
    notes.push(format!(
        "rule: a change beyond {} that is also significant: Welch t-test p < {} when both sides have 2+ runs, \
         else the two 95 % intervals apart (p column: 'apart' or 'overlap'); with neither, the threshold alone \
         decides",
        fmt_pct(opts.max_drop),
        opts.alpha
    ));
    Ok(CheckReport { findings, notes, strict: opts.strict })
}

impl CheckReport {
    fn count(&self, v: Gate) -> usize {
        self.findings.iter().filter(|f| f.verdict == v).count()
    }

    /// 1 when something regressed, or something is missing under --strict.
    pub(crate) fn exit_code(&self) -> i32 {
        let failed = self.count(Gate::Regressed) > 0 || (self.strict && self.count(Gate::Missing) > 0);
        i32::from(failed)
    }

    pub(crate) fn summary(&self) -> String {
        let mut s = format!(
            "{} regressed, {} improved, {} unchanged, {} missing",
            self.count(Gate::Regressed),
            self.count(Gate::Improved),
            self.count(Gate::Unchanged),
            self.count(Gate::Missing)
        );
        if self.strict && self.count(Gate::Missing) > 0 {
            s.push_str(" (--strict: missing configs fail)");
        }
        s.push_str(if self.exit_code() == 0 { ": PASS" } else { ": FAIL" });
        s
    }

    pub(crate) fn table(&self) -> Table {
        let columns = vec![
            Column::text("config", "config"),
            Column::text("metric", "metric"),
            Column::num("baseline", "baseline"),
            Column::num("current", "current"),
            Column::num("change", "change"),
            Column::num("p_value", "p"),
            Column::text("runs", "runs b/c"),
            Column::text("verdict", "verdict"),
            Column::raw("test"),
        ];
        let rows = self
            .findings
            .iter()
            .map(|f| {
                let fmt = |v: Option<f64>| match (v, f.metric) {
                    (Some(x), Some(m)) => Cell::num(x, m.fmt(x)),
                    _ => Cell::none(),
                };
                vec![
                    Cell::text(f.key.describe()),
                    Cell::text(f.metric.map_or("-", Metric::title)),
                    fmt(f.baseline),
                    fmt(f.current),
                    f.change.map_or_else(Cell::none, |c| Cell::num(c, format!("{:+.1}%", c * 100.0))),
                    match f.test {
                        Test::Welch(p) => Cell::num(p, if p < 0.001 { "<0.001".into() } else { format!("{p:.3}") }),
                        Test::Intervals(apart) => Cell::empty(if apart { "apart" } else { "overlap" }),
                        Test::None => Cell::none(),
                    },
                    Cell::text(format!("{}/{}", f.runs.0, f.runs.1)),
                    Cell::text(match (f.why.is_empty(), f.disturbed) {
                        (true, 0) => f.verdict.word().to_string(),
                        (true, d) => format!("{} (disturbed run{}: see notes)", f.verdict.word(), plural(d)),
                        (false, _) => format!("{}: {}", f.verdict.word(), f.why),
                    }),
                    Cell::text(match f.test {
                        Test::Welch(_) => "welch",
                        Test::Intervals(true) => "intervals apart",
                        Test::Intervals(false) => "intervals overlap",
                        Test::None if f.metric.is_some() => "threshold",
                        Test::None => "",
                    }),
                ]
            })
            .collect();
        Table { title: format!("gpubench check: {}", self.summary()), columns, rows, notes: self.notes.clone() }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::summary::tests::{row, runs_of};

    fn opts() -> CheckOptions {
        CheckOptions {
            metrics: vec![Metric::Throughput, Metric::Scaling],
            max_drop: 0.05,
            alpha: 0.05,
            strict: false,
            implementation: Implementation::Gpubench,
        }
    }

    /// `check` on the rows as the command loads them: its columns alone. A
    /// read of a column left out of `COLUMNS` fails the test.
    fn check_loaded(base: &[Run], cur: &[Run], opts: &CheckOptions) -> Result<CheckReport> {
        let keep = crate::results::packed::Columns::named(COLUMNS);
        let load = |runs: &[Run]| -> Vec<Run> {
            runs.iter().map(|r| Run { row: r.row.unpack().pack_only(keep), ..r.clone() }).collect()
        };
        check(&load(base), &load(cur), opts)
    }

    #[test]
    fn its_columns_are_columns() {
        assert_eq!(crate::results::packed::Columns::unknown(COLUMNS), Vec::<&str>::new());
    }

    fn side(v: &[(&str, u32, f64)]) -> Vec<Run> {
        runs_of(v.iter().map(|(s, n, t)| row(s, *n, *t)).collect())
    }

    fn verdicts(r: &CheckReport) -> Vec<(String, &'static str)> {
        r.findings
            .iter()
            .map(|f| (format!("{} {}", f.key.strategy, f.metric.map_or("-", Metric::title)), f.verdict.word()))
            .collect()
    }

    #[test]
    fn threshold_and_significance_both_needed() {
        let base = [1000.0, 1002.0, 998.0];
        // 10% drop, tight: regressed
        let d = |b: &[f64], c: &[f64]| decide(Metric::Throughput, b, c, None, 0.05, 0.05).0;
        assert_eq!(d(&base, &[900.0, 901.0, 899.0]), Gate::Regressed);
        // 10% drop but wildly noisy: not significant
        assert_eq!(d(&base, &[600.0, 1200.0, 900.0]), Gate::Unchanged);
        // significant but within the threshold
        assert_eq!(d(&base, &[980.0, 981.0, 979.0]), Gate::Unchanged);
        // lower step time is better
        assert_eq!(decide(Metric::StepP50, &[100.0], &[120.0], None, 0.05, 0.05).0, Gate::Regressed);
        assert_eq!(decide(Metric::StepP50, &[100.0], &[80.0], None, 0.05, 0.05).0, Gate::Improved);
        // Serving latency: lower is better, as step time is.
        assert_eq!(decide(Metric::LatencyP99, &[40.0], &[60.0], None, 0.05, 0.05).0, Gate::Regressed);
        // single runs without intervals: the threshold decides, no p
        let (v, c, t) = decide(Metric::Throughput, &[1000.0], &[1100.0], None, 0.05, 0.05);
        assert_eq!((v, t), (Gate::Improved, Test::None));
        assert!((c - 0.1).abs() < 1e-12);
    }

    #[test]
    fn single_runs_are_judged_by_their_intervals() {
        let iv = |lo, hi| Interval { lo, hi };
        // 10% drop, intervals apart: regressed.
        let (v, _, t) =
            decide(Metric::Throughput, &[1000.0], &[900.0], Some((iv(990.0, 1010.0), iv(890.0, 910.0))), 0.05, 0.05);
        assert_eq!((v, t), (Gate::Regressed, Test::Intervals(true)));
        // The same drop inside two wide intervals is noise.
        let (v, _, t) =
            decide(Metric::Throughput, &[1000.0], &[900.0], Some((iv(850.0, 1150.0), iv(800.0, 1000.0))), 0.05, 0.05);
        assert_eq!((v, t), (Gate::Unchanged, Test::Intervals(false)));
        // Repeats on both sides still use Welch's test.
        let (_, _, t) = decide(
            Metric::Throughput,
            &[1000.0, 1001.0],
            &[900.0, 901.0],
            Some((iv(0.0, 1.0), iv(0.0, 1.0))),
            0.05,
            0.05,
        );
        assert!(matches!(t, Test::Welch(p) if p < 0.05), "{t:?}");
    }

    #[test]
    fn check_reads_row_intervals_and_names_disturbed_rows() {
        let with_ci = |thr: f64, half: f64| {
            let mut r = row("single", 1, thr);
            (r.throughput_ci95_lo, r.throughput_ci95_hi) = (Some(thr - half), Some(thr + half));
            r
        };
        let b = runs_of(vec![with_ci(1000.0, 80.0)]);
        let mut cur = with_ci(900.0, 80.0);
        cur.interference = "host busy: load 4.2 on 2 cores".into();
        let c = runs_of(vec![cur]);
        let r = check_loaded(&b, &c, &opts()).unwrap();
        assert_eq!(r.findings[0].test, Test::Intervals(false));
        assert_eq!(verdicts(&r), [("single img/s".to_string(), "unchanged")]);
        assert!(r.notes.iter().any(|n| n.starts_with("disturbed t.csv:2") && n.contains("load 4.2")), "{:?}", r.notes);
        // Tight intervals: a regression, said to rest on a disturbed run.
        let b = runs_of(vec![with_ci(1000.0, 5.0)]);
        let mut c = runs_of(vec![with_ci(900.0, 5.0)]);
        c[0].edit(|r| r.interference = "gpu0: another process holds 12 GiB".into());
        let r = check_loaded(&b, &c, &opts()).unwrap();
        assert_eq!(r.exit_code(), 1);
        let text = String::from_utf8(
            crate::report::export::Exporter::export(&crate::report::export::TextExporter, &r.table()).unwrap(),
        )
        .unwrap();
        assert!(text.contains("apart") && text.contains("REGRESSED (disturbed run: see notes)"), "{text}");
    }

    #[test]
    fn pytorch_rows_do_not_pool_with_gpubench_rows() {
        let b = side(&[("single", 1, 100.0)]);
        // Same config, but one row is PyTorch's own run at half the speed.
        let mut rows: Vec<_> = [100.0, 50.0].iter().map(|&t| row("single", 1, t)).collect();
        rows[1].implementation = Implementation::Pytorch;
        let c = runs_of(rows);
        let r = check_loaded(&b, &c, &opts()).unwrap();
        assert_eq!(verdicts(&r), [("single img/s".to_string(), "unchanged")]);
        assert!(r.notes.iter().any(|n| n.contains("1 row(s) of other implementations left out")), "{:?}", r.notes);
        // Judging PyTorch's rows: the baseline has none.
        let o = CheckOptions { implementation: Implementation::Pytorch, ..opts() };
        let e = check_loaded(&b, &c, &o).err().unwrap().to_string();
        assert!(e.contains("no row of impl pytorch"), "{e}");
    }

    #[test]
    fn scaling_regression_is_caught_even_when_one_device_improves() {
        let b = side(&[("single", 1, 100.0), ("ddp", 4, 380.0)]);
        let c = side(&[("single", 1, 110.0), ("ddp", 4, 385.0)]);
        let r = check_loaded(&b, &c, &opts()).unwrap();
        assert_eq!(
            verdicts(&r),
            [
                ("ddp scaling".to_string(), "REGRESSED"),
                ("single img/s".into(), "improved"),
                ("ddp img/s".into(), "unchanged")
            ]
        );
        assert_eq!(r.exit_code(), 1);
    }

    #[test]
    fn missing_configs_fail_only_when_strict() {
        let b = side(&[("single", 1, 100.0), ("dp", 2, 150.0)]);
        let c = side(&[("single", 1, 101.0)]);
        let mut o = opts();
        let r = check_loaded(&b, &c, &o).unwrap();
        assert_eq!(verdicts(&r), [("dp -".to_string(), "missing"), ("single img/s".into(), "unchanged")]);
        assert_eq!(r.exit_code(), 0);
        o.strict = true;
        let r = check_loaded(&b, &c, &o).unwrap();
        assert_eq!(r.exit_code(), 1);
        assert!(r.summary().ends_with("(--strict: missing configs fail): FAIL"), "{}", r.summary());
    }

    #[test]
    fn failed_current_runs_are_missing_not_zero() {
        let b = side(&[("single", 1, 100.0), ("dp", 2, 150.0)]);
        let mut c = side(&[("single", 1, 100.0), ("dp", 2, 0.0)]);
        c[1].edit(|r| r.status = crate::results::Status::Oom);
        c[1].edit(|r| r.throughput_img_s = None);
        let r = check_loaded(&b, &c, &opts()).unwrap();
        let dp = r.findings.iter().find(|f| f.key.strategy == "dp").unwrap();
        assert_eq!((dp.verdict, dp.why.as_str()), (Gate::Missing, "no ok run in current (1 oom)"));
        assert_eq!(r.exit_code(), 0);
    }

    #[test]
    fn nothing_in_common_is_unusable_input() {
        let b = side(&[("single", 1, 100.0)]);
        let mut c = side(&[("single", 1, 100.0)]);
        c[0].edit(|r| r.model = "resnet18".into());
        let err = check_loaded(&b, &c, &opts()).err().unwrap();
        assert_eq!(crate::error::exit_code(&err), 2);
        assert!(err.to_string().contains("nothing to compare"));
    }

    #[test]
    fn precision_is_part_of_the_key() {
        let b = side(&[("single", 1, 100.0)]);
        let mut c = side(&[("single", 1, 100.0), ("single", 1, 50.0)]);
        c[1].edit(|r| r.precision = "fp16".into());
        c[0].edit(|r| r.precision = "fp16".into());
        assert!(check_loaded(&b, &c, &opts()).is_err());
    }
}
