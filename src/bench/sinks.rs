//! Where a run's outcome goes: the results CSV, its devices file, the
//! telemetry timeline, JSON or the human summary on stdout. Shaped like
//! hyperfine's export manager: every output is checked before any work is
//! done (`Sinks::check`), and written once at the end (`Sinks::write`).
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::PathBuf;

use crate::bench::measure::{Figures, Measurement};
use crate::config::RunConfig;
use crate::metrics::devices::DeviceMetrics;
use crate::metrics::sampler::DeviceSample;
use crate::report::envelope::Envelope;
use crate::results::csv::Row;
use crate::results::{long, Status};

/// A finished run, ready to be written.
pub(crate) struct Outcome<'a> {
    pub row: &'a Row,
    pub m: &'a Measurement,
    pub fig: Option<&'a Figures>,
    pub devs: &'a [DeviceMetrics],
}

/// The outputs of one process's run.
#[derive(Debug, Clone)]
pub(crate) struct Sinks {
    out: Option<PathBuf>,
    telemetry: Option<PathBuf>,
    format: crate::config::Format,
    quiet: bool,
    /// Whether this run's row is appended. A ddp rank's liveness watcher
    /// may end the process with a `failed` row of its own while the run is
    /// blocked: both append through [`Sinks::append_once`] on clones of
    /// these sinks, so the run gets one row.
    written: std::sync::Arc<std::sync::Mutex<bool>>,
}

impl Sinks {
    /// The run's outputs. A ddp rank r > 0 writes its telemetry beside the
    /// file, to FILE.rank<r>.csv, so that ranks never interleave.
    pub(crate) fn new(cfg: &RunConfig, rank: Option<usize>) -> Sinks {
        let telemetry = cfg.instruments.telemetry.as_ref().map(|t| match rank {
            Some(r) if r > 0 => t.with_extension(format!("rank{r}.csv")),
            _ => t.clone(),
        });
        Sinks {
            out: cfg.output.out.clone(),
            telemetry,
            format: cfg.output.format,
            quiet: cfg.output.quiet,
            written: Default::default(),
        }
    }

    /// Runs `append` under the row lock unless this run's row is written;
    /// returns the lock (the watcher ends the process holding it).
    pub(crate) fn append_once(&self, append: impl FnOnce() -> Result<()>) -> Result<std::sync::MutexGuard<'_, bool>> {
        let mut done = self.written.lock().unwrap_or_else(|p| p.into_inner());
        if !*done {
            append()?;
            *done = true;
        }
        Ok(done)
    }

    /// Checks every file the run will write, before any work is done.
    pub(crate) fn check(&self) -> Result<()> {
        if let Some(out) = &self.out {
            crate::results::check_out(out)?;
        }
        if let Some(t) = &self.telemetry {
            long::check_writable(t, &long::telemetry_header(), "--telemetry")?;
        }
        Ok(())
    }

    /// Appends this process's sampled timeline (`--telemetry`).
    pub(crate) fn write_telemetry(&self, run_id: &str, samples: &[DeviceSample]) -> Result<()> {
        match &self.telemetry {
            Some(t) => long::append_telemetry(t, run_id, samples),
            None => Ok(()),
        }
    }

    /// Appends the row (and its devices) to `--out`, then prints JSON or the
    /// human summary; returns the exit code (0 when the run is ok).
    pub(crate) fn write(&self, o: &Outcome) -> Result<i32> {
        if let Some(out) = &self.out {
            drop(self.append_once(|| crate::results::append_run(out, o.row, o.devs))?);
        }
        if self.format == crate::config::Format::Csv {
            print!("{}", crate::results::csv::rows_text(std::slice::from_ref(o.row)));
        } else if self.format == crate::config::Format::Json {
            let own = RunSteps { step_ms: o.m.step_secs.iter().map(|s| s * 1e3).collect(), losses: &o.m.losses };
            Envelope::new().rows(std::slice::from_ref(o.row))?.own("run", own)?.print().context("printing the run")?;
        } else if !self.quiet {
            print!("{}", human_summary(o.row, o.fig));
            print!("{}", device_table(o.devs));
            if let Some(out) = &self.out {
                println!("row appended to {}", out.display());
            }
        } else if o.row.status != Status::Ok {
            // --quiet silences the summary, never a failure: one line, as
            // main prints every other error.
            let kept = self.out.as_ref().map(|p| format!(" (its row is in {})", p.display())).unwrap_or_default();
            eprintln!("error: the run ended {}: {}{kept}", o.row.status.name(), o.row.error);
        }
        Ok(if o.row.status == Status::Ok { 0 } else { 1 })
    }
}

#[derive(Serialize)]
/// `--format json`'s own key `run`: each timed step and loss, beside the row.
struct RunSteps<'a> {
    step_ms: Vec<f64>,
    losses: &'a [f64],
}

fn cell(v: Option<f64>, prec: usize) -> String {
    v.map(|x| format!("{x:.prec$}")).unwrap_or_else(|| "n/a".into())
}

/// The per-device table of the human summary.
pub(crate) fn device_table(devs: &[DeviceMetrics]) -> String {
    if devs.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "{:<10} {:<8} {:>11} {:>11} {:>11} {:>7} {:>7} {:>8} {:>8} {:>9}\n",
        "device", "role", "alloc MiB", "reserv MiB", "nvml MiB", "util%", "p95%", "power W", "cpu%", "rss MiB"
    );
    for d in devs {
        s += &format!(
            "{:<10} {:<8} {:>11} {:>11} {:>11} {:>7} {:>7} {:>8} {:>8} {:>9}\n",
            d.device,
            d.role,
            cell(d.peak_alloc_mb, 0),
            cell(d.peak_reserved_mb, 0),
            cell(d.nvml_mem_peak_mb, 0),
            cell(d.util_mean_pct, 0),
            cell(d.util_p95_pct, 0),
            cell(d.power_mean_w, 0),
            cell(d.cpu_util_pct, 0),
            cell(d.peak_rss_mb, 0)
        );
    }
    s
}

pub(crate) fn human_summary(r: &Row, fig: Option<&Figures>) -> String {
    let mut s = String::new();
    let opt = |v: Option<u32>| v.map(|x| x.to_string()).unwrap_or_default();
    s += &format!(
        "gpubench {} · {} · {} {}×{} · {} · {} ({})\n",
        r.gpubench_version,
        r.strategy,
        r.model,
        opt(r.image_size),
        opt(r.image_size),
        r.precision,
        r.devices,
        r.device_name
    );
    let micro = match r.grad_accum {
        Some(k) if k > 1 => format!(" × {k} micro-batches"),
        _ => String::new(),
    };
    s += &format!(
        "batch      {} per device × {} device(s){micro} = {} global\n",
        opt(r.batch_per_device),
        r.n_devices,
        opt(r.global_batch)
    );
    s += &format!("steps      {} timed after {} warm-up", opt(r.steps), opt(r.warmup));
    let ends: Vec<&str> = [r.warmup_end.as_str(), r.timed_end.as_str()]
        .into_iter()
        .filter(|e| !e.is_empty() && *e != "steps" && *e != "time" && *e != "duration")
        .collect();
    if !ends.is_empty() {
        s += &format!(" ({})", ends.join("; "));
    }
    s.push('\n');
    if let Some(f) = fig {
        s += &format!("throughput {:.1} img/s ({:.1} per device)", f.throughput_img_s, f.throughput_per_device_img_s);
        if let Some(i) = f.throughput_ci {
            s += &format!(
                " ±{:.1}% (95% interval {:.1}–{:.1} within this run; repeats show run-to-run drift)",
                i.relative_half_width(f.throughput_img_s) * 100.0,
                i.lo,
                i.hi
            );
        } else if r.steps.is_some_and(|n| (n as usize) < crate::metrics::interval::MIN_STEPS) {
            s += &format!(" (no interval: fewer than {} timed steps)", crate::metrics::interval::MIN_STEPS);
        }
        s.push('\n');
        let t = &f.step_ms;
        s += &format!(
            "step time  p50 {:.1} ms{} · mean {:.1} · p90 {:.1} · p99 {:.1} · std {:.1}\n",
            t.p50,
            f.step_ms_p50_ci.map(|i| format!(" ({:.1}–{:.1})", i.lo, i.hi)).unwrap_or_default(),
            t.mean,
            t.p90,
            t.p99,
            t.std
        );
    }
    if !r.interference.is_empty() {
        s += &format!("disturbed  {}\n", r.interference);
    }
    if let Some(w) = r.data_wait_ms {
        s += &format!("data wait  {w:.2} ms per step ({:.1}% of the step)\n", r.data_wait_share.unwrap_or(0.0) * 100.0);
        if let Some(line) = crate::data::input_bound_line(r.data_wait_share, r.workers) {
            s += &format!("{line}\n");
        }
    }
    if let (Some(g), Some(t)) = (r.model_gflop_per_img, r.achieved_tflops) {
        s += &format!("compute    {g:.2} GFLOP per image · {t:.3} TFLOP/s");
        match (r.mfu_pct, r.mfu_datasheet_pct) {
            (Some(m), _) => s += &format!(" · {m:.0}% of this device's measured {} peak (MFU)", r.precision),
            (None, Some(d)) => s += &format!(" · {d:.0}% of the datasheet {} peak", r.precision),
            (None, None) => s += " (`gpubench peak` measures this device's peak for an MFU)",
        }
        s.push('\n');
    }
    if let Some(e) = r.img_per_joule {
        s += &format!("energy     {e:.2} images per joule ({:.0} J per 1000 images)\n", 1000.0 / e);
    }
    if let Some(line) = memory_line(r) {
        s += &line;
    }
    if let (Some(f), Some(b), Some(o)) = (r.forward_ms, r.backward_ms, r.optimizer_ms) {
        s += &format!(
            "breakdown  forward {f:.1} ms · backward {b:.1} · optimizer {o:.1} (--breakdown: synced per phase)\n"
        );
    }
    if r.ddp_backward_comm_ms.is_some() {
        s += &format!(
            "reducer    forward {} ms · backward compute {} · comm {} · overlap {} · {} buckets\n",
            cell(r.ddp_forward_compute_ms, 1),
            cell(r.ddp_backward_compute_ms, 1),
            cell(r.ddp_backward_comm_ms, 1),
            cell(r.ddp_overlap_ms, 1),
            r.ddp_buckets.map(|b| b.to_string()).unwrap_or_else(|| "n/a".into())
        );
    }
    if r.mem_imbalance.is_some() || r.util_spread_pct.is_some() {
        s += &format!(
            "imbalance  memory max/min {} · utilization spread {} pts",
            cell(r.mem_imbalance, 2),
            cell(r.util_spread_pct, 0)
        );
        if let Some(x) = r.master_mem_excess_pct {
            s += &format!(" · master memory {x:+.0}% over the others");
        }
        s.push('\n');
    }
    if let (Some(a), Some(b)) = (r.loss_first, r.loss_last) {
        s += &format!("loss       {a:.4} → {b:.4}\n");
    }
    s += &format!("status     {}", r.status);
    if !r.error.is_empty() {
        s += &format!(" ({})", r.error);
    }
    s.push('\n');
    s
}

/// The memory-by-part lines of the summary: the first device's parts, and
/// what sharding the model state (ZeRO stages 1-3: the optimizer state; also
/// the gradients; also the parameters) over the row's devices would leave of
/// it, against the activations it cannot touch.
fn memory_line(r: &crate::results::csv::Row) -> Option<String> {
    let (p, g, o, a) = (r.mem_params_mb?, r.mem_grads_mb?, r.mem_optimizer_mb?, r.mem_activations_mb?);
    let mut s = format!("memory     params {p:.1} MiB · grads {g:.1} · optimizer {o:.1}");
    if let Some(b) = r.mem_buckets_mb {
        s += &format!(" · buckets {b:.1}");
    }
    s += &format!(" · activations {a:.1} (first device)\n");
    let n = r.n_devices as f64;
    if n >= 2.0 {
        let state = p + g + o;
        let (z1, z2, z3) = (p + g + o / n, p + (g + o) / n, state / n);
        s += &format!(
            "           sharded over {} devices, model state {state:.0} MiB would be {z1:.0} (ZeRO-1), {z2:.0} \
             (ZeRO-2), {z3:.0} (ZeRO-3), beside {a:.0} of activations\n",
            r.n_devices
        );
    }
    if let (Some(i), Some(out), Some(red)) = (r.dp_master_input_mb, r.dp_master_outputs_mb, r.dp_master_reduce_mb) {
        s += &format!(
            "           dp master's extra by cause: input {i:.1} MiB · outputs and loss {out:.1} · gradient sum {red:.1} \
             · optimizer {o:.1}"
        );
        // The measured excess, from the master's peak over the replicas' mean.
        if let (Some(pct), Some(peak)) = (r.master_mem_excess_pct, r.peak_mem_alloc_mb) {
            s += &format!("; measured {:.1} over the replicas' mean", peak - peak / (1.0 + pct / 100.0));
        }
        s.push('\n');
    }
    if let (Some(res), Some(alloc)) = (r.peak_mem_reserved_mb, r.peak_mem_alloc_mb) {
        s += &format!(
            "allocator  reserved beyond allocated at peak {:.1} MiB · {} retries · {} OOMs",
            res - alloc,
            r.alloc_retries.unwrap_or(0),
            r.alloc_ooms.unwrap_or(0)
        );
        if let Some(o) = r.other_procs_mb.filter(|&o| o > 0.0) {
            s += &format!(" · other processes held {o:.0} MiB on these GPUs");
        }
        s.push('\n');
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::memory_line;
    use crate::results::csv::Row;

    /// A dp row on two GPUs: the causes beside the excess measured from the
    /// master's peak (25 % over the replicas' 800 MiB), and the allocator's line.
    #[test]
    fn the_memory_lines_name_dp_causes_and_the_allocator() {
        let r = Row {
            n_devices: 2,
            mem_params_mb: Some(97.5),
            mem_grads_mb: Some(97.5),
            mem_optimizer_mb: Some(97.5),
            mem_activations_mb: Some(500.0),
            dp_master_input_mb: Some(147.0),
            dp_master_outputs_mb: Some(1.5),
            dp_master_reduce_mb: Some(195.0),
            master_mem_excess_pct: Some(25.0),
            peak_mem_alloc_mb: Some(1000.0),
            peak_mem_reserved_mb: Some(1100.0),
            alloc_retries: Some(2),
            alloc_ooms: Some(0),
            other_procs_mb: Some(512.0),
            ..Default::default()
        };
        let s = memory_line(&r).unwrap();
        assert!(s.contains("input 147.0 MiB · outputs and loss 1.5 · gradient sum 195.0 · optimizer 97.5"), "{s}");
        assert!(s.contains("measured 200.0 over the replicas' mean"), "{s}");
        assert!(s.contains("reserved beyond allocated at peak 100.0 MiB · 2 retries · 0 OOMs"), "{s}");
        assert!(s.contains("other processes held 512 MiB"), "{s}");
        let cpu = Row { peak_mem_alloc_mb: None, other_procs_mb: None, ..r };
        assert!(!memory_line(&cpu).unwrap().contains("allocator"));
    }
}
