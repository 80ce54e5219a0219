//! `gpubench sweep` and `gpubench max-batch`: many runs, each in its own
//! child process (`gpubench run … --out FILE --quiet` of this binary), so an
//! out-of-memory error, a crash or a leak in one cell cannot touch the next.
//!
//! Rows are appended by the children as each cell finishes (one locked write
//! and an fsync per row, see `results_csv::append_rows`). When a child dies
//! without writing its row (killed by the OOM killer, aborted, timed out), the
//! sweep writes one for it, with status `oom` or `failed`, the reason and the
//! memory it saw in use. `--resume` skips the cells already in the file with
//! status ok.
//!
//! While a sweep runs it holds an exclusive lock on `.<out>.lock` (beside
//! `out`), which its children inherit: a second sweep on the same file waits,
//! and `--resume` after a `kill -9` reads the results only once no process of
//! the killed sweep can still append to them.
pub mod child;
pub mod max_batch;

use anyhow::{Context, Result};
use clap::{Args, Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::HashMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cli::RunArgs;
use crate::config::{self, BackendKind, ModelKind, RunConfig, StrategyKind};
use crate::device::{self, Devices};
use crate::error::usage;
use crate::reference::Impl;
use crate::report::long_csv;
use crate::report::results_csv::{self, Row};
use crate::runner::Status;

pub use max_batch::MaxBatchArgs;

/// `run` options that apply to every cell (or probe). Unset ones keep
/// `gpubench run`'s defaults, or the preset's.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Run options (passed to every cell)")]
pub struct CellArgs {
    /// Square input size in pixels (run's default: 224).
    #[arg(long)]
    pub image_size: Option<i64>,
    /// Number of classes (run's default: 1000).
    #[arg(long)]
    pub num_classes: Option<i64>,
    /// Timed steps per run (run's default: 30; ignored with --duration).
    #[arg(long)]
    pub steps: Option<u64>,
    /// Warm-up steps per run (run's default: 5).
    #[arg(long)]
    pub warmup: Option<u64>,
    /// Time each run for this long instead of a step count (e.g. 10s).
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Warm up for this long instead of a step count.
    #[arg(long, value_name = "DURATION")]
    pub warmup_time: Option<String>,
    /// Learning rate (run's default: 0.1 × global_batch / 256).
    #[arg(long)]
    pub lr: Option<f64>,
    #[arg(long)]
    pub momentum: Option<f64>,
    #[arg(long)]
    pub weight_decay: Option<f64>,
    #[arg(long)]
    pub seed: Option<u64>,
    /// Intra-op threads on the CPU, per run.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Input data: `synthetic` (run's default) or an ImageFolder directory.
    #[arg(long, value_name = "synthetic|PATH")]
    pub data: Option<String>,
    /// Decode threads per device for --data PATH.
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Free text stored in every row's `label` column.
    #[arg(long)]
    pub label: Option<String>,
    /// Numeric precision: fp32, tf32, fp16 or bf16 (run's default: fp32).
    #[arg(long, value_name = "P")]
    pub precision: Option<String>,
    /// NHWC (channels-last) memory format.
    #[arg(long)]
    pub channels_last: bool,
    /// cuDNN autotuning, on or off (run's default: off).
    #[arg(long, value_name = "on|off")]
    pub cudnn_benchmark: Option<String>,
    /// Deterministic algorithms.
    #[arg(long)]
    pub deterministic: bool,
    /// Time each step's phases (adds a device sync per phase).
    #[arg(long)]
    pub breakdown: bool,
    /// Telemetry sampling interval (run's default: 100ms).
    #[arg(long, value_name = "DURATION")]
    pub sample_interval: Option<String>,
    /// ddp's process-group backend (default: nccl on CUDA, gloo on CPU).
    #[arg(long, value_enum)]
    pub backend: Option<BackendKind>,
    /// ddp's gradient bucket size in MiB (run's default: 25).
    #[arg(long)]
    pub bucket_cap_mb: Option<f64>,
    #[arg(long)]
    pub gradient_as_bucket_view: bool,
    #[arg(long)]
    pub find_unused_parameters: bool,
    #[arg(long)]
    pub no_broadcast_buffers: bool,
    /// ddp's rendezvous and collective timeout (run's default: 300s).
    #[arg(long, value_name = "DURATION")]
    pub dist_timeout: Option<String>,
}

impl CellArgs {
    /// The options as `gpubench run` arguments.
    pub fn to_args(&self) -> Vec<String> {
        let mut v: Vec<String> = vec![];
        let mut opt = |flag: &str, val: Option<String>| {
            if let Some(x) = val {
                v.push(flag.into());
                v.push(x);
            }
        };
        opt("--image-size", self.image_size.map(|x| x.to_string()));
        opt("--num-classes", self.num_classes.map(|x| x.to_string()));
        opt("--steps", self.steps.map(|x| x.to_string()));
        opt("--warmup", self.warmup.map(|x| x.to_string()));
        opt("--duration", self.duration.clone());
        opt("--warmup-time", self.warmup_time.clone());
        opt("--lr", self.lr.map(|x| x.to_string()));
        opt("--momentum", self.momentum.map(|x| x.to_string()));
        opt("--weight-decay", self.weight_decay.map(|x| x.to_string()));
        opt("--seed", self.seed.map(|x| x.to_string()));
        opt("--threads", self.threads.map(|x| x.to_string()));
        opt("--data", self.data.clone());
        opt("--workers", self.workers.map(|x| x.to_string()));
        opt("--label", self.label.clone());
        opt("--precision", self.precision.clone());
        opt("--cudnn-benchmark", self.cudnn_benchmark.clone());
        opt("--sample-interval", self.sample_interval.clone());
        opt("--backend", self.backend.map(|b| b.name().to_string()));
        opt("--bucket-cap-mb", self.bucket_cap_mb.map(|x| x.to_string()));
        opt("--dist-timeout", self.dist_timeout.clone());
        for (flag, on) in [
            ("--channels-last", self.channels_last),
            ("--deterministic", self.deterministic),
            ("--breakdown", self.breakdown),
            ("--gradient-as-bucket-view", self.gradient_as_bucket_view),
            ("--find-unused-parameters", self.find_unused_parameters),
            ("--no-broadcast-buffers", self.no_broadcast_buffers),
        ] {
            if on {
                v.push(flag.into());
            }
        }
        v
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// All three strategies on 1 and all devices, with charts: about two
    /// minutes on a 2-core CPU (tinycnn), about a minute on GPUs (resnet50).
    Demo,
}

#[derive(Args, Debug, Clone)]
pub struct SweepArgs {
    /// Start from a ready-made matrix; flags given as well override its choices.
    #[arg(long, value_enum)]
    pub preset: Option<Preset>,
    /// Strategies to run (default: single,dp,ddp). `single` runs at one device only.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "LIST")]
    pub strategies: Vec<StrategyKind>,
    /// CUDA devices, comma-separated; a cell with N devices uses the first N.
    /// Default: every GPU, or the CPU when there is none.
    #[arg(long, value_name = "LIST", conflicts_with = "cpu")]
    pub gpus: Option<String>,
    /// Sweep the CPU, with up to N replicas (dp) or ranks (ddp).
    #[arg(long, value_name = "N")]
    pub cpu: Option<usize>,
    /// Device counts to run (default: 1, 2, 4, … up to all, and all).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub device_counts: Vec<usize>,
    /// Per-device batch sizes (default: 64).
    #[arg(long, value_delimiter = ',', value_name = "LIST", allow_negative_numbers = true)]
    pub batch_sizes: Vec<i64>,
    /// Models (default: resnet50).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "LIST")]
    pub models: Vec<ModelKind>,
    /// Implementations: gpubench, pytorch or both (default: gpubench). Each
    /// cell runs under each, one after the other, into the same --out.
    #[arg(long = "impl", value_enum, value_delimiter = ',', value_name = "LIST")]
    pub implementations: Vec<Impl>,
    /// Run every cell this many times (repeats go round the whole matrix).
    #[arg(long, value_name = "N")]
    pub repeat: Option<u32>,
    /// Results file; each cell appends its row as it finishes. Required
    /// unless --preset demo (results/demo.csv).
    #[arg(long, value_name = "FILE.csv")]
    pub out: Option<PathBuf>,
    /// Skip the cells that already have a row with status ok in --out.
    #[arg(long)]
    pub resume: bool,
    /// Draw the report's charts for the sweep into DIR at the end.
    #[arg(long, value_name = "DIR")]
    pub charts: Option<PathBuf>,
    /// Cap each cell's processes' data memory (RLIMIT_DATA, CPU runs only),
    /// e.g. 2G, to emulate a smaller device; libtorch itself takes ~0.6G.
    #[arg(long, value_name = "SIZE")]
    pub mem_limit: Option<String>,
    /// Stop a cell that runs longer than this (its row: status failed).
    #[arg(long, value_name = "DURATION")]
    pub cell_timeout: Option<String>,
    #[command(flatten)]
    pub run: CellArgs,
}

/// Where the cells run: a prefix of a GPU list, or N CPU replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pool {
    Gpus(Vec<usize>),
    Cpu(usize),
}

impl Pool {
    pub fn len(&self) -> usize {
        match self {
            Pool::Gpus(g) => g.len(),
            Pool::Cpu(n) => *n,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `--gpus a,b` or `--cpu n` for the first `n` devices.
    pub fn args(&self, n: usize) -> Vec<String> {
        match self {
            Pool::Gpus(g) => {
                let l: Vec<String> = g[..n].iter().map(|o| o.to_string()).collect();
                vec!["--gpus".into(), l.join(",")]
            }
            Pool::Cpu(_) => vec!["--cpu".into(), n.to_string()],
        }
    }

    pub fn devices(&self, n: usize) -> Devices {
        match self {
            Pool::Gpus(g) => Devices::cuda(g[..n].to_vec()),
            Pool::Cpu(_) => Devices::cpu(n),
        }
    }

    pub fn describe(&self) -> String {
        self.devices(self.len()).describe()
    }
}

/// `--gpus` / `--cpu` as given, else every GPU, else the CPU with `cpu_default` replicas.
pub fn resolve_pool(gpus: Option<&str>, cpu: Option<usize>, cpu_default: usize) -> Result<Pool> {
    if let Some(n) = cpu {
        if n == 0 {
            return Err(usage("--cpu takes the largest number of replicas or ranks to run, at least 1"));
        }
        return Ok(Pool::Cpu(n));
    }
    if gpus.is_some() {
        let d = device::resolve(gpus, None, true)?;
        return Ok(Pool::Gpus(d.ordinals));
    }
    let count = device::cuda_device_count();
    if count > 0 {
        eprintln!("gpubench: no --gpus or --cpu given; using all {count} GPU(s)");
        Ok(Pool::Gpus((0..count).collect()))
    } else {
        eprintln!("gpubench: no --gpus or --cpu given and no CUDA device found; using the CPU (--cpu {cpu_default})");
        Ok(Pool::Cpu(cpu_default))
    }
}

/// 1, 2, 4, … below `n`, and `n`.
pub fn default_counts(n: usize) -> Vec<usize> {
    let mut v = vec![];
    let mut c = 1;
    while c < n {
        v.push(c);
        c *= 2;
    }
    v.push(n.max(1));
    v
}

/// Identity of a cell in the results file: a row with the same key is a run
/// of that cell (repeats share it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CellKey {
    pub host: String,
    pub implementation: String,
    pub label: String,
    pub strategy: String,
    pub devices: String,
    pub model: String,
    pub image_size: u32,
    pub precision: String,
    pub batch_per_device: u32,
    pub data: String,
}

impl CellKey {
    pub fn of_row(r: &Row) -> Option<CellKey> {
        if r.implementation != "gpubench" && r.implementation != "pytorch" {
            return None;
        }
        Some(CellKey {
            host: r.host.clone(),
            implementation: r.implementation.clone(),
            label: r.label.clone(),
            strategy: r.strategy.clone(),
            devices: r.devices.clone(),
            model: r.model.clone(),
            image_size: r.image_size?,
            precision: r.precision.clone(),
            batch_per_device: r.batch_per_device?,
            data: r.data.clone(),
        })
    }
}

/// One run of the matrix.
#[derive(Debug, Clone)]
pub struct Cell {
    pub implementation: Impl,
    pub strategy: StrategyKind,
    pub n: usize,
    pub model: ModelKind,
    pub batch: i64,
    pub repeat: u32,
    /// `gpubench run` arguments, without --out and --quiet.
    pub args: Vec<String>,
    pub cfg: RunConfig,
    pub backend: Option<BackendKind>,
    pub key: CellKey,
}

impl Cell {
    /// Builds a cell's `run` arguments and validates them as `run` would.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        implementation: Impl,
        strategy: StrategyKind,
        n: usize,
        model: ModelKind,
        batch: i64,
        repeat: u32,
        pool: &Pool,
        common: &[String],
        host: &str,
    ) -> Result<Cell> {
        let mut args: Vec<String> =
            vec!["--strategy".into(), strategy.name().into(), "--model".into(), model.name().into()];
        if implementation == Impl::Pytorch {
            args.extend(["--impl".to_string(), "pytorch".to_string()]);
        }
        args.extend(pool.args(n));
        args.extend(["--batch-size".to_string(), batch.to_string()]);
        args.extend(common.iter().cloned());
        let (ra, cfg) = validate_run_args(&args, pool.devices(n))?;
        let key = CellKey {
            host: host.to_string(),
            implementation: implementation.name().into(),
            label: cfg.label.clone(),
            strategy: strategy.name().into(),
            devices: cfg.devices.describe(),
            model: model.name().into(),
            image_size: cfg.image_size as u32,
            precision: cfg.precision.name().to_string(),
            batch_per_device: batch as u32,
            data: cfg.data.clone(),
        };
        Ok(Cell { implementation, strategy, n, model, batch, repeat, args, cfg, backend: ra.ddp.backend, key })
    }

    /// e.g. `ddp ×2 resnet50 224px b64`, with ` (pytorch)` for PyTorch's own.
    pub fn describe(&self) -> String {
        let which = if self.implementation == Impl::Pytorch { " (pytorch)" } else { "" };
        let (s, n, m) = (self.strategy.name(), self.n, self.model.name());
        format!("{s} ×{n} {m} {}px b{}{which}", self.cfg.image_size, self.batch)
    }
}

/// Parses `gpubench run ARGS` and validates it as `run` would, so that a bad
/// matrix is a usage error before any cell starts.
pub fn validate_run_args(args: &[String], devices: Devices) -> Result<(RunArgs, RunConfig)> {
    let argv = ["gpubench", "run"].into_iter().map(String::from).chain(args.iter().cloned());
    let ra = match crate::cli::Cli::try_parse_from(argv) {
        Ok(crate::cli::Cli { command: crate::cli::Command::Run(a) }) => *a,
        Ok(_) => unreachable!("parsed as run"),
        Err(e) => {
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or("").trim_start_matches("error: ").to_string();
            return Err(usage(first));
        }
    };
    for (flag, d) in [
        ("--duration", &ra.duration),
        ("--warmup-time", &ra.warmup_time),
        ("--dist-timeout", &Some(ra.ddp.dist_timeout.clone())),
    ] {
        if let Some(d) = d {
            config::parse_duration(flag, d)?;
        }
    }
    let cfg = config::validate(&ra, devices)?;
    Ok((ra, cfg))
}

/// The matrix: (repeat → model → batch → device count → strategy), with
/// `single` only at one device.
#[derive(Debug, Clone)]
pub struct Plan {
    pub pool: Pool,
    pub strategies: Vec<StrategyKind>,
    pub counts: Vec<usize>,
    pub batches: Vec<i64>,
    pub models: Vec<ModelKind>,
    pub impls: Vec<Impl>,
    pub repeat: u32,
    pub cells: Vec<Cell>,
    pub notes: Vec<String>,
    pub out: PathBuf,
    pub charts: Option<PathBuf>,
    pub mem_limit: Option<u64>,
    pub cell_timeout: Option<Duration>,
    pub resume: bool,
}

fn dedup<T: PartialEq + Clone>(v: &[T]) -> Vec<T> {
    let mut out: Vec<T> = vec![];
    for x in v {
        if !out.contains(x) {
            out.push(x.clone());
        }
    }
    out
}

/// Fills what the preset chooses, where the command line left it open.
fn apply_preset(a: &mut SweepArgs) {
    if a.preset != Some(Preset::Demo) {
        return;
    }
    let gpu = a.cpu.is_none() && (a.gpus.is_some() || device::cuda_device_count() > 0);
    if a.strategies.is_empty() {
        a.strategies = vec![StrategyKind::Single, StrategyKind::Dp, StrategyKind::Ddp];
    }
    a.out.get_or_insert_with(|| PathBuf::from("results/demo.csv"));
    a.charts.get_or_insert_with(|| PathBuf::from("results/demo-charts"));
    let r = &mut a.run;
    if r.steps.is_none() && r.duration.is_none() {
        r.duration = Some(if gpu { "5s" } else { "7s" }.into());
    }
    if r.warmup.is_none() && r.warmup_time.is_none() {
        r.warmup = Some(if gpu { 5 } else { 3 });
    }
    if gpu {
        if a.models.is_empty() {
            a.models = vec![ModelKind::Resnet50];
        }
        if a.batch_sizes.is_empty() {
            a.batch_sizes = vec![64];
        }
    } else {
        a.cpu.get_or_insert(2);
        if a.models.is_empty() {
            a.models = vec![ModelKind::Tinycnn];
        }
        if a.batch_sizes.is_empty() {
            a.batch_sizes = vec![32, 128];
        }
        r.image_size.get_or_insert(64);
        r.num_classes.get_or_insert(10);
    }
}

/// Builds and validates the matrix; every problem is a usage error.
pub fn plan(mut a: SweepArgs) -> Result<Plan> {
    apply_preset(&mut a);
    let out = a.out.clone().ok_or_else(|| {
        usage("sweep needs --out FILE.csv for its rows (or --preset demo, which writes results/demo.csv)")
    })?;
    let pool = resolve_pool(a.gpus.as_deref(), a.cpu, 2)?;
    let demo_default_counts = a.preset == Some(Preset::Demo) && a.device_counts.is_empty();
    let counts = if demo_default_counts {
        dedup(&[1, pool.len()])
    } else if a.device_counts.is_empty() {
        default_counts(pool.len())
    } else {
        dedup(&a.device_counts)
    };
    for &c in &counts {
        if c == 0 || c > pool.len() {
            let what = match &pool {
                Pool::Gpus(g) => format!("--gpus lists {}", g.len()),
                Pool::Cpu(n) => format!("--cpu is {n}"),
            };
            return Err(usage(format!(
                "--device-counts {c}: counts must be between 1 and the number of devices ({what})"
            )));
        }
    }
    let strategies = if a.strategies.is_empty() {
        vec![StrategyKind::Single, StrategyKind::Dp, StrategyKind::Ddp]
    } else {
        dedup(&a.strategies)
    };
    let batches = if a.batch_sizes.is_empty() { vec![64] } else { dedup(&a.batch_sizes) };
    if let Some(b) = batches.iter().find(|&&b| b < 1) {
        return Err(usage(format!("--batch-sizes {b}: batch sizes are per device and at least 1")));
    }
    let models = if a.models.is_empty() { vec![ModelKind::Resnet50] } else { dedup(&a.models) };
    let repeat = a.repeat.unwrap_or(1);
    if repeat == 0 {
        return Err(usage("--repeat must be at least 1"));
    }
    let mem_limit = a.mem_limit.as_deref().map(|s| child::parse_size("--mem-limit", s)).transpose()?;
    if mem_limit.is_some() && matches!(pool, Pool::Gpus(_)) {
        return Err(usage(
            "--mem-limit caps a process's CPU memory (RLIMIT_DATA) and cannot emulate a smaller GPU; use it with --cpu",
        ));
    }
    let cell_timeout = a.cell_timeout.as_deref().map(|s| config::parse_duration("--cell-timeout", s)).transpose()?;
    if let Some(dir) = &a.charts {
        if dir.exists() && !dir.is_dir() {
            return Err(usage(format!("--charts {}: not a directory", dir.display())));
        }
    }

    let impls = if a.implementations.is_empty() { vec![Impl::Gpubench] } else { dedup(&a.implementations) };
    if impls.contains(&Impl::Pytorch) {
        if a.run.breakdown {
            return Err(usage("--breakdown times gpubench's own process; drop it, or sweep --impl gpubench only"));
        }
        // Fail before the first cell, with the fix, rather than in every PyTorch cell.
        crate::reference::find_python()?;
    }
    let mut notes = vec![];
    if strategies.contains(&StrategyKind::Single) && counts.iter().any(|&c| c > 1) {
        notes.push("single runs at 1 device only".to_string());
    }
    let pytorch_dp_skipped =
        impls.contains(&Impl::Pytorch) && strategies.contains(&StrategyKind::Dp) && matches!(pool, Pool::Cpu(_));
    if pytorch_dp_skipped {
        notes.push(
            "no PyTorch dp cells on the CPU: torch.nn.DataParallel needs CUDA devices (gpubench's dp still runs)"
                .to_string(),
        );
    }
    let common = a.run.to_args();
    let host = device::hostname();
    let mut cells = vec![];
    for r in 0..repeat {
        for &model in &models {
            for &batch in &batches {
                for &n in &counts {
                    for &strategy in &strategies {
                        if strategy == StrategyKind::Single && n != 1 {
                            continue;
                        }
                        // Implementations innermost: the runs to compare follow each other.
                        for &imp in &impls {
                            if imp == Impl::Pytorch && strategy == StrategyKind::Dp && pytorch_dp_skipped {
                                continue;
                            }
                            cells.push(Cell::new(imp, strategy, n, model, batch, r, &pool, &common, &host)?);
                        }
                    }
                }
            }
        }
    }
    if cells.is_empty() {
        return Err(usage(
            "the matrix is empty: --strategies single runs at 1 device only; add 1 to --device-counts or choose dp/ddp",
        ));
    }
    Ok(Plan {
        pool,
        strategies,
        counts,
        batches,
        models,
        impls,
        repeat,
        cells,
        notes,
        out,
        charts: a.charts.clone(),
        mem_limit,
        cell_timeout,
        resume: a.resume,
    })
}

/// `.<name>.lock` beside `out` (hidden), held while a sweep and its children run.
pub fn lock_path(out: &Path) -> PathBuf {
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    out.with_file_name(format!(".{name}.lock"))
}

/// Waits for the exclusive lock on `f` (flock: the children inherit it with
/// the descriptor), polling so that Ctrl-C still works; says once why it waits.
fn wait_lock(f: &File, path: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    let mut said = false;
    loop {
        // SAFETY: flock(2) on a descriptor we own.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::WouldBlock {
            return Err(e).with_context(|| format!("cannot lock {}", path.display()));
        }
        if !said {
            eprintln!(
                "gpubench: waiting for another sweep on this file, or its processes, to finish ({} is locked)",
                path.display()
            );
            said = true;
        }
        if child::interrupted() {
            anyhow::bail!("interrupted while waiting for {}", path.display());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The rows of `out` (none when the file does not exist yet or is empty).
fn read_rows_if_any(out: &Path) -> Result<Vec<Row>> {
    if !out.exists() || std::fs::metadata(out).map(|m| m.len() == 0).unwrap_or(true) {
        return Ok(vec![]);
    }
    results_csv::read_rows(out)
}

/// The rows a finished child appended for `key`: rows of `out` matching the
/// key whose run_id was not there before the child started.
pub fn new_rows_for(out: &Path, key: &CellKey, before: &std::collections::HashSet<String>) -> Result<Vec<Row>> {
    Ok(read_rows_if_any(out)?
        .into_iter()
        .filter(|r| !before.contains(&r.run_id) && CellKey::of_row(r).as_ref() == Some(key))
        .collect())
}

/// The outcome of one cell or probe: its row (written by the child, or by us).
pub struct CellOutcome {
    pub row: Row,
    /// The sweep wrote the row because the child did not.
    pub written_by_sweep: bool,
    pub secs: f64,
}

/// A row for a cell whose process ended without one.
pub fn missing_row(c: &Cell, r: &child::ChildResult, mem_limited: bool) -> Row {
    let cfg = &c.cfg;
    let backend = match cfg.strategy {
        StrategyKind::Ddp => crate::strategy::ddp::backend_for(c.backend, &cfg.devices).name(),
        _ => "",
    };
    let mut row = crate::runner::base_row(cfg, cfg.strategy, backend);
    row.implementation = c.implementation.name().into();
    row.threads = cfg.threads.map(|t| t as u32);
    let (status, error) = child::classify_missing_row(r, mem_limited);
    row.status = status.name().into();
    row.error = error;
    row.peak_rss_mb = r.peak_rss_mb;
    row.note = "row written by gpubench sweep: the cell's process ended without one; \
                peak_rss_mb sampled by the sweep"
        .into();
    row
}

/// How cells are run: which program, into which file, under which limits.
pub struct Runner {
    pub program: PathBuf,
    pub out: PathBuf,
    /// RLIMIT_DATA of each cell's processes, bytes.
    pub mem_limit: Option<u64>,
    pub timeout: Option<Duration>,
    /// The sweep's lock, inherited by the cells' processes.
    pub inherit_fd: Option<i32>,
}

impl Runner {
    /// Runs one cell to its row; Err(Interrupted) on Ctrl-C.
    pub fn run(&self, c: &Cell) -> Result<CellOutcome> {
        let before: std::collections::HashSet<String> =
            read_rows_if_any(&self.out)?.into_iter().map(|r| r.run_id).collect();
        let mut argv: Vec<OsString> = vec!["run".into()];
        argv.extend(c.args.iter().map(OsString::from));
        argv.extend(["--out".into(), self.out.as_os_str().to_owned(), "--quiet".into()]);
        let spec = child::ChildSpec {
            program: &self.program,
            args: argv,
            mem_limit: self.mem_limit,
            inherit_fd: self.inherit_fd,
            timeout: self.timeout,
        };
        let res = child::run(&spec, || {})?;
        if res.exit == child::Exit::Interrupted {
            return Err(anyhow::Error::new(Interrupted));
        }
        let mut rows = new_rows_for(&self.out, &c.key, &before)?;
        // Prefer the row of our own child (its run id ends in its pid; ddp's
        // rows carry rank 0's pid instead), should someone else append too.
        let mine = format!("-{:x}", res.pid);
        if let Some(i) = rows.iter().rposition(|r| r.run_id.ends_with(&mine)) {
            let row = rows.swap_remove(i);
            return Ok(CellOutcome { row, written_by_sweep: false, secs: res.secs });
        }
        if let Some(row) = rows.pop() {
            return Ok(CellOutcome { row, written_by_sweep: false, secs: res.secs });
        }
        let row = missing_row(c, &res, self.mem_limit.is_some());
        results_csv::append_rows(&self.out, std::slice::from_ref(&row))?;
        Ok(CellOutcome { row, written_by_sweep: true, secs: res.secs })
    }
}

/// Ctrl-C or SIGTERM stopped the sweep.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// Peak memory of a row, for one-line outputs: the allocator's on CUDA, else
/// NVML's, else the process's resident set.
pub fn row_peak_mem(r: &Row) -> Option<(f64, &'static str)> {
    r.peak_mem_alloc_mb
        .map(|m| (m, "alloc"))
        .or(r.nvml_mem_peak_mb.map(|m| (m, "nvml")))
        .or(r.peak_rss_mb.map(|m| (m, "rss")))
}

pub fn fmt_mib(mb: f64) -> String {
    if mb >= 1024.0 {
        format!("{:.1} GiB", mb / 1024.0)
    } else {
        format!("{mb:.0} MiB")
    }
}

/// The error, short enough for one line.
pub fn short_error(e: &str, max: usize) -> String {
    let e = e.trim();
    if e.chars().count() <= max {
        return e.to_string();
    }
    let cut: String = e.chars().take(max).collect();
    format!("{cut}…")
}

/// One line per finished cell.
pub fn cell_line(i: usize, total: usize, what: &str, o: &CellOutcome) -> String {
    let r = &o.row;
    let w = total.to_string().len();
    let mut s = format!("[{i:>w$}/{total}] {what:<30} {:<8}", r.status);
    if let Some(t) = r.throughput_img_s {
        s += &format!(" {:>9} img/s", crate::report::summary::fmt_rate(t));
        if let Some(p) = r.throughput_per_device_img_s {
            s += &format!(" ({}/dev)", crate::report::summary::fmt_rate(p));
        }
    }
    if let Some((m, kind)) = row_peak_mem(r) {
        s += &format!(" · peak {} {kind}", fmt_mib(m));
    }
    s += &format!(" · {:.1}s", o.secs);
    if !r.error.is_empty() {
        s += &format!(" · {}", short_error(&r.error, 160));
    }
    if o.written_by_sweep {
        s += " (row written by the sweep)";
    }
    s
}

fn say(pb: &ProgressBar, line: &str) {
    if pb.is_hidden() {
        println!("{line}");
    } else {
        pb.suspend(|| println!("{line}"));
    }
}

/// The command line that continues this sweep.
fn resume_command() -> String {
    let mut args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--resume") {
        args.push("--resume".into());
    }
    args.iter().map(|a| child::shell_quote(a)).collect::<Vec<_>>().join(" ")
}

/// `gpubench sweep`.
pub fn run_sweep(a: SweepArgs) -> Result<i32> {
    let plan = plan(a)?;
    if plan.preset_creates_results_dir() {
        std::fs::create_dir_all("results").context("creating results/ for the demo")?;
    }
    results_csv::check_writable(&plan.out)?;
    long_csv::check_writable(&long_csv::devices_path(&plan.out), &long_csv::devices_header(), "--out")?;
    if let Some(dir) = &plan.charts {
        std::fs::create_dir_all(dir)
            .map_err(|e| usage(format!("--charts {}: cannot create directory ({e})", dir.display())))?;
    }
    child::install_interrupt_handler();
    let program = child::child_program()?;
    let lock_file_path = lock_path(&plan.out);
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_file_path)
        .with_context(|| format!("cannot open {}", lock_file_path.display()))?;

    // One sweep per results file at a time; after a kill -9, this also waits
    // for any process of the killed sweep that could still append.
    wait_lock(&lock, &lock_file_path)?;
    // Which cells are done already.
    let mut todo: Vec<&Cell> = plan.cells.iter().collect();
    let mut skipped = 0;
    if plan.resume {
        let mut done: HashMap<CellKey, usize> = HashMap::new();
        for r in read_rows_if_any(&plan.out)? {
            if r.status == Status::Ok.name() {
                if let Some(k) = CellKey::of_row(&r) {
                    *done.entry(k).or_default() += 1;
                }
            }
        }
        todo.retain(|c| match done.get_mut(&c.key) {
            Some(k) if *k > 0 => {
                *k -= 1;
                false
            }
            _ => true,
        });
        skipped = plan.cells.len() - todo.len();
    }
    use std::os::fd::AsRawFd;
    let runner = Runner {
        program,
        out: plan.out.clone(),
        mem_limit: plan.mem_limit,
        timeout: plan.cell_timeout,
        inherit_fd: Some(lock.as_raw_fd()),
    };

    eprintln!("gpubench sweep: {}", plan.describe());
    for n in &plan.notes {
        eprintln!("note: {n}");
    }
    if plan.resume {
        eprintln!(
            "resume: {skipped} of {} cells already have an ok row in {}; {} to run",
            plan.cells.len(),
            plan.out.display(),
            todo.len()
        );
    }

    let pb = if std::io::stderr().is_terminal() {
        let pb = ProgressBar::with_draw_target(Some(todo.len() as u64), ProgressDrawTarget::stderr());
        pb.set_style(
            ProgressStyle::with_template(
                "{spinner} sweep [{bar:30}] {pos}/{len} cells · {elapsed_precise} · ETA {eta} · {msg}",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        pb.enable_steady_tick(Duration::from_millis(200));
        pb
    } else {
        ProgressBar::hidden()
    };
    let t0 = Instant::now();
    let mut counts: HashMap<String, usize> = HashMap::new();
    let total = todo.len();
    for (i, c) in todo.iter().enumerate() {
        pb.set_message(c.describe());
        let res = runner.run(c);
        let o = match res {
            Ok(o) => o,
            Err(e) if e.is::<Interrupted>() => {
                pb.finish_and_clear();
                eprintln!(
                    "interrupted: stopped cell {} ({}) and its processes; the rows of finished cells ({i} in this \
                     session) are kept in {}",
                    i + 1,
                    c.describe(),
                    plan.out.display()
                );
                eprintln!("resume with: {}", resume_command());
                return Ok(130);
            }
            Err(e) => {
                pb.finish_and_clear();
                return Err(e.context(format!("cell {}", c.describe())));
            }
        };
        *counts.entry(o.row.status.clone()).or_default() += 1;
        say(&pb, &cell_line(i + 1, total, &c.describe(), &o));
        pb.inc(1);
    }
    pb.finish_and_clear();

    let summary = summarize_plan(&plan)?;
    print!("{}", summary.text);
    if let Some(dir) = &plan.charts {
        match render_charts(&plan.out, &summary, dir) {
            Ok(n) => eprintln!("wrote {n} chart file{} to {}", if n == 1 { "" } else { "s" }, dir.display()),
            Err(e) => eprintln!("note: charts not written: {}", crate::error::one_line(&e)),
        }
    }
    let mut parts: Vec<String> =
        ["ok", "oom", "diverged", "failed"].iter().filter_map(|s| counts.get(*s).map(|n| format!("{n} {s}"))).collect();
    if skipped > 0 {
        parts.push(format!("{skipped} skipped (already ok)"));
    }
    println!(
        "sweep done: {total} cell(s) run in {} ({}); rows in {}",
        humantime::format_duration(Duration::from_secs(t0.elapsed().as_secs())),
        parts.join(", "),
        plan.out.display()
    );
    let bad = counts.get("failed").copied().unwrap_or(0) + counts.get("diverged").copied().unwrap_or(0);
    Ok(if bad > 0 { 1 } else { 0 })
}

impl Plan {
    fn preset_creates_results_dir(&self) -> bool {
        self.out.starts_with("results") && !Path::new("results").exists()
    }

    pub fn describe(&self) -> String {
        let names = |v: &[StrategyKind]| v.iter().map(|s| s.name()).collect::<Vec<_>>().join(",");
        let list = |v: &[usize]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(",");
        let models = self.models.iter().map(|m| m.name()).collect::<Vec<_>>().join(",");
        let batches = self.batches.iter().map(|b| b.to_string()).collect::<Vec<_>>().join(",");
        let mut s = format!(
            "{} cells: {} × {} device(s) of {} × batch {} × {}",
            self.cells.len(),
            names(&self.strategies),
            list(&self.counts),
            self.pool.describe(),
            batches,
            models
        );
        if self.impls != [Impl::Gpubench] {
            s += &format!(" × impl {}", self.impls.iter().map(|i| i.name()).collect::<Vec<_>>().join(","));
        }
        if self.repeat > 1 {
            s += &format!(" × {} repeats", self.repeat);
        }
        if let Some(m) = self.mem_limit {
            s += &format!(", memory capped at {} per process", fmt_mib(m as f64 / 1048576.0));
        }
        s += &format!(" → {}", self.out.display());
        s
    }
}

/// The summary of a finished sweep: the report's table (medians, scaling
/// against the 1-device run of the same config), over this matrix's rows.
pub struct Summary {
    pub text: String,
    pub runs: Vec<crate::report::summary::Run>,
    pub groups: Vec<crate::report::summary::Group>,
}

pub fn summarize_plan(plan: &Plan) -> Result<Summary> {
    use crate::report::summary::{self as rs, Scope};
    let keys: std::collections::HashSet<&CellKey> = plan.cells.iter().map(|c| &c.key).collect();
    let all = if plan.out.exists() { rs::load_files(std::slice::from_ref(&plan.out))? } else { vec![] };
    let runs: Vec<rs::Run> =
        all.into_iter().filter(|r| CellKey::of_row(&r.row).is_some_and(|k| keys.contains(&k))).collect();
    let (devices, _) = crate::report::devices::load_for(std::slice::from_ref(&plan.out));
    let idx: Vec<usize> = (0..runs.len()).collect();
    let groups = rs::summarize(&runs, &idx, Scope::of, &devices);
    let mut table = rs::report_table(&runs, &groups, std::slice::from_ref(&plan.out));
    table.title = format!("sweep summary ({} row(s) of this matrix in {})", runs.len(), plan.out.display());
    let bytes = crate::report::export::exporter(crate::report::export::Format::Table).export(&table)?;
    Ok(Summary { text: String::from_utf8_lossy(&bytes).into_owned(), runs, groups })
}

/// The report's charts for the sweep's rows; returns the number of files written.
pub fn render_charts(out: &Path, s: &Summary, dir: &Path) -> Result<usize> {
    use crate::report::charts::{self, ChartWriter};
    let font = match charts::find_font() {
        Ok(p) => Some(p),
        Err(msg) => {
            eprintln!("note: {msg}");
            None
        }
    };
    let mut w = match ChartWriter::new(dir, font.as_deref()) {
        Err(e) if font.is_some() && crate::error::exit_code(&e) != 2 => {
            eprintln!("note: {}; PNG charts skipped, only SVG written", crate::error::one_line(&e));
            ChartWriter::new(dir, None)?
        }
        r => r?,
    };
    let (devices, _) = crate::report::devices::load_for(&[out.to_path_buf()]);
    for n in charts::report_charts(&mut w, &s.runs, &s.groups, &devices)? {
        eprintln!("note: {n}");
    }
    Ok(w.written.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(extra: &[&str]) -> SweepArgs {
        let mut v = vec!["gpubench", "sweep"];
        v.extend(extra);
        match crate::cli::Cli::try_parse_from(v).unwrap().command {
            crate::cli::Command::Sweep(a) => *a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn counts_default_to_powers_of_two_and_all() {
        assert_eq!(default_counts(1), [1]);
        assert_eq!(default_counts(4), [1, 2, 4]);
        assert_eq!(default_counts(6), [1, 2, 4, 6]);
    }

    #[test]
    fn the_lock_is_hidden_beside_the_results() {
        assert_eq!(lock_path(Path::new("results/demo.csv")), PathBuf::from("results/.demo.csv.lock"));
        assert_eq!(lock_path(Path::new("r.csv")), PathBuf::from(".r.csv.lock"));
    }

    #[test]
    fn matrix_order_and_single_at_one_device() {
        let p = plan(parse(&[
            "--cpu",
            "2",
            "--strategies",
            "single,ddp",
            "--batch-sizes",
            "8,16",
            "--models",
            "tinycnn",
            "--image-size",
            "16",
            "--repeat",
            "2",
            "--out",
            "x.csv",
        ]))
        .unwrap();
        let d: Vec<String> = p.cells.iter().map(|c| format!("{} r{}", c.describe(), c.repeat)).collect();
        assert_eq!(
            d[..6],
            [
                "single ×1 tinycnn 16px b8 r0",
                "ddp ×1 tinycnn 16px b8 r0",
                "ddp ×2 tinycnn 16px b8 r0",
                "single ×1 tinycnn 16px b16 r0",
                "ddp ×1 tinycnn 16px b16 r0",
                "ddp ×2 tinycnn 16px b16 r0"
            ]
        );
        assert_eq!(p.cells.len(), 12);
        assert_eq!(p.cells[2].key.devices, "cpu×2");
        assert!(p.cells[2].args.windows(2).any(|w| w == ["--cpu", "2"]));
        assert!(p.notes.iter().any(|n| n.contains("single runs at 1 device only")));
    }

    #[test]
    fn bad_matrices_are_usage_errors() {
        let base = ["--cpu", "2", "--models", "tinycnn", "--out", "x.csv"];
        let bad: &[&[&str]] = &[
            &["--device-counts", "3"],
            &["--device-counts", "0"],
            &["--batch-sizes", "0"],
            &["--repeat", "0"],
            &["--strategies", "single", "--device-counts", "2"],
            &["--image-size", "4"],
            &["--mem-limit", "lots"],
            &["--duration", "soon"],
            &["--cell-timeout", "0s"],
        ];
        for extra in bad {
            let mut v = base.to_vec();
            v.extend_from_slice(extra);
            let e = plan(parse(&v)).unwrap_err();
            assert_eq!(crate::error::exit_code(&e), 2, "{extra:?}: {e}");
        }
        let e = plan(parse(&["--cpu", "1"])).unwrap_err();
        assert!(e.to_string().contains("--out"), "{e}");
    }

    #[test]
    fn cell_options_reach_every_cell() {
        let p = plan(parse(&[
            "--cpu",
            "1",
            "--strategies",
            "single",
            "--models",
            "tinycnn",
            "--image-size",
            "16",
            "--steps",
            "2",
            "--label",
            "box A",
            "--no-broadcast-buffers",
            "--out",
            "x.csv",
        ]))
        .unwrap();
        let a = &p.cells[0].args;
        for w in [["--steps", "2"], ["--label", "box A"]] {
            assert!(a.windows(2).any(|x| x == w), "{a:?}");
        }
        assert!(a.contains(&"--no-broadcast-buffers".to_string()));
        assert_eq!(p.cells[0].key.label, "box A");
    }

    #[test]
    fn demo_preset_on_the_cpu() {
        let p = plan(parse(&["--preset", "demo", "--cpu", "2"])).unwrap();
        assert_eq!(p.out, PathBuf::from("results/demo.csv"));
        assert!(p.charts.is_some());
        let strategies: std::collections::BTreeSet<&str> = p.cells.iter().map(|c| c.strategy.name()).collect();
        assert_eq!(strategies.len(), 3);
        assert_eq!(p.counts, [1, 2]);
        assert_eq!(p.cells.len(), 10);
        // explicit flags win over the preset
        let p = plan(parse(&["--preset", "demo", "--cpu", "2", "--batch-sizes", "8", "--out", "y.csv"])).unwrap();
        assert_eq!((p.cells.len(), p.out.as_path()), (5, Path::new("y.csv")));
    }
}
