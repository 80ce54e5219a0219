//! The runner owns everything about measuring: warm-up, timing, device
//! synchronization, divergence and failure handling, and turning the samples
//! into a result row. Strategies only step.
use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use std::io::IsTerminal;
use std::time::Instant;

use crate::cli::RunArgs;
use crate::config::{self, Length, RunConfig, StrategyKind};
use crate::data::DataSource;
use crate::device::{self, DeviceKind};
use crate::metrics::devices::DeviceMetrics;
use crate::metrics::sampler::DeviceSample;
use crate::metrics::stats::{summarize, Summary};
use crate::report::results_csv::{self, Row, SCHEMA_VERSION};
use crate::strategy::{dp::DataParallel, single::Single, Phase, PhaseClock, Strategy};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Diverged,
    Failed,
    Oom,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Diverged => "diverged",
            Self::Failed => "failed",
            Self::Oom => "oom",
        }
    }
}

/// What one process measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Measurement {
    /// Duration of every timed step, in seconds, in order.
    pub step_secs: Vec<f64>,
    /// Loss of every timed step.
    pub losses: Vec<f64>,
    pub warmup_steps: u64,
    /// The loss of the first step, warm-up included (None if none ran).
    pub loss_first: Option<f64>,
    pub status: Option<Status>,
    pub error: String,
    /// Time each timed step waited for its input, in seconds.
    pub data_wait_secs: Vec<f64>,
    /// With `--breakdown`: per timed step, seconds in forward, backward and
    /// optimizer (each ended by a device sync).
    pub phase_secs: Option<[Vec<f64>; 3]>,
    /// The timed window, for the per-device metrics.
    #[serde(skip)]
    pub window: Option<crate::metrics::collect::Window>,
}

/// For `--breakdown`: synchronizes the devices at the end of each phase and
/// adds the time since the previous mark to that phase.
struct SyncClock<'a> {
    devices: &'a crate::device::Devices,
    last: Instant,
    secs: [f64; 3],
}

impl PhaseClock for SyncClock<'_> {
    fn mark(&mut self, phase: Phase) {
        self.devices.synchronize();
        let now = Instant::now();
        let i = match phase {
            Phase::Forward => 0,
            Phase::Backward => 1,
            Phase::Optimizer => 2,
        };
        self.secs[i] += (now - self.last).as_secs_f64();
        self.last = now;
    }
}

/// Runs `f`, turning a panic from libtorch (tch panics on C++ errors) into an error.
pub fn guarded<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(anyhow::anyhow!(crate::error::panic_message(&*p))),
    }
}

/// Out-of-memory errors from the CUDA caching allocator or the CPU allocator.
pub fn is_oom(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    m.contains("out of memory") || m.contains("can't allocate memory") || m.contains("cannot allocate memory")
}

fn failure(err: &anyhow::Error) -> (Status, String) {
    let mut msg = crate::error::one_line(err);
    // tch's panic messages carry libtorch's C++ backtrace, escaped: keep the message.
    if let Some(i) = msg.find("\\nframe #") {
        msg.truncate(i);
    }
    (if is_oom(&msg) { Status::Oom } else { Status::Failed }, msg)
}

pub fn progress(cfg: &RunConfig) -> ProgressBar {
    let visible = !cfg.quiet && !cfg.json && std::io::stderr().is_terminal();
    if !visible {
        return ProgressBar::hidden();
    }
    let pb = match cfg.timed {
        Length::Steps(n) => ProgressBar::new(n),
        Length::Time(d) => ProgressBar::new(d.as_millis() as u64),
    };
    pb.set_draw_target(ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template("{spinner} {prefix} [{bar:30}] {msg} ({elapsed})")
            .expect("static template")
            .progress_chars("=> "),
    );
    pb
}

/// Warm-up then timed steps. The device is synchronized before every clock
/// read, so a step's time covers its finished work; warm-up steps are not timed.
/// A failure after the run started is recorded in the measurement, not lost.
pub fn measure(cfg: &RunConfig, strat: &mut dyn Strategy, data: &mut dyn DataSource, pb: &ProgressBar) -> Measurement {
    let mut m = Measurement::default();
    let global = cfg.global_batch() as f64;
    let res = guarded(|| -> Result<()> {
        pb.set_prefix("warm-up");
        let t_warm = Instant::now();
        let mut warming = cfg.warmup != Length::Steps(0);
        while warming {
            let batch = data.next_batch()?;
            let loss_t = strat.step(&batch)?;
            m.warmup_steps += 1;
            let stop = match cfg.warmup {
                Length::Steps(k) => m.warmup_steps >= k,
                Length::Time(d) => t_warm.elapsed() >= d,
            };
            let (loss, stop) = strat.agree(&loss_t, stop)?;
            m.loss_first.get_or_insert(loss);
            pb.tick();
            if !loss.is_finite() {
                m.status = Some(Status::Diverged);
                m.error = format!("loss became {loss} during warm-up step {}", m.warmup_steps);
                return Ok(());
            }
            warming = !stop;
        }
        strat.devices().synchronize();
        crate::metrics::collect::reset_peaks(strat.devices());
        pb.set_prefix("timed");
        let t_run = Instant::now();
        let cpu0 = crate::metrics::sampler::process_cpu_seconds();
        if cfg.breakdown {
            m.phase_secs = Some([vec![], vec![], vec![]]);
        }
        loop {
            let t0 = Instant::now();
            let batch = data.next_batch()?;
            let t_data = Instant::now();
            m.data_wait_secs.push((t_data - t0).as_secs_f64());
            let loss_t = if let Some(p) = m.phase_secs.as_mut() {
                let devices = strat.devices().clone();
                let mut clock = SyncClock { devices: &devices, last: t_data, secs: [0.0; 3] };
                let l = strat.step_timed(&batch, &mut clock)?;
                for (v, x) in p.iter_mut().zip(clock.secs) {
                    v.push(x);
                }
                l
            } else {
                strat.step(&batch)?
            };
            strat.devices().synchronize();
            let t1 = Instant::now();
            let dt = (t1 - t0).as_secs_f64();
            m.step_secs.push(dt);
            let cpu = crate::metrics::sampler::process_cpu_seconds();
            m.window = Some(crate::metrics::collect::Window {
                start: t_run,
                end: t1,
                cpu_secs: cpu0.zip(cpu).map(|(a, b)| b - a),
            });
            let n = m.step_secs.len();
            let stop = match cfg.timed {
                Length::Steps(k) => {
                    pb.set_position(n as u64);
                    n as u64 >= k
                }
                Length::Time(d) => {
                    pb.set_position(t_run.elapsed().as_millis().min(d.as_millis()) as u64);
                    t_run.elapsed() >= d
                }
            };
            let (loss, stop) = strat.agree(&loss_t, stop)?;
            m.losses.push(loss);
            m.loss_first.get_or_insert(loss);
            let elapsed: f64 = m.step_secs.iter().sum();
            pb.set_message(format!("{:.1} img/s, loss {loss:.4}", global * n as f64 / elapsed));
            if !loss.is_finite() {
                m.status = Some(Status::Diverged);
                m.error = format!("loss became {loss} at timed step {n}");
                return Ok(());
            }
            if stop {
                return Ok(());
            }
        }
    });
    pb.finish_and_clear();
    match res {
        Ok(()) => {
            m.status.get_or_insert(Status::Ok);
        }
        Err(e) => {
            let (s, msg) = failure(&e);
            m.status = Some(s);
            m.error = msg;
        }
    }
    m
}

/// The figures a run reports, derived from its samples.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub throughput_img_s: f64,
    pub throughput_per_device_img_s: f64,
    /// Step time statistics in milliseconds.
    pub step_ms: Summary,
}

pub fn figures(step_secs: &[f64], global_batch: i64, n_devices: usize) -> Option<Figures> {
    if step_secs.is_empty() {
        return None;
    }
    let total: f64 = step_secs.iter().sum();
    let thr = global_batch as f64 * step_secs.len() as f64 / total;
    let ms: Vec<f64> = step_secs.iter().map(|s| s * 1e3).collect();
    Some(Figures {
        throughput_img_s: thr,
        throughput_per_device_img_s: thr / n_devices as f64,
        step_ms: summarize(&ms),
    })
}

/// A run id unique across hosts and processes: start time and process id.
pub fn new_run_id(nanos: u128) -> String {
    format!("{:x}-{:x}", nanos, std::process::id())
}

/// Run identity and environment common to every row of this process.
pub fn base_row(cfg: &RunConfig, strategy: StrategyKind, backend: &str) -> Row {
    let now = std::time::SystemTime::now();
    let nanos = now.duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    let cuda = cfg.devices.kind == DeviceKind::Cuda;
    let v = crate::ffi::cuda_versions();
    Row {
        schema_version: SCHEMA_VERSION,
        run_id: new_run_id(nanos),
        timestamp: humantime::format_rfc3339_seconds(now).to_string(),
        gpubench_version: env!("CARGO_PKG_VERSION").into(),
        host: device::hostname(),
        label: cfg.label.clone(),
        implementation: "gpubench".into(),
        strategy: strategy.name().into(),
        backend: backend.into(),
        device_kind: if cuda { "cuda" } else { "cpu" }.into(),
        devices: cfg.devices.describe(),
        n_devices: cfg.devices.len() as u32,
        device_name: if cuda { device::device_name(cfg.devices.ordinals[0]) } else { device::cpu_model() },
        driver_version: device::driver_version().unwrap_or_default(),
        cuda_version: if cuda { crate::ffi::format_cuda_version(v.cudart) } else { String::new() },
        libtorch_version: crate::ffi::libtorch_version(),
        model: cfg.model.name().into(),
        image_size: Some(cfg.image_size as u32),
        precision: cfg.precision.name().into(),
        channels_last: Some(cfg.channels_last),
        cudnn_benchmark: Some(cfg.cudnn_benchmark),
        deterministic: Some(cfg.deterministic),
        batch_per_device: Some(cfg.batch_per_device as u32),
        global_batch: Some(cfg.global_batch() as u32),
        seed: Some(cfg.seed),
        threads: Some(tch::get_num_threads() as u32),
        data: crate::data::column_name(&cfg.data),
        ..Default::default()
    }
}

/// Fills a row's results and outcome from the measurement.
pub fn fill_row(row: &mut Row, m: &Measurement, fig: Option<&Figures>) {
    row.steps = Some(m.step_secs.len() as u32);
    row.warmup = Some(m.warmup_steps as u32);
    if let Some(f) = fig {
        row.throughput_img_s = Some(f.throughput_img_s);
        row.throughput_per_device_img_s = Some(f.throughput_per_device_img_s);
        row.step_ms_mean = Some(f.step_ms.mean);
        row.step_ms_p50 = Some(f.step_ms.p50);
        row.step_ms_p90 = Some(f.step_ms.p90);
        row.step_ms_p99 = Some(f.step_ms.p99);
        row.step_ms_std = Some(f.step_ms.std);
    }
    row.loss_first = m.loss_first;
    row.loss_last = m.losses.last().copied();
    row.status = m.status.unwrap_or(Status::Failed).name().into();
    row.error = m.error.clone();
}

#[derive(Serialize)]
struct JsonSummary<'a> {
    row: &'a Row,
    step_ms: Vec<f64>,
    losses: &'a [f64],
}

/// Prints the result and appends the row; returns the exit code (0 when ok).
pub fn report(
    cfg: &RunConfig,
    row: &Row,
    m: &Measurement,
    fig: Option<&Figures>,
    devs: &[DeviceMetrics],
    samples: &[DeviceSample],
) -> Result<i32> {
    use crate::report::long_csv;
    if let Some(out) = &cfg.out {
        results_csv::append_rows(out, std::slice::from_ref(row))?;
        let key =
            long_csv::RunKey { run_id: row.run_id.clone(), strategy: row.strategy.clone(), n_devices: row.n_devices };
        long_csv::append_devices(&long_csv::devices_path(out), &key, devs)?;
    }
    if let Some(t) = &cfg.telemetry {
        long_csv::append_telemetry(t, &row.run_id, samples)?;
    }
    if cfg.json {
        let s = JsonSummary { row, step_ms: m.step_secs.iter().map(|s| s * 1e3).collect(), losses: &m.losses };
        println!("{}", serde_json::to_string_pretty(&s).context("serializing the summary")?);
    } else if !cfg.quiet {
        print!("{}", human_summary(row, fig));
        print!("{}", device_table(devs));
        if let Some(out) = &cfg.out {
            println!("row appended to {}", out.display());
        }
    }
    Ok(if row.status == "ok" { 0 } else { 1 })
}

fn cell(v: Option<f64>, prec: usize) -> String {
    v.map(|x| format!("{x:.prec$}")).unwrap_or_else(|| "n/a".into())
}

/// The per-device table of the human summary.
pub fn device_table(devs: &[DeviceMetrics]) -> String {
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

pub fn human_summary(r: &Row, fig: Option<&Figures>) -> String {
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
    s += &format!(
        "batch      {} per device × {} device(s) = {} global\n",
        opt(r.batch_per_device),
        r.n_devices,
        opt(r.global_batch)
    );
    s += &format!("steps      {} timed after {} warm-up\n", opt(r.steps), opt(r.warmup));
    if let Some(f) = fig {
        s += &format!("throughput {:.1} img/s ({:.1} per device)\n", f.throughput_img_s, f.throughput_per_device_img_s);
        let t = &f.step_ms;
        s += &format!(
            "step time  p50 {:.1} ms · mean {:.1} · p90 {:.1} · p99 {:.1} · std {:.1}\n",
            t.p50, t.mean, t.p90, t.p99, t.std
        );
    }
    if let Some(w) = r.data_wait_ms {
        s += &format!("data wait  {w:.2} ms per step ({:.1}% of the step)\n", r.data_wait_share.unwrap_or(0.0) * 100.0);
        if let Some(line) = crate::data::input_bound_line(r.data_wait_share, r.workers) {
            s += &format!("{line}\n");
        }
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

/// Which device was dp's master, and how CPU threads were split.
fn dp_note(cfg: &RunConfig) -> String {
    let master = match cfg.devices.kind {
        DeviceKind::Cuda => format!("cuda:{}", cfg.devices.ordinals[0]),
        DeviceKind::Cpu => "cpu:0".into(),
    };
    let mut note = format!("master {master}; {} replicas", cfg.devices.len());
    if cfg.devices.kind == DeviceKind::Cpu {
        let total = cfg.threads.unwrap_or_else(device::cpu_cores);
        note += &format!("; {} intra-op threads per replica", (total / cfg.devices.len()).max(1));
    }
    note
}

fn make_strategy(cfg: &RunConfig) -> Result<Box<dyn Strategy>> {
    Ok(match cfg.strategy {
        StrategyKind::Single => Box::new(Single::new(cfg)?),
        StrategyKind::Dp => Box::new(DataParallel::new(cfg)?),
        StrategyKind::Ddp => unreachable!("ddp runs through the launcher"),
    })
}

/// `gpubench run`.
pub fn run_command(a: RunArgs) -> Result<i32> {
    if a.implementation == crate::reference::Impl::Pytorch {
        return crate::reference::run(a);
    }
    // --save-init / --init-from (see `reference::Start`).
    let start = crate::reference::Start::from_args(&a)?;
    if a.strategy == StrategyKind::Ddp {
        return crate::launcher::run(a);
    }
    let devices = device::resolve(a.gpus.as_deref(), a.cpu, a.quiet || a.json)?;
    let cfg = config::validate(&a, devices)?;
    check_outputs(&cfg)?;
    if let Some(t) = cfg.threads {
        tch::set_num_threads(t as i32);
    }
    if !cfg.quiet && !cfg.json {
        eprintln!(
            "gpubench: {} on {}: batch {} per device × {} = {} global",
            cfg.strategy.name(),
            cfg.devices.describe(),
            cfg.batch_per_device,
            cfg.devices.len(),
            cfg.global_batch()
        );
    }
    let workers = a.workers.unwrap_or_else(|| crate::data::default_workers(cfg.devices.len()));
    let mut row = base_row(&cfg, cfg.strategy, "");
    row.workers = (cfg.data != "synthetic").then_some(workers as u32);
    if cfg.strategy == StrategyKind::Dp {
        row.note = dp_note(&cfg);
    }
    let setup = guarded(|| {
        apply_knobs(&cfg)?;
        let strat = make_strategy(&cfg)?;
        start.apply(strat.var_store())?;
        let spec = crate::data::SourceSpec {
            batch: strat.input_batch(),
            device: strat.input_device(),
            synthetic_seed: start.data_seed(cfg.seed),
            seed: start.data_seed(cfg.seed),
            rank: 0,
            world: 1,
            // dp loads the global batch on the master: --workers per device, all there.
            workers: workers * cfg.devices.len(),
        };
        let data = crate::data::make_source(&cfg, spec)?;
        Ok((strat, data))
    });
    let monitor = start_monitor(&cfg, &cfg.devices);
    let mut skipped = 0;
    let (m, fig) = match setup {
        Ok((mut strat, mut data)) => {
            let pb = progress(&cfg);
            let m = measure(&cfg, strat.as_mut(), data.as_mut(), &pb);
            skipped = strat.skipped_steps();
            row.data_skipped = data.bad_files().map(|b| b.len() as u64);
            let fig = figures(&m.step_secs, cfg.global_batch(), cfg.devices.len());
            (m, fig)
        }
        Err(e) => {
            let (s, msg) = failure(&e);
            (Measurement { status: Some(s), error: msg, ..Default::default() }, None)
        }
    };
    let roles: Vec<String> = match cfg.strategy {
        // On the CPU all replicas share one process: one row for it.
        StrategyKind::Dp if cfg.devices.kind == DeviceKind::Cpu => vec!["process".into()],
        StrategyKind::Dp => (0..cfg.devices.len()).map(|i| if i == 0 { "master" } else { "replica" }.into()).collect(),
        _ => vec![cfg.strategy.name().into()],
    };
    let (devs, samples) = monitor.finish(&cfg.devices, &roles, m.window);
    fill_row(&mut row, &m, fig.as_ref());
    row.skipped_steps = Some(skipped);
    let master = (cfg.strategy == StrategyKind::Dp).then_some(0);
    fill_metrics(&mut row, &devs, master, &m);
    report(&cfg, &row, &m, fig.as_ref(), &devs, &samples)
}

/// Precision, TF32, cuDNN autotuning and determinism: process-wide settings,
/// applied before any model exists.
pub fn apply_knobs(cfg: &RunConfig) -> Result<()> {
    if cfg.deterministic {
        // Deterministic cuBLAS needs a fixed workspace; read at its first use.
        if std::env::var_os("CUBLAS_WORKSPACE_CONFIG").is_none() {
            std::env::set_var("CUBLAS_WORKSPACE_CONFIG", ":4096:8");
        }
    }
    crate::strategy::precision::apply_globals(cfg.precision, cfg.cudnn_benchmark, cfg.deterministic)
}

/// Checks every file the run will write, before any work is done.
pub fn check_outputs(cfg: &RunConfig) -> Result<()> {
    use crate::report::long_csv;
    if let Some(out) = &cfg.out {
        results_csv::check_writable(out)?;
        long_csv::check_writable(&long_csv::devices_path(out), &long_csv::devices_header(), "--out")?;
    }
    if let Some(t) = &cfg.telemetry {
        long_csv::check_writable(t, &long_csv::telemetry_header(), "--telemetry")?;
    }
    Ok(())
}

/// Starts telemetry for `devices`; says once, on stderr, when NVML is not there.
pub fn start_monitor(cfg: &RunConfig, devices: &crate::device::Devices) -> crate::metrics::collect::Monitor {
    let mon = crate::metrics::collect::Monitor::start(devices, cfg.sample_interval);
    if let Some(why) = &mon.unavailable {
        if !cfg.quiet && !cfg.json {
            eprintln!("gpubench: per-device utilization, power and NVML memory are n/a: {why}");
        }
    }
    mon
}

/// The main row's per-device summary, imbalance and time breakdown.
pub fn fill_metrics(row: &mut Row, devs: &[DeviceMetrics], master: Option<usize>, m: &Measurement) {
    let max = |f: fn(&DeviceMetrics) -> Option<f64>| devs.iter().filter_map(f).reduce(f64::max);
    let avg = |f: fn(&DeviceMetrics) -> Option<f64>| {
        let v: Vec<f64> = devs.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| crate::metrics::stats::mean(&v))
    };
    row.peak_mem_alloc_mb = max(|d| d.peak_alloc_mb);
    row.peak_mem_reserved_mb = max(|d| d.peak_reserved_mb);
    row.nvml_mem_peak_mb = max(|d| d.nvml_mem_peak_mb);
    row.util_mean_pct = avg(|d| d.util_mean_pct);
    row.util_p95_pct = max(|d| d.util_p95_pct);
    row.power_mean_w = avg(|d| d.power_mean_w);
    row.cpu_util_pct = max(|d| d.cpu_util_pct);
    row.peak_rss_mb = max(|d| d.peak_rss_mb);
    let imb = crate::metrics::devices::imbalance(devs, master);
    row.mem_imbalance = imb.mem_imbalance;
    row.util_spread_pct = imb.util_spread_pct;
    row.master_mem_excess_pct = imb.master_mem_excess_pct;
    row.master_util_excess_pct = imb.master_util_excess_pct;
    if !m.data_wait_secs.is_empty() {
        let wait = crate::metrics::stats::mean(&m.data_wait_secs);
        row.data_wait_ms = Some(wait * 1e3);
        let step = crate::metrics::stats::mean(&m.step_secs);
        row.data_wait_share = (step > 0.0).then(|| wait / step);
    }
    if let Some(p) = &m.phase_secs {
        let ms = |v: &Vec<f64>| (!v.is_empty()).then(|| crate::metrics::stats::mean(v) * 1e3);
        row.forward_ms = ms(&p[0]);
        row.backward_ms = ms(&p[1]);
        row.optimizer_ms = ms(&p[2]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oom_messages_are_recognised() {
        assert!(is_oom("CUDA out of memory. Tried to allocate 2.00 GiB"));
        assert!(is_oom("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes"));
        assert!(!is_oom("shape mismatch"));
    }

    #[test]
    fn throughput_from_samples() {
        let f = figures(&[0.5, 0.5, 1.0], 8, 2).unwrap();
        assert!((f.throughput_img_s - 12.0).abs() < 1e-9);
        assert!((f.throughput_per_device_img_s - 6.0).abs() < 1e-9);
        assert_eq!(f.step_ms.p50, 500.0);
        assert!(figures(&[], 8, 1).is_none());
    }
}
