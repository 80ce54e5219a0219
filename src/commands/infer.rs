//! `gpubench infer`: serve one load and write its row, or search for the
//! largest load within the latency bound, a row per probe. A `processes`
//! worker (the hidden `infer-worker` subcommand its parent starts) only
//! serves its share and writes its records. Both apply the run's settings
//! (threads, TF32, cuDNN autotuning) through `apply_settings`.
use anyhow::Result;
use std::path::Path;

use crate::config::{Format, InferConfig, Scenario};
use crate::report::envelope::Envelope;
use crate::report::format::{fmt_ms, fmt_rate};
use crate::results::csv::Row;
use crate::results::Status;
use crate::serve::search::{find_max, verdict, Probe};
use crate::serve::{self, Measured};

/// The process-wide settings every serving process applies before it
/// builds a model: the parent (replicas, dp, processes' parent) and each
/// `processes` worker alike, so that no strategy serves under other ones.
fn apply_settings(threads: Option<usize>, cfg: &InferConfig) -> Result<()> {
    if let Some(t) = threads {
        tch::set_num_threads(t as i32);
    }
    crate::strategy::precision::apply_globals(cfg.workload.precision, cfg.workload.cudnn_benchmark, false)
}

/// One `processes` worker: its share of the load, with its share of the threads.
pub(crate) fn worker(cfg: InferConfig, k: u32, p: u32, dir: &Path) -> Result<i32> {
    // A worker whose parent was killed ends too, as ddp's ranks do; none is
    // left serving a load nobody will read.
    crate::bench::ddp::worker::watch_parent();
    apply_settings(Some(cfg.threads_per_worker()), &cfg)?;
    serve::processes::run_worker(&cfg, k, p, dir)
}

pub(crate) fn run(cfg: InferConfig) -> Result<i32> {
    if let Some(out) = &cfg.output.out {
        crate::results::check_out(out)?;
    }
    if cfg.data != "synthetic" {
        // A folder with no image in it is a usage error, before any model is built.
        serve::server::Frames::load(&cfg)?;
    }
    apply_settings(cfg.threads, &cfg)?;
    if cfg.output.talks() {
        eprintln!("gpubench infer: {}", describe(&cfg));
    }
    match cfg.search {
        None => {
            let m = serve::measure(&cfg);
            write(&cfg, &m)?;
            match cfg.output.format {
                Format::Json => Envelope::new().rows(std::slice::from_ref(&m.row))?.print()?,
                Format::Csv => print!("{}", crate::results::csv::rows_text(std::slice::from_ref(&m.row))),
                _ if !cfg.output.quiet => print!("{}", summary(&m.row)),
                _ => {}
            }
            // An overloaded server was measured as asked: its row says so, and
            // `check` or a script decides what that means.
            Ok(if matches!(m.row.status, Status::Ok | Status::Overloaded) { 0 } else { 1 })
        }
        Some(s) => search(&cfg, &s),
    }
}

/// The set-up in one line.
fn describe(cfg: &InferConfig) -> String {
    let load = match cfg.scenario {
        Scenario::Offline => "offline (every frame ready)".to_string(),
        Scenario::SingleStream => "single-stream (one request at a time)".to_string(),
        Scenario::Server { rate } => format!("server: Poisson arrivals at {} req/s", fmt_rate(rate)),
        Scenario::Streams { streams, fps } => {
            format!("streams: {streams} cameras × {fps} fps = {} req/s", fmt_rate(streams as f64 * fps))
        }
    };
    format!(
        "{} ({}) on {}, {} {}px from {}x{} frames; {load}; max batch {}, max wait {}; {}",
        cfg.strategy.name(),
        cfg.implementation.name(),
        cfg.devices.describe(),
        cfg.workload.model.name(),
        cfg.workload.image_size,
        cfg.frame_w,
        cfg.frame_h,
        cfg.max_batch,
        humantime::format_duration(cfg.max_wait),
        humantime::format_duration(cfg.duration),
    )
}

/// Appends the row and its devices to `--out`.
fn write(cfg: &InferConfig, m: &Measured) -> Result<()> {
    if let Some(out) = &cfg.output.out {
        crate::results::append_run(out, &m.row, &m.devs)?;
    }
    Ok(())
}

/// The human summary of one load.
pub(crate) fn summary(r: &Row) -> String {
    let mut t = String::new();
    let opt = |v: Option<f64>| v.map(fmt_ms).unwrap_or_else(|| "n/a".into());
    if r.status != Status::Ok {
        t += &format!("status {}: {}\n", r.status, r.error);
        if r.requests.unwrap_or(0) == 0 {
            return t;
        }
    }
    let achieved = r.achieved_rate.unwrap_or(0.0);
    let ci = match (r.throughput_ci95_lo, r.throughput_ci95_hi) {
        (Some(lo), Some(hi)) => format!(" (95% interval {}–{})", fmt_rate(lo), fmt_rate(hi)),
        _ => String::new(),
    };
    match r.offered_rate {
        Some(o) => t += &format!("offered {} req/s, achieved {} req/s{ci}\n", fmt_rate(o), fmt_rate(achieved)),
        None => t += &format!("achieved {} req/s{ci}\n", fmt_rate(achieved)),
    }
    t += &format!(
        "requests {}: {} answered, {} dropped; {} batches (mean {:.1})\n",
        r.requests.unwrap_or(0),
        r.completed.unwrap_or(0),
        r.dropped.unwrap_or(0),
        r.batches.unwrap_or(0),
        r.batch_mean.unwrap_or(0.0)
    );
    if r.latency_ms_p50.is_some() {
        t += &format!(
            "latency from the scheduled arrival: p50 {} · p90 {} · p99 {} · max {} ms",
            opt(r.latency_ms_p50),
            opt(r.latency_ms_p90),
            opt(r.latency_ms_p99),
            opt(r.latency_ms_max)
        );
        if let (Some(b), Some(p99)) = (r.latency_bound_ms, r.latency_ms_p99) {
            t += if p99 <= b { " (within the bound)" } else { " (over the bound)" };
        }
        t += "\n";
    }
    if r.compute_ms_mean.is_some() {
        t += &format!(
            "per request, mean ms: queue {} · batching {}; its batch's input {} · compute {} · output {}\n",
            opt(r.queue_ms_mean),
            opt(r.batch_ms_mean),
            opt(r.input_ms_mean),
            opt(r.compute_ms_mean),
            opt(r.output_ms_mean)
        );
    }
    for n in [&r.note, &r.interference].into_iter().filter(|n| !n.is_empty()) {
        t += &format!("note: {n}\n");
    }
    t
}

/// `--find-max-streams` / `--find-max-rate`.
fn search(cfg: &InferConfig, s: &crate::config::CapacitySearch) -> Result<i32> {
    let (start, integer, fps) = match cfg.scenario {
        Scenario::Streams { streams, fps } => (streams as f64, true, fps),
        Scenario::Server { rate } => (rate, false, 0.0),
        _ => unreachable!("cli::infer allows searches on streams and server only"),
    };
    let what = if integer { "streams" } else { "req/s" };
    let mut rows: Vec<Row> = vec![];
    let mut probe = |x: f64, kind: Probe| -> Result<bool> {
        let mut c = cfg.clone();
        c.scenario = if integer { Scenario::Streams { streams: x as u32, fps } } else { Scenario::Server { rate: x } };
        let offered = c.scenario.offered_rate().unwrap_or(1.0);
        let need = std::time::Duration::from_secs_f64(s.min_requests as f64 / offered);
        c.duration = s.min_duration.max(need) * if kind == Probe::Confirm { 2 } else { 1 };
        let mut m = serve::measure(&c);
        let v = verdict(&m.row, s);
        let i = rows.len() + 1;
        m.row.note = [
            format!(
                "capacity {} {i}: {}",
                if kind == Probe::Confirm { "confirmation" } else { "probe" },
                v.as_ref().map(|_| "within bound".into()).unwrap_or_else(|e| e.clone())
            ),
            m.row.note.clone(),
        ]
        .into_iter()
        .filter(|x| !x.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
        write(&c, &m)?;
        if cfg.output.talks() {
            println!(
                "{} {i:>2}: {} {what}{}: {} · achieved {} req/s · p99 {} ms · {} dropped",
                if kind == Probe::Confirm { "confirm" } else { "probe  " },
                fmt_load(x, integer),
                if kind == Probe::Confirm {
                    format!(" for {}", humantime::format_duration(c.duration))
                } else {
                    String::new()
                },
                match &v {
                    Ok(()) => "within bound".to_string(),
                    Err(e) => format!("misses ({e})"),
                },
                fmt_rate(m.row.achieved_rate.unwrap_or(0.0)),
                m.row.latency_ms_p99.map(fmt_ms).unwrap_or_else(|| "n/a".into()),
                m.row.dropped.unwrap_or(0)
            );
        }
        if matches!(m.row.status, Status::Failed) {
            return Err(anyhow::anyhow!("probe {i} failed: {}", m.row.error));
        }
        rows.push(m.row);
        Ok(v.is_ok())
    };
    let found = find_max(start, integer, &mut probe)?;
    let bound = humantime::format_duration(s.bound);
    let answer = match found.best {
        Some(b) => {
            let next = found.first_miss.map(|m| format!("; {} misses", fmt_load(m, integer))).unwrap_or_default();
            format!(
                "largest load within p99 ≤ {bound} and ≤ {:.1}% dropped: {} {what}{next}",
                s.max_drop_rate * 100.0,
                fmt_load(b, integer)
            )
        }
        None => format!(
            "no load met p99 ≤ {bound}: even {} {what} missed",
            fmt_load(found.probes.last().map(|p| p.0).unwrap_or(start), integer)
        ),
    };
    match cfg.output.format {
        Format::Json => Envelope::new()
            .rows(&rows)?
            .own("search", serde_json::json!({ "answer": found.best, "first_miss": found.first_miss, "unit": what }))?
            .print()?,
        Format::Csv => print!("{}", crate::results::csv::rows_text(&rows)),
        _ if cfg.output.quiet => {}
        _ => {
        println!("{answer}");
        if let Some(out) = &cfg.output.out {
            println!("{} probe(s); a row per probe in {}", found.probes.len(), Path::new(out).display());
        }
        }
    }
    Ok(if found.best.is_some() { 0 } else { 1 })
}

fn fmt_load(x: f64, integer: bool) -> String {
    if integer {
        format!("{}", x as u64)
    } else {
        fmt_rate(x)
    }
}
