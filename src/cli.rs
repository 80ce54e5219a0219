//! Command-line surface. Parsing only: each subcommand hands a validated
//! configuration to the module that does the work.
use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

use crate::config::{ModelKind, StrategyKind};

#[derive(Parser, Debug)]
#[command(
    name = "gpubench",
    version,
    about = "Which parallel training strategy (single, DataParallel, DistributedDataParallel) is fastest on your GPUs, and why",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Print versions, CUDA devices, CPU and which process groups work here.
    Info(InfoArgs),
    /// Run the ResNet training loop under one strategy and record its speed.
    Run(Box<RunArgs>),
    // report subcommands
    /// Summarize result files: a table by hardware and config, and charts.
    Report(crate::report::commands::ReportArgs),
    /// Put result sets side by side (machines, dates, published figures).
    Compare(crate::report::commands::CompareArgs),
    /// CI gate: exit 1 when the current results regressed against a baseline.
    Check(crate::report::commands::CheckArgs),
    /// Run a matrix of strategies × device counts × batch sizes × models, each
    /// cell in its own process; out-of-memory cells become `oom` rows.
    Sweep(Box<crate::sweep::SweepArgs>),
    /// Find the largest per-device batch that fits in memory (doubling, then
    /// binary search; each probe a few steps in its own process).
    MaxBatch(Box<crate::sweep::MaxBatchArgs>),
    /// Measure the input pipeline alone (decode, crop, resize, flip) in images/s, no model.
    DataBench(crate::data::bench::DataBenchArgs),
}

#[derive(Args, Debug)]
pub struct InfoArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Parallel strategy.
    #[arg(long, value_enum, default_value_t = StrategyKind::Single)]
    pub strategy: StrategyKind,
    /// Implementation: gpubench itself, or PyTorch's own (the Python reference,
    /// run with set-up's torch venv) for a side-by-side row with impl=pytorch.
    #[arg(long = "impl", value_enum, default_value_t = crate::reference::Impl::Gpubench)]
    pub implementation: crate::reference::Impl,
    /// Write the model's initial weights and the data seed to FILE (safetensors).
    #[arg(long, value_name = "FILE")]
    pub save_init: Option<PathBuf>,
    /// Start from the weights and data seed in FILE (written by --save-init).
    #[arg(long, value_name = "FILE")]
    pub init_from: Option<PathBuf>,
    /// CUDA device ordinals, comma-separated (e.g. 0,1,2,3). Default: GPU 0 if
    /// there is one, else the CPU.
    #[arg(long, value_name = "LIST", conflicts_with = "cpu")]
    pub gpus: Option<String>,
    /// Run on the CPU with N replicas (dp) or ranks (ddp); 1 for single.
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "1")]
    pub cpu: Option<usize>,
    /// Model to train. `tinycnn` is a small BatchNorm-free CNN for tests and smoke runs.
    #[arg(long, value_enum, default_value_t = ModelKind::Resnet50)]
    pub model: ModelKind,
    #[arg(long, default_value_t = 1000)]
    pub num_classes: i64,
    /// Square input size in pixels.
    #[arg(long, default_value_t = 224)]
    pub image_size: i64,
    /// Images per device; the global batch is this times the number of devices.
    #[arg(long, default_value_t = 64)]
    pub batch_size: i64,
    /// Timed steps (ignored when --duration is given).
    #[arg(long, default_value_t = 30)]
    pub steps: u64,
    /// Warm-up steps, excluded from timing (ignored when --warmup-time is given).
    #[arg(long, default_value_t = 5)]
    pub warmup: u64,
    /// Time the run for this long instead of a step count (e.g. 30s, 2m).
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,
    /// Warm up for this long instead of a step count (e.g. 10s).
    #[arg(long, value_name = "DURATION")]
    pub warmup_time: Option<String>,
    /// Learning rate. Default: 0.1 × global_batch / 256 (Goyal et al.).
    #[arg(long)]
    pub lr: Option<f64>,
    #[arg(long, default_value_t = 0.9)]
    pub momentum: f64,
    #[arg(long, default_value_t = 1e-4)]
    pub weight_decay: f64,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Intra-op threads on the CPU (per process; dp splits them among replicas).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Input data: `synthetic` (the default) generates random batches on the
    /// device; a path reads an ImageFolder tree (DIR/train/<class>/*.JPEG or
    /// DIR/<class>/*.JPEG) with the ImageNet training transform.
    #[arg(long, default_value = "synthetic")]
    pub data: String,
    /// Decode threads per device for --data PATH (dp: this many per device, all
    /// on the master). Default: the cores shared among the devices, 1 to 8.
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Free text stored in the row's `label` column (e.g. "V100 box").
    #[arg(long, default_value = "")]
    pub label: String,
    /// Append the result row to this CSV file (created with a header if new).
    #[arg(long, value_name = "FILE.csv")]
    pub out: Option<PathBuf>,
    /// Print a JSON summary instead of the human one.
    #[arg(long)]
    pub json: bool,
    /// No progress bar and no summary (the row is still written).
    #[arg(long, short)]
    pub quiet: bool,
    /// Numeric precision: fp32, tf32 (TF32 matmuls and convolutions on CUDA),
    /// fp16 (autocast + dynamic loss scaling) or bf16 (autocast).
    #[arg(long, value_enum, default_value_t = crate::strategy::precision::Precision::Fp32)]
    pub precision: crate::strategy::precision::Precision,
    /// NHWC (channels-last) memory format for the model and its inputs.
    #[arg(long)]
    pub channels_last: bool,
    /// cuDNN autotuning: on or off (fixed input shapes benefit; the first
    /// steps are slower while it tunes, so warm up long enough).
    #[arg(long, value_name = "on|off", default_value = "off", value_parser = parse_on_off)]
    pub cudnn_benchmark: bool,
    /// Deterministic algorithms (plus the seed) for reproducible losses.
    #[arg(long)]
    pub deterministic: bool,
    /// Time each step's phases (data wait, forward, backward, optimizer). Adds
    /// a device sync after every phase, which perturbs the step time.
    #[arg(long)]
    pub breakdown: bool,
    /// How often to sample device telemetry (NVML) and the process.
    #[arg(long, default_value = "100ms", value_name = "DURATION")]
    pub sample_interval: String,
    /// Write the full sampled timeline (every device, every field) to this CSV.
    #[arg(long, value_name = "FILE.csv")]
    pub telemetry: Option<PathBuf>,

    #[command(flatten)]
    pub ddp: DdpArgs,
}

/// DistributedDataParallel options; they mean what they mean in PyTorch.
#[derive(Args, Debug, Clone)]
pub struct DdpArgs {
    /// Process-group backend. Default: nccl on CUDA, gloo on CPU.
    #[arg(long, value_enum)]
    pub backend: Option<crate::config::BackendKind>,
    #[arg(long, default_value_t = 25.0)]
    pub bucket_cap_mb: f64,
    #[arg(long)]
    pub gradient_as_bucket_view: bool,
    #[arg(long)]
    pub find_unused_parameters: bool,
    /// Do not broadcast buffers (BatchNorm statistics) from rank 0 before each forward.
    #[arg(long)]
    pub no_broadcast_buffers: bool,
    /// Number of nodes (multi-node runs start one launcher per node).
    #[arg(long, default_value_t = 1)]
    pub nnodes: usize,
    /// This node's rank among --nnodes.
    #[arg(long, default_value_t = 0)]
    pub node_rank: usize,
    /// Address of global rank 0's node (default 127.0.0.1).
    #[arg(long)]
    pub master_addr: Option<String>,
    /// Port for the rendezvous store on the master (default: a free port, single node only).
    #[arg(long)]
    pub master_port: Option<u16>,
    /// How long to wait for peers at rendezvous and in collectives.
    #[arg(long, default_value = "300s", value_name = "DURATION")]
    pub dist_timeout: String,
}

fn parse_on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" | "true" | "1" => Ok(true),
        "off" | "false" | "0" => Ok(false),
        _ => Err(format!("{s:?} is neither on nor off")),
    }
}

/// Parses the command line and runs the subcommand; returns the exit code.
pub fn run() -> Result<i32> {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return Ok(print_clap_error(e)),
    };
    match cli.command {
        Command::Info(a) => crate::info::run(a.json).map(|_| 0),
        Command::Run(a) => crate::runner::run_command(*a),
        Command::Report(a) => crate::report::commands::run_report(&a),
        Command::Compare(a) => crate::report::commands::run_compare(&a),
        Command::Check(a) => crate::report::commands::run_check(&a),
        Command::Sweep(a) => crate::sweep::run_sweep(*a),
        Command::MaxBatch(a) => crate::sweep::max_batch::run_max_batch(*a),
        Command::DataBench(a) => crate::data::bench::run_data_bench(a),
    }
}

/// Clap's help and version go to stdout as usual; its errors are folded onto
/// one line (problem, then the valid choices) and exit with 2.
fn print_clap_error(e: clap::Error) -> i32 {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                2
            } else {
                0
            }
        }
        _ => {
            let text = e.render().to_string();
            let parts: Vec<&str> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("For more information") && !l.starts_with("Usage:"))
                .collect();
            let line = parts.join(" ");
            let line = line.strip_prefix("error: ").unwrap_or(&line);
            eprintln!("error: {line} (see gpubench --help)");
            2
        }
    }
}
