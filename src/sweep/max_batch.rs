//! `gpubench max-batch`: the largest per-device batch that trains without
//! running out of memory, for one strategy on given devices. Doubling from
//! `--start` until a batch does not fit, then binary search between the last
//! that fit and the first that did not. Every probe is a short `gpubench run`
//! in its own process (a failed allocation can leave an allocator or a CUDA
//! context in a state no later probe should inherit).
use anyhow::Result;
use clap::Args;
use serde::Deserialize;
use std::path::{Path, PathBuf};

use super::{child, fmt_mib, row_peak_mem, short_error, Cell, CellArgs, CellOutcome, Interrupted, Pool, Runner};
use crate::config::{ModelKind, StrategyKind};
use crate::error::usage;
use crate::reference::Impl;
use crate::report::long_csv;
use crate::report::results_csv::Row;
use crate::runner::Status;

#[derive(Args, Debug, Clone)]
pub struct MaxBatchArgs {
    /// Parallel strategy.
    #[arg(long, value_enum, default_value_t = StrategyKind::Single)]
    pub strategy: StrategyKind,
    /// CUDA devices, comma-separated (all of them are used). Default: GPU 0
    /// if there is one, else the CPU.
    #[arg(long, value_name = "LIST", conflicts_with = "cpu")]
    pub gpus: Option<String>,
    /// Run on the CPU with N replicas (dp) or ranks (ddp); 1 for single.
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "1")]
    pub cpu: Option<usize>,
    /// Model to train.
    #[arg(long, value_enum, default_value_t = ModelKind::Resnet50)]
    pub model: ModelKind,
    /// First per-device batch to try; it doubles from there (or halves, if it
    /// does not fit).
    #[arg(long, default_value_t = 16)]
    pub start: i64,
    /// Largest per-device batch to try.
    #[arg(long, default_value_t = 65536)]
    pub max: i64,
    /// Stop searching when the largest batch that fits and the smallest that
    /// does not are this close (or within 1/8 of the batch, if that is closer).
    #[arg(long, default_value_t = 8)]
    pub granularity: i64,
    /// Append a row per probe to this CSV (status ok or oom).
    #[arg(long, value_name = "FILE.csv")]
    pub out: Option<PathBuf>,
    /// Cap each probe's data memory (RLIMIT_DATA, CPU only), e.g. 2G, to find
    /// the batch for a smaller device; libtorch itself takes ~0.6G of it.
    #[arg(long, value_name = "SIZE")]
    pub mem_limit: Option<String>,
    /// Stop a probe that runs longer than this (it then counts as failed).
    #[arg(long, value_name = "DURATION")]
    pub probe_timeout: Option<String>,
    /// Options passed to every probe. Probes default to --warmup 1 --steps 3
    /// and --lr 0.01 (so that a huge batch does not diverge before its memory peak).
    #[command(flatten)]
    pub run: CellArgs,
}

/// What a probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    Fits,
    Oom,
}

/// Tries one batch size. A failure other than out-of-memory is an error,
/// which ends the search.
pub trait Probe {
    fn probe(&mut self, batch: i64) -> Result<Fit>;
}

impl<F: FnMut(i64) -> Result<Fit>> Probe for F {
    fn probe(&mut self, batch: i64) -> Result<Fit> {
        self(batch)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search {
    /// Largest batch that fit.
    pub best: Option<i64>,
    /// Smallest batch that did not (None: `max` fit).
    pub first_oom: Option<i64>,
    /// Every probe in order.
    pub probes: Vec<(i64, Fit)>,
}

/// How close the search gets: `granularity`, or 1/8 of the batch if closer, at least 1.
pub fn resolution(lo: i64, granularity: i64) -> i64 {
    granularity.min(lo / 8).max(1)
}

/// Doubling from `start` (halving if it does not fit), then binary search,
/// until the gap is within `resolution`. Assumes that if a batch fits, every
/// smaller one does.
pub fn search(p: &mut dyn Probe, start: i64, max: i64, granularity: i64) -> Result<Search> {
    let mut probes = vec![];
    let mut run = |b: i64, probes: &mut Vec<(i64, Fit)>| -> Result<Fit> {
        let f = p.probe(b)?;
        probes.push((b, f));
        Ok(f)
    };
    let mut b = start.clamp(1, max);
    let (mut lo, mut hi);
    if run(b, &mut probes)? == Fit::Fits {
        lo = b;
        loop {
            if b >= max {
                return Ok(Search { best: Some(b), first_oom: None, probes });
            }
            b = (b * 2).min(max);
            if run(b, &mut probes)? == Fit::Fits {
                lo = b;
            } else {
                hi = b;
                break;
            }
        }
    } else {
        hi = b;
        loop {
            if b == 1 {
                return Ok(Search { best: None, first_oom: Some(1), probes });
            }
            b /= 2;
            if run(b, &mut probes)? == Fit::Fits {
                lo = b;
                break;
            }
            hi = b;
        }
    }
    while hi - lo > resolution(lo, granularity) {
        let step = resolution(lo, granularity);
        let mut mid = (lo + hi) / 2 / step * step;
        if mid <= lo || mid >= hi {
            mid = (lo + hi) / 2;
        }
        if run(mid, &mut probes)? == Fit::Fits {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(Search { best: Some(lo), first_oom: Some(hi), probes })
}

/// One device's peak memory in a run, from `<out>.devices.csv`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct DevicePeak {
    pub run_id: String,
    pub device: String,
    #[serde(default)]
    pub role: String,
    #[serde(default)]
    pub peak_alloc_mb: Option<f64>,
    #[serde(default)]
    pub nvml_mem_peak_mb: Option<f64>,
    #[serde(default)]
    pub peak_rss_mb: Option<f64>,
}

impl DevicePeak {
    pub fn peak(&self) -> Option<(f64, &'static str)> {
        self.peak_alloc_mb
            .map(|m| (m, "alloc"))
            .or(self.nvml_mem_peak_mb.map(|m| (m, "nvml")))
            .or(self.peak_rss_mb.map(|m| (m, "rss")))
    }
}

/// The per-device rows of `run_id` (empty when the file or the run is missing).
pub fn device_peaks(out: &Path, run_id: &str) -> Vec<DevicePeak> {
    let path = long_csv::devices_path(out);
    let Ok(mut rdr) = csv::Reader::from_path(&path) else { return vec![] };
    rdr.deserialize::<DevicePeak>().filter_map(|r| r.ok()).filter(|d| d.run_id == run_id).collect()
}

fn probe_line(i: usize, b: i64, global: i64, o: &CellOutcome) -> String {
    let r = &o.row;
    let what = match r.status.as_str() {
        "ok" => "fits".to_string(),
        "diverged" => "fits (loss diverged)".to_string(),
        "oom" => "out of memory".to_string(),
        s => s.to_string(),
    };
    let mut s = format!("probe {i:>2}: batch {b:>6} per device ({global} global) {what}");
    if let Some(t) = r.throughput_img_s {
        s += &format!(" · {} img/s", crate::report::summary::fmt_rate(t));
    }
    if let Some((m, k)) = row_peak_mem(r) {
        s += &format!(" · peak {} {k}", fmt_mib(m));
    }
    s += &format!(" · {:.1}s", o.secs);
    if r.status == "oom" && !r.error.is_empty() {
        s += &format!(" · {}", short_error(&r.error, 140));
    }
    s
}

/// `gpubench max-batch`.
pub fn run_max_batch(a: MaxBatchArgs) -> Result<i32> {
    if a.start < 1 || a.max < a.start {
        return Err(usage(format!("--start {} and --max {}: need 1 ≤ start ≤ max", a.start, a.max)));
    }
    if a.granularity < 1 {
        return Err(usage("--granularity must be at least 1"));
    }
    let devices = crate::device::resolve(a.gpus.as_deref(), a.cpu, false)?;
    let pool = match devices.kind {
        crate::device::DeviceKind::Cuda => Pool::Gpus(devices.ordinals.clone()),
        crate::device::DeviceKind::Cpu => Pool::Cpu(devices.len()),
    };
    let mem_limit = a.mem_limit.as_deref().map(|s| child::parse_size("--mem-limit", s)).transpose()?;
    if mem_limit.is_some() && matches!(pool, Pool::Gpus(_)) {
        return Err(usage(
            "--mem-limit caps a process's CPU memory (RLIMIT_DATA) and cannot emulate a smaller GPU; use it with --cpu",
        ));
    }
    let timeout =
        a.probe_timeout.as_deref().map(|s| crate::config::parse_duration("--probe-timeout", s)).transpose()?;
    let mut run = a.run.clone();
    if run.steps.is_none() && run.duration.is_none() {
        run.steps = Some(3);
    }
    if run.warmup.is_none() && run.warmup_time.is_none() {
        run.warmup = Some(1);
    }
    run.lr.get_or_insert(0.01);
    let common = run.to_args();
    let host = crate::device::hostname();
    let n = pool.len();
    // Validate once, at the start batch, before any probe runs.
    let first = Cell::new(Impl::Gpubench, a.strategy, n, a.model, a.start, 0, &pool, &common, &host)?;

    let (out, temporary) = match &a.out {
        Some(p) => {
            crate::report::results_csv::check_writable(p)?;
            long_csv::check_writable(&long_csv::devices_path(p), &long_csv::devices_header(), "--out")?;
            (p.clone(), false)
        }
        None => {
            let nanos =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
            (std::env::temp_dir().join(format!("gpubench-max-batch-{}-{nanos:x}.csv", std::process::id())), true)
        }
    };
    child::install_interrupt_handler();
    let runner = Runner { program: child::child_program()?, out: out.clone(), mem_limit, timeout, inherit_fd: None };
    eprintln!(
        "gpubench max-batch: {} on {}, {} {}px; doubling from batch {} per device, then binary search{}",
        a.strategy.name(),
        first.cfg.devices.describe(),
        a.model.name(),
        first.cfg.image_size,
        a.start,
        mem_limit
            .map(|m| format!(", memory capped at {} per process", fmt_mib(m as f64 / 1048576.0)))
            .unwrap_or_default()
    );

    let mut outcomes: Vec<(i64, CellOutcome)> = vec![];
    let result = {
        let mut probe = |b: i64| -> Result<Fit> {
            let cell = Cell::new(Impl::Gpubench, a.strategy, n, a.model, b, 0, &pool, &common, &host)?;
            let o = runner.run(&cell)?;
            println!("{}", probe_line(outcomes.len() + 1, b, b * n as i64, &o));
            let fit = match o.row.status.as_str() {
                "ok" | "diverged" => Fit::Fits,
                "oom" => Fit::Oom,
                s => {
                    return Err(anyhow::anyhow!(
                        "the probe at batch {b} ended with status {s}, not out of memory: {}",
                        short_error(&o.row.error, 300)
                    ))
                }
            };
            outcomes.push((b, o));
            Ok(fit)
        };
        search(&mut probe, a.start, a.max, a.granularity)
    };
    let cleanup = || {
        if temporary {
            let _ = std::fs::remove_file(&out);
            let _ = std::fs::remove_file(long_csv::devices_path(&out));
        }
    };
    let s = match result {
        Ok(s) => s,
        Err(e) if e.is::<Interrupted>() => {
            eprintln!(
                "interrupted: the probe was stopped with its processes; {} probe(s) had finished",
                outcomes.len()
            );
            cleanup();
            return Ok(130);
        }
        Err(e) => {
            cleanup();
            return Err(e.context("max-batch stopped"));
        }
    };
    let text = final_report(&a, &first.cfg.devices.describe(), n, &s, &outcomes, &out, temporary);
    print!("{text}");
    cleanup();
    Ok(if s.best.is_some() { 0 } else { 1 })
}

fn final_report(
    a: &MaxBatchArgs,
    devices: &str,
    n: usize,
    s: &Search,
    outcomes: &[(i64, CellOutcome)],
    out: &Path,
    temporary: bool,
) -> String {
    let mut t = format!("\nmax-batch: {} on {devices}, {}\n", a.strategy.name(), a.model.name());
    let row_of = |b: i64| -> Option<&Row> { outcomes.iter().rev().find(|(x, _)| *x == b).map(|(_, o)| &o.row) };
    match s.best {
        None => {
            let err = row_of(1).map(|r| short_error(&r.error, 300)).unwrap_or_default();
            t += &format!("even batch 1 per device does not fit: {err}\n");
        }
        Some(best) => {
            t += &format!("largest batch that fits: {best} per device ({} global)", best * n as i64);
            match s.first_oom {
                Some(f) => t += &format!("; {f} does not\n"),
                None => t += "; that is --max, the limit may be higher (raise --max)\n",
            }
            if let Some(r) = row_of(best) {
                if let (Some(thr), Some(per)) = (r.throughput_img_s, r.throughput_per_device_img_s) {
                    t += &format!(
                        "throughput at {best}: {} img/s ({} per device)\n",
                        crate::report::summary::fmt_rate(thr),
                        crate::report::summary::fmt_rate(per)
                    );
                }
                if r.status == Status::Diverged.name() {
                    t += "(its loss diverged, but it trained without running out of memory)\n";
                }
                let peaks = device_peaks(out, &r.run_id);
                if peaks.iter().any(|d| d.peak().is_some()) {
                    t += "peak memory per device:\n";
                    for d in &peaks {
                        if let Some((m, k)) = d.peak() {
                            t += &format!("  {:<12} {:<8} {} ({k})\n", d.device, d.role, fmt_mib(m));
                        }
                    }
                } else if let Some((m, k)) = row_peak_mem(r) {
                    t += &format!("peak memory: {} ({k}, largest device)\n", fmt_mib(m));
                }
                if a.strategy == StrategyKind::Dp {
                    t += &dp_note(r);
                }
            }
        }
    }
    let n_oom = s.probes.iter().filter(|(_, f)| *f == Fit::Oom).count();
    t += &format!("{} probe(s), {} out of memory", s.probes.len(), n_oom);
    if temporary {
        t += " (--out FILE.csv keeps a row per probe)\n";
    } else {
        t += &format!("; a row per probe in {}\n", out.display());
    }
    t
}

/// dp keeps the model, the gathered outputs and the reduced gradients on the
/// master, so the master fills up first and sets dp's limit.
fn dp_note(r: &Row) -> String {
    match r.master_mem_excess_pct {
        Some(x) => format!(
            "dp: the master device used {x:+.0}% memory over the replicas' mean; the master's extra memory \
             (the model, gathered outputs and loss, reduced gradients) is what limits dp's batch, and the \
             replicas still have room at it (ddp's ranks are even)\n"
        ),
        None => "dp: the master device holds extra memory (the model, gathered outputs and loss, reduced \
                 gradients), so on GPUs it fills up first and limits dp's batch, leaving the replicas room; on \
                 the CPU all replicas share one process, so the cap covers them together\n"
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fits iff batch ≤ t; counts probes.
    fn threshold(t: i64) -> impl FnMut(i64) -> Result<Fit> {
        move |b| Ok(if b <= t { Fit::Fits } else { Fit::Oom })
    }

    #[test]
    fn finds_the_threshold_within_the_resolution() {
        for t in [1, 2, 3, 7, 8, 9, 15, 16, 17, 100, 255, 256, 257, 1000, 1536, 4095, 9999] {
            for (start, g) in [(16, 8), (1, 1), (64, 32), (3, 1)] {
                let s = search(&mut threshold(t), start, 1 << 20, g).unwrap();
                let best = s.best.unwrap();
                let oom = s.first_oom.unwrap();
                assert!(best <= t && oom > t, "t={t} start={start} g={g}: {s:?}");
                assert!(oom - best <= resolution(best, g), "t={t} start={start} g={g}: {s:?}");
                // every probe agrees with the threshold, and none repeats
                assert!(s.probes.iter().all(|&(b, f)| (b <= t) == (f == Fit::Fits)));
                let mut bs: Vec<i64> = s.probes.iter().map(|p| p.0).collect();
                bs.sort();
                bs.dedup();
                assert_eq!(bs.len(), s.probes.len(), "{s:?}");
                assert!(s.probes.len() <= 2 * 21, "{s:?}");
            }
        }
        // exact with granularity 1
        assert_eq!(search(&mut threshold(1000), 16, 1 << 20, 1).unwrap().best, Some(1000));
    }

    #[test]
    fn doubles_then_bisects() {
        let s = search(&mut threshold(100), 16, 1 << 20, 8).unwrap();
        let bs: Vec<i64> = s.probes.iter().map(|p| p.0).collect();
        assert_eq!(bs[..5], [16, 32, 64, 128, 96]);
        assert_eq!((s.best, s.first_oom), (Some(96), Some(104)));
    }

    #[test]
    fn nothing_fits_and_max_fits() {
        let s = search(&mut threshold(0), 16, 1024, 8).unwrap();
        assert_eq!((s.best, s.first_oom), (None, Some(1)));
        assert_eq!(s.probes.iter().map(|p| p.0).collect::<Vec<_>>(), [16, 8, 4, 2, 1]);
        let s = search(&mut threshold(5000), 16, 1024, 8).unwrap();
        assert_eq!((s.best, s.first_oom), (Some(1024), None));
        let s = search(&mut threshold(5000), 3000, 1024, 8).unwrap();
        assert_eq!(s.probes, [(1024, Fit::Fits)]);
    }

    #[test]
    fn a_failing_probe_stops_the_search() {
        let mut n = 0;
        let mut p = |b: i64| {
            n += 1;
            if b >= 64 {
                anyhow::bail!("segfault")
            }
            Ok(Fit::Fits)
        };
        let e = search(&mut p, 16, 1024, 8).unwrap_err();
        assert_eq!(e.to_string(), "segfault");
        assert_eq!(n, 3);
    }
}
