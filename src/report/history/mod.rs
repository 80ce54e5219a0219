//! `history`: the weeks of a nightly benchmark. Rows become series (one per
//! configuration, machine and metric, `series`), each series' points are
//! searched for the nights its level changed (`detect`), each change is
//! told with the range to bisect and the environment that changed with it,
//! the newest level is checked for slow drift, and the user's reviewed
//! acknowledgements (`acks`) say which changes are known. The gate fails on
//! a regression that is new (in the last `--last` points), lasting, and
//! unacknowledged, or on drift past its bound. Method and defaults:
//! docs/history.md.
pub mod acks;
pub mod detect;
pub mod output;
pub mod series;

use anyhow::Result;

use crate::report::check::Metric;
use crate::report::summary::Run;
use crate::results::Implementation;

use acks::{Ack, Kind};
use detect::{Change, Level, Params, Slope};
use series::{By, Order, Point, Series, ENV};

/// The columns `history` reads (a file's rows are loaded with these alone):
/// check's, and where a row stands in history and what it ran on.
#[rustfmt::skip]
pub(crate) const COLUMNS: &[&str] = &[
    "model", "image_size", "precision", "strategy", "n_devices", "batch_per_device", "channels_last",
    "cudnn_benchmark", "deterministic", "grad_accum", "data", "variant", "device_kind", "backend", "comm_hook",
    "mode", "scenario", "streams", "fps", "offered_rate",
    "impl", "status", "interference", "run_id", "timestamp", "label",
    "commit", "branch", "sweep_id", "ci_url",
    "driver_version", "cuda_version", "libtorch_version", "gpubench_version", "gpubench_commit", "device_name",
    "node_list", "host", "threads",
    "throughput_img_s", "step_ms_p50", "step_ms_p90", "latency_ms_p99",
];

/// `gpubench history`'s settings.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub metrics: Vec<Metric>,
    pub by: By,
    pub order: Order,
    pub params: Params,
    /// The gate's window: a regression whose new level starts within the
    /// last this many points of its series.
    pub last: usize,
    /// Points the drift slope is fitted over (at most; fewer since a change).
    pub drift_points: usize,
    /// Drift that fails the gate: relative change per week, e.g. 0.005.
    pub drift_bound: f64,
    pub implementation: Implementation,
    /// Seconds since the epoch: rows before it are left out.
    pub since: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            metrics: vec![Metric::Throughput, Metric::Scaling, Metric::StepP50, Metric::LatencyP99],
            by: By::Host,
            order: Order::Commit,
            params: Params::default(),
            last: 10,
            drift_points: 30,
            drift_bound: 0.005,
            implementation: Implementation::Gpubench,
            since: f64::MIN,
        }
    }
}

/// Points a series needs before it is judged: a level on each side of a change.
pub(crate) fn points_needed(p: &Params) -> usize {
    2 * p.min_size
}

/// Fewest points the drift slope is fitted over.
const DRIFT_MIN_POINTS: usize = 10;
/// The drift slope's interval.
const DRIFT_CONFIDENCE: f64 = 0.995;

/// One change of one series, told for people.
#[derive(Debug, Clone)]
pub(crate) struct Finding {
    /// Stable: a hash of the series and the first point of the new level.
    pub id: String,
    pub series: usize,
    /// Its `at` is the first point of the new level; the point before it is the last of the old.
    pub change: Change,
    /// Environment columns that differ: (what, before, after).
    pub env: Vec<(&'static str, String, String)>,
    /// Worse for this metric (lower throughput, longer steps).
    pub worse: bool,
    pub ack: Option<Ack>,
    /// Within the gate's window.
    pub recent: bool,
}

impl Finding {
    /// A regression the gate fails on.
    pub(crate) fn gates(&self) -> bool {
        self.worse && self.recent && !self.change.fixed && self.ack.is_none()
    }

    /// `driver 550.54 -> 560.35`, the environment's changes in one phrase.
    pub(crate) fn what_changed(&self) -> String {
        self.env.iter().map(|(w, a, b)| format!("{w} {} -> {}", or_dash(a), or_dash(b))).collect::<Vec<_>>().join(", ")
    }
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() {
        "(none)"
    } else {
        s
    }
}

/// The newest level's slope.
#[derive(Debug, Clone)]
pub(crate) struct Drift {
    pub id: String,
    pub series: usize,
    /// Relative change per week, with its interval.
    pub per_week: Slope,
    pub points: usize,
    pub worse: bool,
    /// Past the bound, its whole interval on the worse side.
    pub beyond: bool,
    pub ack: Option<Ack>,
}

impl Drift {
    pub(crate) fn gates(&self) -> bool {
        self.beyond && self.worse && self.ack.is_none()
    }
}

pub(crate) struct History {
    pub series: Vec<Series>,
    pub findings: Vec<Finding>,
    pub drifts: Vec<Drift>,
    pub notes: Vec<String>,
    pub options: Options,
}

impl History {
    /// 1 when the gate fails.
    pub(crate) fn gate_code(&self) -> i32 {
        i32::from(self.findings.iter().any(Finding::gates) || self.drifts.iter().any(Drift::gates))
    }

    pub(crate) fn summary(&self) -> String {
        let regressions = self.findings.iter().filter(|f| f.gates()).count();
        let drifting = self.drifts.iter().filter(|d| d.gates()).count();
        format!(
            "{} series, {} change{} ({} new unacknowledged regression{}), {} drifting past {}/week: {}",
            self.series.len(),
            self.findings.len(),
            plural(self.findings.len()),
            regressions,
            plural(regressions),
            drifting,
            crate::report::format::fmt_pct(self.options.drift_bound),
            if self.gate_code() == 0 { "PASS" } else { "FAIL" }
        )
    }

    /// The current level of `series`: the indices of its points since its last change.
    pub(crate) fn current_level(&self, series: usize) -> std::ops::Range<usize> {
        last_change(&self.findings, series)..self.series[series].points.len()
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Where the newest level of series `si` begins: its last change, or 0.
fn last_change(findings: &[Finding], si: usize) -> usize {
    findings.iter().filter(|f| f.series == si).map(|f| f.change.at).max().unwrap_or(0)
}

/// A series' changes. An acknowledged `expected` change is a fixed level
/// boundary at the point its id names (the id is that point's), so the
/// levels around it are judged against it.
fn changes_of(s: &Series, acks: &[Ack], params: &Params) -> Vec<Change> {
    let y: Vec<f64> = s.points.iter().map(|p| p.value).collect();
    let fixed: Vec<usize> = (1..s.points.len())
        .filter(|&i| acks.iter().any(|a| a.kind == Kind::Expected && a.target == id_of(s, &s.points[i].id)))
        .collect();
    detect::change_points(&y, &fixed, params)
}

/// FNV-1a, 64 bits: stable across Rust versions and machines, unlike std's
/// hasher, so an id written in an acknowledgement file keeps meaning.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

pub(crate) fn id_of(series: &Series, what: &str) -> String {
    format!("{:012x}", fnv(&format!("{}|{what}", series.ident())) & 0xffff_ffff_ffff)
}

/// Analyses `runs`: series, their changes and drift, acknowledged by `acks`.
/// An error when nothing can be judged (no usable row, every series too short).
pub(crate) fn analyze(runs: &[Run], acks: &[Ack], options: &Options) -> Result<History> {
    let ignores: Vec<&Ack> = acks.iter().filter(|a| a.kind == Kind::Ignore).collect();
    let used = std::cell::RefCell::new(vec![false; ignores.len()]);
    let ignore = |id: &str, commit: &str, time: f64| {
        if ignores.is_empty() {
            return false;
        }
        let date = series::date_of(time);
        let hit: Vec<bool> = ignores.iter().map(|a| acks::names_point(&a.target, id, commit, &date)).collect();
        used.borrow_mut().iter_mut().zip(&hit).for_each(|(u, h)| *u |= h);
        hit.contains(&true)
    };
    let (all, left) = series::build(
        runs,
        &options.metrics,
        options.by,
        options.order,
        options.implementation,
        options.since,
        &ignore,
    )?;
    let mut notes = left_notes(&left, options.implementation);
    if all.is_empty() {
        return Err(crate::error::usage(format!(
            "no row to follow: history needs rows of impl {} with status ok and no interference, of the metrics \
             asked for ({})",
            options.implementation,
            options.metrics.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ")
        )));
    }
    let machines: std::collections::BTreeSet<&str> = all.iter().map(|s| s.machine.as_str()).collect();
    if machines.len() > 1 && options.by == By::Host {
        notes.push(format!(
            "rows of {} hosts ({}): a series each, never mixed (--by device pools hosts of one device)",
            machines.len(),
            machines.iter().take(6).copied().collect::<Vec<_>>().join(", ")
        ));
    }
    let need = points_needed(&options.params);
    let (series, short): (Vec<Series>, Vec<Series>) = all.into_iter().partition(|s| s.points.len() >= need);
    if series.is_empty() {
        let most = short.iter().map(|s| s.points.len()).max().unwrap_or(0);
        return Err(crate::error::usage(format!(
            "no series is long enough to judge: a series needs {need} points (commits, sweeps or runs; {} on each \
             side of a change), and the longest here has {most}",
            options.params.min_size
        )));
    }
    if !short.is_empty() {
        let names: Vec<String> = short.iter().take(5).map(|s| format!("{} ({})", s.ident(), s.points.len())).collect();
        notes.push(format!(
            "{} series with fewer than {need} points not judged: {}{}",
            short.len(),
            names.join("; "),
            if short.len() > 5 { "; …" } else { "" }
        ));
    }

    let mut findings = vec![];
    let mut drifts = vec![];
    for (si, s) in series.iter().enumerate() {
        for c in changes_of(s, acks, &options.params) {
            let id = id_of(s, &s.points[c.at].id);
            let ack = acks.iter().find(|a| a.kind != Kind::Ignore && a.target == id).cloned();
            let rel = c.relative();
            findings.push(Finding {
                id,
                series: si,
                env: env_near(&s.points, c.at),
                worse: if higher_is_better(s.metric) { rel < 0.0 } else { rel > 0.0 },
                ack,
                recent: s.points.len() - c.at <= options.last,
                change: c,
            });
        }
        if let Some(d) = drift(s, si, last_change(&findings, si), options) {
            drifts
                .push(Drift { ack: acks.iter().find(|a| a.kind == Kind::Accepted && a.target == d.id).cloned(), ..d });
        }
    }
    for a in acks.iter().filter(|a| a.kind != Kind::Ignore) {
        let known = findings.iter().any(|f| f.id == a.target) || drifts.iter().any(|d| d.id == a.target);
        if !known {
            notes.push(format!(
                "acknowledgement line {}: no change or drift has id {} in these rows (its rows left out, or a \
                 stale line)",
                a.line, a.target
            ));
        }
    }
    for (a, used) in ignores.iter().zip(used.borrow().iter()) {
        if !used {
            notes.push(format!("acknowledgement line {}: ignore {} names no point of these rows", a.line, a.target));
        }
    }
    notes.push(format!(
        "rule: a change is kept when a pooled t-test of the {w} points either side (at least {m}) gives p < {p} and \
         the medians move with the means; the gate fails on an unacknowledged regression starting in the last {k} \
         points, or a drift of the newest level past {b}/week (its {c:.1} % interval wholly past 0)",
        w = options.params.window,
        m = options.params.min_size,
        p = options.params.p,
        k = options.last,
        b = crate::report::format::fmt_pct(options.drift_bound),
        c = DRIFT_CONFIDENCE * 100.0,
    ));
    Ok(History { series, findings, drifts, notes, options: options.clone() })
}

/// `check --baseline-from-history`: the rows of each configuration's current
/// level (since its last change, found or expected, on any metric), so that
/// a gate compares tonight with the level it belongs to rather than with one
/// lucky or unlucky night. A configuration too short to judge keeps every
/// row. Indices into `runs`, in order.
pub(crate) fn current_level_rows(runs: &[Run], acks: &[Ack], options: &Options) -> Result<Vec<usize>> {
    let o = options;
    let (all, _) = series::build(runs, &o.metrics, o.by, o.order, o.implementation, o.since, &|_, _, _: f64| false)?;
    let need = points_needed(&o.params);
    // Per (configuration, machine): when its current level starts, and its points' times and rows.
    type Config = (String, String);
    let mut start: std::collections::HashMap<Config, f64> = std::collections::HashMap::new();
    let mut rows_of: std::collections::HashMap<Config, Vec<(f64, Vec<u32>)>> = std::collections::HashMap::new();
    for s in &all {
        let k = (format!("{:?}", s.key), s.machine.clone());
        let pts = rows_of.entry(k.clone()).or_default();
        if pts.is_empty() {
            pts.extend(s.points.iter().map(|p| (p.time, p.rows.clone())));
        }
        if s.points.len() < need {
            continue;
        }
        if let Some(c) = changes_of(s, acks, &o.params).last() {
            let t = s.points[c.at].time;
            let e = start.entry(k).or_insert(t);
            *e = e.max(t);
        }
    }
    let mut keep: Vec<usize> = rows_of
        .iter()
        .flat_map(|(k, pts)| {
            let from = start.get(k).copied().unwrap_or(f64::MIN);
            pts.iter().filter(move |(t, _)| *t >= from).flat_map(|(_, r)| r.iter().map(|&i| i as usize))
        })
        .collect();
    keep.sort_unstable();
    keep.dedup();
    Ok(keep)
}

pub(crate) fn higher_is_better(m: Metric) -> bool {
    matches!(m, Metric::Throughput | Metric::Scaling)
}

/// What changed between the last point before `at` and the first after;
/// when nothing did, a change one point either side (a step is placed
/// from noisy points, and may be placed a night off the night the driver
/// changed), said with where.
fn env_near(points: &[Point], at: usize) -> Vec<(&'static str, String, String)> {
    let here = env_diff(&points[at - 1], &points[at]);
    if !here.is_empty() {
        return here;
    }
    for (a, b, when) in [(at.checked_sub(2), at - 1, "a point earlier"), (Some(at), at + 1, "a point later")] {
        if let (Some(a), true) = (a, b < points.len()) {
            let near = env_diff(&points[a], &points[b]);
            if !near.is_empty() {
                return near
                    .into_iter()
                    .map(|(w, x, y)| (w, x, format!("{y} ({when}, {})", points[b].date())))
                    .collect();
            }
        }
    }
    vec![]
}

fn env_diff(a: &Point, b: &Point) -> Vec<(&'static str, String, String)> {
    ENV.iter()
        .zip(a.env.iter().zip(b.env.iter()))
        .filter(|(_, (x, y))| x != y)
        .map(|((_, what), (x, y))| (*what, x.clone(), y.clone()))
        .collect()
}

/// The slope of the newest level: at most `drift_points` points since its
/// last change, at least `DRIFT_MIN_POINTS`. Time in days from the points'
/// times, the slope relative to the level's median, per week.
fn drift(s: &Series, si: usize, start: usize, options: &Options) -> Option<Drift> {
    let pts = &s.points[start.max(s.points.len().saturating_sub(options.drift_points))..];
    if pts.len() < DRIFT_MIN_POINTS {
        return None;
    }
    let day = 86_400.0;
    let x: Vec<f64> = pts.iter().map(|p| (p.time - pts[0].time) / day).collect();
    let y: Vec<f64> = pts.iter().map(|p| p.value).collect();
    let level = detect::median(&y);
    let raw = detect::theil_sen(&x, &y, DRIFT_CONFIDENCE)?;
    let week = |v: f64| v * 7.0 / level;
    let per_week = Slope { slope: week(raw.slope), lo: week(raw.lo), hi: week(raw.hi) };
    let worse = if higher_is_better(s.metric) { per_week.slope < 0.0 } else { per_week.slope > 0.0 };
    let beyond = if higher_is_better(s.metric) {
        per_week.hi < 0.0 && -per_week.slope > options.drift_bound
    } else {
        per_week.lo > 0.0 && per_week.slope > options.drift_bound
    };
    Some(Drift { id: id_of(s, "drift"), series: si, per_week, points: pts.len(), worse, beyond, ack: None })
}

fn left_notes(left: &series::Left, implementation: Implementation) -> Vec<String> {
    let mut n = vec![];
    if left.disturbed > 0 {
        n.push(format!(
            "{} row(s) that recorded interference left out (a disturbed night is no point of history)",
            left.disturbed
        ));
    }
    if !left.not_ok.is_empty() {
        let s: Vec<String> = left.not_ok.iter().map(|(k, v)| format!("{v} {k}")).collect();
        n.push(format!("{} row(s) not ok left out ({})", left.not_ok.values().sum::<usize>(), s.join(", ")));
    }
    if left.other_impl > 0 {
        n.push(format!(
            "{} row(s) of other implementations left out; this history follows impl {implementation}",
            left.other_impl
        ));
    }
    if left.not_runs > 0 {
        n.push(format!("{} all-reduce or peak row(s) left out", left.not_runs));
    }
    if left.before_since > 0 {
        n.push(format!("{} row(s) before --since left out", left.before_since));
    }
    n
}

/// The level of a set of points' values.
pub(crate) fn level_of(points: &[Point]) -> Level {
    Level::of(&points.iter().map(|p| p.value).collect::<Vec<_>>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::summary::tests::{row, runs_of};
    use crate::results::csv::Row;

    /// Noise that repeats exactly: tests need no random numbers.
    fn wobble(i: usize) -> f64 {
        [0.3, -0.8, 1.1, -0.2, 0.6, -1.0, 0.1, 0.9, -0.5, -0.4][i % 10] / 100.0
    }

    /// Night `i` of a nightly single-GPU run on `host` at `thr` img/s.
    fn night(i: usize, thr: f64, host: &str) -> Row {
        let mut r = row("single", 1, thr * (1.0 + wobble(i)));
        r.host = host.into();
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_790_820_000 + 86_400 * i as u64);
        r.timestamp = humantime::format_rfc3339_seconds(at).to_string();
        r.commit = format!("{:07x}0", i + 1);
        r.run_id = format!("{host}-{i}");
        r.driver_version = "550.54".into();
        r
    }

    fn nights(n: usize, step_at: usize, step: f64) -> Vec<Row> {
        (0..n).map(|i| night(i, if i >= step_at { 1000.0 * (1.0 + step) } else { 1000.0 }, "box")).collect()
    }

    fn opts() -> Options {
        Options { metrics: vec![Metric::Throughput], ..Options::default() }
    }

    #[test]
    fn a_step_is_found_with_its_commits_and_the_driver_that_changed_with_it() {
        let mut rows = nights(28, 20, -0.05);
        for r in rows.iter_mut().skip(20) {
            r.driver_version = "560.35".into();
        }
        let h = analyze(&runs_of(rows), &[], &opts()).unwrap();
        assert_eq!(h.findings.len(), 1);
        let f = &h.findings[0];
        let s = &h.series[f.series];
        let at = f.change.at;
        assert_eq!((&*s.points[at - 1].commit, &*s.points[at].commit), ("00000140", "00000150"));
        assert_eq!(f.what_changed(), "driver 550.54 -> 560.35");
        assert!(f.worse && f.recent && f.gates());
        assert_eq!(h.gate_code(), 1);
        let t = output::changes_table(&h);
        let text = String::from_utf8(
            crate::report::export::Exporter::export(&crate::report::export::TextExporter, &t).unwrap(),
        )
        .unwrap();
        assert!(
            text.contains("driver 550.54 -> 560.35 on 2026-10-21")
                && text.contains("git log --oneline 00000140..00000150"),
            "{text}"
        );
        assert!(text.contains("REGRESSION"), "{text}");
    }

    #[test]
    fn acknowledgements_restart_accept_and_ignore() {
        let rows = nights(28, 20, -0.05);
        let runs = runs_of(rows);
        let h = analyze(&runs, &[], &opts()).unwrap();
        let id = h.findings[0].id.clone();
        // The id is stable as nights are added.
        let more = analyze(&runs_of(nights(32, 20, -0.05)), &[], &opts()).unwrap();
        assert_eq!(more.findings[0].id, id);
        let ack = |kind, target: &str| Ack { kind, target: target.into(), reason: "known".into(), line: 1 };
        let accepted = analyze(&runs, &[ack(Kind::Accepted, &id)], &opts()).unwrap();
        assert_eq!((accepted.findings.len(), accepted.gate_code()), (1, 0));
        let expected = analyze(&runs, &[ack(Kind::Expected, &id)], &opts()).unwrap();
        assert!(expected.findings[0].change.fixed && expected.gate_code() == 0);
        // An unknown id is named in the notes, not fatal.
        let stale = analyze(&runs, &[ack(Kind::Accepted, "0123456789ab")], &opts()).unwrap();
        assert!(stale.notes.iter().any(|n| n.contains("no change or drift has id 0123456789ab")), "{:?}", stale.notes);
        // A broken night, ignored by its date, is no point.
        let mut rows = nights(30, 99, 0.0);
        rows[25].throughput_img_s = Some(500.0);
        rows[26].throughput_img_s = Some(500.0);
        rows[27].throughput_img_s = Some(500.0);
        let runs = runs_of(rows);
        assert_eq!(analyze(&runs, &[], &opts()).unwrap().gate_code(), 1);
        let ignored = [ack(Kind::Ignore, "2026-10-26"), ack(Kind::Ignore, "2026-10-27"), ack(Kind::Ignore, "000001c0")];
        let h = analyze(&runs, &ignored, &opts()).unwrap();
        assert_eq!((h.series[0].points.len(), h.gate_code()), (27, 0));
    }

    #[test]
    fn disturbed_and_failed_rows_are_no_points_and_other_hosts_are_other_series() {
        let mut rows = nights(12, 99, 0.0);
        rows[3].interference = "host busy".into();
        rows[4].status = crate::results::Status::Oom;
        rows.extend((0..12).map(|i| night(i, 500.0, "other")));
        let h = analyze(&runs_of(rows), &[], &opts()).unwrap();
        assert_eq!(h.series.len(), 2);
        assert_eq!(h.series.iter().map(|s| s.points.len()).collect::<Vec<_>>(), [10, 12]);
        assert!(h.notes.iter().any(|n| n.starts_with("rows of 2 hosts (box, other): a series each")), "{:?}", h.notes);
        assert!(h.notes.iter().any(|n| n.contains("1 row(s) that recorded interference")), "{:?}", h.notes);
        assert!(h.notes.iter().any(|n| n.contains("1 row(s) not ok left out (1 oom)")), "{:?}", h.notes);
        // --by device pools the two hosts into one series of one device.
        let mut rows = nights(8, 99, 0.0);
        rows.extend((8..16).map(|i| night(i, 1000.0, "other")));
        let by_device = Options { by: By::Device, ..opts() };
        assert_eq!(analyze(&runs_of(rows), &[], &by_device).unwrap().series[0].points.len(), 16);
    }

    #[test]
    fn repeats_of_a_commit_pool_and_scaling_uses_the_same_nights_one_device_run() {
        let mut rows = vec![];
        for i in 0..8 {
            for rep in 0..3 {
                let mut one = night(i, 100.0 + rep as f64, "box");
                one.run_id = format!("{i}-{rep}");
                let mut four = row("ddp", 4, 360.0);
                (four.host, four.timestamp, four.commit) = ("box".into(), one.timestamp.clone(), one.commit.clone());
                rows.extend([one, four]);
            }
        }
        let o = Options { metrics: vec![Metric::Throughput, Metric::Scaling], ..opts() };
        let h = analyze(&runs_of(rows), &[], &o).unwrap();
        let scaling = h.series.iter().find(|s| s.metric == Metric::Scaling).unwrap();
        assert_eq!(scaling.points.len(), 8);
        assert_eq!(scaling.points[0].repeats.len(), 3);
        // 360 / (4 × the night's median single run).
        let single = h.series.iter().find(|s| s.key.strategy == "single").unwrap();
        assert!((scaling.points[0].value - 360.0 / (4.0 * single.points[0].value)).abs() < 1e-9);
    }

    #[test]
    fn unusable_histories_are_refused_in_one_line() {
        let e = |rows: Vec<Row>, o: &Options| {
            let err = analyze(&runs_of(rows), &[], o).err().unwrap();
            assert_eq!(crate::error::exit_code(&err), 2);
            err.to_string()
        };
        assert!(e(nights(1, 99, 0.0), &opts()).contains("a series needs 6 points"));
        assert!(e(nights(5, 99, 0.0), &opts()).contains("the longest here has 5"));
        let mut rows = nights(8, 99, 0.0);
        rows[6].commit = rows[2].commit.clone();
        assert!(e(rows.clone(), &opts()).contains("ran again after commit"));
        // By time, the same rows are eight points.
        let by_time = Options { order: Order::Time, ..opts() };
        assert_eq!(analyze(&runs_of(rows), &[], &by_time).unwrap().series[0].points.len(), 8);
        let mut rows = nights(8, 99, 0.0);
        rows[2].timestamp = "yesterday".into();
        assert!(e(rows, &opts()).contains("t.csv:4: timestamp `yesterday` is not an RFC 3339 time"));
    }

    #[test]
    fn its_columns_are_columns_and_enough() {
        assert_eq!(crate::results::packed::Columns::unknown(COLUMNS), Vec::<&str>::new());
        // Analysed from rows loaded with these columns alone: the same findings.
        let keep = crate::results::packed::Columns::named(COLUMNS);
        let runs = runs_of(nights(28, 20, -0.05));
        let loaded: Vec<Run> = runs.iter().map(|r| Run { row: r.row.unpack().pack_only(keep), ..r.clone() }).collect();
        let (a, b) = (analyze(&runs, &[], &opts()).unwrap(), analyze(&loaded, &[], &opts()).unwrap());
        assert_eq!(
            a.findings.iter().map(|f| &f.id).collect::<Vec<_>>(),
            b.findings.iter().map(|f| &f.id).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_baseline_from_history_is_the_current_level() {
        let runs = runs_of(nights(30, 20, -0.05));
        let rows = current_level_rows(&runs, &[], &opts()).unwrap();
        assert_eq!(rows, (20..30).collect::<Vec<_>>());
        // Without a change, every night.
        let runs = runs_of(nights(30, 99, 0.0));
        assert_eq!(current_level_rows(&runs, &[], &opts()).unwrap().len(), 30);
    }

    #[test]
    fn exports_have_the_shapes_their_tools_read() {
        let h = analyze(&runs_of(nights(10, 99, 0.0)), &[], &opts()).unwrap();
        let bmf: serde_json::Value = serde_json::from_slice(&output::bmf(&h).unwrap()).unwrap();
        let (name, measures) = bmf.as_object().unwrap().iter().next().unwrap();
        assert_eq!(name, "resnet50 224px fp32 single x1 b64 @ box");
        assert!(measures["throughput"]["value"].as_f64().unwrap() > 0.0);
        let big: serde_json::Value = serde_json::from_slice(&output::gab(&h, true).unwrap()).unwrap();
        assert_eq!(big[0]["unit"], "img/s");
        assert!(big[0]["name"].as_str().unwrap().ends_with("throughput"));
        let small: serde_json::Value = serde_json::from_slice(&output::gab(&h, false).unwrap()).unwrap();
        assert_eq!(small.as_array().unwrap().len(), 0);
    }

    #[test]
    fn slow_drift_is_flagged_and_a_flat_series_is_not() {
        let drifting: Vec<Row> = (0..30).map(|i| night(i, 1000.0 * (1.0 - 0.003 * i as f64), "box")).collect();
        let h =
            analyze(&runs_of(drifting), &[], &Options { params: Params { p: 1e-12, ..Params::default() }, ..opts() })
                .unwrap();
        let d = &h.drifts[0];
        assert!(d.beyond && d.gates(), "{d:?}");
        assert!((d.per_week.slope - (-0.021)).abs() < 0.004, "{d:?}");
        let flat = analyze(&runs_of(nights(30, 99, 0.0)), &[], &opts()).unwrap();
        assert!(!flat.drifts[0].beyond);
    }
}
