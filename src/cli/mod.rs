//! The command line: clap's types, and the one conversion of each
//! subcommand's arguments into the plain configuration the layers below take
//! (`run::job`, `sweep::plan`, …). Nothing below this layer names clap.
#[cfg(feature = "torch")]
pub mod allreduce;
#[cfg(feature = "torch")]
pub mod data_bench;
#[cfg(feature = "torch")]
pub mod infer;
#[cfg(feature = "torch")]
pub mod internal;
pub mod parse;
#[cfg(feature = "torch")]
pub mod peak;
#[cfg(feature = "torch")]
pub mod predict;
pub mod report;
#[cfg(feature = "torch")]
pub mod run;
#[cfg(feature = "torch")]
pub mod run_line;
#[cfg(feature = "torch")]
pub mod sweep;

use clap::builder::PossibleValue;
use clap::{Args, Parser, Subcommand};

use crate::config::{
    Backend, CommDtype, CommHook, Impl, ModelKind, OptimizerImpl, OptimizerKind, Precision, Preprocess, ServeStrategy,
    StrategyKind,
};
use crate::report::check::Metric;
use crate::report::export::Format;

#[derive(Parser, Debug)]
#[command(
    name = "gpubench",
    version,
    about = "Which parallel training strategy (single, DataParallel, DistributedDataParallel) is fastest on your GPUs, and why",
    propagate_version = true
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Parses `argv` (the program name first). A negative number is taken as
    /// an option's value, so that `--batch-size -4` is refused by that
    /// option's own check, naming it, not as "unexpected argument '-4'".
    pub(crate) fn parse_args<I, S>(argv: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = S>,
        S: Into<std::ffi::OsString> + Clone,
    {
        use clap::{CommandFactory, FromArgMatches};
        let cmd = Cli::command().mut_subcommands(|s| s.allow_negative_numbers(true));
        Cli::from_arg_matches(&cmd.try_get_matches_from(argv)?)
    }
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Print versions, CUDA devices, CPU and which process groups work here.
    Info(InfoArgs),
    /// Run the ResNet training loop under one strategy and record its speed.
    Run(#[cfg(feature = "torch")] Box<run::RunArgs>, #[cfg(not(feature = "torch"))] NoTorch),
    /// Serve camera frames or requests with the model and record how many are
    /// answered within a latency bound (replicas, processes or dp).
    Infer(#[cfg(feature = "torch")] Box<infer::InferArgs>, #[cfg(not(feature = "torch"))] NoTorch),
    /// Time c10d's all-reduce per message size, as nccl-tests does (algbw,
    /// busbw, correctness), one process per device.
    Allreduce(#[cfg(feature = "torch")] Box<allreduce::AllreduceArgs>, #[cfg(not(feature = "torch"))] NoTorch),
    /// Predict DDP's step time and scaling on N devices from one device's
    /// profile and an all-reduce curve (measured or published).
    Predict(#[cfg(feature = "torch")] Box<predict::PredictArgs>, #[cfg(not(feature = "torch"))] NoTorch),
    // report subcommands
    /// Summarize result files: a table by hardware and config, and charts.
    Report(report::ReportArgs),
    /// Put result sets side by side (machines, dates, published figures).
    Compare(report::CompareArgs),
    /// CI gate: exit 1 when the current results regressed against a baseline.
    Check(report::CheckArgs),
    /// Which node or GPU of a fleet is slow: each row against its
    /// configuration's baseline (a file, or the fleet's median); exit 1 when
    /// something is defective.
    Diagnose(report::DiagnoseArgs),
    /// Run a matrix of strategies × device counts × batch sizes × models, each
    /// cell in its own process; out-of-memory cells become `oom` rows.
    Sweep(#[cfg(feature = "torch")] Box<sweep::SweepArgs>, #[cfg(not(feature = "torch"))] NoTorch),
    /// Find the largest per-device batch that fits in memory (doubling, then
    /// binary search; each probe a few steps in its own process).
    MaxBatch(#[cfg(feature = "torch")] Box<sweep::MaxBatchArgs>, #[cfg(not(feature = "torch"))] NoTorch),
    /// Measure the input pipeline alone (decode, crop, resize, flip) in images/s, no model.
    DataBench(#[cfg(feature = "torch")] data_bench::DataBenchArgs, #[cfg(not(feature = "torch"))] NoTorch),
    /// Merge the cells of a sweep emitted with `sweep --emit slurm DIR` into
    /// one results file, in manifest order; a cell with no file is a
    /// `missing` row naming its array task.
    Collect(CollectArgs),
    /// Measure the device's matrix-multiply peak per precision and keep it
    /// (~/.cache/gpubench/peaks.json), so that runs report their MFU against it.
    Peak(#[cfg(feature = "torch")] PeakArgs, #[cfg(not(feature = "torch"))] NoTorch),
    /// Print the columns of gpubench's CSV files: name, unit and meaning.
    Schema(SchemaArgs),
    /// Rewrite a results file of an earlier CSV schema for this gpubench, so
    /// that rows can be appended to it; the old file is kept beside it.
    Upgrade(UpgradeArgs),
    /// Per rank, where the steps traced by `run --profile DIR` went: compute,
    /// communication, data wait, idle, and how much communication overlapped compute.
    TraceSummary(TraceSummaryArgs),
    // gpubench's own child processes (`crate::internal`), hidden from --help.
    #[cfg(feature = "torch")]
    #[command(name = crate::internal::Role::Rank.subcommand(), hide = true)]
    Rank(internal::Wrapped),
    #[cfg(feature = "torch")]
    #[command(name = crate::internal::Role::InferWorker.subcommand(), hide = true)]
    InferWorker(internal::InferWorkerArgs),
    #[cfg(feature = "torch")]
    #[command(name = crate::internal::Role::WriteInit.subcommand(), hide = true)]
    WriteInit(internal::WriteInitArgs),
    /// Checks a command line without running it (scripts use it).
    #[cfg(feature = "torch")]
    #[command(hide = true)]
    Validate(internal::ValidateArgs),
}

/// A subcommand of the full build, in the torch-free one: whatever follows
/// it is taken as given, and the command says that it needs libtorch.
#[cfg(not(feature = "torch"))]
#[derive(Args, Debug)]
pub(crate) struct NoTorch {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub args: Vec<std::ffi::OsString>,
}

#[derive(Args, Debug)]
pub(crate) struct InfoArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[cfg(feature = "torch")]
#[derive(Args, Debug)]
pub(crate) struct PeakArgs {
    /// CUDA devices to measure, one after the other. Default: GPU 0 if
    /// there is one, else the CPU.
    #[arg(long, value_name = "LIST", conflicts_with = "cpu")]
    pub gpus: Option<String>,
    /// Measure the CPU (all its cores).
    #[arg(long)]
    pub cpu: bool,
    /// Precisions (default: fp32, tf32, fp16 and bf16 on a GPU, bf16 from
    /// compute capability 8.0; fp32 and bf16 on the CPU).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "LIST")]
    pub precision: Vec<Precision>,
    /// The square matrices' side (default 8192 on a GPU, 2048 on the CPU).
    #[arg(long, value_name = "N")]
    pub size: Option<i64>,
    /// Rounds per precision; their median is kept.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Each round runs at least this long.
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub round_time: String,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also append one results row per device and precision (mode `peak`)
    /// to this CSV file, beside the runs `report` reads with it.
    #[arg(long, value_name = "FILE")]
    pub out: Option<std::path::PathBuf>,
}

#[derive(Args, Debug)]
pub(crate) struct CollectArgs {
    /// The directory `sweep --emit slurm DIR` wrote.
    pub dir: std::path::PathBuf,
    /// The merged results file (its per-device rows beside it); replaced
    /// whole if it exists, which collect says.
    #[arg(long, value_name = "FILE.csv")]
    pub out: std::path::PathBuf,
}

#[derive(Args, Debug)]
pub(crate) struct TraceSummaryArgs {
    /// The directory `run --profile` wrote.
    pub dir: std::path::PathBuf,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct UpgradeArgs {
    /// The results file (FILE.csv).
    pub file: std::path::PathBuf,
}

#[derive(Args, Debug)]
pub(crate) struct SchemaArgs {
    /// Output format: an aligned table, or markdown (for documentation).
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// A clap error as one usage line: the problem, then the valid choices,
/// then `hint` in parentheses.
pub(crate) fn clap_usage(e: &clap::Error, hint: &str) -> anyhow::Error {
    let text = e.render().to_string();
    let parts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("For more information") && !l.starts_with("Usage:"))
        .collect();
    let line = parts.join(" ");
    let line = line.strip_prefix("error: ").unwrap_or(&line);
    crate::error::usage(format!("{line} ({hint})"))
}

/// Implements clap's `ValueEnum` for a plain enum of the layers below from
/// its `ALL` and `name()`, with each value's help text here, where the
/// command line is described.
macro_rules! value_enum {
    ($t:ty { $($v:ident => $help:expr),+ $(,)? }) => {
        impl clap::ValueEnum for $t {
            fn value_variants<'a>() -> &'a [Self] {
                &<$t>::ALL
            }
            fn to_possible_value(&self) -> Option<PossibleValue> {
                let help: &str = match self { $(<$t>::$v => $help,)+ };
                let v = PossibleValue::new(self.name());
                Some(if help.is_empty() { v } else { v.help(help) })
            }
        }
    };
}

value_enum!(StrategyKind {
    Single => "One device",
    Dp => "DataParallel: one process, replicas refreshed from the master every step",
    Ddp => "DistributedDataParallel: one process per device, c10d Reducer all-reduce",
});
value_enum!(ServeStrategy {
    Replicas => "One process, a model replica per device, each fed by its own thread from one queue",
    Processes => "One process per device; each camera or request goes to one of them",
    Dp => "DataParallel forward: each batch split over the devices, outputs gathered",
});
value_enum!(CommDtype {
    Fp32 => "",
    Fp16 => "",
    Bf16 => "",
});
value_enum!(OptimizerImpl {
    Auto => "The fastest this device has (fused on CUDA and the CPU in libtorch 2.11)",
    Fused => "One fused kernel for all parameters, as SGD(fused=True)",
    Foreach => "Multi-tensor kernels, as SGD(foreach=True), PyTorch's default on CUDA",
    Loop => "libtorch's C++ SGD: a few kernels per parameter, as SGD(foreach=False)",
});
value_enum!(OptimizerKind {
    Sgd => "SGD with momentum (default lr 0.1 × global batch / 256, weight decay 1e-4)",
    Adamw => "AdamW (default lr 0.001 × global batch / 256, weight decay 0.05, betas 0.9/0.999)",
});
value_enum!(CommHook {
    None => "The Reducer's own fp32 all-reduce",
    Fp16 => "libtorch's builtin FP16 compression hook",
    Bf16 => "The same in bfloat16",
});
value_enum!(Preprocess {
    Device => "Copy uint8 frames to the device, resize and normalise there",
    Cpu => "Resize and normalise on the CPU, then copy",
});
value_enum!(ModelKind {
    Resnet18 => "",
    Resnet34 => "",
    Resnet50 => "",
    Resnet101 => "",
    Resnet152 => "",
    Tinycnn => "Small BatchNorm-free CNN for tests and smoke runs",
});
value_enum!(Backend {
    Gloo => "",
    Nccl => "",
});
value_enum!(Precision {
    Fp32 => "Full fp32: TF32 off for matmuls and convolutions",
    Tf32 => "fp32 storage, TF32 tensor-core math for cuBLAS and cuDNN (CUDA)",
    Fp16 => "Autocast to float16 with dynamic loss scaling",
    Bf16 => "Autocast to bfloat16 (no loss scaling needed)",
});
value_enum!(Impl {
    Gpubench => "gpubench itself (Rust over libtorch)",
    Pytorch => "PyTorch's own single / DataParallel / DistributedDataParallel, in Python",
});
value_enum!(Format {
    Table => "Aligned plain text for the terminal",
    Markdown => "GitHub-flavoured markdown, e.g. for a PR comment",
    Csv => "Raw values, one line per row; notes go to stderr",
    Json => "Raw values as objects keyed by column, with title and notes",
});
value_enum!(Metric {
    Throughput => "Images per second (higher is better)",
    Scaling => "Throughput over devices x the 1-device throughput (higher is better)",
    StepP50 => "Median step time in ms (lower is better)",
    StepP90 => "90th-percentile step time in ms (lower is better)",
    LatencyP99 => "Serving rows: p99 latency in ms (lower is better)",
});

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn every_value_parses_back_to_itself() {
        fn check<T: ValueEnum + PartialEq + std::fmt::Debug>() {
            for v in T::value_variants() {
                let name = v.to_possible_value().unwrap().get_name().to_string();
                assert_eq!(&T::from_str(&name, false).unwrap(), v);
            }
        }
        check::<StrategyKind>();
        check::<ModelKind>();
        check::<Backend>();
        check::<Precision>();
        check::<Impl>();
        check::<Format>();
        check::<Metric>();
    }

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
