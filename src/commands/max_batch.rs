//! `gpubench max-batch`: the largest per-device batch that trains without
//! running out of memory, for one strategy on given devices. Doubling from
//! `--start` until a batch does not fit, then binary search between the last
//! that fit and the first that did not (`sweep::search`). Every probe is a
//! short `gpubench run` in its own process (a failed allocation can leave an
//! allocator or a CUDA context in a state no later probe should inherit).
use anyhow::Result;
use std::path::Path;

use crate::config::StrategyKind;
use crate::report::format::{fmt_mib, fmt_rate, row_peak_mem, short_error};
use crate::results::csv::Row;
use crate::results::{long, Status};
use crate::sweep::cells::{CellOutcome, Interrupted, Runner};
use crate::sweep::child;
use crate::sweep::plan::MaxBatchPlan;
use crate::sweep::search::{search, Fit, Search};

fn probe_line(i: usize, b: i64, global: i64, o: &CellOutcome) -> String {
    let r = &o.row;
    let what = match r.status {
        Status::Ok => "fits".to_string(),
        Status::Diverged => "fits (loss diverged)".to_string(),
        Status::Oom => "out of memory".to_string(),
        // Overloaded is a serving status; a training probe never has it.
        Status::Failed | Status::Overloaded => r.status.to_string(),
    };
    let mut s = format!("probe {i:>2}: batch {b:>6} per device ({global} global) {what}");
    if let Some(t) = r.throughput_img_s {
        s += &format!(" · {} img/s", fmt_rate(t));
    }
    if let Some((m, k)) = row_peak_mem(r) {
        s += &format!(" · peak {} {k}", fmt_mib(m));
    }
    s += &format!(" · {:.1}s", o.secs);
    if r.status == Status::Oom && !r.error.is_empty() {
        s += &format!(" · {}", short_error(&r.error, 140));
    }
    s
}

/// `gpubench max-batch`.
pub(crate) fn run(a: MaxBatchPlan) -> Result<i32> {
    let (first, mem_limit, timeout, n) = (&a.first, a.mem_limit, a.timeout, a.pool.len());
    let (out, temporary) = match &a.out {
        Some(p) => {
            crate::results::check_out(p)?;
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
            let cell = (a.cell)(b)?;
            let o = runner.run(&cell)?;
            println!("{}", probe_line(outcomes.len() + 1, b, b * n as i64, &o));
            let fit = match o.row.status {
                Status::Ok | Status::Diverged => Fit::Fits,
                Status::Oom => Fit::Oom,
                Status::Failed | Status::Overloaded => {
                    let s = &o.row.status;
                    return Err(anyhow::anyhow!(
                        "the probe at batch {b} ended with status {s}, not out of memory: {}",
                        short_error(&o.row.error, 300)
                    ));
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
            let _ = std::fs::remove_file(long::devices_path(&out));
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
    a: &MaxBatchPlan,
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
                    t += &format!("throughput at {best}: {} img/s ({} per device)\n", fmt_rate(thr), fmt_rate(per));
                }
                if r.status == Status::Diverged {
                    t += "(its loss diverged, but it trained without running out of memory)\n";
                }
                let (devices, _) = long::load_devices(&[out.to_path_buf()]);
                let peaks = devices.get(&r.run_id);
                if peaks.iter().any(|d| d.peak_mb().is_some()) {
                    t += "peak memory per device:\n";
                    for d in peaks {
                        if let Some((m, k)) = d.peak_mb() {
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
