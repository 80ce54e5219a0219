//! Inference serving, measured as honestly as training: how many camera
//! streams (or requests per second) a box serves within a latency bound, and
//! which way of using its GPUs serves most. `gpubench infer` runs one load
//! (`measure`) or searches for the largest load within the bound (`search`).
//!
//! - `schedule`: when requests arrive (Poisson, cameras), from the seed;
//! - `server`: gpubench's server in one process (replicas, dp);
//! - `forward`: what serves a batch (a replica, dp, the test hook's sleeper);
//! - `graphs`: `--cuda-graphs`, a captured graph per batch bucket around it;
//! - `processes`: one server process per device;
//! - `pytorch`: the same server in PyTorch Python (threads, processes);
//! - `records`: every request's fate, and the row's figures from them.
pub(crate) mod forward;
pub(crate) mod graphs;
pub mod processes;
pub mod pytorch;
pub mod records;
pub mod schedule;
pub mod search;
pub mod server;

use crate::bench::measure::failure;
use crate::bench::row::workload_row;
use crate::config::{Impl, InferConfig, Scenario, ServeStrategy};
use crate::device::DeviceKind;
use crate::metrics::collect::Monitor;
use crate::results::csv::Row;
use crate::results::Status;
use records::ServeFigures;
use server::{Frames, ServeOutcome, StartSignal};

/// One measured load: its row and per-device metrics.
pub struct Measured {
    pub row: Row,
    pub devs: Vec<crate::metrics::devices::DeviceMetrics>,
}

/// Serves `cfg`'s load once, with gpubench's server or PyTorch's, and
/// returns its row (status failed or oom, with the error, when it failed).
pub fn measure(cfg: &InferConfig) -> Measured {
    let mut row = workload_row(&cfg.workload, &cfg.devices, &cfg.output.label, cfg.implementation.into());
    let workers = if cfg.strategy == ServeStrategy::Processes { cfg.devices.len() as u32 } else { 1 };
    let arrivals = || schedule::schedule(&cfg.scenario, cfg.duration.as_secs_f64(), workers, cfg.workload.seed);
    // On the CPU the counters are this process's: they say nothing of the
    // PyTorch server or of worker processes. NVML sees every process.
    let in_process = cfg.implementation == Impl::Gpubench && cfg.strategy != ServeStrategy::Processes;
    let monitor =
        (in_process || cfg.devices.kind == DeviceKind::Cuda).then(|| Monitor::start(&cfg.devices, cfg.sample_interval));
    let mut about = None;
    let out = match (cfg.implementation, cfg.strategy) {
        (Impl::Pytorch, _) => {
            let (out, a) = pytorch::run(cfg, arrivals());
            about = a;
            out
        }
        (_, ServeStrategy::Processes) => processes::run_parent(cfg),
        _ => match crate::error::guarded(|| Frames::load(cfg)) {
            Ok(frames) => server::serve(cfg, &frames, arrivals(), &StartSignal::Now),
            Err(e) => ServeOutcome { records: vec![], late: 0, error: Some(e), window: None, interference: vec![] },
        },
    };
    let window = out.window;
    let (devs, notes) = match monitor {
        Some(m) => {
            let (d, _, n) = m.finish_with_notes(&cfg.devices, &roles(cfg), window);
            (d, n)
        }
        None => (vec![], vec![]),
    };
    let mut interference = out.interference.clone();
    interference.extend(notes);
    // Counted afresh rather than kept: the schedule is never held whole.
    let expected = if out.error.is_none() { arrivals().count() as u64 } else { 0 };
    let backlog = matches!(cfg.scenario, Scenario::Offline | Scenario::SingleStream);
    let figures =
        records::figures(&out.records, cfg.duration.as_secs_f64(), cfg.scenario != Scenario::Offline, backlog);
    fill(&mut row, cfg, &out, &figures, &interference);
    if cfg.cuda_graphs {
        // A lever that changes what is measured: rows with and without it
        // are different configurations (report, check, a sweep's --resume).
        row.variant = "cuda-graphs".into();
    }
    if let Some(a) = about {
        row.libtorch_version = a.torch_version;
        row.device_name = a.device_name;
        row.note = format!("{}; torch {} on Python {}", row.note, row.libtorch_version, a.python_version);
    }
    if row.status == Status::Ok {
        if let Some(why) = overload(&out.records, cfg) {
            row.status = Status::Overloaded;
            row.error = why;
        }
    }
    let lost = records::accounting_errors(&out.records, 0..expected);
    if !lost.is_empty() && matches!(row.status, Status::Ok | Status::Overloaded) {
        row.status = Status::Failed;
        row.error =
            format!("requests lost or doubled: {}", lost.iter().take(3).cloned().collect::<Vec<_>>().join("; "));
    }
    crate::bench::row::fill_metrics(
        &mut row,
        &devs,
        (cfg.strategy == ServeStrategy::Dp).then_some(0),
        &Default::default(),
    );
    Measured { row, devs }
}

/// What the server did with its input and its forward, where it is not
/// the serial eager path: both servers (gpubench's and PyTorch's) do the
/// same, so the side-by-side compares equal work.
pub(crate) fn serving_path(cfg: &InferConfig) -> Vec<String> {
    let mut notes = vec![];
    if cfg.devices.kind == DeviceKind::Cuda && cfg.strategy != ServeStrategy::Dp {
        notes.push(match cfg.overlap {
            true => "input overlapped: the next batch staged on its own stream while one computes".to_string(),
            false => "input serial (--overlap off)".to_string(),
        });
    }
    if cfg.cuda_graphs {
        let b = graphs::buckets(cfg.max_batch);
        notes.push(format!("CUDA graphs: one per batch bucket {b:?}"));
    }
    notes
}

/// Input over this many forward passes, and a row says it is input-bound.
const INPUT_BOUND: f64 = 4.0;

/// More than this share of requests dropped, and a run is overloaded.
const OVERLOAD_DROPS: f64 = 0.01;

/// Why a run that dropped over 1 % of its requests dropped them, in words;
/// None when it did not. A dropped request was taken when it was already
/// too old (`--drop-older-than`), or was still queued when the grace period
/// after the window ended (its record is taken then); the servers have no
/// queue limit, so nothing is refused on arrival.
fn overload(records: &[records::Record], cfg: &InferConfig) -> Option<String> {
    let dropped: Vec<&records::Record> = records.iter().filter(|r| r.served.is_none()).collect();
    let share = dropped.len() as f64 / records.len().max(1) as f64;
    if share <= OVERLOAD_DROPS {
        return None;
    }
    let end = (cfg.duration + server::grace(cfg)).as_secs_f64();
    // 1 ms of slack: the end is measured by the worker that found it passed.
    let queued = dropped.iter().filter(|r| r.taken >= end - 1e-3).count();
    let stale = dropped.len() - queued;
    let mut why = vec![];
    if stale > 0 {
        let limit = cfg.drop_older_than.map(|d| format!(" {}", humantime::format_duration(d))).unwrap_or_default();
        why.push(format!("{stale} older than --drop-older-than{limit} when a worker took them"));
    }
    if queued > 0 {
        why.push(format!("{queued} still queued when the grace period after the window ended"));
    }
    Some(format!(
        "overloaded: {:.1}% of {} requests dropped ({}); offer less load or add workers",
        share * 100.0,
        records.len(),
        why.join("; ")
    ))
}

/// Each device's role in the per-device metrics.
fn roles(cfg: &InferConfig) -> Vec<String> {
    if cfg.devices.kind == DeviceKind::Cpu {
        return vec!["process".into()];
    }
    (0..cfg.devices.len())
        .map(|i| match cfg.strategy {
            ServeStrategy::Dp if i == 0 => "master".into(),
            ServeStrategy::Dp | ServeStrategy::Replicas => "replica".into(),
            ServeStrategy::Processes => format!("worker {i}"),
        })
        .collect()
}

/// The serving columns of `row`.
fn fill(row: &mut Row, cfg: &InferConfig, out: &ServeOutcome, f: &ServeFigures, interference: &[String]) {
    row.mode = crate::results::Mode::Infer;
    row.strategy = cfg.strategy.name().into();
    row.global_batch = None;
    row.batch_per_device = Some(cfg.max_batch as u32);
    row.threads = Some(cfg.threads_per_worker() as u32);
    row.data = crate::data::column_name(&cfg.data);
    row.warmup = Some(cfg.warmup_batches as u32 * 2);
    row.warmup_end = "batches".into();
    row.timed_end = "duration".into();
    row.scenario = cfg.scenario.name().into();
    if let Scenario::Streams { streams, fps } = cfg.scenario {
        row.streams = Some(streams);
        row.fps = Some(fps);
    }
    row.offered_rate = cfg.scenario.offered_rate();
    row.achieved_rate = Some(f.achieved_rate);
    row.latency_bound_ms = cfg.latency_bound.map(|d| d.as_secs_f64() * 1e3);
    row.requests = Some(f.requests);
    row.completed = Some(f.completed);
    row.dropped = Some(f.dropped);
    row.batches = Some(f.batches);
    row.steps = Some(f.batches as u32);
    row.batch_mean = f.batch_mean;
    if let Some(l) = f.latency_ms {
        (row.latency_ms_p50, row.latency_ms_p90, row.latency_ms_p99, row.latency_ms_max) =
            (Some(l[0]), Some(l[1]), Some(l[2]), Some(l[3]));
    }
    if let Some(p) = f.parts_ms {
        // Offline requests are all "scheduled" at the start: no queue time to speak of.
        let p0 = (cfg.scenario != Scenario::Offline).then_some(p[0]);
        (row.queue_ms_mean, row.batch_ms_mean, row.input_ms_mean, row.compute_ms_mean, row.output_ms_mean) =
            (p0, Some(p[1]), Some(p[2]), Some(p[3]), Some(p[4]));
    }
    row.throughput_img_s = Some(f.achieved_rate);
    row.throughput_per_device_img_s = Some(f.achieved_rate / cfg.devices.len() as f64);
    row.throughput_ci95_lo = f.achieved_ci.map(|i| i.lo);
    row.throughput_ci95_hi = f.achieved_ci.map(|i| i.hi);
    crate::bench::row::fill_efficiency(
        row,
        crate::arch::infer_gflop_per_img(cfg.workload.model, cfg.workload.image_size, cfg.workload.num_classes),
    );
    let issued = f.requests.max(1) as f64;
    let late_pct =
        (!matches!(cfg.scenario, Scenario::Offline | Scenario::SingleStream)).then(|| out.late as f64 / issued * 100.0);
    row.generator_late_pct = late_pct;
    let mut notes = vec![];
    let mut interference = interference.to_vec();
    if late_pct.is_some_and(|p| p > 1.0) {
        // The generator could not keep its schedule: the host disturbed the
        // measurement, as a busy core disturbs a training run.
        interference.push(format!(
            "load generator fell behind: {:.1}% of requests issued over 1 ms late (latency still counts from the \
             schedule)",
            late_pct.unwrap_or(0.0)
        ));
    }
    if let (Some(p), Some(per_frame)) = (f.parts_ms, f.input_ms_per_frame) {
        // A server whose input path costs several forward passes measures
        // its preprocessing, not its model: say so beside the figures.
        if p[2] > INPUT_BOUND * p[3] {
            notes.push(format!(
                "input-bound: preprocessing and the copy take {:.2} ms per batch ({per_frame:.3} ms per frame), \
                 {:.1}x the forward pass",
                p[2],
                p[2] / p[3].max(1e-9)
            ));
        }
    }
    notes.extend(serving_path(cfg));
    if cfg.strategy == ServeStrategy::Dp {
        notes.push(format!("master {}", cfg.devices.describe().split(',').next().unwrap_or_default()));
    }
    if cfg.implementation == Impl::Pytorch {
        notes.push(match cfg.strategy {
            ServeStrategy::Replicas => "python threads: one per replica, sharing the GIL".into(),
            _ => "python processes: one per device (multiprocessing)".to_string(),
        });
    }
    if let Some(ms) = server::test_service_ms() {
        notes.push(format!("TEST: a model that takes {ms} ms per batch ({})", crate::internal::Hook::ServiceMs.var()));
    }
    row.note = notes.join("; ");
    row.interference = interference.join("; ");
    match &out.error {
        None => row.status = Status::Ok,
        Some(e) => {
            let (s, msg) = failure(e);
            row.status = s;
            row.error = msg;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A generator that could not keep its schedule disturbed the run: the
    /// row says so where a disturbed training run's does, not in its note.
    #[test]
    fn a_late_generator_is_named_as_interference() {
        let a = ["--cpu", "1", "--model", "tinycnn", "--scenario", "streams", "--streams", "4", "--fps", "10"];
        let cfg = crate::cli::infer::parse_infer(&a).unwrap();
        let f = records::ServeFigures { requests: 100, completed: 100, ..Default::default() };
        for (late, named) in [(0, false), (5, true)] {
            let out = ServeOutcome { records: vec![], late, error: None, window: None, interference: vec![] };
            let mut row = workload_row(&cfg.workload, &cfg.devices, &cfg.output.label, cfg.implementation.into());
            fill(&mut row, &cfg, &out, &f, &[]);
            assert_eq!(row.generator_late_pct, Some(late as f64), "{late}");
            assert_eq!(row.interference.contains("load generator fell behind: 5.0%"), named, "{}", row.interference);
            assert!(!row.note.contains("fell behind"), "{}", row.note);
        }
    }
}
