//! From result rows to the figures people read: rows grouped by config,
//! repeats reduced to medians, scaling efficiency against the 1-device run,
//! each with its 95 % interval. `report`, `compare`, `check` and the charts
//! all start here.
//!
//! A group's throughput interval is the spread of its repeats when it has
//! two or more (from the lowest to the highest of their own 95 % intervals,
//! so run-to-run drift is inside it), else the one run's own interval
//! (`metrics::interval`, which does not cover drift), and tables mark the
//! latter with `*`. Scaling efficiency's interval propagates both
//! throughputs' relative half-widths in quadrature (independent measurements).
//!
//! Only rows with status `ok` contribute numbers. Others are kept, so that
//! they can be reported, but never count as zero throughput.

use anyhow::Result;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::usage;
use crate::metrics::interval::Interval;
use crate::metrics::stats;
use crate::report::export::{Cell, Column, Table};
use crate::report::format::{fmt_half_width, fmt_ms, fmt_pct, fmt_rate, fmt_ratio};
use crate::results::csv::{read_rows_with_lines, Row};
use crate::results::long::DeviceData;
use crate::results::Implementation;

/// One row and where it came from.
#[derive(Debug, Clone)]
pub struct Run {
    pub file: PathBuf,
    pub line: u64,
    pub row: Row,
}

impl Run {
    pub fn is_ok(&self) -> bool {
        self.row.status == crate::results::Status::Ok
    }
    /// `file:line`, for messages about this row.
    pub fn place(&self) -> String {
        format!("{}:{}", self.file.display(), self.line)
    }
    pub fn is_published(&self) -> bool {
        self.row.implementation == PUBLISHED
    }
}

/// The `impl` of reference rows: other people's figures, never measured here.
pub const PUBLISHED: Implementation = Implementation::Published;

/// Reads every file; a file with a header but no rows is an error, since a
/// report or a gate over nothing is almost certainly the wrong file.
pub fn load_files(paths: &[PathBuf]) -> Result<Vec<Run>> {
    let mut runs = vec![];
    for p in paths {
        let rows = read_rows_with_lines(p)?;
        if rows.is_empty() {
            return Err(usage(format!("{}: has a header but no result rows", p.display())));
        }
        runs.extend(rows.into_iter().map(|(line, row)| Run { file: p.clone(), line, row }));
    }
    Ok(runs)
}

/// Model, image size, precision, batch per device, serving load and set-up:
/// what scaling is measured across.
pub type Workload = (String, Option<u32>, String, Option<u32>, String, String);

/// The configuration a result belongs to; rows with equal keys are repeats.
/// Every option that changes the measurement is in it: precision (fp32 and
/// fp16 are different workloads), the set-up beside the columns, and ddp's
/// communication.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConfigKey {
    pub model: String,
    pub image_size: Option<u32>,
    pub precision: String,
    pub strategy: String,
    pub n_devices: u32,
    pub batch_per_device: Option<u32>,
    /// Serving rows: the scenario and its load (`load_of`); empty for training.
    pub load: String,
    /// What else was chosen that makes another workload, for every strategy
    /// alike (`setup_of`); empty for the defaults.
    pub setup: String,
    /// ddp's communication where it is not the default (`comm_of`).
    pub comm: String,
}

/// The words of a row's set-up beside its own columns: channels-last,
/// cudnn-benchmark, deterministic, the data, then the `variant` column's.
pub fn setup_of(row: &Row) -> String {
    let mut w: Vec<String> = vec![];
    for (on, word) in [
        (row.channels_last, "channels-last"),
        (row.cudnn_benchmark, "cudnn-benchmark"),
        (row.deterministic, "deterministic"),
    ] {
        if on == Some(true) {
            w.push(word.into());
        }
    }
    if !row.data.is_empty() && row.data != "synthetic" {
        w.push(format!("data={}", row.data));
    }
    if !row.variant.is_empty() {
        w.push(row.variant.clone());
    }
    w.join(" ")
}

/// A ddp row's communication where it is not the default: a backend other
/// than the device's default (gloo on the CPU, nccl on CUDA), a compression hook.
pub fn comm_of(row: &Row) -> String {
    let mut w: Vec<String> = vec![];
    let default_backend = if row.device_kind == "cuda" { "nccl" } else { "gloo" };
    if !row.backend.is_empty() && row.backend != default_backend {
        w.push(format!("backend={}", row.backend));
    }
    if !row.comm_hook.is_empty() && row.comm_hook != "none" {
        w.push(format!("comm-hook={}", row.comm_hook));
    }
    w.join(" ")
}

/// A serving row's scenario and load, e.g. `streams 200×5fps`, `server
/// 500/s`, `offline`; empty for a training row.
pub fn load_of(row: &Row) -> String {
    if !row.is_infer() {
        return String::new();
    }
    let num = |v: f64| if v.fract() == 0.0 { format!("{v:.0}") } else { format!("{v}") };
    match (row.scenario.as_str(), row.streams, row.fps, row.offered_rate) {
        ("streams", Some(n), Some(f), _) => format!("streams {n}×{}fps", num(f)),
        ("server", _, _, Some(r)) => format!("server {}/s", num(r)),
        (s, ..) => s.to_string(),
    }
}

/// Loads in numeric order: the scenario, then its first number.
fn load_rank(load: &str) -> (String, u64, String) {
    let (kind, rest) = load.split_once(' ').unwrap_or((load, ""));
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    (kind.to_string(), digits.parse().unwrap_or(0), rest.to_string())
}

/// single, dp, ddp in that order (simplest first), then anything else by name.
pub fn strategy_rank(s: &str) -> u8 {
    match s {
        "single" => 0,
        "dp" => 1,
        "ddp" => 2,
        _ => 3,
    }
}

/// A whole number as a table cell, empty when unknown.
pub fn int_cell(v: Option<u32>) -> Cell {
    v.map_or_else(Cell::none, |x| Cell::num(x as f64, x.to_string()))
}

impl ConfigKey {
    /// The set-up and communication words, as the `variant` column of a
    /// table shows them.
    pub fn variant(&self) -> String {
        [self.setup.as_str(), self.comm.as_str()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Whether any of `keys` has a variant: tables show the column then.
    pub fn any_variant<'a>(keys: impl IntoIterator<Item = &'a ConfigKey>) -> bool {
        keys.into_iter().any(|k| !k.setup.is_empty() || !k.comm.is_empty())
    }

    /// The table columns that name a configuration (report and compare);
    /// `load` adds the serving load's column, `variant` what else was chosen.
    pub fn columns(load: bool, variant: bool) -> Vec<Column> {
        let mut c = vec![
            Column::text("model", "model"),
            Column::num("image_size", "image"),
            Column::text("precision", "precision"),
            Column::text("strategy", "strategy"),
            Column::num("n_devices", "devices"),
            Column::num("batch_per_device", "batch/dev"),
        ];
        if load {
            c.push(Column::text("load", "load"));
        }
        if variant {
            c.push(Column::text("variant", "variant"));
        }
        c
    }

    /// This configuration's cells under `columns(load, variant)`.
    pub fn cells(&self, load: bool, variant: bool) -> Vec<Cell> {
        let mut c = vec![
            Cell::text(&self.model),
            int_cell(self.image_size),
            Cell::text(&self.precision),
            Cell::text(&self.strategy),
            int_cell(Some(self.n_devices)),
            int_cell(self.batch_per_device),
        ];
        if load {
            c.push(Cell::text(&self.load));
        }
        if variant {
            c.push(Cell::text(self.variant()));
        }
        c
    }

    /// A serving configuration (`gpubench infer`).
    pub fn is_infer(&self) -> bool {
        !self.load.is_empty()
    }

    pub fn of(row: &Row) -> Self {
        ConfigKey {
            model: row.model.clone(),
            image_size: row.image_size,
            precision: row.precision.clone(),
            strategy: row.strategy.clone(),
            n_devices: row.n_devices,
            batch_per_device: row.batch_per_device,
            load: load_of(row),
            setup: setup_of(row),
            comm: if row.strategy == "ddp" { comm_of(row) } else { String::new() },
        }
    }

    /// The key without strategy, device count and communication: what
    /// scaling is measured across.
    pub fn workload(&self) -> Workload {
        (
            self.model.clone(),
            self.image_size,
            self.precision.clone(),
            self.batch_per_device,
            self.load.clone(),
            self.setup.clone(),
        )
    }

    /// Short human form, e.g. `resnet50 224px fp32 ddp x8 b64` (serving:
    /// with its load).
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{} {} {} {} x{} b{}",
            self.model,
            opt_or(self.image_size, "?").to_string() + "px",
            self.precision,
            self.strategy,
            self.n_devices,
            opt_or(self.batch_per_device, "?")
        );
        if self.is_infer() {
            s += &format!(" {}", self.load);
        }
        let v = self.variant();
        if !v.is_empty() {
            s += &format!(" {v}");
        }
        s
    }
}

impl Ord for ConfigKey {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        let k = |c: &ConfigKey| {
            (
                c.model.clone(),
                c.image_size,
                c.precision.clone(),
                c.batch_per_device,
                load_rank(&c.load),
                c.setup.clone(),
                strategy_rank(&c.strategy),
                c.strategy.clone(),
                c.n_devices,
                c.comm.clone(),
            )
        };
        k(self).cmp(&k(o))
    }
}

impl PartialOrd for ConfigKey {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

pub fn opt_or<T: ToString>(v: Option<T>, none: &str) -> String {
    v.map_or_else(|| none.to_string(), |x| x.to_string())
}

/// What a group's rows share besides the config. `report` scopes by
/// hardware, label and impl so that different machines or a published figure
/// are never pooled as repeats; `compare` and `check` have already split
/// their inputs into sets and use one scope per set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scope {
    pub hardware: String,
    pub label: String,
    pub implementation: Implementation,
}

impl Scope {
    pub fn of(row: &Row) -> Self {
        Scope {
            hardware: if row.device_name.is_empty() { "unknown".into() } else { row.device_name.clone() },
            label: row.label.clone(),
            implementation: row.implementation,
        }
    }
}

/// Repeated runs of one config in one scope, reduced to medians.
#[derive(Debug, Clone)]
pub struct Group {
    pub scope: Scope,
    pub key: ConfigKey,
    /// Indices into the runs, status ok.
    pub ok: Vec<usize>,
    /// Indices into the runs, other statuses.
    pub excluded: Vec<usize>,
    pub throughput: Option<f64>,
    pub per_device: Option<f64>,
    /// throughput / (n_devices × 1-device throughput); None without a
    /// 1-device group in the same scope and workload.
    pub efficiency: Option<f64>,
    /// Median of the 1-device group's throughput that `efficiency` used.
    pub base_throughput: Option<f64>,
    pub step_p50: Option<f64>,
    pub step_p90: Option<f64>,
    pub imbalance: Option<f64>,
    pub throughput_ci: Option<Spread>,
    /// None for the baseline itself, whose efficiency is 1 by definition.
    pub efficiency_ci: Option<Spread>,
    /// Indices of ok runs whose row names interference.
    pub disturbed: Vec<usize>,
}

/// A group's 95 % interval for one figure, and what it rests on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub ci: Interval,
    /// One run's own interval: run-to-run drift is not in it.
    pub within_run: bool,
}

impl Spread {
    pub fn half_width(&self) -> f64 {
        (self.ci.hi - self.ci.lo) / 2.0
    }

    /// Two figures whose intervals overlap cannot be ranked.
    pub fn overlaps(&self, other: &Spread) -> bool {
        self.ci.overlaps(&other.ci)
    }
}

/// With repeats, their spread: from the lowest to the highest of the
/// repeats' own 95 % intervals (each repeat's throughput where a row has
/// none), so run-to-run drift is inside it. With one run, that run's interval.
///
/// Not Student's t over the repeats: with the two or three repeats a sweep
/// can afford, t's quantile (12.7 for two) makes the interval wider than the
/// figure itself, and a reader learns nothing. The spread is what hyperfine
/// shows as a range, widened by each run's own noise.
fn throughput_spread(runs: &[Run], ok: &[usize]) -> Option<Spread> {
    let rows: Vec<&Row> = ok.iter().map(|&i| &runs[i].row).filter(|r| r.throughput_img_s.is_some()).collect();
    match rows.as_slice() {
        [] => None,
        [one] => {
            Some(Spread { ci: Interval { lo: one.throughput_ci95_lo?, hi: one.throughput_ci95_hi? }, within_run: true })
        }
        many => {
            let lo = many.iter().map(|r| r.throughput_ci95_lo.or(r.throughput_img_s).unwrap()).fold(f64::MAX, f64::min);
            let hi = many.iter().map(|r| r.throughput_ci95_hi.or(r.throughput_img_s).unwrap()).fold(f64::MIN, f64::max);
            Some(Spread { ci: Interval { lo, hi }, within_run: false })
        }
    }
}

/// efficiency = T / (n·B): relative half-widths of T and B add in quadrature.
fn efficiency_spread(eff: f64, t: f64, t_ci: &Spread, b: f64, b_ci: &Spread) -> Spread {
    let rel = ((t_ci.half_width() / t).powi(2) + (b_ci.half_width() / b).powi(2)).sqrt();
    Spread {
        ci: Interval { lo: eff * (1.0 - rel), hi: eff * (1.0 + rel) },
        within_run: t_ci.within_run || b_ci.within_run,
    }
}

pub fn median(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| stats::percentile(xs, 50.0))
}

/// The median of one column over some rows (`idx` into `runs`), the rows without it left out.
pub fn column_median(runs: &[Run], idx: &[usize], f: fn(&Row) -> Option<f64>) -> Option<f64> {
    median(&idx.iter().filter_map(|&i| f(&runs[i].row)).collect::<Vec<_>>())
}

/// A numeric column by name. Later schema additions (issue 5's
/// `mem_imbalance`) are read through this, so this module does not break
/// while `Row` grows, and starts using them as soon as they exist.
pub fn column_f64(row: &Row, name: &str) -> Option<f64> {
    serde_json::to_value(row).ok()?.get(name)?.as_f64()
}

/// Peak-memory imbalance of one run: max/min across devices. From the row's
/// `mem_imbalance` column when the schema has it, else from the per-device file.
pub fn run_imbalance(run: &Run, devices: &DeviceData) -> Option<f64> {
    column_f64(&run.row, "mem_imbalance").or_else(|| devices.mem_imbalance(&run.row.run_id))
}

/// Groups `members` (indices into `runs`) by scope and config, sorted.
/// All-reduce rows are curves over message size, not configurations: they
/// never form a group (`report::comm` has their table).
pub fn summarize(
    runs: &[Run],
    members: &[usize],
    scope_of: impl Fn(&Row) -> Scope,
    devices: &DeviceData,
) -> Vec<Group> {
    let mut by: BTreeMap<(Scope, ConfigKey), (Vec<usize>, Vec<usize>)> = BTreeMap::new();
    for &i in members.iter().filter(|&&i| !runs[i].row.is_allreduce()) {
        let r = &runs[i];
        let e = by.entry((scope_of(&r.row), ConfigKey::of(&r.row))).or_default();
        if r.is_ok() {
            e.0.push(i);
        } else {
            e.1.push(i);
        }
    }
    let mut groups: Vec<Group> = by
        .into_iter()
        .map(|((scope, key), (ok, excluded))| {
            let vals = |f: &dyn Fn(&Run) -> Option<f64>| -> Option<f64> {
                median(&ok.iter().filter_map(|&i| f(&runs[i])).collect::<Vec<_>>())
            };
            let throughput = vals(&|r| r.row.throughput_img_s);
            let throughput_ci = throughput_spread(runs, &ok);
            let disturbed = ok.iter().copied().filter(|&i| !runs[i].row.interference.is_empty()).collect();
            let n = key.n_devices.max(1) as f64;
            let per_device = vals(&|r| r.row.throughput_per_device_img_s).or(throughput.map(|t| t / n));
            Group {
                step_p50: vals(&|r| r.row.step_ms_p50),
                step_p90: vals(&|r| r.row.step_ms_p90),
                imbalance: vals(&|r| run_imbalance(r, devices)),
                scope,
                key,
                ok,
                excluded,
                throughput,
                per_device,
                efficiency: None,
                base_throughput: None,
                throughput_ci,
                efficiency_ci: None,
                disturbed,
            }
        })
        .collect();
    for i in 0..groups.len() {
        let Some(bi) = baseline_of(&groups, i) else { continue };
        let (base, base_ci) = (groups[bi].throughput, groups[bi].throughput_ci);
        let g = &mut groups[i];
        if let (Some(t), Some(b)) = (g.throughput, base) {
            if b > 0.0 && t > 0.0 {
                let eff = t / (g.key.n_devices as f64 * b);
                g.efficiency = Some(eff);
                g.base_throughput = Some(b);
                if let (Some(tc), Some(bc), true) = (&g.throughput_ci, &base_ci, bi != i) {
                    g.efficiency_ci = Some(efficiency_spread(eff, t, tc, b, bc));
                }
            }
        }
    }
    groups
}

/// The 1-device group that group `i` scales from: same scope and workload,
/// one device, preferring strategy `single` (then dp, ddp, ...), with a
/// throughput.
pub fn baseline_of(groups: &[Group], i: usize) -> Option<usize> {
    let g = &groups[i];
    groups
        .iter()
        .enumerate()
        .filter(|(_, b)| {
            b.scope == g.scope && b.key.n_devices == 1 && b.key.workload() == g.key.workload() && b.throughput.is_some()
        })
        .min_by_key(|(_, b)| (strategy_rank(&b.key.strategy), b.key.strategy.clone()))
        .map(|(j, _)| j)
}

pub fn cell_opt(v: Option<f64>, fmt: fn(f64) -> String) -> Cell {
    v.map_or_else(Cell::none, |x| Cell::num(x, fmt(x)))
}

/// "1234 ±25", with `*` when the interval is one run's own; the raw value
/// stays the estimate.
pub fn cell_spread(v: Option<f64>, s: Option<Spread>, fmt: fn(f64) -> String) -> Cell {
    match (v, s) {
        (Some(x), Some(s)) if s.half_width().is_finite() => {
            let pm = fmt_half_width(fmt, x, s.half_width());
            Cell::num(x, format!("{} ±{pm}{}", fmt(x), if s.within_run { "*" } else { "" }))
        }
        _ => cell_opt(v, fmt),
    }
}

/// The interval's bounds as two raw-only cells (CSV and JSON).
pub fn spread_bounds(s: Option<Spread>) -> [Cell; 2] {
    match s {
        Some(s) => [Cell::num(s.ci.lo, ""), Cell::num(s.ci.hi, "")],
        None => [Cell::none(), Cell::none()],
    }
}

/// Which figures rest on one run's interval: "within-run", "repeats" or "".
pub fn spread_basis(s: Option<Spread>) -> Cell {
    Cell::text(match s {
        Some(s) if s.within_run => "within-run",
        Some(_) => "repeats",
        None => "",
    })
}

pub const INTERVAL_NOTE: &str = "± = half-width of the spread: with repeats, from the lowest to the highest of their \
                                 own 95 % intervals; * = one run's own 95 % interval (batch means over its steps), \
                                 which does not cover run-to-run drift: repeat runs (--repeat) for that";

/// Per machine, workload and device count with two or more strategies: the
/// strategies fastest first, `>` between two whose throughput intervals are
/// apart and `≈` where they overlap (noise cannot rank them). Groups without
/// an interval (rows from before intervals) are left out of the ranking.
pub fn ranking_notes(groups: &[Group]) -> Vec<String> {
    let mut by: BTreeMap<(Scope, Workload, u32), Vec<&Group>> = BTreeMap::new();
    for g in groups.iter().filter(|g| g.throughput.is_some() && g.throughput_ci.is_some()) {
        by.entry((g.scope.clone(), g.key.workload(), g.key.n_devices)).or_default().push(g);
    }
    by.into_iter()
        .filter(|(_, gs)| gs.len() >= 2)
        .map(|((scope, (model, img, prec, batch, load, setup), n), mut gs)| {
            gs.sort_by(|a, b| b.throughput.unwrap().total_cmp(&a.throughput.unwrap()));
            let mut line = String::new();
            for (i, g) in gs.iter().enumerate() {
                if i > 0 {
                    let same = gs[i - 1].throughput_ci.unwrap().overlaps(&g.throughput_ci.unwrap());
                    line.push_str(if same { " ≈ " } else { " > " });
                }
                line.push_str(&format!("{} {}", g.key.strategy, fmt_rate(g.throughput.unwrap())));
                if !g.key.comm.is_empty() {
                    line.push_str(&format!(" ({})", g.key.comm));
                }
            }
            let load = [load, setup].iter().filter(|s| !s.is_empty()).map(|s| format!(" {s}")).collect::<String>();
            format!(
                "fastest on {n} device{} ({} {model} {}px {prec} b{}{load}): {line}",
                if n == 1 { "" } else { "s" },
                scope.hardware,
                opt_or(img, "?"),
                opt_or(batch, "?")
            )
        })
        .collect()
}

/// One note per ok row that recorded interference.
pub fn disturbed_notes(runs: &[Run], idx: impl IntoIterator<Item = usize>) -> Vec<String> {
    idx.into_iter()
        .map(|i| {
            let r = &runs[i];
            format!("disturbed {} ({}): {}", r.place(), ConfigKey::of(&r.row).describe(), r.row.interference)
        })
        .collect()
}

/// "2 oom, 1 failed" for a group's excluded runs.
pub fn status_counts(runs: &[Run], idx: &[usize]) -> String {
    let mut c: BTreeMap<&str, usize> = BTreeMap::new();
    for &i in idx {
        *c.entry(runs[i].row.status.name()).or_default() += 1;
    }
    c.iter().map(|(s, n)| format!("{n} {s}")).collect::<Vec<_>>().join(", ")
}

/// One note per excluded row, saying where it is and why it does not count.
pub fn excluded_notes(runs: &[Run], idx: impl IntoIterator<Item = usize>) -> Vec<String> {
    idx.into_iter()
        .map(|i| {
            let r = &runs[i];
            let err = r.row.error.lines().next().unwrap_or("").trim();
            let why = if err.is_empty() { String::new() } else { format!(": {err}") };
            format!("excluded {} ({}): status {}{why}", r.place(), ConfigKey::of(&r.row).describe(), r.row.status)
        })
        .collect()
}

pub const SCALING_NOTE: &str = "scaling = img/s / (devices x img/s of the 1-device run with the same hardware, model, \
                                image size, precision and batch/dev); '-' where there is no such run";

pub const PUBLISHED_NOTE: &str = "impl 'published' rows are other people's figures on other hardware, \
                                  cited in their `source` column; they were not measured here";

/// The `report` table: one line per (hardware, label, impl, config).
pub fn report_table(runs: &[Run], groups: &[Group], files: &[PathBuf]) -> Table {
    let any_label = groups.iter().any(|g| !g.scope.label.is_empty());
    let any_impl = groups.iter().any(|g| g.scope.implementation != Implementation::Gpubench);
    let any_excluded = groups.iter().any(|g| !g.excluded.is_empty());
    let any_disturbed = groups.iter().any(|g| !g.disturbed.is_empty());
    let any_spread = groups.iter().any(|g| g.throughput_ci.is_some());
    let any_variant = ConfigKey::any_variant(groups.iter().map(|g| &g.key));

    let mut columns = vec![Column::text("hardware", "hardware")];
    if any_label {
        columns.push(Column::text("label", "label"));
    }
    if any_impl {
        columns.push(Column::text("impl", "impl"));
    }
    columns.extend(ConfigKey::columns(false, any_variant));
    columns.push(Column::num("runs", "runs"));
    if any_excluded {
        columns.push(Column::text("excluded", "excluded"));
    }
    if any_disturbed {
        columns.push(Column::num("disturbed", "disturbed"));
    }
    columns.extend([
        Column::num("throughput_img_s", "img/s"),
        Column::num("throughput_per_device_img_s", "img/s/dev"),
        Column::num("scaling_efficiency", "scaling"),
        Column::num("step_ms_p50", "step p50 ms"),
        Column::num("step_ms_p90", "step p90 ms"),
        Column::num("mem_imbalance", "mem imbalance"),
        Column::raw("throughput_ci95_lo"),
        Column::raw("throughput_ci95_hi"),
        Column::raw("scaling_ci95_lo"),
        Column::raw("scaling_ci95_hi"),
        Column::raw("ci_basis"),
    ]);

    let rows = groups
        .iter()
        .map(|g| {
            let mut row = vec![Cell::text(&g.scope.hardware)];
            if any_label {
                row.push(Cell::text(&g.scope.label));
            }
            if any_impl {
                row.push(Cell::text(g.scope.implementation.name()));
            }
            row.extend(g.key.cells(false, any_variant));
            row.push(int_cell(Some(g.ok.len() as u32)));
            if any_excluded {
                row.push(Cell::text(status_counts(runs, &g.excluded)));
            }
            if any_disturbed {
                let d = g.disturbed.len();
                row.push(if d == 0 { Cell::none() } else { Cell::num(d as f64, format!("{d}/{}", g.ok.len())) });
            }
            row.extend([
                cell_spread(g.throughput, g.throughput_ci, fmt_rate),
                cell_opt(g.per_device, fmt_rate),
                cell_spread(g.efficiency, g.efficiency_ci, fmt_pct),
                cell_opt(g.step_p50, fmt_ms),
                cell_opt(g.step_p90, fmt_ms),
                cell_opt(g.imbalance, fmt_ratio),
            ]);
            row.extend(spread_bounds(g.throughput_ci));
            row.extend(spread_bounds(g.efficiency_ci));
            row.push(spread_basis(g.throughput_ci));
            row
        })
        .collect();

    let n_ok: usize = groups.iter().map(|g| g.ok.len()).sum();
    let mut notes = vec![
        "figures are medians over repeated runs of a config".to_string(),
        SCALING_NOTE.to_string(),
        "mem imbalance = max/min peak memory across a run's devices".to_string(),
    ];
    if any_spread {
        notes.push(INTERVAL_NOTE.to_string());
    }
    if any_impl && groups.iter().any(|g| g.scope.implementation == PUBLISHED) {
        notes.push(PUBLISHED_NOTE.to_string());
    }
    notes.extend(ranking_notes(groups));
    notes.extend(excluded_notes(runs, groups.iter().flat_map(|g| g.excluded.iter().copied())));
    notes.extend(disturbed_notes(runs, groups.iter().flat_map(|g| g.disturbed.iter().copied())));
    Table {
        title: format!(
            "gpubench report: {n_ok} ok run{} from {}",
            if n_ok == 1 { "" } else { "s" },
            files_phrase(files)
        ),
        columns,
        rows,
        notes,
    }
}

/// "a.csv" or "3 files".
pub fn files_phrase(files: &[PathBuf]) -> String {
    match files {
        [one] => one.display().to_string(),
        _ => format!("{} files", files.len()),
    }
}

/// A file's name without directory and `.csv`, for labels.
pub fn file_stem(p: &Path) -> String {
    p.file_stem().map_or_else(|| p.display().to_string(), |s| s.to_string_lossy().into_owned())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::report::export::Exporter;

    /// A measured ok row; tests adjust what they need.
    pub fn row(strategy: &str, n: u32, thr: f64) -> Row {
        Row {
            schema_version: 1,
            run_id: format!("{strategy}-{n}-{thr}"),
            implementation: Implementation::Gpubench,
            strategy: strategy.into(),
            n_devices: n,
            device_name: "Tesla V100".into(),
            model: "resnet50".into(),
            image_size: Some(224),
            precision: "fp32".into(),
            batch_per_device: Some(64),
            throughput_img_s: Some(thr),
            throughput_per_device_img_s: Some(thr / n as f64),
            step_ms_p50: Some(100.0),
            step_ms_p90: Some(110.0),
            status: crate::results::Status::Ok,
            ..Default::default()
        }
    }

    pub fn runs_of(rows: Vec<Row>) -> Vec<Run> {
        rows.into_iter().enumerate().map(|(i, row)| Run { file: "t.csv".into(), line: i as u64 + 2, row }).collect()
    }

    fn groups(runs: &[Run]) -> Vec<Group> {
        let all: Vec<usize> = (0..runs.len()).collect();
        summarize(runs, &all, Scope::of, &DeviceData::default())
    }

    #[test]
    fn all_reduce_rows_never_form_a_configuration() {
        // compare and check summarize whatever the files hold; a curve's sizes must not pool into a "config".
        let mut points = vec![row("single", 1, 100.0)];
        for bytes in [1024, 1 << 20] {
            let mut r = row("allreduce", 2, 5.0);
            r.mode = "allreduce".into();
            r.bytes = Some(bytes);
            points.push(r);
        }
        let g = groups(&runs_of(points));
        assert_eq!(g.len(), 1, "{:?}", g.iter().map(|g| g.key.describe()).collect::<Vec<_>>());
        assert_eq!(g[0].key.describe(), "resnet50 224px fp32 single x1 b64");
    }

    #[test]
    fn repeats_reduce_to_the_median_and_scale_from_single() {
        let runs = runs_of(vec![
            row("single", 1, 100.0),
            row("single", 1, 110.0),
            row("single", 1, 90.0),
            row("ddp", 4, 360.0),
            row("dp", 4, 200.0),
        ]);
        let g = groups(&runs);
        let keys: Vec<String> = g.iter().map(|g| g.key.describe()).collect();
        assert_eq!(
            keys,
            ["resnet50 224px fp32 single x1 b64", "resnet50 224px fp32 dp x4 b64", "resnet50 224px fp32 ddp x4 b64"]
        );
        assert_eq!(g[0].throughput, Some(100.0));
        assert_eq!(g[0].ok.len(), 3);
        assert_eq!(g[0].efficiency, Some(1.0));
        assert_eq!(g[2].efficiency, Some(0.9));
        assert_eq!(g[1].efficiency, Some(0.5));
    }

    #[test]
    fn scaling_uses_any_one_device_run_when_single_is_absent() {
        let runs = runs_of(vec![row("ddp", 1, 100.0), row("ddp", 2, 150.0)]);
        let g = groups(&runs);
        assert_eq!(g[1].efficiency, Some(0.75));
    }

    #[test]
    fn no_scaling_across_hardware_precision_or_batch() {
        let mut other_hw = row("single", 1, 100.0);
        other_hw.device_name = "Tesla K80".into();
        let mut fp16 = row("single", 1, 100.0);
        fp16.precision = "fp16".into();
        let mut b32 = row("single", 1, 100.0);
        b32.batch_per_device = Some(32);
        let runs = runs_of(vec![other_hw, fp16, b32, row("ddp", 2, 150.0)]);
        let g = groups(&runs);
        let ddp = g.iter().find(|g| g.key.strategy == "ddp").unwrap();
        assert_eq!(ddp.efficiency, None);
    }

    #[test]
    fn failed_rows_are_kept_apart_and_never_count_as_zero() {
        let mut oom = row("dp", 4, 0.0);
        oom.status = crate::results::Status::Oom;
        oom.throughput_img_s = None;
        oom.error = "CUDA out of memory\nmore".into();
        let runs = runs_of(vec![row("dp", 4, 200.0), oom]);
        let g = groups(&runs);
        assert_eq!(g.len(), 1);
        assert_eq!((g[0].ok.len(), g[0].excluded.len()), (1, 1));
        assert_eq!(g[0].throughput, Some(200.0));
        assert_eq!(
            excluded_notes(&runs, g[0].excluded.clone()),
            ["excluded t.csv:3 (resnet50 224px fp32 dp x4 b64): status oom: CUDA out of memory"]
        );
    }

    #[test]
    fn repeats_give_their_range_and_one_run_its_own_interval() {
        let mut one = row("single", 1, 100.0);
        (one.throughput_ci95_lo, one.throughput_ci95_hi) = (Some(98.0), Some(102.0));
        let runs = runs_of(vec![one, row("ddp", 2, 180.0), row("ddp", 2, 190.0), row("ddp", 2, 200.0)]);
        let g = groups(&runs);
        let s = g[0].throughput_ci.unwrap();
        assert!(s.within_run);
        assert_eq!((s.ci.lo, s.ci.hi), (98.0, 102.0));
        // Repeats without their own intervals: the range of their figures.
        let d = g[1].throughput_ci.unwrap();
        assert!(!d.within_run);
        assert_eq!((d.ci.lo, d.ci.hi), (180.0, 200.0));
        // Scaling 0.95 with relative half-widths 0.02 and 10/190.
        let e = g[1].efficiency_ci.unwrap();
        let rel = (0.02f64.powi(2) + (10.0f64 / 190.0).powi(2)).sqrt();
        assert!(((e.ci.hi - e.ci.lo) / 2.0 - 0.95 * rel).abs() < 1e-9, "{e:?}");
        assert!(e.within_run, "a within-run side makes the propagated interval within-run");
        assert_eq!(g[0].efficiency_ci, None, "the baseline's own scaling is 1 by definition");
    }

    #[test]
    fn repeats_spread_over_their_own_intervals() {
        let with_ci = |thr: f64, lo: f64, hi: f64| {
            let mut r = row("single", 1, thr);
            (r.throughput_ci95_lo, r.throughput_ci95_hi) = (Some(lo), Some(hi));
            r
        };
        let g = groups(&runs_of(vec![with_ci(100.0, 97.0, 103.0), with_ci(110.0, 108.0, 112.0)]));
        let s = g[0].throughput_ci.unwrap();
        assert_eq!((s.ci.lo, s.ci.hi, s.within_run), (97.0, 112.0, false));
    }

    #[test]
    fn a_single_run_without_an_interval_has_none() {
        let g = groups(&runs_of(vec![row("single", 1, 100.0), row("ddp", 2, 150.0)]));
        assert_eq!((g[0].throughput_ci, g[1].efficiency_ci), (None, None));
        assert_eq!(cell_spread(Some(100.0), None, fmt_rate).display(), "100");
    }

    #[test]
    fn cells_show_plus_minus_and_mark_within_run() {
        let s = Spread { ci: Interval { lo: 1210.0, hi: 1260.0 }, within_run: true };
        assert_eq!(cell_spread(Some(1234.0), Some(s), fmt_rate).display(), "1234 ±25*");
        let s = Spread { within_run: false, ..s };
        assert_eq!(cell_spread(Some(1234.0), Some(s), fmt_rate), Cell::num(1234.0, "1234 ±25"));
    }

    #[test]
    fn rankings_do_not_rank_noise() {
        let mut rows = vec![];
        for (s, n, t) in [("single", 1, 100.0), ("dp", 1, 101.0), ("dp", 2, 150.0), ("ddp", 2, 190.0)] {
            for d in [-2.0, 0.0, 2.0] {
                rows.push(row(s, n, t + d));
            }
        }
        let g = groups(&runs_of(rows));
        assert_eq!(
            ranking_notes(&g),
            [
                "fastest on 1 device (Tesla V100 resnet50 224px fp32 b64): dp 101 ≈ single 100",
                "fastest on 2 devices (Tesla V100 resnet50 224px fp32 b64): ddp 190 > dp 150"
            ]
        );
    }

    #[test]
    fn disturbed_rows_are_counted_and_named() {
        let mut busy = row("single", 1, 90.0);
        busy.interference = "host busy: load 4.2 on 2 cores".into();
        let runs = runs_of(vec![row("single", 1, 100.0), busy]);
        let g = groups(&runs);
        assert_eq!(g[0].disturbed, [1]);
        let t = report_table(&runs, &g, &["t.csv".into()]);
        let text = String::from_utf8(crate::report::export::TextExporter.export(&t).unwrap()).unwrap();
        assert!(text.contains("disturbed t.csv:3 (resnet50 224px fp32 single x1 b64): host busy: load 4.2"), "{text}");
        assert!(text.contains(" 1/2 "), "{text}");
    }

    #[test]
    fn per_device_falls_back_to_throughput_over_devices() {
        let mut r = row("ddp", 4, 400.0);
        r.throughput_per_device_img_s = None;
        let g = groups(&runs_of(vec![r]));
        assert_eq!(g[0].per_device, Some(100.0));
    }

    #[test]
    fn number_formats() {
        assert_eq!(fmt_rate(2855.4), "2855");
        assert_eq!(fmt_rate(51.94), "51.9");
        assert_eq!(fmt_rate(5.123), "5.12");
        assert_eq!(fmt_pct(0.9537), "95.4%");
        assert_eq!(fmt_ratio(3.4817), "3.48x");
        assert_eq!(fmt_ms(12.34), "12.3");
    }

    #[test]
    fn columns_are_read_by_name() {
        let r = row("single", 1, 1.0);
        assert_eq!(column_f64(&r, "throughput_img_s"), Some(1.0));
        assert_eq!(column_f64(&r, "no_such_column"), None);
    }
}
