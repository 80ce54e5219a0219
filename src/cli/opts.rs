//! The options several subcommands take, each defined once, here: a command
//! flattens the groups it takes (`#[command(flatten)]`), so that a flag has
//! one type, one grammar and one help text across the whole command line
//! (`tests::one_definition_per_long_flag` checks it through clap itself).
//! A command that needs another default sets it with `mut_arg`, never with a
//! definition of its own.
//!
//! An option that travels alone is a struct of one field that dereferences
//! to its value (`option!`), so that `a.out.as_deref()` reads as before.
use clap::Args;
use std::path::PathBuf;

use super::parse::{parse_above_zero, parse_batch_size, parse_branch, parse_commit, parse_fraction, parse_steps};
use crate::config::{Backend, CommHook, Impl, ModelKind, Precision, Threads};
use crate::report::check::Metric;
use crate::report::export::Format;

/// One option in a struct of its own, flattened where a command takes it;
/// the struct dereferences to the option's value.
macro_rules! option {
    ($(#[doc = $doc:expr])* $name:ident { #[arg($($arg:tt)*)] $field:ident: $ty:ty }) => {
        #[derive(Args, Debug, Clone)]
        pub(crate) struct $name {
            $(#[doc = $doc])*
            #[arg($($arg)*)]
            pub $field: $ty,
        }

        impl std::ops::Deref for $name {
            type Target = $ty;
            fn deref(&self) -> &$ty {
                &self.$field
            }
        }
    };
}

/// Where a command runs: GPUs by ordinal, or the CPU.
#[derive(Args, Debug, Clone)]
pub(crate) struct DeviceOpts {
    /// CUDA device ordinals, comma-separated (e.g. 0,1,2,3). Default: GPU 0
    /// if there is one, else the CPU (sweep and allreduce: every GPU).
    #[arg(long, value_name = "LIST", conflicts_with = "cpu")]
    pub gpus: Option<String>,
    /// Run on the CPU: `--cpu` is one CPU device, `--cpu N` is N replicas
    /// (dp, serving) or ranks (ddp, all-reduce) sharing its cores.
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "1")]
    pub cpu: Option<usize>,
}

/// The model a command builds and how its arithmetic runs.
#[derive(Args, Debug, Clone)]
pub(crate) struct ModelOpts {
    /// The model. `tinycnn` is a small BatchNorm-free CNN for tests and smoke runs.
    #[arg(long, value_enum, default_value_t = ModelKind::Resnet50)]
    pub model: ModelKind,
    /// Classes of the model's last layer (ImageNet's 1000 unless given).
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub num_classes: i64,
    #[command(flatten)]
    pub image_size: ImageSize,
    /// Numeric precision: fp32, tf32 (TF32 matmuls and convolutions on
    /// CUDA), fp16 (autocast with dynamic loss scaling) or bf16 (autocast).
    #[arg(long, value_enum, default_value_t = Precision::Fp32)]
    pub precision: Precision,
    /// NHWC (channels-last) memory format for the model and its inputs.
    #[arg(long)]
    pub channels_last: bool,
    /// cuDNN autotuning: on or off; the bare flag means on (fixed input
    /// shapes benefit; the first steps are slower while it tunes, so warm up
    /// long enough).
    #[arg(long, value_name = "on|off", num_args = 0..=1, default_value = "off", default_missing_value = "on",
          action = clap::ArgAction::Set, value_parser = super::parse::parse_on_off)]
    pub cudnn_benchmark: bool,
    #[command(flatten)]
    pub seed: Seed,
}

impl ModelOpts {
    /// The workload, for a command on devices of `kind`: the one place its
    /// checks live (run, infer, predict and every sweep cell and max-batch
    /// probe come through here), each one line naming the fix.
    pub(crate) fn workload(&self, kind: crate::device::DeviceKind) -> anyhow::Result<crate::config::Workload> {
        use crate::error::usage;
        if self.num_classes < 2 {
            return Err(usage("--num-classes must be at least 2"));
        }
        let min = self.model.min_image_size();
        if *self.image_size < min {
            return Err(usage(format!(
                "--image-size {} is too small for {}; use at least {min}",
                *self.image_size,
                self.model.name()
            )));
        }
        if kind == crate::device::DeviceKind::Cpu && self.precision == Precision::Tf32 {
            return Err(usage("--precision tf32 is a CUDA tensor-core mode; on the CPU use fp32 or bf16"));
        }
        Ok(crate::config::Workload {
            model: self.model,
            num_classes: self.num_classes,
            image_size: *self.image_size,
            precision: self.precision,
            channels_last: self.channels_last,
            cudnn_benchmark: self.cudnn_benchmark,
            seed: *self.seed,
            deterministic: false,
        })
    }
}

option! {
    /// CUDA graphs: on captures the work once after warm-up and replays it
    /// (run: the whole training step, single and dp on one GPU; infer: the
    /// forward of each batch-size bucket), so the host launches one graph
    /// where it launched hundreds of kernels. CUDA only; refused where it
    /// cannot work, never a silent fall-back.
    CudaGraphs {
        #[arg(long, value_name = "on|off", num_args = 0..=1, default_value = "off", default_missing_value = "on",
              action = clap::ArgAction::Set, value_parser = super::parse::parse_on_off)]
        cuda_graphs: bool
    }
}

option! {
    /// Square input size in pixels: the model's input (frames and decoded
    /// images are resized to it).
    ImageSize { #[arg(long, default_value_t = 224, value_name = "PX")] image_size: i64 }
}

option! {
    /// Seed of the initial weights and of the synthetic or shuffled data.
    Seed { #[arg(long, default_value_t = 0, value_name = "N")] seed: u64 }
}

option! {
    /// Images per device in one step; the global batch is this times the
    /// devices (and times --grad-accum).
    BatchSize {
        #[arg(long, default_value_t = 64, value_name = "N", value_parser = parse_batch_size, allow_hyphen_values = true)]
        batch_size: i64
    }
}

option! {
    /// Input: `synthetic` (random batches made on the device), or a folder of
    /// images: an ImageFolder tree (DIR/train/<class>/*.JPEG or
    /// DIR/<class>/*.JPEG) for run and data-bench, JPEG or PNG files served as
    /// frames for infer.
    DataOpt { #[arg(long, default_value = "synthetic", value_name = "synthetic|DIR")] data: String }
}

option! {
    /// Decode threads per device for --data DIR. Default: the cores shared
    /// among the devices, 1 to 8.
    WorkersOpt { #[arg(long, value_name = "N")] workers: Option<usize> }
}

fn parse_threads(s: &str) -> Result<Threads, String> {
    if s == "auto" {
        return Ok(Threads::Auto);
    }
    match s.parse::<usize>() {
        Ok(0) => Err("--threads must be at least 1 (or auto)".into()),
        Ok(n) => Ok(Threads::Count(n)),
        Err(_) => Err(format!("{s:?} is not a thread count; give N or auto")),
    }
}

/// The host side of a measured process.
#[derive(Args, Debug, Clone)]
pub(crate) struct HostOpts {
    /// Intra-op threads for the whole process, shared among its replicas or
    /// serving workers; for ddp, a node's, shared among its ranks. `auto`:
    /// the cores other processes leave free, measured over 300 ms when the
    /// run starts (for a shared host). Default: every core on the CPU, which
    /// a quiet machine's benchmark wants; on a GPU, where host threads only
    /// stage batches, at most 4 per worker.
    #[arg(long, value_name = "N|auto", value_parser = parse_threads)]
    pub threads: Option<Threads>,
    /// How often to sample device telemetry (NVML) and the process.
    #[arg(long, default_value = "100ms", allow_hyphen_values = true, value_name = "DURATION")]
    pub sample_interval: String,
}

option! {
    /// Whose implementation: gpubench itself, or PyTorch's own (the Python
    /// reference, run in set-up's torch venv) for rows side by side with
    /// impl=pytorch; check judges the rows of this one.
    ImplOpt { #[arg(long = "impl", value_enum, default_value_t = Impl::Gpubench)] implementation: Impl }
}

/// How many steps are timed, after how many untimed ones.
#[derive(Args, Debug, Clone)]
pub(crate) struct StepOpts {
    /// Timed steps (run: ignored when --duration is given).
    #[arg(long, default_value_t = 30, value_name = "N", value_parser = parse_steps)]
    pub steps: u64,
    /// Warm-up steps, excluded from timing, or `auto` (run): until step
    /// times are steady (the medians of the last three windows of 5 steps
    /// within 5 %), at most 200 steps or 60 s.
    #[arg(long, default_value = "5", value_name = "N|auto")]
    pub warmup: String,
}

option! {
    /// How long the timed part runs (e.g. 30s, 2m), or `auto` (run only):
    /// until throughput's 95 % interval is within --ci-target, at most
    /// --max-duration.
    DurationOpt {
        #[arg(long, allow_hyphen_values = true, value_name = "DURATION|auto")]
        duration: Option<String>
    }
}

option! {
    /// The results file (CSV). Rows are appended, each whole, to a file of
    /// this schema, which is created with its header if new; collect writes
    /// its merged file whole.
    OutOpt { #[arg(long, value_name = "FILE.csv")] out: Option<PathBuf> }
}

option! {
    /// Free text stored in the rows' `label` column (e.g. "V100 box").
    LabelOpt { #[arg(long, default_value = "", allow_hyphen_values = true, value_name = "TEXT")] label: String }
}

option! {
    /// Output format: an aligned table (or the text summary), markdown,
    /// CSV, or one JSON document.
    FormatOpt { #[arg(long, value_enum, default_value_t = Format::Table)] format: Format }
}

impl FormatOpt {
    /// The format, when this command prints it; else one usage line naming
    /// the formats it has.
    pub(crate) fn one_of(&self, command: &str, has: &[Format]) -> anyhow::Result<Format> {
        if has.contains(&self.format) {
            return Ok(self.format);
        }
        let names: Vec<&str> = has.iter().map(|f| f.name()).collect();
        Err(crate::error::usage(format!(
            "--format {}: {command} prints {}; give one of them",
            self.format.name(),
            names.join(", ")
        )))
    }
}

option! {
    /// No progress bar and no summary (results files are still written, and
    /// a failure still gets its line).
    QuietOpt { #[arg(long, short)] quiet: bool }
}

/// Where a measuring command's results go and how it speaks.
#[derive(Args, Debug, Clone)]
pub(crate) struct OutputOpts {
    #[command(flatten)]
    pub out: OutOpt,
    #[command(flatten)]
    pub label: LabelOpt,
    #[command(flatten)]
    pub format: FormatOpt,
    #[command(flatten)]
    pub quiet: QuietOpt,
}

impl OutputOpts {
    /// The output part, for `command`, which prints the formats `has`.
    pub(crate) fn output(&self, command: &str, has: &[Format]) -> anyhow::Result<crate::config::Output> {
        Ok(crate::config::Output {
            label: self.label.label.clone(),
            out: self.out.out.clone(),
            format: self.format.one_of(command, has)?,
            quiet: *self.quiet,
        })
    }
}

// The code under test, for the rows' `commit` and `branch` columns, where
// neither the CI's variables nor the working directory's checkout say it (or
// say it wrong: a build made from another checkout than the one the
// benchmark runs in). A plain comment: clap makes a flattened group's doc
// comment the about of a command that has none.
#[derive(Args, Debug, Clone)]
pub(crate) struct CommitOpts {
    /// The commit of the code under test, recorded in every row (4 to 64 hex
    /// digits). Default: the CI's variable (GITHUB_SHA, CI_COMMIT_SHA,
    /// BUILDKITE_COMMIT, GIT_COMMIT), else `git rev-parse HEAD` of the
    /// working directory, else none.
    #[arg(long, value_name = "SHA", value_parser = parse_commit)]
    pub commit: Option<String>,
    /// The branch of that commit, recorded in every row. Default: the CI's
    /// variable, else the working directory's checked-out branch.
    #[arg(long, value_name = "NAME", value_parser = parse_branch)]
    pub branch: Option<String>,
}

impl CommitOpts {
    /// Puts the flags where every row of this process and of its children
    /// finds them (`fleet::this_provenance`): the environment, which ddp's
    /// ranks, a sweep's cells and the PyTorch reference inherit. Called
    /// first in the command's conversion, while the process has one thread
    /// (no device is initialised and nothing is spawned yet), so setting
    /// the environment races with no reader.
    pub(crate) fn export(&self) {
        use crate::fleet::{BRANCH_VAR, COMMIT_VAR};
        for (var, value) in [(COMMIT_VAR, &self.commit), (BRANCH_VAR, &self.branch)] {
            if let Some(v) = value {
                std::env::set_var(var, v);
            }
        }
    }
}

/// How a reporting command renders its tables: the format on stdout,
/// charts into a directory, one HTML page.
#[derive(Args, Debug, Clone)]
pub(crate) struct RenderOpts {
    #[command(flatten)]
    pub format: FormatOpt,
    #[command(flatten)]
    pub charts: ChartsOpt,
    #[command(flatten)]
    pub html: HtmlOpt,
}

option! {
    /// Metrics to judge (repeat or comma-separate).
    MetricsOpt {
        #[arg(long = "metric", value_name = "METRIC", value_enum, value_delimiter = ',',
              default_values_t = [Metric::Throughput, Metric::Scaling])]
        metrics: Vec<Metric>
    }
}

option! {
    /// Acknowledgements of history's changes: a file you commit and review
    /// (`expected ID`, `accepted ID`, `ignore POINT`; docs/history.md).
    AcksOpt { #[arg(long, value_name = "FILE")] acks: Option<PathBuf> }
}

option! {
    /// Also draw this command's charts into DIR (SVG, plus PNG when a font is available).
    ChartsOpt { #[arg(long, value_name = "DIR")] charts: Option<PathBuf> }
}

option! {
    /// Also write this command's tables and charts as one self-contained HTML page to FILE.
    HtmlOpt { #[arg(long, value_name = "FILE.html")] html: Option<PathBuf> }
}

option! {
    /// Nodes in the job: a multi-node job runs one launcher per node
    /// (predict: the nodes of the job predicted).
    Nnodes { #[arg(long, default_value_t = 1, value_name = "N")] nnodes: usize }
}

/// A job across processes and nodes: its process group and rendezvous.
#[derive(Args, Debug, Clone)]
pub(crate) struct DistOpts {
    /// Process-group backend. Default: nccl on CUDA, gloo on the CPU.
    #[arg(long, value_enum)]
    pub backend: Option<Backend>,
    #[command(flatten)]
    pub nnodes: Nnodes,
    /// This node's rank among --nnodes.
    #[arg(long, default_value_t = 0, value_name = "R")]
    pub node_rank: usize,
    /// Address of global rank 0's node, the same on every node (default 127.0.0.1).
    #[arg(long, value_name = "HOST")]
    pub master_addr: Option<String>,
    /// Port of the rendezvous store on --master-addr (default: a free port, one node only).
    #[arg(long, value_name = "PORT")]
    pub master_port: Option<u16>,
    /// How long to wait for peers at rendezvous and in collectives.
    #[arg(long, default_value = "300s", allow_hyphen_values = true, value_name = "DURATION")]
    pub dist_timeout: String,
}

/// DistributedDataParallel's Reducer, as PyTorch names its settings.
#[derive(Args, Debug, Clone)]
pub(crate) struct ReducerOpts {
    /// Size of the Reducer's gradient buckets, in MiB (DDP's bucket_cap_mb).
    #[arg(long, default_value_t = 25.0, value_name = "MB", value_parser = parse_above_zero, allow_hyphen_values = true)]
    pub bucket_cap_mb: f64,
    /// Gradient compression: fp16 (libtorch's builtin FP16 hook) or bf16,
    /// all-reducing gradients in half precision.
    #[arg(long, value_enum, default_value_t = CommHook::None)]
    pub comm_hook: CommHook,
    /// Do not broadcast buffers (BatchNorm statistics) from rank 0 before each forward.
    #[arg(long)]
    pub no_broadcast_buffers: bool,
}

option! {
    /// Cap each child process's data memory (RLIMIT_DATA, CPU runs only),
    /// e.g. 2G, to emulate a smaller device; libtorch itself takes ~0.6G.
    MemLimit { #[arg(long, allow_hyphen_values = true, value_name = "SIZE")] mem_limit: Option<String> }
}

option! {
    /// Known-good results to hold the rows against (check: required;
    /// diagnose: else the fleet's own median of each configuration, 3 rows
    /// or more).
    Baseline { #[arg(long, value_name = "B.csv")] baseline: Option<PathBuf> }
}

option! {
    /// How far below the baseline a figure may fall before it counts (when
    /// it is also significant, or its interval apart): `5%` or `0.05`.
    MaxDrop {
        // Hyphen values reach the parser, which names the option: `-5%` is
        // refused as a negative drop, not as an unknown argument `-5`.
        #[arg(long, default_value = "5%", value_parser = parse_fraction, allow_hyphen_values = true, value_name = "PCT")]
        max_drop: f64
    }
}

option! {
    /// Device counts per node, comma-separated (sweep: its cells' sizes,
    /// default 1, 2, 4, … up to all; predict: the world sizes it predicts).
    DeviceCounts { #[arg(long, value_delimiter = ',', value_name = "LIST")] device_counts: Vec<usize> }
}

impl DeviceOpts {
    /// For a command that measures one device at a time: `--cpu N` above 1
    /// is refused with what the command takes instead.
    pub(crate) fn one_cpu(&self, command: &str, instead: &str) -> anyhow::Result<()> {
        match self.cpu {
            Some(n) if n > 1 => Err(crate::error::usage(format!(
                "--cpu {n}: {command} measures the CPU as one device (all its cores); give --cpu{instead}"
            ))),
            _ => Ok(()),
        }
    }
}

impl DurationOpt {
    /// `--duration` as a time, for a command that has no `auto` rule.
    pub(crate) fn time(&self, command: &str) -> anyhow::Result<Option<std::time::Duration>> {
        match self.duration.as_deref() {
            None => Ok(None),
            Some("auto") => Err(crate::error::usage(format!(
                "--duration auto is run's rule (until throughput's interval is narrow enough); give {command} a \
                 time, e.g. --duration 30s"
            ))),
            Some(d) => super::parse::parse_duration("--duration", d).map(Some),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_count_is_one_or_more_or_auto() {
        assert_eq!(parse_threads("0").unwrap_err(), "--threads must be at least 1 (or auto)");
        assert_eq!(parse_threads("auto"), Ok(Threads::Auto));
        assert_eq!(parse_threads("3"), Ok(Threads::Count(3)));
    }
}
