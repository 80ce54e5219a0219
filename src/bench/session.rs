//! One process's measured run, as a template (burn-train's provided `train()`
//! over a required part): `run` owns the steps every run takes — process-wide
//! knobs, a guarded build, telemetry, the measurement, the row and its
//! outputs — and a [`Session`] supplies what differs between a local run
//! (single, dp: [`LocalRun`]) and a ddp rank (`bench::ddp::worker::Rank`): how
//! the strategy and its input are made, the devices' roles, and how the
//! job's measurements are gathered into one row.
use anyhow::Result;
use indicatif::ProgressBar;

use crate::bench::measure::{self, figures, Measurement};
use crate::bench::row;
use crate::bench::sinks::{Outcome, Sinks};
use crate::config::{RunConfig, StrategyKind};
use crate::data::SourceSpec;
use crate::device::{self, DeviceKind};
use crate::error::guarded;
use crate::init::Start;
use crate::metrics::collect::Monitor;
use crate::metrics::devices::DeviceMetrics;
use crate::results::csv::Row;
use crate::strategy::{dp::DataParallel, single::Single, Strategy};

/// What this process measured, before the job's measurements are gathered.
pub(crate) struct Local {
    pub m: Measurement,
    pub devs: Vec<DeviceMetrics>,
    /// fp16 steps the loss scaler skipped.
    pub skipped: u64,
    /// `--data PATH`: dataset indices of the files skipped.
    pub bad_files: Option<Vec<u32>>,
    /// ddp: the Reducer's runtime statistics.
    pub reducer: Option<crate::dist::ReducerStats>,
}

/// What `Session::gather` gives the template.
pub(crate) enum Gather {
    /// This process writes the job's row.
    Row(Box<Gathered>),
    /// Another process writes it; this one exits with `code`.
    NoRow { code: i32 },
}

/// The job's measurement, for its one row.
pub(crate) struct Gathered {
    pub m: Measurement,
    pub devs: Vec<DeviceMetrics>,
    pub skipped: u64,
    pub data_skipped: Option<u64>,
    /// Columns only this kind of run has (ddp's Reducer statistics).
    pub extra: Box<dyn FnOnce(&mut Row)>,
}

/// The part of a run that differs between a local run and a ddp rank.
pub(crate) trait Session {
    /// The strategy: model, optimizer and parallelism, on this process's devices.
    fn build(&mut self, cfg: &RunConfig) -> Result<Box<dyn Strategy>>;
    /// What the data source makes, for `strat`, starting as `start` says.
    fn source(&self, cfg: &RunConfig, strat: &dyn Strategy, start: &Start) -> SourceSpec;
    /// Each device's role in the per-device metrics.
    fn roles(&self, cfg: &RunConfig) -> Vec<String>;
    /// The id every row and telemetry line of the run carries.
    fn run_id(&self) -> Option<String> {
        None
    }
    /// Whether this process prints progress and the summary.
    fn talks(&self, cfg: &RunConfig) -> bool {
        cfg.output.talks()
    }
    /// A build that fails ends the process with the error instead of a
    /// `failed` row (see `Rank`: its peers wait in a collective, and the
    /// launcher, which sees every rank, writes the row).
    fn abort_on_setup_failure(&self) -> bool {
        false
    }
    /// Combines this process's measurement with the rest of the job's.
    fn gather(&mut self, cfg: &RunConfig, local: Local) -> Result<Gather>;
    /// The device whose memory the imbalance columns compare with the others.
    fn master(&self, _cfg: &RunConfig) -> Option<usize> {
        None
    }
    /// The row's note.
    fn note(&self, _cfg: &RunConfig) -> String {
        String::new()
    }
}

/// Runs `cfg` under `session` and writes its outcome; returns the exit code.
/// The caller has checked the outputs (`Sinks::check`) where this process
/// writes them.
pub(crate) fn run(cfg: &RunConfig, session: &mut dyn Session, start: &Start, sinks: &Sinks) -> Result<i32> {
    // Made now, so that its timestamp is the run's start.
    let mut row = row::base_row(cfg);
    if let Some(id) = session.run_id() {
        row.run_id = id;
    }
    let setup = guarded(|| {
        apply_knobs(cfg)?;
        // Before any model or loader thread exists: from here the CPU
        // allocations are counted (the activations' measure on the CPU).
        crate::ffi::cpu_memory_install()?;
        let strat = session.build(cfg)?;
        start.apply(strat.var_store())?;
        let spec = session.source(cfg, strat.as_ref(), start);
        let data = crate::data::make_source(cfg, spec)?;
        Ok((strat, data))
    });
    let setup = match setup {
        Err(e) if session.abort_on_setup_failure() => return Err(e),
        s => s,
    };
    let monitor = start_monitor(cfg, session.talks(cfg));
    let (m, skipped, bad_files, reducer) = match setup {
        Ok((mut strat, mut data)) => {
            let pb = if session.talks(cfg) { measure::progress(cfg) } else { ProgressBar::hidden() };
            let marks = monitor.energy_marks();
            let mut m = measure::measure(cfg, strat.as_mut(), data.as_mut(), &pb, marks.as_ref());
            let reducer = strat.reducer_stats();
            m.mem = memory_parts(strat.as_ref(), reducer.as_ref(), m.mem.activations);
            (m, strat.skipped_steps(), data.bad_files(), reducer)
        }
        Err(e) => {
            let (s, msg) = measure::failure(&e);
            let failed_at = Some(std::time::SystemTime::now());
            (Measurement { status: Some(s), error: msg, failed_at, ..Default::default() }, 0, None, None)
        }
    };
    let (devs, samples, gpu_notes) = monitor.finish_with_notes(&cfg.placement.devices, &session.roles(cfg), m.window);
    let mut m = m;
    m.interference.extend(gpu_notes);
    sinks.write_telemetry(&row.run_id, &samples)?;
    let local = Local { m, devs, skipped, bad_files, reducer };
    let g = match session.gather(cfg, local)? {
        Gather::Row(g) => *g,
        Gather::NoRow { code } => return Ok(code),
    };
    let fig = figures(&g.m.step_secs, cfg.global_batch(), cfg.placement.world);
    if !g.m.interference.is_empty() && session.talks(cfg) {
        eprintln!("gpubench: warning: the run was disturbed: {}", g.m.interference.join("; "));
    }
    row.workers = cfg.reads_files().then_some(cfg.host.workers as u32);
    row.note = session.note(cfg);
    if let Some(p) = &cfg.instruments.profile {
        let said = format!(
            "profiled: the first {} timed steps traced to {} (their timing is not comparable)",
            p.steps,
            p.trace_path().display()
        );
        row.note = if row.note.is_empty() { said } else { format!("{}; {said}", row.note) };
    }
    row::fill_row(&mut row, &g.m, fig.as_ref());
    row::fill_efficiency(
        &mut row,
        crate::arch::train_gflop_per_img(cfg.workload.model, cfg.workload.image_size, cfg.workload.num_classes),
    );
    row.skipped_steps = Some(g.skipped);
    row.data_skipped = g.data_skipped;
    row::fill_metrics(&mut row, &g.devs, session.master(cfg), &g.m);
    (g.extra)(&mut row);
    sinks.write(&Outcome { row: &row, m: &g.m, fig: fig.as_ref(), devs: &g.devs })
}

/// The parts of a step's memory the strategy holds, on its first device:
/// parameters and gradients as byte counts, the optimizer's state, ddp's
/// buckets, beside the measured activations.
fn memory_parts(
    strat: &dyn Strategy,
    reducer: Option<&crate::dist::ReducerStats>,
    activations: Option<u64>,
) -> measure::MemParts {
    use crate::strategy::optim::bytes_of;
    let params = strat.var_store().trainable_variables();
    let grads: Vec<tch::Tensor> = params.iter().map(|p| p.grad()).collect();
    measure::MemParts {
        params: Some(bytes_of(&params)),
        grads: Some(bytes_of(&grads)),
        optimizer: Some(strat.optimizer_state_bytes()),
        buckets: reducer.map(|r| r.bucket_sizes_bytes.iter().map(|&b| b.max(0) as u64).sum()),
        activations,
        dp_master: strat.master_parts(),
    }
}

/// Precision, TF32, cuDNN autotuning and determinism: process-wide settings,
/// applied before any model exists.
pub(crate) fn apply_knobs(cfg: &RunConfig) -> Result<()> {
    crate::strategy::precision::apply_globals(
        cfg.workload.precision,
        cfg.workload.cudnn_benchmark,
        cfg.workload.deterministic,
    )
}

/// The environment libraries read on their own: set once, first thing in
/// the process, while it has one thread (setenv beside another thread's
/// getenv is undefined behaviour, and a ddp rank's process group starts
/// NCCL's threads).
/// `cli::run::job` calls it from the flags alone, before the devices are
/// resolved: resolving starts the CUDA driver, which may start threads of
/// its own (G18). `cpu`: the run will be on the CPU.
pub(crate) fn set_process_env(deterministic: bool, profile: bool, cpu: bool) {
    if deterministic && std::env::var_os("CUBLAS_WORKSPACE_CONFIG").is_none() {
        // Deterministic cuBLAS needs a fixed workspace; read at its first use.
        std::env::set_var("CUBLAS_WORKSPACE_CONFIG", ":4096:8");
    }
    if profile && cpu && std::env::var_os("KINETO_LOG_LEVEL").is_none() {
        // Kineto logs an ERROR when it finds no GPU, on every CPU run: silence
        // its log there (failures still surface as gpubench errors); a GPU run keeps it.
        std::env::set_var("KINETO_LOG_LEVEL", "5");
    }
}

/// Starts telemetry for this process's devices; says once, on stderr, when
/// NVML is not there.
pub(crate) fn start_monitor(cfg: &RunConfig, talks: bool) -> Monitor {
    let mon = Monitor::start(&cfg.placement.devices, cfg.host.sample_interval);
    if let Some(why) = &mon.unavailable {
        if talks {
            eprintln!("gpubench: per-device utilization, power and NVML memory are n/a: {why}");
        }
    }
    mon
}

/// single and dp: one process drives all of the run's devices.
pub(crate) struct LocalRun;

impl Session for LocalRun {
    fn build(&mut self, cfg: &RunConfig) -> Result<Box<dyn Strategy>> {
        let s: Box<dyn Strategy> = match cfg.strategy {
            StrategyKind::Single => Box::new(Single::new(cfg)?),
            StrategyKind::Dp => Box::new(DataParallel::new(cfg)?),
            StrategyKind::Ddp => unreachable!("ddp runs one process per device (bench::ddp)"),
        };
        Ok(match cfg.cuda_graphs {
            true => Box::new(crate::strategy::graphed::Graphed::new(s)?),
            false => s,
        })
    }

    fn source(&self, cfg: &RunConfig, strat: &dyn Strategy, start: &Start) -> SourceSpec {
        SourceSpec {
            batch: strat.input_batch(),
            device: strat.input_device(),
            seed: start.data_seed(cfg.workload.seed),
            rank: 0,
            world: 1,
            // dp loads the global batch on the master: --workers per device, all there.
            workers: cfg.host.workers * cfg.placement.devices.len(),
        }
    }

    fn roles(&self, cfg: &RunConfig) -> Vec<String> {
        match cfg.strategy {
            // On the CPU all replicas share one process: one row for it.
            StrategyKind::Dp if cfg.placement.devices.kind == DeviceKind::Cpu => vec!["process".into()],
            StrategyKind::Dp => {
                (0..cfg.placement.devices.len()).map(|i| if i == 0 { "master" } else { "replica" }.into()).collect()
            }
            _ => vec![cfg.strategy.name().into()],
        }
    }

    fn gather(&mut self, _: &RunConfig, l: Local) -> Result<Gather> {
        let data_skipped = l.bad_files.map(|b| b.len() as u64);
        Ok(Gather::Row(Box::new(Gathered {
            m: l.m,
            devs: l.devs,
            skipped: l.skipped,
            data_skipped,
            extra: Box::new(|_| {}),
        })))
    }

    fn master(&self, cfg: &RunConfig) -> Option<usize> {
        (cfg.strategy == StrategyKind::Dp).then_some(0)
    }

    /// dp: which device was the master, and how CPU threads were split.
    fn note(&self, cfg: &RunConfig) -> String {
        if cfg.strategy != StrategyKind::Dp {
            return String::new();
        }
        let master = match cfg.placement.devices.kind {
            DeviceKind::Cuda => format!("cuda:{}", cfg.placement.devices.ordinals[0]),
            DeviceKind::Cpu => "cpu:0".into(),
        };
        let mut note = format!("master {master}; {} replicas", cfg.placement.devices.len());
        if cfg.placement.devices.shares_a_gpu() {
            note += "; TEST MODE: several replicas share a GPU (threads, scatter and gather run, but this is not a \
                     multi-GPU measurement)";
        }
        if cfg.placement.devices.kind == DeviceKind::Cpu {
            let total = cfg.host.count().unwrap_or_else(device::cpu_cores);
            note += &format!("; {} intra-op threads per replica", (total / cfg.placement.devices.len()).max(1));
        }
        note
    }
}
