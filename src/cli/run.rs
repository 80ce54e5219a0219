//! `gpubench run`'s arguments, and the one conversion into a `RunConfig`:
//! every check the command line can fail happens here, once per process,
//! before any device is used or any file is written.
//!
//! A process first finds its role and seat (`bench::placement`): a local run
//! (single, dp), ddp's launcher, one ddp rank (started by our launcher,
//! torchrun or Slurm), or the PyTorch reference; the seat decides which
//! devices the configuration is for.
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

use super::opts::{BatchSize, CommitOpts, CudaGraphs, DataOpt, DeviceOpts, DistOpts, DurationOpt, HostOpts, ImplOpt, ModelOpts, OutputOpts, ReducerOpts, StepOpts, WorkersOpt};
use super::parse::parse_duration;
use super::{Configure, Job};
use crate::bench::placement::{self, Ask, Seat};
use crate::bench::Role;
use crate::config::{
    Backend, CommHook, DdpConfig, Format, Impl, InitSpec, InitWriter, Length, ModelKind, OptimizerImpl, OptimizerKind,
    Host, Instruments, Optim, Placement, RunConfig, Schedule, StrategyKind,
};
use crate::device::{DeviceKind, Devices};
use crate::error::usage;

/// Run the ResNet training loop under one strategy and record its speed.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Parallel strategy.
    #[arg(long, value_enum, default_value_t = StrategyKind::Single)]
    pub strategy: StrategyKind,
    #[command(flatten)]
    pub(crate) implementation: ImplOpt,
    /// Write the model's initial weights and the data seed to FILE (safetensors).
    #[arg(long, value_name = "FILE")]
    pub save_init: Option<PathBuf>,
    /// Start from the weights and data seed in FILE (written by --save-init).
    #[arg(long, value_name = "FILE")]
    pub init_from: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) devices: DeviceOpts,
    #[command(flatten)]
    pub(crate) model: ModelOpts,
    #[command(flatten)]
    pub(crate) batch_size: BatchSize,
    #[command(flatten)]
    pub(crate) steps: StepOpts,
    #[command(flatten)]
    pub(crate) duration: DurationOpt,
    /// With --duration auto: the interval half-width to reach, e.g. 2% or 0.02.
    #[arg(long, default_value = "2%", value_name = "PCT", value_parser = super::parse::parse_fraction)]
    pub ci_target: f64,
    /// With --duration auto: stop here even if the target is not met.
    #[arg(long, default_value = "2m", allow_hyphen_values = true, value_name = "DURATION")]
    pub max_duration: String,
    /// Warm up for this long instead of a step count (e.g. 10s).
    #[arg(long, allow_hyphen_values = true, value_name = "DURATION")]
    pub warmup_time: Option<String>,
    /// Gradient accumulation: K micro-batches of --batch-size per device,
    /// one optimizer step (the global batch is batch × devices × K; ddp
    /// all-reduces once per step, on the last micro-batch).
    #[arg(long, default_value_t = 1, value_name = "K")]
    pub grad_accum: i64,
    /// Activation checkpointing: the stem's and each ResNet stage's
    /// activations are dropped in forward and recomputed in backward (one
    /// more forward for their memory). single and ddp, ResNets only. BatchNorm's
    /// running statistics update twice per step, as under PyTorch's
    /// torch.utils.checkpoint.
    #[arg(long)]
    pub checkpoint: bool,
    /// The optimizer (recorded in the row's variant when not SGD).
    #[arg(long, value_enum, default_value_t = OptimizerKind::Sgd)]
    pub optimizer: OptimizerKind,
    /// Learning rate. Default: 0.1 × global_batch / 256 for SGD (Goyal et
    /// al.), 0.001 × global_batch / 256 for AdamW.
    #[arg(long, value_name = "LR")]
    pub lr: Option<f64>,
    /// SGD's momentum.
    #[arg(long, default_value_t = crate::config::SGD_MOMENTUM, value_name = "M")]
    pub momentum: f64,
    /// Weight decay, decoupled for AdamW. Default: 1e-4 for SGD, 0.05 for AdamW.
    #[arg(long, value_name = "WD")]
    pub weight_decay: Option<f64>,
    /// How the optimizer step runs: the same update in one fused kernel, a
    /// few multi-tensor kernels, or a few kernels per parameter (recorded in
    /// the row's variant; --impl pytorch makes the same choice).
    #[arg(long, value_enum, default_value_t = OptimizerImpl::Auto, value_name = "IMPL")]
    pub optimizer_impl: OptimizerImpl,
    #[command(flatten)]
    pub(crate) host: HostOpts,
    #[command(flatten)]
    pub(crate) data: DataOpt,
    #[command(flatten)]
    pub(crate) workers: WorkersOpt,
    // table: the summary; csv: the row; json: the row with each step's time and loss.
    #[command(flatten)]
    pub(crate) output: OutputOpts,
    #[command(flatten)]
    pub(crate) commit: CommitOpts,
    /// Deterministic algorithms (plus the seed) for reproducible losses.
    #[arg(long)]
    pub deterministic: bool,
    #[command(flatten)]
    pub(crate) cuda_graphs: CudaGraphs,
    /// Time each step's phases (data wait, forward, backward, optimizer). Adds
    /// a device sync after every phase, which perturbs the step time.
    #[arg(long)]
    pub breakdown: bool,
    /// Write the full sampled timeline (every device, every field) to this CSV.
    #[arg(long, value_name = "FILE.csv")]
    pub telemetry: Option<PathBuf>,
    /// Trace the first timed steps with PyTorch's profiler (Kineto): one
    /// Chrome trace per process, DIR/rank<R>.pt.trace.json, for Perfetto,
    /// TensorBoard or Holistic Trace Analysis.
    #[arg(long, value_name = "DIR")]
    pub profile: Option<PathBuf>,
    /// How many timed steps --profile traces.
    #[arg(long, default_value_t = 3, value_name = "K")]
    pub profile_steps: u64,
    /// Let --profile write into a directory that is not empty.
    #[arg(long)]
    pub force: bool,
    /// gpubench's ranges (step, data wait, forward, backward, optimizer) as
    /// NVTX ranges over every timed step, for Nsight Systems (nsys profile).
    #[arg(long)]
    pub nvtx: bool,
    #[command(flatten)]
    pub(crate) dist: DistOpts,
    #[command(flatten)]
    pub(crate) reducer: ReducerOpts,
    /// DDP's gradient_as_bucket_view: gradients are views into the
    /// Reducer's buckets (no copy into them, less memory).
    #[arg(long)]
    pub gradient_as_bucket_view: bool,
    /// DDP's find_unused_parameters: look for parameters the forward did not
    /// use, every step.
    #[arg(long)]
    pub find_unused_parameters: bool,
}

impl Configure for RunArgs {
    fn configure(self) -> Result<Job> {
        into_job(self, false)
    }
}

/// The job of this process, in the role the environment gives it; `ours`:
/// a rank our launcher started (the hidden `rank` subcommand).
pub(crate) fn into_job(a: RunArgs, ours: bool) -> Result<Job> {
    a.commit.export();
    let (role, cfg) = job(a, ours)?;
    // Said once, by the process the user started, before the first step.
    let cpu = cfg.placement.devices.kind == crate::device::DeviceKind::Cpu;
    if !ours && cpu && cfg.workload.precision == crate::config::Precision::Bf16 {
        if let Some(why) = crate::device::cpu_slow_bf16() {
            eprintln!("note: --precision bf16: {why}; expect it to run far slower than fp32");
        }
    }
    Ok(Box::new(move || crate::commands::run::run(role, cfg)))
}

/// run's defaults for the options `variant` names when they differ.
const NUM_CLASSES: i64 = 1000;
const BUCKET_CAP_MB: f64 = 25.0;
const SEED: u64 = 0;

/// More micro-batches per step than this is a typo, not a configuration.
const MAX_GRAD_ACCUM: i64 = 1024;

/// The options that change what a run measures and have no column of
/// their own, where they differ from run's defaults, as `option=value`
/// words (the row's `variant`; `results::schema` lists them). Rows that
/// differ in it are different configurations, so a sweep that varies one
/// of them never takes one variant's row for another's.
fn variant(a: &RunArgs) -> String {
    let mut v: Vec<String> = vec![];
    let mut word = |on: bool, w: String| {
        if on {
            v.push(w)
        }
    };
    let m = &a.model;
    word(m.num_classes != NUM_CLASSES, format!("num-classes={}", m.num_classes));
    word(a.lr.is_some(), format!("lr={}", a.lr.unwrap_or_default()));
    // A bare word: `optimizer=` already names the step's implementation.
    word(a.optimizer != OptimizerKind::Sgd, a.optimizer.name().to_string());
    word(a.momentum != crate::config::SGD_MOMENTUM && a.optimizer == OptimizerKind::Sgd, format!("momentum={}", a.momentum));
    let wd = a.weight_decay.unwrap_or(a.optimizer.default_weight_decay());
    word(wd != a.optimizer.default_weight_decay(), format!("weight-decay={wd}"));
    // Rows without it ran libtorch's per-parameter loop, as every row did
    // before --optimizer-impl; the others name theirs.
    let opt = a.optimizer_impl.resolve();
    word(opt != OptimizerImpl::Loop, format!("optimizer={}", opt.name()));
    word(*m.seed != SEED, format!("seed={}", *m.seed));
    word(a.host.threads.is_some(), a.host.threads.map(|t| format!("threads={t}")).unwrap_or_default());
    word(a.workers.is_some() && *a.data != "synthetic", format!("workers={}", a.workers.unwrap_or_default()));
    if a.strategy == StrategyKind::Ddp {
        let r = &a.reducer;
        word(r.bucket_cap_mb != BUCKET_CAP_MB, format!("bucket-cap-mb={}", r.bucket_cap_mb));
        word(a.gradient_as_bucket_view, "gradient-as-bucket-view".into());
        word(a.find_unused_parameters, "find-unused-parameters".into());
        word(r.no_broadcast_buffers, "no-broadcast-buffers".into());
    }
    word(a.checkpoint, "checkpoint".into());
    word(*a.cuda_graphs, "cuda-graphs".into());
    word(a.breakdown, "breakdown".into());
    word(a.profile.is_some(), "profile".into());
    word(a.nvtx, "nvtx".into());
    if let Some(p) = &a.init_from {
        word(true, format!("init-from={}", p.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()));
    }
    v.join(" ")
}

/// Parses `gpubench run ARGS` (without `gpubench run`); a bad argument is a
/// usage error with clap's first line.
/// `run` ARGS' configuration on this machine's devices, as `gpubench run`
/// builds it (the overhead benchmark builds its so).
pub fn run_config<S: AsRef<str>>(args: &[S]) -> Result<RunConfig> {
    let a = parse_run_args(args)?;
    let devices = crate::device::resolve(a.devices.gpus.as_deref(), a.devices.cpu, true)?;
    a.into_config(Seat::Local(devices))
}

pub fn parse_run_args<S: AsRef<str>>(args: &[S]) -> Result<RunArgs> {
    let argv = ["gpubench", "run"].into_iter().map(String::from).chain(args.iter().map(|s| s.as_ref().to_string()));
    match super::Cli::parse_args(argv) {
        Ok(super::Cli { command: super::Command::Run(a) }) => Ok(*a),
        Ok(_) => unreachable!("parsed as run"),
        Err(e) => {
            let text = e.render().to_string();
            Err(usage(text.lines().next().unwrap_or("").trim_start_matches("error: ").to_string()))
        }
    }
}

/// This process's role and its configuration, from `gpubench run`'s
/// arguments and the environment (ddp ranks are told by RANK/WORLD_SIZE or
/// Slurm's variables; `ours`: this is a rank our launcher started, the
/// hidden `rank` subcommand). Who writes `--save-init` is decided here too.
pub(crate) fn job(a: RunArgs, ours: bool) -> Result<(Role, RunConfig)> {
    // Without --gpus, a machine with no NVIDIA driver runs on the CPU; one
    // with a driver but no usable GPU is refused by `resolve`. /proc only.
    let cpu = a.devices.cpu.is_some() || (a.devices.gpus.is_none() && crate::device::driver_version().is_none());
    crate::bench::session::set_process_env(a.deterministic, a.profile.is_some(), cpu);
    let ask = Ask {
        gpus: a.devices.gpus.as_deref(),
        cpu: a.devices.cpu,
        backend: a.dist.backend,
        strategy: a.strategy,
        implementation: *a.implementation,
        master_addr: a.dist.master_addr.as_deref(),
        master_port: a.dist.master_port,
        talks: a.output.output("run", &Format::ALL)?.talks(),
    };
    let (role, seat) = placement::seat(&ask, ours)?;
    let mut cfg = a.into_config(seat)?;
    let (save, from) = (cfg.init.save.is_some(), cfg.init.from.is_some());
    let in_child = crate::internal::Hook::InitInChild.is_set();
    cfg.init.writer = placement::init_writer(&role, save, from, cfg.placement.devices.kind, in_child);
    // The one process of the job that writes its row checks its outputs,
    // before anything starts.
    let writes_row = match &role {
        Role::Local => true,
        Role::Launcher | Role::Pytorch => cfg.ddp.node_rank == 0,
        Role::Rank(env) => !env.ours && env.rank == 0,
    };
    if writes_row {
        crate::bench::sinks::Sinks::new(&cfg, None).check()?;
    }
    Ok((role, cfg))
}

/// `--profile DIR` can hold the traces: a directory, or a path whose
/// nearest existing ancestor is a writable directory (it is created at the
/// first traced step). Checked before any work: a file there, or a place
/// that cannot be written, failed only after the warm-up, as a failed row.
fn profile_dir_usable(dir: &std::path::Path) -> Result<()> {
    let d = dir.display();
    if dir.exists() && !dir.is_dir() {
        return Err(usage(format!("--profile {d} is a file; give a directory for the traces")));
    }
    let mut at = dir;
    while !at.exists() {
        at = match at.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => std::path::Path::new("."),
        };
    }
    if !at.is_dir() {
        return Err(usage(format!("--profile {d}: {} is a file, so the directory cannot be made", at.display())));
    }
    crate::results::csv::writable_dir(at, "--profile", dir)
}

/// Why `--cuda-graphs on` cannot work for this run, if it cannot: one line
/// each, before any work (the capture itself is `strategy::graphed`).
fn cuda_graphs_refusal(a: &RunArgs, devices: &Devices, warmup: &Length) -> Option<String> {
    let why = if devices.kind == DeviceKind::Cpu {
        "--cuda-graphs captures CUDA work, and this run is on the CPU; drop --cuda-graphs (or run on a GPU)".into()
    } else if a.strategy == StrategyKind::Ddp {
        "--cuda-graphs is not offered for ddp: capturing the c10d Reducer's autograd hooks and NCCL calls from \
         gpubench's C++ path is unverified; use it with --strategy single, or dp on one GPU"
            .into()
    } else if a.strategy == StrategyKind::Dp && devices.len() > 1 {
        format!(
            "--cuda-graphs captures a step on one GPU; dp over {} GPUs runs a thread per replica, which one capture \
             cannot hold: give dp one GPU, or use --strategy single",
            devices.len()
        )
    } else if a.grad_accum > 1 {
        "--cuda-graphs captures one micro-batch per step; drop --grad-accum".into()
    } else if a.checkpoint {
        "--cuda-graphs does not capture --checkpoint's recomputed stages; drop one of them".into()
    } else if a.breakdown {
        "--breakdown synchronizes the device between phases, and a graph replays the step as one launch; drop one \
         of them"
            .into()
    } else if a.optimizer_impl.resolve() != OptimizerImpl::Fused {
        "--cuda-graphs needs --optimizer-impl fused (the default): the other steps decide fp16's skip or count \
         AdamW's steps on the host"
            .into()
    } else if *warmup == Length::Steps(0) {
        "--cuda-graphs captures the step during warm-up; give --warmup 1 or more".into()
    } else {
        return None;
    };
    Some(why)
}

/// --nnodes / --node-rank / --master-addr / --master-port agree (ddp and allreduce).
pub(crate) fn check_nodes(nnodes: usize, node_rank: usize, addr: Option<&str>, port: Option<u16>) -> Result<()> {
    if nnodes == 0 || node_rank >= nnodes {
        return Err(usage(format!("--node-rank {node_rank} must be below --nnodes {nnodes}")));
    }
    if nnodes > 1 && (addr.is_none() || port.is_none()) {
        return Err(usage("a multi-node run needs --master-addr HOST and --master-port PORT, the same on every node"));
    }
    Ok(())
}

impl RunArgs {
    /// The configuration for `seat`, with every check that needs no
    /// device work; the only conversion from `run`'s arguments.
    pub fn into_config(self, seat: Seat) -> Result<RunConfig> {
        let variant = variant(&self);
        let a = self;
        let mut output = a.output.output("run", &[Format::Table, Format::Csv, Format::Json])?;
        // Only rank 0 of a ddp job speaks.
        output.quiet |= matches!(&seat, Seat::Rank { env, .. } if env.rank != 0);
        let m = &a.model;
        let implementation = *a.implementation;
        let batch_size = *a.batch_size;
        if !(1..=MAX_GRAD_ACCUM).contains(&a.grad_accum) {
            return Err(usage(format!(
                "--grad-accum {}: micro-batches per step run from 1 to {MAX_GRAD_ACCUM}",
                a.grad_accum
            )));
        }
        if a.checkpoint {
            if m.model == ModelKind::Tinycnn {
                return Err(usage(
                    "--checkpoint drops and recomputes ResNet stages; tinycnn has none (use a resnet model)",
                ));
            }
            if a.strategy == StrategyKind::Dp {
                return Err(usage(
                    "--checkpoint runs with single and ddp: dp's replicas are rebuilt from the master every forward, \
                     so there is no stage graph of theirs to recompute",
                ));
            }
        }
        let timed = match a.duration.as_deref() {
            Some("auto") => Length::Auto,
            Some(s) => Length::Time(parse_duration("--duration", s)?),
            None => Length::Steps(a.steps.steps),
        };
        let warmup = match (&a.warmup_time, a.steps.warmup.as_str()) {
            (Some(s), _) => Length::Time(parse_duration("--warmup-time", s)?),
            (None, "auto") => Length::Auto,
            (None, n) => Length::Steps(n.trim().parse().map_err(|_| {
                usage(format!(
                    "--warmup {n:?} is neither a number of steps nor auto; write e.g. --warmup 5 or --warmup auto"
                ))
            })?),
        };
        if a.ci_target <= 0.0 {
            return Err(usage("--ci-target must be above 0%, e.g. 2%"));
        }
        let max_duration = parse_duration("--max-duration", &a.max_duration)?;
        if implementation == Impl::Pytorch && (timed == Length::Auto || warmup == Length::Auto) {
            return Err(usage(
                "--duration auto and --warmup auto are gpubench's own rules; give --impl pytorch steps or a duration",
            ));
        }
        if *a.workers == Some(0) {
            return Err(usage("--workers must be at least 1"));
        }
        if *a.data != "synthetic" {
            crate::data::imagefolder::check_layout(&a.data, m.num_classes)?;
        }
        let (devices, node_devices, rank) = match seat {
            Seat::Local(d) => (d.clone(), d, None),
            Seat::Rank { mine, node, env } => (mine, node, Some(env)),
        };
        if a.strategy == StrategyKind::Single && devices.len() > 1 {
            return Err(usage(format!(
                "--strategy single uses one device but {} were given; use --strategy dp or ddp for several",
                devices.len()
            )));
        }
        for (flag, v) in [
            ("--lr", a.lr.unwrap_or(0.1)),
            ("--momentum", a.momentum),
            ("--weight-decay", a.weight_decay.unwrap_or(0.0)),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(usage(format!("{flag} must be a finite number ≥ 0")));
            }
        }
        let cpu = devices.kind == DeviceKind::Cpu;
        let workload = crate::config::Workload { deterministic: a.deterministic, ..m.workload(devices.kind)? };
        if *a.cuda_graphs {
            if let Some(why) = cuda_graphs_refusal(&a, &devices, &warmup) {
                return Err(usage(why));
            }
        }
        let sample_interval = parse_duration("--sample-interval", &a.host.sample_interval)?;
        let ddp = a.strategy == StrategyKind::Ddp;
        let d = &a.dist;
        let r = &a.reducer;
        let timeout = parse_duration("--dist-timeout", &d.dist_timeout)?;
        let backend = d.backend.unwrap_or(Backend::default_for(devices.kind));
        if !ddp && r.comm_hook != CommHook::None {
            return Err(usage("--comm-hook compresses ddp's all-reduce; use it with --strategy ddp"));
        }
        if ddp {
            if rank.is_none() {
                check_nodes(*d.nnodes, d.node_rank, d.master_addr.as_deref(), d.master_port)?;
            }
            if backend == Backend::Nccl && cpu {
                return Err(usage("--backend nccl needs CUDA devices; use --backend gloo on the CPU"));
            }
        }
        if implementation == Impl::Pytorch {
            if a.strategy == StrategyKind::Dp && cpu {
                return Err(usage(
                    "--impl pytorch --strategy dp needs CUDA devices: on the CPU, torch.nn.DataParallel just calls the \
                     module (no replicas), which is not a DataParallel run; use --strategy single or ddp on the CPU",
                ));
            }
            if a.breakdown || a.telemetry.is_some() {
                return Err(usage(
                    "--breakdown and --telemetry time and sample gpubench's own process; drop them with --impl pytorch",
                ));
            }
        }
        if let Some(p) = &a.init_from {
            crate::init::read_init_meta(p)?.check_fits(p, m.model, m.num_classes)?;
        }
        if a.nvtx && implementation == Impl::Pytorch {
            return Err(usage("--nvtx marks gpubench's own steps; for --impl pytorch use torch.cuda.nvtx in PyTorch"));
        }
        if a.nvtx && !crate::ffi::nvtx_available() {
            return Err(usage(
                "--nvtx needs a CUDA build of gpubench (the NVTX headers come with the CUDA wheels); this one has none",
            ));
        }
        let profile = match &a.profile {
            None => None,
            Some(dir) => {
                if implementation == Impl::Pytorch {
                    return Err(usage(
                        "--profile traces gpubench's own run; for --impl pytorch use torch.profiler in PyTorch itself",
                    ));
                }
                if a.profile_steps == 0 {
                    return Err(usage("--profile-steps must be at least 1"));
                }
                if let Length::Steps(n) = timed {
                    if a.profile_steps > n {
                        return Err(usage(format!(
                            "--profile-steps {} is more than the {n} timed steps; trace at most {n}, or add --steps",
                            a.profile_steps
                        )));
                    }
                }
                profile_dir_usable(dir)?;
                // Ranks find the directory their launcher checked (and other ranks' traces in it).
                if rank.is_none() && !a.force && std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some()) {
                    return Err(usage(format!(
                        "--profile {}: the directory is not empty; choose an empty one, or add --force to write into it",
                        dir.display()
                    )));
                }
                let (r, w) = rank.as_ref().map_or((0, 1), |e| (e.rank, e.world_size));
                Some(crate::config::ProfileSpec {
                    dir: dir.clone(),
                    steps: a.profile_steps,
                    rank: r,
                    world: w,
                    backend: if ddp { backend.name() } else { "" }.to_string(),
                })
            }
        };
        // The job's size and this node's share of it.
        let (world, nnodes, node_share) = match &rank {
            Some(env) => (env.world_size, env.nnodes(), env.ranks_on_node()),
            None if ddp => (devices.len() * *d.nnodes, *d.nnodes, devices.len()),
            None => (devices.len(), 1, devices.len()),
        };
        let global = batch_size * world as i64 * a.grad_accum;
        Ok(RunConfig {
            strategy: a.strategy,
            implementation,
            placement: Placement { devices, node_devices, world },
            workload,
            batch_per_device: batch_size,
            grad_accum: a.grad_accum as u32,
            checkpoint: a.checkpoint,
            schedule: Schedule { timed, warmup, ci_target: a.ci_target, max_duration },
            optim: Optim {
                optimizer: a.optimizer,
                optimizer_impl: a.optimizer_impl.resolve(),
                lr: a.lr.unwrap_or(a.optimizer.lr_at_256() * global as f64 / 256.0),
                momentum: a.momentum,
                weight_decay: a.weight_decay.unwrap_or(a.optimizer.default_weight_decay()),
            },
            host: Host {
                // `auto` is measured where the run starts (`commands::run`).
                threads: a.host.threads,
                data: a.data.data.clone(),
                workers: a.workers.unwrap_or_else(|| crate::data::default_workers(node_share)),
                sample_interval,
            },
            output,
            instruments: Instruments { breakdown: a.breakdown, telemetry: a.telemetry.clone(), profile, nvtx: a.nvtx },
            init: InitSpec { save: a.save_init.clone(), from: a.init_from.clone(), writer: InitWriter::Nobody },
            ddp: DdpConfig {
                backend,
                bucket_cap_mb: r.bucket_cap_mb,
                gradient_as_bucket_view: a.gradient_as_bucket_view,
                find_unused_parameters: a.find_unused_parameters,
                broadcast_buffers: !r.no_broadcast_buffers,
                nnodes,
                node_rank: d.node_rank,
                master_addr: d.master_addr.clone(),
                master_port: d.master_port,
                timeout,
                comm_hook: r.comm_hook,
            },
            cuda_graphs: *a.cuda_graphs,
            variant,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AdamW's own defaults (lr 0.001 × global / 256, weight decay 0.05),
    /// named in the variant so its rows never pool with SGD's.
    /// A sweep plans every cell in one process: `auto` is not measured
    /// there (300 ms a cell), but where each cell runs (`commands::run`).
    #[test]
    fn threads_auto_stays_unresolved_in_the_configuration() {
        let cfg = run_config(&["--cpu", "--model", "tinycnn", "--image-size", "16", "--threads", "auto"]).unwrap();
        assert_eq!((cfg.host.threads, cfg.host.count()), (Some(crate::config::Threads::Auto), None));
        assert!(cfg.variant.contains("threads=auto"), "{}", cfg.variant);
        let cfg = run_config(&["--cpu", "--model", "tinycnn", "--image-size", "16", "--threads", "3"]).unwrap();
        assert_eq!(cfg.host.count(), Some(3));
    }

    #[test]
    fn adamw_takes_its_own_defaults_and_names_itself() {
        let cfg = |a: &str| {
            let argv: Vec<String> = a.split_whitespace().map(String::from).collect();
            parse_run_args(&argv).unwrap().into_config(Seat::Local(Devices::cpu(2))).unwrap()
        };
        let c = cfg("--strategy dp --cpu 2 --batch-size 64 --optimizer adamw");
        assert_eq!(c.optim.optimizer, OptimizerKind::Adamw);
        assert!((c.optim.lr - 0.001 * 128.0 / 256.0).abs() < 1e-12, "{}", c.optim.lr);
        assert_eq!(c.optim.weight_decay, 0.05);
        assert!(c.variant.split(' ').any(|w| w == "adamw"), "{}", c.variant);
        assert!(!c.variant.contains("weight-decay"), "{}", c.variant);
        let c = cfg("--strategy dp --cpu 2 --batch-size 64 --optimizer adamw --weight-decay 1e-4");
        assert!(c.variant.contains("weight-decay=0.0001"), "{}", c.variant);
        let c = cfg("--strategy dp --cpu 2 --batch-size 64");
        assert_eq!((c.optim.optimizer, c.optim.weight_decay), (OptimizerKind::Sgd, 1e-4));
        // Accumulation multiplies the global batch, and the default lr with it.
        let a = cfg("--strategy dp --cpu 2 --batch-size 64 --grad-accum 4");
        assert_eq!((a.global_batch(), a.micro_global_batch(), a.grad_accum), (512, 128, 4));
        assert!((a.optim.lr - 0.2).abs() < 1e-12, "{}", a.optim.lr);
        assert!((c.optim.lr - 0.05).abs() < 1e-12 && !c.variant.contains("adamw"), "{} {}", c.optim.lr, c.variant);
    }

    /// `--cuda-graphs on` is refused, with one line naming why, wherever the
    /// step cannot be captured; where it can, the row's variant names it.
    /// (CUDA devices are named, not used: the checks need no GPU.)
    #[test]
    fn cuda_graphs_are_refused_where_a_step_cannot_be_captured() {
        let cfg = |a: &str, devices: Devices| {
            let argv: Vec<String> = a.split_whitespace().map(String::from).collect();
            parse_run_args(&argv).unwrap().into_config(Seat::Local(devices))
        };
        let gpu = || Devices::cuda(vec![0]);
        let refused = |a: &str, devices: Devices, says: &str| {
            let e = cfg(a, devices).unwrap_err();
            assert_eq!(crate::error::exit_code(&e), 2, "{a}: {e}");
            let m = e.to_string();
            assert!(m.contains(says) && !m.contains('\n') && !m.contains("  "), "{a}: {m}");
        };
        refused("--cpu 1 --cuda-graphs", Devices::cpu(1), "on the CPU");
        refused("--strategy ddp --cuda-graphs on", gpu(), "not offered for ddp");
        refused("--strategy dp --cuda-graphs", Devices::cuda(vec![0, 1]), "dp over 2 GPUs");
        refused("--cuda-graphs --grad-accum 2", gpu(), "--grad-accum");
        refused("--cuda-graphs --checkpoint", gpu(), "--checkpoint");
        refused("--cuda-graphs --breakdown", gpu(), "--breakdown");
        refused("--cuda-graphs --optimizer-impl foreach", gpu(), "--optimizer-impl fused");
        refused("--cuda-graphs --optimizer-impl loop", gpu(), "--optimizer-impl fused");
        refused("--cuda-graphs --warmup 0", gpu(), "--warmup 1");
        for ok in ["--cuda-graphs", "--cuda-graphs on --precision fp16", "--strategy dp --cuda-graphs"] {
            let c = cfg(ok, gpu()).unwrap_or_else(|e| panic!("{ok}: {e}"));
            assert!(c.cuda_graphs && c.variant.split(' ').any(|w| w == "cuda-graphs"), "{ok}: {}", c.variant);
        }
        let off = cfg("--cuda-graphs off", gpu()).unwrap();
        assert!(!off.cuda_graphs && !off.variant.contains("cuda-graphs"), "{}", off.variant);
        // The flag's grammar is cudnn-benchmark's.
        let e = parse_run_args(&["--cuda-graphs", "maybe"]).unwrap_err();
        assert!(e.to_string().contains("neither on nor off"), "{e}");
    }
}
