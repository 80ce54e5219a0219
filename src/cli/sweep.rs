//! `gpubench sweep` and `gpubench max-batch`: their arguments, the demo
//! preset, and their conversion into a sweep plan (`sweep::plan`), each
//! cell's `run` arguments validated as `gpubench run` would validate them.
use anyhow::Result;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

use super::parse::{parse_duration, parse_size};
use super::run::{parse_run_args, Placement};
use crate::config::{Backend, Impl, ModelKind, RunConfig, StrategyKind};
use crate::device::{self, Devices};
use crate::error::usage;
use crate::sweep::plan::{default_counts, resolve_pool, Cell, Matrix, MaxBatchPlan, Plan, Pool};

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
    /// Warm-up steps per run, or auto (run's default: 5).
    #[arg(long, value_name = "N|auto")]
    pub warmup: Option<String>,
    /// Time each run for this long instead of a step count (e.g. 10s), or
    /// auto: until throughput's interval is within --ci-target.
    #[arg(long, value_name = "DURATION|auto")]
    pub duration: Option<String>,
    /// With --duration auto: the interval half-width to reach (run's default: 2%).
    #[arg(long, value_name = "PCT")]
    pub ci_target: Option<String>,
    /// With --duration auto: the longest a run may take (run's default: 2m).
    #[arg(long, value_name = "DURATION")]
    pub max_duration: Option<String>,
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
    pub backend: Option<Backend>,
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
        opt("--warmup", self.warmup.clone());
        opt("--ci-target", self.ci_target.clone());
        opt("--max-duration", self.max_duration.clone());
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
    /// Write the sweep's report (table and charts) as one self-contained HTML
    /// page to FILE at the end.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
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
    // Each cell twice, the repeats interleaved (repeat → model → …), so the
    // summary shows a spread and does not rank noise.
    a.repeat.get_or_insert(2);
    let r = &mut a.run;
    if r.steps.is_none() && r.duration.is_none() {
        r.duration = Some(if gpu { "5s" } else { "3s" }.into());
    }
    if r.warmup.is_none() && r.warmup_time.is_none() {
        r.warmup = Some(if gpu { "5" } else { "auto" }.into());
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
    let mem_limit = a.mem_limit.as_deref().map(|s| parse_size("--mem-limit", s)).transpose()?;
    if mem_limit.is_some() && matches!(pool, Pool::Gpus(_)) {
        return Err(usage(
            "--mem-limit caps a process's CPU memory (RLIMIT_DATA) and cannot emulate a smaller GPU; use it with --cpu",
        ));
    }
    let cell_timeout = a.cell_timeout.as_deref().map(|s| parse_duration("--cell-timeout", s)).transpose()?;
    if let Some(dir) = &a.charts {
        if dir.exists() && !dir.is_dir() {
            return Err(usage(format!("--charts {}: not a directory", dir.display())));
        }
    }
    if let Some(p) = &a.html {
        crate::report::html::check_html_path(p)?;
    }

    let impls = if a.implementations.is_empty() { vec![Impl::Gpubench] } else { dedup(&a.implementations) };
    if impls.contains(&Impl::Pytorch) {
        if a.run.breakdown {
            return Err(usage("--breakdown times gpubench's own process; drop it, or sweep --impl gpubench only"));
        }
        // Fail before the first cell, with the fix, rather than in every PyTorch cell.
        crate::reference::python::find_python()?;
    }
    let matrix = Matrix { pool, strategies, counts, batches, models, impls, repeat };
    let (cells, notes) = matrix.cells(&a.run.to_args(), &device::hostname(), &cell_config)?;
    Ok(Plan {
        matrix,
        cells,
        notes,
        out,
        charts: a.charts.clone(),
        html: a.html.clone(),
        mem_limit,
        cell_timeout,
        resume: a.resume,
    })
}

/// A cell's configuration: its `gpubench run` arguments on `devices`,
/// validated as `gpubench run` validates them.
pub fn cell_config(args: &[String], devices: Devices) -> Result<RunConfig> {
    parse_run_args(args)?.into_config(Placement::Local(devices))
}

/// Checks `max-batch`'s arguments and validates its probe at the start batch.
pub fn max_batch_plan(a: MaxBatchArgs) -> Result<MaxBatchPlan> {
    if a.start < 1 || a.max < a.start {
        return Err(usage(format!("--start {} and --max {}: need 1 ≤ start ≤ max", a.start, a.max)));
    }
    if a.granularity < 1 {
        return Err(usage("--granularity must be at least 1"));
    }
    let devices = device::resolve(a.gpus.as_deref(), a.cpu, false)?;
    let pool = match devices.kind {
        device::DeviceKind::Cuda => Pool::Gpus(devices.ordinals.clone()),
        device::DeviceKind::Cpu => Pool::Cpu(devices.len()),
    };
    let mem_limit = a.mem_limit.as_deref().map(|s| parse_size("--mem-limit", s)).transpose()?;
    if mem_limit.is_some() && matches!(pool, Pool::Gpus(_)) {
        return Err(usage(
            "--mem-limit caps a process's CPU memory (RLIMIT_DATA) and cannot emulate a smaller GPU; use it with --cpu",
        ));
    }
    let timeout = a.probe_timeout.as_deref().map(|s| parse_duration("--probe-timeout", s)).transpose()?;
    let mut run = a.run.clone();
    if run.steps.is_none() && run.duration.is_none() {
        run.steps = Some(3);
    }
    if run.warmup.is_none() && run.warmup_time.is_none() {
        run.warmup = Some("1".into());
    }
    run.lr.get_or_insert(0.01);
    let common = run.to_args();
    let host = device::hostname();
    let n = pool.len();
    let (strategy, model) = (a.strategy, a.model);
    let first = Cell::new(Impl::Gpubench, strategy, n, model, a.start, 0, &pool, &common, &host, &cell_config)?;
    let probe_pool = pool.clone();
    let cell =
        move |b: i64| Cell::new(Impl::Gpubench, strategy, n, model, b, 0, &probe_pool, &common, &host, &cell_config);
    Ok(MaxBatchPlan {
        strategy,
        model,
        pool,
        start: a.start,
        max: a.max,
        granularity: a.granularity,
        out: a.out,
        mem_limit,
        timeout,
        first,
        cell: Box::new(cell),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::path::Path;

    fn parse(extra: &[&str]) -> SweepArgs {
        let mut v = vec!["gpubench", "sweep"];
        v.extend(extra);
        match crate::cli::Cli::try_parse_from(v).unwrap().command {
            crate::cli::Command::Sweep(a) => *a,
            _ => unreachable!(),
        }
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
        assert_eq!(p.matrix.counts, [1, 2]);
        // 10 cells, each run twice (the repeats interleaved)
        assert_eq!((p.cells.len(), p.matrix.repeat), (20, 2));
        assert_eq!((p.cells[0].repeat, p.cells[10].repeat), (0, 1));
        // explicit flags win over the preset
        let p = plan(parse(&["--preset", "demo", "--cpu", "2", "--batch-sizes", "8", "--out", "y.csv"])).unwrap();
        assert_eq!((p.cells.len(), p.out.as_path()), (10, Path::new("y.csv")));
    }
}
