//! Fidelity: PyTorch's own implementation of the same run, side by side.
//!
//! `gpubench run --impl pytorch …` runs `scripts/reference/pytorch_bench.py`
//! (embedded in the binary, written to a temporary directory at run time)
//! with the torch venv that `scripts/setup` made: single, torch.nn.DataParallel
//! (CUDA only) or DistributedDataParallel under `torch.distributed.run`. The
//! script prints JSON (step times, losses, outcome); the row is built here with
//! the runner's `base_row`/`fill_row`, so the schema lives in one place.
//!
//! Same start: `--save-init FILE` writes the model's initial weights and
//! buffers (safetensors, readable without numpy or the safetensors package)
//! with the data seed in its metadata; `--init-from FILE` starts a run from
//! them. A PyTorch run without `--init-from` starts from the weights gpubench
//! builds for the same `--seed`, so the two implementations always start
//! identical; the synthetic batches are identical because tch and torch share
//! libtorch's generators and kernels (`torch.manual_seed(s)` then `randn`,
//! `randint` in the same order reproduce `Synthetic::new` exactly).
use anyhow::{anyhow, Context, Result};
use clap::ValueEnum;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use tch::{nn, Device, Kind, Tensor};

use crate::cli::RunArgs;
use crate::config::{self, RunConfig, StrategyKind};
use crate::device::{self, DeviceKind, Devices};
use crate::error::usage;
use crate::report::results_csv;
use crate::runner::{self, Measurement, Status};

/// The reference script, embedded so that an installed binary needs no source tree.
pub const SCRIPT: &str = include_str!("../scripts/reference/pytorch_bench.py");
/// The torch version gpubench is built against; the reference should use the same.
pub const TORCH_VERSION: &str = "2.11.0";
/// `format` in an init file's metadata.
pub const INIT_FORMAT: &str = "gpubench-init-v1";
/// ddp rank r's data seed is the run's data seed plus this times r.
pub const RANK_SEED_STRIDE: u64 = 7919;

/// Which implementation runs the training loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Impl {
    /// gpubench itself (Rust over libtorch).
    #[default]
    Gpubench,
    /// PyTorch's own single / DataParallel / DistributedDataParallel, in Python.
    Pytorch,
}

impl Impl {
    /// As in the `impl` column and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Impl::Gpubench => "gpubench",
            Impl::Pytorch => "pytorch",
        }
    }
}

/// The data seed a run uses when no init file says otherwise.
pub fn default_data_seed(seed: u64) -> u64 {
    seed ^ 0x5eed
}

// ------------------------------------------------------------ init files

/// An init file's metadata: what the weights are for, and the data seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitMeta {
    pub model: String,
    pub num_classes: i64,
    pub seed: u64,
    pub data_seed: u64,
}

impl InitMeta {
    fn to_map(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("format".to_string(), INIT_FORMAT.to_string()),
            ("model".to_string(), self.model.clone()),
            ("num_classes".to_string(), self.num_classes.to_string()),
            ("seed".to_string(), self.seed.to_string()),
            ("data_seed".to_string(), self.data_seed.to_string()),
            ("rank_seed_stride".to_string(), RANK_SEED_STRIDE.to_string()),
            ("gpubench_version".to_string(), env!("CARGO_PKG_VERSION").to_string()),
        ])
    }

    fn from_map(path: &Path, m: &BTreeMap<String, String>) -> Result<Self> {
        let bad = || usage(format!("{} is not a gpubench init file (write one with --save-init)", path.display()));
        if m.get("format").map(String::as_str) != Some(INIT_FORMAT) {
            return Err(bad());
        }
        let get = |k: &str| m.get(k).ok_or_else(bad);
        Ok(InitMeta {
            model: get("model")?.clone(),
            num_classes: get("num_classes")?.parse().map_err(|_| bad())?,
            seed: get("seed")?.parse().map_err(|_| bad())?,
            data_seed: get("data_seed")?.parse().map_err(|_| bad())?,
        })
    }

    /// A usage error unless the file was written for this model and class count.
    pub fn check_fits(&self, path: &Path, a: &RunArgs) -> Result<()> {
        if self.model != a.model.name() || self.num_classes != a.num_classes {
            return Err(usage(format!(
                "--init-from {} holds {} weights for {} classes, but this run is {} with {} classes; \
                 use the same --model and --num-classes as the --save-init run",
                path.display(),
                self.model,
                self.num_classes,
                a.model.name(),
                a.num_classes
            )));
        }
        Ok(())
    }
}

#[derive(Serialize, Deserialize)]
struct TensorEntry {
    dtype: String,
    shape: Vec<i64>,
    data_offsets: [usize; 2],
}

/// Writes every variable of `vs` (parameters and BatchNorm buffers), as f32
/// on the CPU, to a safetensors file with `meta` in its `__metadata__`.
pub fn write_init(path: &Path, vs: &nn::VarStore, meta: &InitMeta) -> Result<()> {
    let mut named: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), serde_json::to_value(meta.to_map())?);
    let mut data: Vec<u8> = vec![];
    for (name, t) in &named {
        let t = t.f_detach()?.f_to_device(Device::Cpu)?.f_to_kind(Kind::Float)?.f_contiguous()?;
        let values: Vec<f32> = Vec::<f32>::try_from(&t.f_flatten(0, -1)?)?;
        let start = data.len();
        for v in values {
            data.extend_from_slice(&v.to_le_bytes());
        }
        let e = TensorEntry { dtype: "F32".into(), shape: t.size(), data_offsets: [start, data.len()] };
        header.insert(name.clone(), serde_json::to_value(e)?);
    }
    let mut h = serde_json::to_vec(&serde_json::Value::Object(header))?;
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let write = || -> std::io::Result<()> {
        let tmp = path.with_extension("tmp-gpubench");
        let mut f = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        f.write_all(&(h.len() as u64).to_le_bytes())?;
        f.write_all(&h)?;
        f.write_all(&data)?;
        f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| usage(format!("--save-init {}: cannot write ({e}); choose another file", path.display())))
}

fn read_header(path: &Path, f: &mut impl Read) -> Result<(u64, serde_json::Map<String, serde_json::Value>)> {
    let bad = |why: &str| usage(format!("--init-from {}: {why}; write the file with --save-init", path.display()));
    let mut n = [0u8; 8];
    f.read_exact(&mut n).map_err(|_| bad("not a safetensors file"))?;
    let n = u64::from_le_bytes(n);
    if n > 100 << 20 {
        return Err(bad("not a safetensors file"));
    }
    let mut h = vec![0u8; n as usize];
    f.read_exact(&mut h).map_err(|_| bad("truncated header"))?;
    let v: serde_json::Value = serde_json::from_slice(&h).map_err(|_| bad("unreadable header"))?;
    match v {
        serde_json::Value::Object(m) => Ok((n, m)),
        _ => Err(bad("unreadable header")),
    }
}

fn open_init(path: &Path) -> Result<std::fs::File> {
    std::fs::File::open(path).map_err(|e| usage(format!("--init-from {}: cannot read ({e})", path.display())))
}

fn meta_of(path: &Path, header: &serde_json::Map<String, serde_json::Value>) -> Result<InitMeta> {
    let map: BTreeMap<String, String> =
        header.get("__metadata__").and_then(|m| serde_json::from_value(m.clone()).ok()).unwrap_or_default();
    InitMeta::from_map(path, &map)
}

/// Reads only an init file's metadata.
pub fn read_init_meta(path: &Path) -> Result<InitMeta> {
    let mut f = BufReader::new(open_init(path)?);
    let (_, header) = read_header(path, &mut f)?;
    meta_of(path, &header)
}

/// Reads an init file: its named tensors (on the CPU) and metadata.
pub fn read_init(path: &Path) -> Result<(Vec<(String, Tensor)>, InitMeta)> {
    let mut f = BufReader::new(open_init(path)?);
    let (_, header) = read_header(path, &mut f)?;
    let meta = meta_of(path, &header)?;
    let mut data = vec![];
    f.read_to_end(&mut data).with_context(|| format!("reading {}", path.display()))?;
    let mut out = vec![];
    for (name, v) in header {
        if name == "__metadata__" {
            continue;
        }
        let e: TensorEntry = serde_json::from_value(v)
            .map_err(|_| usage(format!("--init-from {}: bad entry for {name}", path.display())))?;
        let [lo, hi] = e.data_offsets;
        let numel: i64 = e.shape.iter().product();
        if e.dtype != "F32" || hi > data.len() || lo > hi || (hi - lo) as i64 != 4 * numel {
            return Err(usage(format!("--init-from {}: entry {name} is not f32 data of its shape", path.display())));
        }
        let values: Vec<f32> =
            data[lo..hi].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        out.push((name, Tensor::from_slice(&values).f_reshape(&e.shape)?));
    }
    Ok((out, meta))
}

/// Copies `tensors` into the variables of `vs` of the same names; every
/// variable must be there with its shape, and nothing else.
pub fn load_into(vs: &nn::VarStore, tensors: &[(String, Tensor)], path: &Path) -> Result<()> {
    let vars = vs.variables();
    let misfit = |what: String| usage(format!("--init-from {} does not fit this model: {what}", path.display()));
    if tensors.len() != vars.len() {
        return Err(misfit(format!("{} tensors in the file, {} in the model", tensors.len(), vars.len())));
    }
    tch::no_grad(|| -> Result<()> {
        for (name, t) in tensors {
            let mut v = vars.get(name).ok_or_else(|| misfit(format!("unknown tensor {name}")))?.shallow_clone();
            if v.size() != t.size() {
                return Err(misfit(format!("{name} is {:?} in the file, {:?} in the model", t.size(), v.size())));
            }
            v.f_copy_(&t.f_to_device(v.device())?)?;
        }
        Ok(())
    })
}

/// Builds the model exactly as a gpubench run with `cfg` would (same seed,
/// same device) and writes its initial state with `data_seed`.
pub fn save_init(cfg: &RunConfig, path: &Path, data_seed: u64) -> Result<InitMeta> {
    let (vs, _model) = crate::strategy::build_model(cfg, cfg.devices.device(0));
    let meta = InitMeta { model: cfg.model.name().into(), num_classes: cfg.num_classes, seed: cfg.seed, data_seed };
    write_init(path, &vs, &meta)?;
    Ok(meta)
}

/// How a gpubench run starts: `--save-init` is honoured here (once per job:
/// not by ddp workers other than rank 0), `--init-from` is loaded for `apply`.
#[derive(Default)]
pub struct Start {
    init: Option<LoadedInit>,
}

/// The `--init-from` file: its path, its named tensors and its metadata.
type LoadedInit = (PathBuf, Vec<(String, Tensor)>, InitMeta);

/// True in a ddp worker process that must not write the init file: any of
/// our launcher's workers (the launcher writes it), or a torchrun / Slurm
/// rank other than 0.
fn is_secondary_worker() -> bool {
    if std::env::var_os(crate::launcher::LAUNCHED_ENV).is_some() {
        return true;
    }
    ["RANK", "SLURM_PROCID"].iter().any(|k| std::env::var(k).map(|v| v.trim() != "0").unwrap_or(false))
}

impl Start {
    pub fn from_args(a: &RunArgs) -> Result<Start> {
        if a.save_init.is_none() && a.init_from.is_none() {
            return Ok(Start::default());
        }
        if let Some(path) = &a.save_init {
            if !is_secondary_worker() {
                let cfg = init_config(a)?;
                crate::runner::guarded(|| save_init(&cfg, path, default_data_seed(cfg.seed)))?;
            }
        }
        Start::from_init_file(a)
    }

    /// Only reads `--init-from` (a ddp rank: the file was written, if at
    /// all, before the ranks started).
    pub fn from_init_file(a: &RunArgs) -> Result<Start> {
        let mut start = Start::default();
        if let Some(path) = &a.init_from {
            let (tensors, meta) = read_init(path)?;
            meta.check_fits(path, a)?;
            start.init = Some((path.clone(), tensors, meta));
        }
        Ok(start)
    }

    /// Loads the init file's weights into a freshly built model.
    pub fn apply(&self, vs: &nn::VarStore) -> Result<()> {
        match &self.init {
            Some((path, tensors, _)) => load_into(vs, tensors, path),
            None => Ok(()),
        }
    }

    /// The data seed: the init file's, else the one derived from `seed`.
    pub fn data_seed(&self, seed: u64) -> u64 {
        self.init.as_ref().map(|(_, _, m)| m.data_seed).unwrap_or_else(|| default_data_seed(seed))
    }
}

/// The run's configuration as the launcher sees it (all local devices).
fn init_config(a: &RunArgs) -> Result<RunConfig> {
    let devices = device::resolve(a.gpus.as_deref(), a.cpu, true)?;
    config::validate(a, devices)
}

// ------------------------------------------------------------ the Python side

/// A Python interpreter that imports torch, and torch's version.
#[derive(Debug, Clone)]
pub struct Python {
    pub path: PathBuf,
    pub torch_version: String,
}

fn torch_version_of(py: &Path) -> Option<String> {
    let out = Command::new(py)
        .args(["-W", "ignore", "-c", "import torch; print(torch.__version__)"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !v.is_empty()).then_some(v)
}

/// Where to look, in order: $GPUBENCH_PYTHON, $GPUBENCH_PYTHON_BIN (set-up's
/// env.sh), set-up's venv in the cache, python3.
pub fn python_candidates() -> Vec<PathBuf> {
    let mut c: Vec<PathBuf> = vec![];
    for k in ["GPUBENCH_PYTHON", "GPUBENCH_PYTHON_BIN"] {
        if let Some(v) = std::env::var_os(k).filter(|v| !v.is_empty()) {
            c.push(PathBuf::from(v));
        }
    }
    let home = std::env::var_os("GPUBENCH_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("gpubench")));
    if let Some(dir) = home.and_then(|h| std::fs::read_dir(h).ok()) {
        let mut venvs: Vec<PathBuf> = dir
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(&format!("torch-{TORCH_VERSION}-py")))
            .map(|e| e.path().join("bin").join("python"))
            .filter(|p| p.exists())
            .collect();
        venvs.sort();
        venvs.reverse();
        c.extend(venvs);
    }
    c.push(PathBuf::from("python3"));
    c
}

/// The first candidate that imports torch.
pub fn find_python() -> Result<Python> {
    let cands = python_candidates();
    for p in &cands {
        if let Some(v) = torch_version_of(p) {
            return Ok(Python { path: p.clone(), torch_version: v });
        }
    }
    let tried: Vec<String> = cands.iter().map(|p| p.display().to_string()).collect();
    Err(anyhow!(
        "--impl pytorch needs a Python with torch {TORCH_VERSION}, and none of {} imports torch: run scripts/setup, \
         or set GPUBENCH_PYTHON to such a python",
        tried.join(", ")
    ))
}

/// A private temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<Self> {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        let p = std::env::temp_dir().join(format!("gpubench-pytorch-{}-{nanos:x}", std::process::id()));
        std::fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
        Ok(TempDir(p))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What the script reports (rank 0 for ddp).
#[derive(Debug, Deserialize)]
pub struct ScriptSummary {
    pub torch_version: String,
    pub python_version: String,
    pub device_name: String,
    pub threads: u32,
    #[serde(default)]
    pub backend: String,
    pub step_secs: Vec<f64>,
    /// null for a non-finite loss (JSON has no NaN).
    pub losses: Vec<Option<f64>>,
    pub warmup_steps: u64,
    pub loss_first: Option<f64>,
    pub status: String,
    #[serde(default)]
    pub error: String,
    /// fp16: steps GradScaler skipped (None when it cannot be told).
    #[serde(default)]
    pub skipped_steps: Option<u64>,
}

fn status_of(s: &str) -> Status {
    match s {
        "ok" => Status::Ok,
        "diverged" => Status::Diverged,
        "oom" => Status::Oom,
        _ => Status::Failed,
    }
}

fn secs(d: std::time::Duration) -> String {
    format!("{}", d.as_secs_f64())
}

/// The script's arguments for this run (everything already validated).
fn script_args(a: &RunArgs, cfg: &RunConfig, init: &Path, json_out: &Path) -> Vec<String> {
    let mut v: Vec<String> = vec![
        "--strategy".into(),
        cfg.strategy.name().into(),
        "--device".into(),
        if cfg.devices.kind == DeviceKind::Cuda { "cuda" } else { "cpu" }.into(),
        "--model".into(),
        cfg.model.name().into(),
        "--num-classes".into(),
        cfg.num_classes.to_string(),
        "--image-size".into(),
        cfg.image_size.to_string(),
        "--batch-size".into(),
        cfg.batch_per_device.to_string(),
        "--lr".into(),
        cfg.lr.to_string(),
        "--momentum".into(),
        cfg.momentum.to_string(),
        "--weight-decay".into(),
        cfg.weight_decay.to_string(),
        "--seed".into(),
        cfg.seed.to_string(),
        "--init".into(),
        init.display().to_string(),
        "--json-out".into(),
        json_out.display().to_string(),
    ];
    match cfg.timed {
        config::Length::Steps(n) => v.extend(["--steps".into(), n.to_string()]),
        config::Length::Time(d) => v.extend(["--duration".into(), secs(d)]),
    }
    match cfg.warmup {
        config::Length::Steps(n) => v.extend(["--warmup".into(), n.to_string()]),
        config::Length::Time(d) => v.extend(["--warmup-time".into(), secs(d)]),
    }
    if let Some(t) = cfg.threads {
        v.extend(["--threads".into(), t.to_string()]);
    }
    v.extend(["--precision".into(), a.precision.name().into()]);
    for (on, flag) in [
        (a.channels_last, "--channels-last"),
        (a.cudnn_benchmark, "--cudnn-benchmark"),
        (a.deterministic, "--deterministic"),
    ] {
        if on {
            v.push(flag.into());
        }
    }
    if cfg.strategy == StrategyKind::Dp && cfg.devices.kind == DeviceKind::Cuda {
        let ids: Vec<String> = cfg.devices.ordinals.iter().map(|o| o.to_string()).collect();
        v.extend(["--gpus".into(), ids.join(",")]);
    }
    if cfg.strategy == StrategyKind::Ddp {
        let d = &a.ddp;
        v.extend(["--bucket-cap-mb".into(), d.bucket_cap_mb.to_string()]);
        if let Some(b) = d.backend {
            v.extend(["--backend".into(), b.name().into()]);
        }
        if d.gradient_as_bucket_view {
            v.push("--gradient-as-bucket-view".into());
        }
        if d.find_unused_parameters {
            v.push("--find-unused-parameters".into());
        }
        if d.no_broadcast_buffers {
            v.push("--no-broadcast-buffers".into());
        }
        if let Ok(t) = config::parse_duration("--dist-timeout", &d.dist_timeout) {
            v.extend(["--dist-timeout".into(), secs(t)]);
        }
    }
    v
}

/// How the child ended, for the error message: "status N" or "signal N".
struct Exit {
    code: i32,
    how: String,
}

/// Runs the child, forwarding its stderr (unless quiet) and keeping its last
/// non-empty lines for an error message.
fn run_child(mut cmd: Command, quiet: bool) -> Result<(Exit, Vec<String>)> {
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn()?;
    let err = child.stderr.take().expect("piped stderr");
    let mut last: Vec<String> = vec![];
    for line in BufReader::new(err).lines().map_while(Result::ok) {
        if !quiet {
            eprintln!("[pytorch] {line}");
        }
        if !line.trim().is_empty() {
            last.push(line);
            if last.len() > 40 {
                last.remove(0);
            }
        }
    }
    let st = child.wait()?;
    use std::os::unix::process::ExitStatusExt;
    let exit = match (st.code(), st.signal()) {
        (Some(c), _) => Exit { code: c, how: format!("status {c}") },
        (None, Some(s)) => {
            Exit { code: 1, how: format!("signal {s}{}", if s == 9 { " (SIGKILL: out of memory?)" } else { "" }) }
        }
        (None, None) => Exit { code: 1, how: "an unknown status".into() },
    };
    Ok((exit, last))
}

/// The most telling line of a failed child's stderr: the first exception
/// line of a Python traceback (torchrun's own summary and rank prefixes left
/// out) or our script's `error:` line, else the last line.
fn failure_line(lines: &[String]) -> String {
    let strip = |l: &str| -> String {
        let t = l.trim();
        match t.strip_prefix("[rank") {
            Some(rest) => rest.split_once("]:").map(|(_, m)| m.trim().to_string()).unwrap_or_else(|| t.to_string()),
            None => t.to_string(),
        }
    };
    let is_err = |t: &String| {
        let head = t.split(':').next().unwrap_or("");
        let exception = !head.contains(' ') && (head.ends_with("Error") || head.ends_with("Exception"));
        (t.starts_with("error:") || exception) && !t.contains("ChildFailedError") && t.len() > head.len() + 2
    };
    let cleaned: Vec<String> = lines.iter().map(|l| strip(l)).collect();
    cleaned.iter().find(|t| is_err(t)).or_else(|| cleaned.last()).cloned().unwrap_or_default()
}

/// `gpubench run --impl pytorch`.
pub fn run(a: RunArgs) -> Result<i32> {
    let devices = device::resolve(a.gpus.as_deref(), a.cpu, a.quiet || a.json)?;
    if a.strategy == StrategyKind::Dp && devices.kind == DeviceKind::Cpu {
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
    let ddp = a.strategy == StrategyKind::Ddp;
    if ddp && (a.ddp.nnodes == 0 || a.ddp.node_rank >= a.ddp.nnodes) {
        return Err(usage(format!("--node-rank {} must be below --nnodes {}", a.ddp.node_rank, a.ddp.nnodes)));
    }
    if ddp && a.ddp.nnodes > 1 && (a.ddp.master_addr.is_none() || a.ddp.master_port.is_none()) {
        return Err(usage("a multi-node run needs --master-addr HOST and --master-port PORT, the same on every node"));
    }
    let local = devices.clone();
    let world = if ddp { local.len() * a.ddp.nnodes } else { local.len() };
    let global_devices = match (ddp && a.ddp.nnodes > 1, local.kind) {
        (false, _) => local.clone(),
        (true, DeviceKind::Cpu) => Devices::cpu(world),
        (true, DeviceKind::Cuda) => Devices::cuda((0..world).collect()),
    };
    let cfg = config::validate(&a, global_devices)?;
    if ddp {
        let b = crate::strategy::ddp::backend_for(a.ddp.backend, &local);
        if b == crate::config::BackendKind::Nccl && local.kind == DeviceKind::Cpu {
            return Err(usage("--backend nccl needs CUDA devices; use --backend gloo on the CPU"));
        }
    }
    let writes_row = !ddp || a.ddp.node_rank == 0;
    if let (Some(out), true) = (&cfg.out, writes_row) {
        results_csv::check_writable(out)?;
    }
    let from_file = match &a.init_from {
        Some(p) => {
            let meta = read_init_meta(p)?;
            meta.check_fits(p, &a)?;
            Some((p.clone(), meta))
        }
        None => None,
    };
    let py = find_python()?;
    let tmp = TempDir::new()?;
    let script = tmp.0.join("pytorch_bench.py");
    std::fs::write(&script, SCRIPT).with_context(|| format!("writing {}", script.display()))?;
    let json_out = tmp.0.join("summary.json");

    // The start: the given init file, or gpubench's own weights for --seed.
    let (init_path, meta) = match from_file {
        Some(x) => x,
        None => {
            let p = a.save_init.clone().unwrap_or_else(|| tmp.0.join("init.safetensors"));
            let meta = runner::guarded(|| save_init(&cfg, &p, default_data_seed(cfg.seed)))?;
            (p, meta)
        }
    };
    if a.init_from.is_some() {
        if let Some(p) = &a.save_init {
            std::fs::copy(&init_path, p)
                .map_err(|e| usage(format!("--save-init {}: cannot write ({e})", p.display())))?;
        }
    }

    let quiet = a.quiet || a.json;
    if !quiet {
        let base = py.torch_version.split('+').next().unwrap_or("");
        if base != TORCH_VERSION {
            eprintln!(
                "gpubench: warning: {} has torch {}, gpubench is built on {TORCH_VERSION}; kernels may differ",
                py.path.display(),
                py.torch_version
            );
        }
        eprintln!(
            "gpubench: PyTorch reference ({}, torch {}): {} on {}: batch {} per device × {world} = {} global",
            py.path.display(),
            py.torch_version,
            cfg.strategy.name(),
            local.describe(),
            cfg.batch_per_device,
            cfg.global_batch()
        );
    }
    let args = script_args(&a, &cfg, &init_path, &json_out);
    let mut cmd = Command::new(&py.path);
    if ddp {
        let addr = a.ddp.master_addr.clone().unwrap_or_else(|| "127.0.0.1".into());
        let port = match a.ddp.master_port {
            Some(p) => p,
            None => crate::launcher::free_port()?,
        };
        cmd.args(["-W", "ignore", "-m", "torch.distributed.run"])
            .arg(format!("--nnodes={}", a.ddp.nnodes))
            .arg(format!("--node-rank={}", a.ddp.node_rank))
            .arg(format!("--nproc-per-node={}", local.len()))
            .arg(format!("--master-addr={addr}"))
            .arg(format!("--master-port={port}"))
            .arg(&script)
            .args(&args);
        match local.kind {
            DeviceKind::Cpu => {
                let total = cfg.threads.unwrap_or_else(device::cpu_cores);
                // torch.distributed.run would otherwise set 1 (and say so); the
                // script sets the same split itself.
                cmd.env("OMP_NUM_THREADS", (total / local.len()).max(1).to_string());
            }
            DeviceKind::Cuda => {
                if a.gpus.is_some() {
                    let ids: Vec<String> = local.ordinals.iter().map(|o| o.to_string()).collect();
                    cmd.env("CUDA_VISIBLE_DEVICES", ids.join(","));
                }
            }
        }
    } else {
        cmd.arg(&script).args(&args);
    }
    // Our ddp variables must not leak into the reference's processes.
    for k in ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", crate::launcher::LAUNCHED_ENV] {
        cmd.env_remove(k);
    }
    let (exit, last) = run_child(cmd, a.quiet).with_context(|| format!("starting {}", py.path.display()))?;
    if !writes_row {
        return Ok(exit.code);
    }

    let backend = if ddp { crate::strategy::ddp::backend_for(a.ddp.backend, &local).name() } else { "" };
    let mut row = runner::base_row(&cfg, cfg.strategy, backend);
    row.implementation = "pytorch".into();
    row.libtorch_version = py.torch_version.split('+').next().unwrap_or("").to_string();
    let summary: Result<ScriptSummary, String> = match std::fs::read(&json_out) {
        Ok(b) => serde_json::from_slice(&b).map_err(|e| format!("unreadable summary ({e})")),
        Err(_) => Err(failure_line(&last)),
    };
    let (m, note) = match summary {
        Ok(s) => {
            row.threads = Some(s.threads);
            row.skipped_steps = s.skipped_steps;
            if !s.device_name.is_empty() {
                row.device_name = s.device_name.clone();
            }
            if !s.backend.is_empty() {
                row.backend = s.backend.clone();
            }
            let m = Measurement {
                step_secs: s.step_secs,
                losses: s.losses.into_iter().map(|l| l.unwrap_or(f64::NAN)).collect(),
                warmup_steps: s.warmup_steps,
                loss_first: s.loss_first,
                status: Some(status_of(&s.status)),
                error: s.error,
                ..Default::default()
            };
            (m, format!("PyTorch {} (Python {})", s.torch_version, s.python_version))
        }
        Err(line) => {
            let msg = format!("PyTorch reference exited with {}: {line}", exit.how);
            let st = if runner::is_oom(&line) { Status::Oom } else { Status::Failed };
            (
                Measurement { status: Some(st), error: msg, ..Default::default() },
                format!("PyTorch {}", py.torch_version),
            )
        }
    };
    let what = match cfg.strategy {
        StrategyKind::Single => "single device".to_string(),
        StrategyKind::Dp => "torch.nn.DataParallel".to_string(),
        StrategyKind::Ddp => {
            format!("DistributedDataParallel via torch.distributed.run, bucket_cap_mb {}", a.ddp.bucket_cap_mb)
        }
    };
    let start = match &a.init_from {
        Some(p) => format!("init from {} (data seed {})", p.display(), meta.data_seed),
        None => format!("init: gpubench's weights for seed {}", meta.seed),
    };
    row.note = format!("{note}; {what}; {start}");
    let fig = runner::figures(&m.step_secs, cfg.global_batch(), world);
    runner::fill_row(&mut row, &m, fig.as_ref());
    runner::report(&cfg, &row, &m, fig.as_ref(), &[], &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_files_round_trip() {
        let dir = std::env::temp_dir().join(format!("gpubench-init-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("i.safetensors");
        let vs = nn::VarStore::new(Device::Cpu);
        let _m = crate::model::build(&vs.root(), crate::config::ModelKind::Tinycnn, 10);
        let meta = InitMeta { model: "tinycnn".into(), num_classes: 10, seed: 3, data_seed: u64::MAX - 1 };
        write_init(&path, &vs, &meta).unwrap();
        assert_eq!(read_init_meta(&path).unwrap(), meta);
        let (tensors, _) = read_init(&path).unwrap();
        let other = nn::VarStore::new(Device::Cpu);
        let _m2 = crate::model::build(&other.root(), crate::config::ModelKind::Tinycnn, 10);
        load_into(&other, &tensors, &path).unwrap();
        for (k, v) in vs.variables() {
            assert!(v.equal(&other.variables()[&k]), "{k}");
        }
        let small = nn::VarStore::new(Device::Cpu);
        let _m3 = crate::model::build(&small.root(), crate::config::ModelKind::Tinycnn, 5);
        let e = load_into(&small, &tensors, &path).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 2);
        std::fs::write(&path, b"junk").unwrap();
        assert_eq!(crate::error::exit_code(&read_init_meta(&path).unwrap_err()), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn failure_line_prefers_the_error() {
        let l: Vec<String> =
            ["Traceback", "  File x", "[rank1]: RuntimeError: boom", "[W] noise", "x.ChildFailedError: "]
                .map(String::from)
                .into();
        assert_eq!(failure_line(&l), "RuntimeError: boom");
        assert_eq!(failure_line(&["a".to_string(), "b".to_string()]), "b");
    }
}
