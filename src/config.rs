//! The configurations of `run`, `infer`, `allreduce` and `predict`: plain
//! types, complete and already validated.
//!
//! They are made of parts, one per option group, each converted and checked
//! once beside its flags (`cli::opts`, `cli::run`): `Workload` (the model and
//! its arithmetic: run, infer, predict), `Output` (where rows go and how the
//! command speaks: all four), and run's `Placement`, `Schedule`, `Optim`,
//! `Host`, `Instruments` and `DdpConfig`. `RunConfig` is built once per
//! process by the command line's one conversion (`cli::run`) and read by
//! everything below it: the session, the strategies, the ddp launcher and
//! workers, the PyTorch reference and each sweep cell. Nothing here parses
//! flags, reads files or touches a device.
use serde::Serialize;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::device::{DeviceKind, Devices};

/// How a command prints what it prints (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned plain text for the terminal.
    Table,
    /// GitHub-flavoured markdown, e.g. for a PR comment.
    Markdown,
    /// Raw values, one line per row; notes go to stderr.
    Csv,
    /// Raw values as objects keyed by column, with title and notes.
    Json,
}

impl Format {
    pub(crate) const ALL: [Format; 4] = [Format::Table, Format::Markdown, Format::Csv, Format::Json];

    /// As on the command line (`--format`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Markdown => "markdown",
            Format::Csv => "csv",
            Format::Json => "json",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StrategyKind {
    /// One device.
    Single,
    /// DataParallel: one process, replicas refreshed from the master every step.
    Dp,
    /// DistributedDataParallel: one process per device, c10d Reducer all-reduce.
    Ddp,
}

impl StrategyKind {
    pub(crate) const ALL: [Self; 3] = [Self::Single, Self::Dp, Self::Ddp];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Single => "single",
            Self::Dp => "dp",
            Self::Ddp => "ddp",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    Resnet18,
    Resnet34,
    Resnet50,
    Resnet101,
    Resnet152,
    /// Small BatchNorm-free CNN for tests and smoke runs.
    Tinycnn,
}

impl ModelKind {
    pub(crate) const ALL: [Self; 6] =
        [Self::Resnet18, Self::Resnet34, Self::Resnet50, Self::Resnet101, Self::Resnet152, Self::Tinycnn];

    pub fn name(self) -> &'static str {
        match self {
            Self::Resnet18 => "resnet18",
            Self::Resnet34 => "resnet34",
            Self::Resnet50 => "resnet50",
            Self::Resnet101 => "resnet101",
            Self::Resnet152 => "resnet152",
            Self::Tinycnn => "tinycnn",
        }
    }

    /// Smallest square input the model accepts: ResNets downsample by 32.
    pub(crate) fn min_image_size(self) -> i64 {
        match self {
            Self::Tinycnn => 8,
            _ => 32,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Full fp32: TF32 off for matmuls and convolutions.
    #[default]
    Fp32,
    /// fp32 storage, TF32 tensor-core math for cuBLAS and cuDNN (CUDA).
    Tf32,
    /// Autocast to float16 with dynamic loss scaling.
    Fp16,
    /// Autocast to bfloat16 (no loss scaling needed).
    Bf16,
}

impl Precision {
    pub(crate) const ALL: [Self; 4] = [Self::Fp32, Self::Tf32, Self::Fp16, Self::Bf16];

    pub fn name(self) -> &'static str {
        match self {
            Self::Fp32 => "fp32",
            Self::Tf32 => "tf32",
            Self::Fp16 => "fp16",
            Self::Bf16 => "bf16",
        }
    }
}

/// Which implementation runs the training loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Impl {
    /// gpubench itself (Rust over libtorch).
    #[default]
    Gpubench,
    /// PyTorch's own single / DataParallel / DistributedDataParallel, in Python.
    Pytorch,
}

impl Impl {
    pub(crate) const ALL: [Self; 2] = [Self::Gpubench, Self::Pytorch];

    /// As in the `impl` column and on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Impl::Gpubench => "gpubench",
            Impl::Pytorch => "pytorch",
        }
    }
}

/// How long a phase lasts: a number of steps, a wall-clock time, or until
/// its rule says so (`--warmup auto`: steady; `--duration auto`: precise
/// enough, see `metrics::interval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Length {
    Steps(u64),
    Time(#[serde(with = "humantime_serde_secs")] Duration),
    Auto,
}

mod humantime_serde_secs {
    pub(crate) fn serialize<S: serde::Serializer>(d: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

/// `--save-init` / `--init-from`: where a run's start is written or read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InitSpec {
    /// Write the model's initial weights and the data seed here.
    pub save: Option<PathBuf>,
    /// Start from the weights and data seed in this file (its metadata was
    /// checked against the model when the configuration was built).
    pub from: Option<PathBuf>,
    /// Whether this process writes gpubench's initial weights to a file, and
    /// how; decided once, with the process's role (`cli::run::job`).
    pub writer: InitWriter,
}

/// Who writes a run's initial weights: one process per job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum InitWriter {
    /// Not this process: nothing to write, or another process of the job does.
    #[default]
    Nobody,
    /// This process, on the CPU.
    Here,
    /// A short-lived `write-init` child (on CUDA, so that this process keeps
    /// no CUDA context on a GPU it is about to benchmark).
    Child,
}

/// `run --profile DIR`: PyTorch's profiler over the first timed steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileSpec {
    pub dir: PathBuf,
    /// Timed steps traced (the first ones after warm-up).
    pub steps: u64,
    /// This process's place, for the trace's name and `distributedInfo`.
    pub rank: usize,
    pub world: usize,
    /// The process group's backend; empty outside ddp.
    pub backend: String,
}

impl ProfileSpec {
    /// One trace per process: `DIR/rank<R>.pt.trace.json`.
    pub(crate) fn trace_path(&self) -> PathBuf {
        self.dir.join(format!("rank{}.pt.trace.json", self.rank))
    }
}

/// DistributedDataParallel settings, checked and resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct DdpConfig {
    /// Resolved: `--backend`, else NCCL on CUDA and Gloo on the CPU.
    pub backend: Backend,
    pub bucket_cap_mb: f64,
    pub gradient_as_bucket_view: bool,
    pub find_unused_parameters: bool,
    pub broadcast_buffers: bool,
    /// Nodes in the job, and this node's rank among them (node_rank < nnodes).
    pub nnodes: usize,
    pub node_rank: usize,
    pub master_addr: Option<String>,
    pub master_port: Option<u16>,
    /// Rendezvous and collective timeout.
    pub timeout: Duration,
    /// Gradient compression before the all-reduce.
    pub comm_hook: CommHook,
}

impl Default for DdpConfig {
    fn default() -> Self {
        DdpConfig {
            backend: Backend::Gloo,
            bucket_cap_mb: 25.0,
            gradient_as_bucket_view: false,
            find_unused_parameters: false,
            broadcast_buffers: true,
            nnodes: 1,
            node_rank: 0,
            master_addr: None,
            master_port: None,
            timeout: Duration::from_secs(300),
            comm_hook: CommHook::None,
        }
    }
}

/// Where a measuring command's results go and how it speaks: the part of
/// run, infer, predict and allreduce configurations, converted once
/// (`cli::opts::OutputOpts::output`).
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// The rows' `label`.
    pub label: String,
    /// Rows are appended to this results file.
    pub out: Option<PathBuf>,
    /// What stdout gets: the human summary (table), the rows (csv) or the
    /// JSON envelope.
    pub format: Format,
    pub quiet: bool,
}

impl Output {
    /// Human output (progress, the summary, notes) is shown: the one rule.
    pub(crate) fn talks(&self) -> bool {
        !self.quiet && self.format == Format::Table
    }
}

/// The model a command builds and how its arithmetic runs: the part of
/// every configuration that builds one (run, infer, predict), converted and
/// checked once (`cli::opts::ModelOpts::workload`).
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub model: ModelKind,
    pub num_classes: i64,
    /// The model's square input, in pixels.
    pub image_size: i64,
    pub precision: Precision,
    pub channels_last: bool,
    pub cudnn_benchmark: bool,
    /// Seed of the initial weights and of the synthetic or shuffled data.
    pub seed: u64,
    /// `run --deterministic`: deterministic kernels (false for serving and predict).
    pub deterministic: bool,
}

/// How long a run's phases last (`--steps`, `--warmup`, `--duration` and
/// their rules).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    pub timed: Length,
    pub warmup: Length,
    /// `--duration auto`: stop when throughput's interval is within ±this (relative).
    pub ci_target: f64,
    /// `--duration auto`: stop here at the latest.
    pub max_duration: Duration,
}

/// The optimizer and its hyper-parameters, resolved (the defaults follow
/// the global batch).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Optim {
    /// SGD with momentum, or AdamW (`momentum` then unused).
    pub optimizer: OptimizerKind,
    /// The optimizer step's implementation, resolved (never `Auto`).
    pub optimizer_impl: OptimizerImpl,
    pub lr: f64,
    pub momentum: f64,
    pub weight_decay: f64,
}

/// `--threads N|auto`, as given: `auto` stays unresolved in the
/// configuration (the cores other processes leave free are measured where
/// the run starts, `commands::run`), so a sweep that plans its cells in one
/// process does not measure a core count per cell that each cell measures
/// again on its own node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    Count(usize),
    Auto,
}

/// As given, for the row's `variant`: `auto` stays `auto`, so that the
/// configuration of a run is the same whatever its neighbours left free.
impl fmt::Display for Threads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Threads::Count(n) => write!(f, "{n}"),
            Threads::Auto => f.write_str("auto"),
        }
    }
}

/// The host side of a run: its threads, its input and how often it is
/// sampled.
#[derive(Debug, Clone, PartialEq)]
pub struct Host {
    /// Intra-op threads of the process (a node's, for ddp); None: the
    /// default rule. `Auto` until the run starts (`count`).
    pub threads: Option<Threads>,
    /// `synthetic`, or a folder of images.
    pub data: String,
    /// Decode threads per device for `--data PATH` (resolved: the cores
    /// shared among this node's devices when not given).
    pub workers: usize,
    /// How often device telemetry and the process are sampled.
    pub sample_interval: Duration,
}

impl Host {
    /// The thread count, where one is known: given, or `auto` resolved at
    /// the run's start; None for the default rule (and for `auto` before).
    pub fn count(&self) -> Option<usize> {
        match self.threads {
            Some(Threads::Count(n)) => Some(n),
            _ => None,
        }
    }
}

/// What watches a run besides its clock: the phase breakdown, the telemetry
/// timeline, PyTorch's profiler and NVTX ranges.
#[derive(Debug, Clone, PartialEq)]
pub struct Instruments {
    pub breakdown: bool,
    pub telemetry: Option<PathBuf>,
    /// `--profile DIR`: trace the first timed steps with PyTorch's profiler.
    pub profile: Option<ProfileSpec>,
    /// `--nvtx`: gpubench's ranges also as NVTX ranges, for Nsight Systems.
    pub nvtx: bool,
}

/// The devices a run's process drives, its node's, and the job's size.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// The devices this process drives: every local device for single, dp,
    /// the ddp launcher and the PyTorch reference; its own device for a ddp rank.
    pub devices: Devices,
    /// This node's devices (the same as `devices` except in a ddp rank).
    pub node_devices: Devices,
    /// Devices in the whole job: `devices.len()`, or every rank of every node
    /// for ddp. The global batch and the default learning rate follow it.
    pub world: usize,
}

#[derive(Debug, Clone)]
pub struct RunConfig {
    pub strategy: StrategyKind,
    pub implementation: Impl,
    pub placement: Placement,
    pub workload: Workload,
    pub batch_per_device: i64,
    /// Micro-batches per optimizer step (`--grad-accum`, 1 without).
    pub grad_accum: u32,
    /// Activation checkpointing per ResNet stage (`--checkpoint`).
    pub checkpoint: bool,
    pub schedule: Schedule,
    pub optim: Optim,
    pub host: Host,
    pub output: Output,
    pub instruments: Instruments,
    pub init: InitSpec,
    /// Meaningful when `strategy` is ddp.
    pub ddp: DdpConfig,
    /// `--cuda-graphs on`: the step captured once, then replayed
    /// (`strategy::graphed`).
    pub cuda_graphs: bool,
    /// The options that change what is measured and have no column of their
    /// own, where they differ from run's defaults (the row's `variant`).
    pub variant: String,
}

impl RunConfig {
    /// Images per optimizer step over the job: per device × devices ×
    /// micro-batches.
    pub fn global_batch(&self) -> i64 {
        self.micro_global_batch() * self.grad_accum as i64
    }

    /// How the global batch is made, for the banner: "64 per device × 4 =
    /// 256 global", with "× 2 micro-batches" under accumulation.
    pub(crate) fn batch_phrase(&self) -> String {
        let k = match self.grad_accum {
            1 => String::new(),
            k => format!(" × {k} micro-batches"),
        };
        format!(
            "batch {} per device × {}{k} = {} global",
            self.batch_per_device,
            self.placement.world,
            self.global_batch()
        )
    }

    /// Images in one micro-batch over the job: per device × devices.
    pub fn micro_global_batch(&self) -> i64 {
        self.batch_per_device * self.placement.world as i64
    }

    /// Whether this run reads real files (`--data PATH`).
    pub(crate) fn reads_files(&self) -> bool {
        self.host.data != "synthetic"
    }

    /// As written in the `devices` column: this node's devices, and the node
    /// count of a multi-node ddp job.
    pub(crate) fn devices_column(&self) -> String {
        let d = self.placement.node_devices.describe();
        if self.strategy == StrategyKind::Ddp && self.ddp.nnodes > 1 {
            format!("{d} ×{} nodes", self.ddp.nnodes)
        } else {
            d
        }
    }
}

/// How `gpubench infer` uses its devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ServeStrategy {
    /// One process, one model replica per device, each fed by its own worker
    /// thread from one shared queue.
    Replicas,
    /// One process per device; each camera (or request) goes to one of them.
    Processes,
    /// DataParallel forward: each batch split over the devices, outputs gathered.
    Dp,
}

impl ServeStrategy {
    pub(crate) const ALL: [Self; 3] = [Self::Replicas, Self::Processes, Self::Dp];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Replicas => "replicas",
            Self::Processes => "processes",
            Self::Dp => "dp",
        }
    }
}

/// How requests arrive (MLPerf LoadGen's names where they match).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// Every frame is ready at the start: throughput.
    Offline,
    /// Poisson arrivals at `rate` requests per second.
    Server { rate: f64 },
    /// `streams` cameras, each sending `fps` frames per second with a random phase.
    Streams { streams: u32, fps: f64 },
    /// One request at a time, the next as soon as the previous is answered: latency.
    SingleStream,
}

impl Scenario {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Scenario::Offline => "offline",
            Scenario::Server { .. } => "server",
            Scenario::Streams { .. } => "streams",
            Scenario::SingleStream => "single-stream",
        }
    }

    /// Requests per second the generator offers (None: as fast as served).
    pub(crate) fn offered_rate(&self) -> Option<f64> {
        match *self {
            Scenario::Server { rate } => Some(rate),
            Scenario::Streams { streams, fps } => Some(streams as f64 * fps),
            _ => None,
        }
    }
}

/// Where frames are resized and normalised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Preprocess {
    /// The uint8 frames are copied and preprocessed on the device.
    #[default]
    Device,
    /// Preprocessed on the CPU by the serving worker, then copied.
    Cpu,
}

impl Preprocess {
    pub(crate) const ALL: [Self; 2] = [Self::Device, Self::Cpu];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Preprocess::Device => "device",
            Preprocess::Cpu => "cpu",
        }
    }
}

/// `--find-max-streams` / `--find-max-rate`: the largest load within the bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CapacitySearch {
    /// p99 latency must stay within this.
    pub bound: Duration,
    /// At most this share of requests may be dropped.
    pub max_drop_rate: f64,
    /// Each probe runs at least this long and serves at least `min_requests`.
    pub min_duration: Duration,
    pub min_requests: u64,
}

/// `gpubench infer`'s configuration, complete and validated (`cli::infer`).
#[derive(Debug, Clone)]
pub struct InferConfig {
    pub strategy: ServeStrategy,
    pub implementation: Impl,
    pub devices: Devices,
    pub workload: Workload,
    /// Camera frames: width × height, uint8 RGB.
    pub frame_w: i64,
    pub frame_h: i64,
    pub preprocess: Preprocess,
    /// `synthetic`, or a folder of JPEG files served as frames.
    pub data: String,
    pub scenario: Scenario,
    pub max_batch: i64,
    /// How long a batch waits for more requests after its first.
    pub max_wait: Duration,
    /// A request older than this when a worker takes it is dropped.
    pub drop_older_than: Option<Duration>,
    pub latency_bound: Option<Duration>,
    pub search: Option<CapacitySearch>,
    /// The load's length (a search's probes run at least `search.min_duration`).
    pub duration: Duration,
    /// Untimed batches per worker before the load starts, at the largest batch and at batch 1.
    pub warmup_batches: u64,
    /// `--cuda-graphs on`: each batch-size bucket's forward captured once,
    /// then replayed (`serve::graphs`).
    pub cuda_graphs: bool,
    /// `--overlap on` (the default): on a GPU, the next batch's input is
    /// staged on a stream of its own while the current batch computes.
    pub overlap: bool,
    /// Intra-op threads per worker on the CPU (the cores shared among them when not given).
    pub threads: Option<usize>,
    pub output: Output,
    pub sample_interval: Duration,
}

impl InferConfig {
    /// Intra-op threads each worker uses, so that workers do not
    /// oversubscribe the cores: the cores (or --threads) shared evenly, on
    /// CUDA as on the CPU, by gpubench's workers and PyTorch's alike. On
    /// CUDA they matter too: `--preprocess cpu` decodes and resizes on them
    /// (G3: gpubench's workers had every core and PyTorch's one each).
    pub(crate) fn threads_per_worker(&self) -> usize {
        crate::device::threads_per_worker(self.devices.kind, self.threads, self.devices.len())
    }
}

/// An all-reduce's element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CommDtype {
    Fp32,
    Fp16,
    Bf16,
}

impl CommDtype {
    pub(crate) const ALL: [Self; 3] = [Self::Fp32, Self::Fp16, Self::Bf16];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Fp32 => "fp32",
            Self::Fp16 => "fp16",
            Self::Bf16 => "bf16",
        }
    }

    /// As nccl-tests names it (`type` in its output).
    pub(crate) fn nccl_name(self) -> &'static str {
        match self {
            Self::Fp32 => "float",
            Self::Fp16 => "half",
            Self::Bf16 => "bfloat16",
        }
    }

    pub(crate) fn bytes(self) -> u64 {
        match self {
            Self::Fp32 => 4,
            Self::Fp16 | Self::Bf16 => 2,
        }
    }
}

/// `gpubench allreduce`'s configuration (`cli::allreduce`).
#[derive(Debug, Clone)]
pub struct AllreduceConfig {
    /// This node's devices (the launcher), or this rank's one device.
    pub devices: Devices,
    /// This node's devices, for the row.
    pub node_devices: Devices,
    pub backend: Backend,
    pub min_bytes: u64,
    pub max_bytes: u64,
    /// Each size is the previous one times this.
    pub factor: u64,
    pub iters: u64,
    pub warmup: u64,
    pub dtype: CommDtype,
    pub nnodes: usize,
    pub node_rank: usize,
    pub master_addr: Option<String>,
    pub master_port: Option<u16>,
    pub timeout: Duration,
    /// table (nccl-tests' text), csv (the rows) or json (nccl-tests' JSON).
    pub output: Output,
}

impl AllreduceConfig {
    /// The sizes measured, in bytes: min, min × factor, … up to max, each a
    /// whole number of elements (at least one).
    pub(crate) fn sizes(&self) -> Vec<u64> {
        let e = self.dtype.bytes();
        let mut v = vec![];
        let mut b = self.min_bytes;
        while b <= self.max_bytes {
            v.push((b / e).max(1) * e);
            b = b.saturating_mul(self.factor);
        }
        v.dedup();
        v
    }
}

/// Where `predict` gets the all-reduce time of a message size.
#[derive(Debug, Clone, PartialEq)]
pub enum CurveSource {
    /// In-place rows of a results file written by `gpubench allreduce`.
    File(PathBuf),
    /// Published or assumed figures: bus bandwidth (GB/s) and latency (s).
    Busbw { busbw_gbs: f64, latency: Duration },
}

/// `gpubench predict`'s configuration (`cli::predict`).
#[derive(Debug, Clone)]
pub struct PredictConfig {
    /// The one device profiled.
    pub device: Devices,
    /// World sizes to predict (devices per node × nodes).
    pub devices: Vec<usize>,
    pub nodes: usize,
    pub workload: Workload,
    pub batch_per_device: i64,
    pub bucket_cap_mb: f64,
    pub comm_hook: CommHook,
    /// DDP's buffer broadcast before each forward (run's default).
    pub broadcast_buffers: bool,
    /// Predict for another device, from its one-device figure.
    pub scale_to: Option<ScaleTo>,
    pub curve: CurveSource,
    pub steps: u64,
    /// Timed steps go on past `steps` until this much was timed.
    pub min_time: std::time::Duration,
    pub warmup: u64,
    pub output: Output,
}

/// Another device's one-device throughput at its own batch and image size
/// (e.g. a published figure): the profile here gives only the shape of the
/// step, scaled to that speed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaleTo {
    pub throughput: f64,
    pub batch: i64,
    pub image_size: i64,
}

impl PredictConfig {
    /// Images per device and image size of the step being predicted.
    pub(crate) fn target(&self) -> (i64, i64) {
        self.scale_to.map_or((self.batch_per_device, self.workload.image_size), |s| (s.batch, s.image_size))
    }

    /// The backend the prediction is for: NCCL for GPUs (profiled on one,
    /// or scaled to another's figure), Gloo for CPU ranks.
    pub(crate) fn target_backend(&self) -> Backend {
        if self.device.kind == crate::device::DeviceKind::Cuda || self.scale_to.is_some() {
            Backend::Nccl
        } else {
            Backend::Gloo
        }
    }

    /// The profiled step as a run configuration: one rank's ddp step on the
    /// one device, with run's defaults where predict has no option, and
    /// `threads` intra-op threads (a CPU rank's share of the cores).
    pub(crate) fn run_config(&self, threads: Option<usize>) -> RunConfig {
        let one = Placement { devices: self.device.clone(), node_devices: self.device.clone(), world: 1 };
        RunConfig {
            // The step being profiled is one rank's ddp step, on the one device.
            strategy: StrategyKind::Ddp,
            implementation: Impl::Gpubench,
            placement: one,
            workload: self.workload.clone(),
            batch_per_device: self.batch_per_device,
            grad_accum: 1,
            checkpoint: false,
            schedule: Schedule {
                timed: Length::Steps(self.steps),
                warmup: Length::Steps(self.warmup),
                // run's defaults for --duration auto, which a profile never
                // uses: its length is its steps and --min-time.
                ci_target: 0.02,
                max_duration: Duration::from_secs(120),
            },
            // run's defaults for SGD at this batch on one device.
            optim: Optim {
                optimizer: OptimizerKind::Sgd,
                optimizer_impl: OptimizerImpl::Auto.resolve(),
                lr: OptimizerKind::Sgd.lr_at_256() * self.batch_per_device as f64 / 256.0,
                momentum: SGD_MOMENTUM,
                weight_decay: OptimizerKind::Sgd.default_weight_decay(),
            },
            host: Host {
                threads: threads.map(Threads::Count),
                data: "synthetic".into(),
                workers: 1,
                sample_interval: Duration::from_millis(100),
            },
            // The rows are predict's own, written by `commands::predict`.
            output: Output { out: None, ..self.output.clone() },
            // The phases are what the prediction is made of.
            instruments: Instruments { breakdown: true, telemetry: None, profile: None, nvtx: false },
            init: InitSpec::default(),
            ddp: DdpConfig {
                backend: self.target_backend(),
                bucket_cap_mb: self.bucket_cap_mb,
                comm_hook: self.comm_hook,
                broadcast_buffers: self.broadcast_buffers,
                ..DdpConfig::default()
            },
            cuda_graphs: false,
            variant: String::new(),
        }
    }
}

/// The collective backend of a ddp run's process group (`dist::ProcessGroup`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// CPU (and CUDA, where libtorch's gloo has CUDA support) over TCP.
    Gloo,
    /// CUDA tensors over NCCL; needs a GPU and a CUDA build of gpubench.
    Nccl,
}

impl Backend {
    pub(crate) const ALL: [Self; 2] = [Backend::Gloo, Backend::Nccl];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Backend::Gloo => "gloo",
            Backend::Nccl => "nccl",
        }
    }

    /// What DDP uses unless told otherwise: NCCL on CUDA, Gloo on the CPU.
    pub(crate) fn default_for(kind: DeviceKind) -> Backend {
        match kind {
            DeviceKind::Cuda => Backend::Nccl,
            DeviceKind::Cpu => Backend::Gloo,
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "gloo" => Ok(Backend::Gloo),
            "nccl" => Ok(Backend::Nccl),
            _ => anyhow::bail!("unknown backend {s:?} (expected gloo or nccl)"),
        }
    }
}

/// How the SGD step updates the parameters (`--optimizer-impl`): each does
/// the same arithmetic (torch.optim.SGD's), in fewer kernel launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerImpl {
    /// The fastest this device has: fused (libtorch 2.11 has fused SGD
    /// kernels for CUDA and the CPU).
    #[default]
    Auto,
    /// One kernel for every parameter's whole update (`_fused_sgd_`), as
    /// torch.optim.SGD(fused=True).
    Fused,
    /// A handful of multi-tensor kernels (`_foreach_*`), as PyTorch's default
    /// on CUDA, torch.optim.SGD(foreach=True).
    Foreach,
    /// Three or four kernels per parameter: libtorch's C++ torch::optim::SGD
    /// (tch's nn::Sgd), as torch.optim.SGD(foreach=False).
    Loop,
}

impl OptimizerImpl {
    pub(crate) const ALL: [Self; 4] = [Self::Auto, Self::Fused, Self::Foreach, Self::Loop];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Fused => "fused",
            Self::Foreach => "foreach",
            Self::Loop => "loop",
        }
    }

    /// What `auto` becomes; any other choice as given.
    pub(crate) fn resolve(self) -> Self {
        match self {
            Self::Auto => Self::Fused,
            other => other,
        }
    }
}

/// The optimizer: SGD with momentum (the ResNet ImageNet recipe, the
/// default), or AdamW with its own defaults so that it trains rather than
/// diverges at SGD's learning rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    #[default]
    Sgd,
    Adamw,
}

/// SGD's momentum unless `--momentum` says otherwise (run's default, and
/// predict's profile's).
pub(crate) const SGD_MOMENTUM: f64 = 0.9;

/// AdamW's betas and epsilon (torch.optim.AdamW's defaults).
pub(crate) const ADAMW_BETAS: (f64, f64) = (0.9, 0.999);
pub(crate) const ADAMW_EPS: f64 = 1e-8;

impl OptimizerKind {
    pub(crate) const ALL: [Self; 2] = [Self::Sgd, Self::Adamw];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Sgd => "sgd",
            Self::Adamw => "adamw",
        }
    }

    /// The learning rate at a global batch of 256 (scaled linearly with it).
    pub(crate) fn lr_at_256(self) -> f64 {
        match self {
            Self::Sgd => 0.1,
            Self::Adamw => 0.001,
        }
    }

    /// The weight decay when none is given.
    pub(crate) fn default_weight_decay(self) -> f64 {
        match self {
            Self::Sgd => 1e-4,
            Self::Adamw => 0.05,
        }
    }
}

/// DDP's communication hooks that gpubench registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CommHook {
    /// The Reducer's own all-reduce of fp32 gradients.
    #[default]
    None,
    /// libtorch's builtin FP16_COMPRESS: gradients all-reduced in float16.
    Fp16,
    /// The same in bfloat16 (PyTorch's bf16_compress_hook's contract).
    Bf16,
}

impl CommHook {
    pub(crate) const ALL: [Self; 3] = [Self::None, Self::Fp16, Self::Bf16];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Fp16 => "fp16",
            Self::Bf16 => "bf16",
        }
    }
}
