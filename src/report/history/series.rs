//! From rows to series: one per configuration, machine and metric, its
//! points in history order, each point the repeats of one commit (or one
//! sweep, or one run) reduced to their median.
use anyhow::Result;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::usage;
use crate::report::check::Metric;
use crate::report::summary::{strategy_rank, ConfigKey, Run};
use crate::results::{Fields, Implementation, Status};

/// How series are told apart besides the configuration (`--by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum By {
    /// One series per host: machines are never mixed (the default).
    Host,
    /// One series per device name: hosts of one kind pooled.
    Device,
}

/// What a point is (`--order`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// The rows of one commit under test, points ordered by when the commit
    /// first ran; rows without a commit fall back to `Time`'s points.
    Commit,
    /// The rows of one sweep (else one run), ordered by time: every night
    /// its own point even when the commit did not change.
    Time,
}

/// The environment a point ran in: the columns compared across a change.
pub(crate) const ENV: &[(&str, &str)] = &[
    ("driver_version", "driver"),
    ("cuda_version", "CUDA"),
    ("libtorch_version", "libtorch"),
    ("gpubench_version", "gpubench"),
    ("gpubench_commit", "gpubench commit"),
    ("device_name", "device"),
    ("node_list", "nodes"),
    ("host", "host"),
    ("threads", "threads"),
];

fn env_value(r: &impl Fields, col: &str) -> String {
    match col {
        "driver_version" => r.driver_version(),
        "cuda_version" => r.cuda_version(),
        "libtorch_version" => r.libtorch_version(),
        "gpubench_version" => r.gpubench_version(),
        "gpubench_commit" => r.gpubench_commit(),
        "device_name" => r.device_name(),
        "node_list" => r.node_list(),
        "host" => r.host(),
        "threads" => return r.threads().map_or(String::new(), |t| t.to_string()),
        _ => "",
    }
    .to_string()
}

/// One point of history: the repeats of one commit, sweep or run. Its
/// strings are shared (a commit is a point of every series it ran), so that
/// a history of millions of rows holds a point in a little over 100 bytes.
#[derive(Debug, Clone)]
pub(crate) struct Point {
    /// What names it: the commit, else the sweep id, else the run id.
    pub id: Arc<str>,
    pub commit: Arc<str>,
    pub branch: Arc<str>,
    /// Seconds since the epoch of its earliest row.
    pub time: f64,
    /// The median of `repeats`.
    pub value: f64,
    pub repeats: Vec<f64>,
    /// Each `ENV` column's distinct values among its rows, joined by "/".
    pub env: Arc<[String]>,
    /// A link to its CI run, where a row has one.
    pub ci_url: Arc<str>,
    /// Its first row's file and line.
    file: Arc<Path>,
    line: u64,
    /// Its rows: indices into the runs the series were built from.
    pub rows: Vec<u32>,
}

impl Point {
    /// `file:line` of its first row.
    pub(crate) fn place(&self) -> String {
        format!("{}:{}", self.file.display(), self.line)
    }

    /// `2026-11-03`.
    pub(crate) fn date(&self) -> String {
        date_of(self.time)
    }

    /// Commit (12 characters) or date: how tables name the point.
    pub(crate) fn name(&self) -> String {
        if self.commit.is_empty() {
            format!("{} {}", self.date(), short(&self.id, 14))
        } else {
            format!("{} {}", self.date(), short(&self.commit, 12))
        }
    }
}

pub(crate) fn short(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

pub(crate) fn date_of(secs: f64) -> String {
    let t = UNIX_EPOCH + std::time::Duration::from_secs(secs.max(0.0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()[..10].to_string()
}

/// A series: one metric of one configuration on one machine, over time.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    pub key: ConfigKey,
    /// The host, or the device name under `--by device`.
    pub machine: String,
    pub label: String,
    pub metric: Metric,
    pub points: Vec<Point>,
}

impl Series {
    /// `resnet50 224px fp32 ddp x4 b64 @ box1`.
    pub(crate) fn name(&self) -> String {
        let mut s = format!("{} @ {}", self.key.describe(), self.machine);
        if !self.label.is_empty() {
            s += &format!(" [{}]", self.label);
        }
        s
    }

    /// The series' identity in ids and exports: name and metric.
    pub(crate) fn ident(&self) -> String {
        format!("{} {}", self.name(), self.metric.name())
    }
}

/// What was left out on the way, for the notes.
#[derive(Debug, Default)]
pub(crate) struct Left {
    pub other_impl: usize,
    pub not_ok: BTreeMap<String, usize>,
    pub disturbed: usize,
    pub not_runs: usize,
    pub before_since: usize,
}

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Where {
    machine: String,
    label: String,
}

/// A row's point id under `order`.
fn point_id(r: &impl Fields, order: Order) -> String {
    if order == Order::Commit && !r.commit().is_empty() {
        return r.commit().to_string();
    }
    if !r.sweep_id().is_empty() {
        return format!("sweep {}", r.sweep_id());
    }
    format!("run {}", r.run_id())
}

fn seconds(run: &Run) -> Result<f64> {
    let ts = run.row.timestamp();
    humantime::parse_rfc3339_weak(ts.trim_end_matches('Z'))
        .ok()
        .or_else(|| humantime::parse_rfc3339(ts).ok())
        .and_then(|t: SystemTime| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64())
        .ok_or_else(|| {
            usage(format!(
                "{}: timestamp `{ts}` is not an RFC 3339 time; history orders its points by when they ran",
                run.place()
            ))
        })
}

/// Equal strings and environments, shared.
#[derive(Default)]
struct Shared {
    strs: HashSet<Arc<str>>,
    envs: HashSet<Arc<[String]>>,
}

impl Shared {
    fn str(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.strs.get(s) {
            return a.clone();
        }
        let a: Arc<str> = s.into();
        self.strs.insert(a.clone());
        a
    }

    fn env(&mut self, e: Vec<String>) -> Arc<[String]> {
        if let Some(a) = self.envs.get(e.as_slice()) {
            return a.clone();
        }
        let a: Arc<[String]> = e.into();
        self.envs.insert(a.clone());
        a
    }
}

/// (configuration, machine) -> point id -> its rows (indices into the runs).
type ByConfig = BTreeMap<(ConfigKey, Where), BTreeMap<Arc<str>, Vec<u32>>>;

/// Builds every series of `metrics` from `runs`: rows of `implementation`,
/// status ok and undisturbed, training or serving; the rest counted in `Left`.
/// `ignore` names points (ids, commit prefixes of 7+ characters, or dates)
/// to leave out. Errors for rows history cannot place (a bad timestamp, a
/// commit that ran again after another).
pub(crate) fn build(
    runs: &[Run],
    metrics: &[Metric],
    by: By,
    order: Order,
    implementation: Implementation,
    since: f64,
    ignore: &dyn Fn(&str, &str, f64) -> bool,
) -> Result<(Vec<Series>, Left)> {
    let mut left = Left::default();
    let mut shared = Shared::default();
    let mut times = vec![f64::NAN; runs.len()];
    let mut by_config: ByConfig = BTreeMap::new();
    for (ri, run) in runs.iter().enumerate() {
        let r = &run.row;
        if r.is_allreduce() || r.is_peak() {
            left.not_runs += 1;
            continue;
        }
        if r.implementation() != implementation {
            left.other_impl += 1;
            continue;
        }
        if r.status() != Status::Ok {
            *left.not_ok.entry(r.status().name().to_string()).or_default() += 1;
            continue;
        }
        if !r.interference().is_empty() {
            left.disturbed += 1;
            continue;
        }
        let t = seconds(run)?;
        if t < since {
            left.before_since += 1;
            continue;
        }
        // A commit's id is shared without a copy: a history of millions of
        // rows makes no string per row that it keeps or drops.
        let id = if order == Order::Commit && !r.commit().is_empty() {
            shared.str(r.commit())
        } else {
            shared.str(&point_id(r, order))
        };
        if ignore(&id, r.commit(), t) {
            continue;
        }
        times[ri] = t;
        let machine = match by {
            By::Host => r.host(),
            By::Device => r.device_name(),
        };
        let w = Where { machine: machine.to_string(), label: r.label().to_string() };
        by_config.entry((ConfigKey::of(r), w)).or_default().entry(id).or_default().push(ri as u32);
    }
    refuse_interleaved_commits(runs, &times, &by_config, order)?;

    // The 1-device throughput of each workload, machine and point, for scaling:
    // `single` preferred, as report's baseline is.
    let mut one: HashMap<(crate::report::summary::WorkloadKey, &Where, &str), (u8, f64)> = HashMap::new();
    for ((key, w), points) in &by_config {
        if key.n_devices != 1 {
            continue;
        }
        for (id, rows) in points {
            let v: Vec<f64> = rows.iter().filter_map(|&i| runs[i as usize].row.throughput_img_s()).collect();
            if v.is_empty() {
                continue;
            }
            let m = super::detect::median(&v);
            let rank = strategy_rank(&key.strategy);
            let slot = one.entry((key.workload(), w, id)).or_insert((rank, m));
            if rank < slot.0 {
                *slot = (rank, m);
            }
        }
    }

    let mut series = vec![];
    for ((key, w), points) in &by_config {
        let wanted: Vec<Metric> = metrics
            .iter()
            .copied()
            .filter(|&m| !(m == Metric::Scaling && key.n_devices <= 1))
            .filter(|&m| m == Metric::Throughput || (m == Metric::LatencyP99) == key.is_infer())
            .collect();
        let mut per_metric: Vec<Vec<Point>> = wanted.iter().map(|_| vec![]).collect();
        for (id, rows) in points {
            let base = one.get(&(key.workload(), w, &**id)).map(|s| s.1);
            // What a point is besides its values is made once, whatever the metrics.
            let mut proto: Option<Point> = None;
            for (m, pts) in wanted.iter().zip(per_metric.iter_mut()) {
                let repeats: Vec<f64> = rows
                    .iter()
                    .filter_map(|&i| {
                        let r = &runs[i as usize].row;
                        match m {
                            Metric::Throughput => r.throughput_img_s(),
                            Metric::Scaling => Some(r.throughput_img_s()? / (key.n_devices as f64 * base?)),
                            Metric::StepP50 => r.step_ms_p50(),
                            Metric::StepP90 => r.step_ms_p90(),
                            Metric::LatencyP99 => r.latency_ms_p99(),
                        }
                    })
                    .filter(|v| v.is_finite())
                    .collect();
                if repeats.is_empty() {
                    continue;
                }
                let p = proto.get_or_insert_with(|| point(id, rows, runs, &times, &mut shared));
                pts.push(Point { value: super::detect::median(&repeats), repeats, ..p.clone() });
            }
        }
        for (metric, mut pts) in wanted.into_iter().zip(per_metric) {
            if pts.is_empty() {
                continue;
            }
            pts.sort_by(|a, b| a.time.total_cmp(&b.time).then_with(|| a.id.cmp(&b.id)));
            series.push(Series {
                key: key.clone(),
                machine: w.machine.clone(),
                label: w.label.clone(),
                metric,
                points: pts,
            });
        }
    }
    Ok((series, left))
}

/// A point without its values (the metric's `repeats` and `value` are filled per series).
fn point(id: &Arc<str>, rows: &[u32], runs: &[Run], times: &[f64], shared: &mut Shared) -> Point {
    let first =
        *rows.iter().min_by(|&&a, &&b| times[a as usize].total_cmp(&times[b as usize])).expect("a point has rows");
    let run = &runs[first as usize];
    let env = ENV
        .iter()
        .map(|(col, _)| {
            let vals: BTreeSet<String> = rows.iter().map(|&i| env_value(&runs[i as usize].row, col)).collect();
            vals.into_iter().filter(|v| !v.is_empty()).collect::<Vec<_>>().join("/")
        })
        .collect();
    let ci = rows.iter().map(|&i| runs[i as usize].row.ci_url()).find(|u| !u.is_empty()).unwrap_or("");
    Point {
        id: id.clone(),
        commit: shared.str(run.row.commit()),
        branch: shared.str(run.row.branch()),
        time: times[first as usize],
        value: f64::NAN,
        repeats: vec![],
        env: shared.env(env),
        ci_url: shared.str(ci),
        file: run.file.clone(),
        line: run.line,
        rows: rows.to_vec(),
    }
}

/// Commit order is the order commits first ran in, which means each
/// commit's rows must lie in one stretch of time: a commit that runs again
/// after another (a re-run of an old build) has no one place in it.
fn refuse_interleaved_commits(runs: &[Run], times: &[f64], by_config: &ByConfig, order: Order) -> Result<()> {
    if order != Order::Commit {
        return Ok(());
    }
    for points in by_config.values() {
        let mut spans: Vec<(f64, f64, &str, &Run)> = points
            .values()
            .filter(|rows| !runs[rows[0] as usize].row.commit().is_empty())
            .map(|rows| {
                let lo = rows.iter().map(|&i| times[i as usize]).fold(f64::MAX, f64::min);
                let last = *rows.iter().max_by(|&&a, &&b| times[a as usize].total_cmp(&times[b as usize])).unwrap();
                let run = &runs[last as usize];
                (lo, times[last as usize], run.row.commit(), run)
            })
            .collect();
        spans.sort_by(|a, b| a.0.total_cmp(&b.0));
        for pair in spans.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            if a.1 > b.0 {
                return Err(usage(format!(
                    "{}: commit {} ran again after commit {} had run ({}), so it has no one place in commit \
                     order; leave those rows out or use --order time (a point per sweep or run)",
                    a.3.place(),
                    short(a.2, 12),
                    short(b.2, 12),
                    date_of(b.0)
                )));
            }
        }
    }
    Ok(())
}
