//! `--save-init` / `--init-from`: a run's start, as a file.
//!
//! `--save-init FILE` writes the model's initial weights and buffers
//! (safetensors, readable without numpy or the safetensors package) with the
//! data seed in its metadata; `--init-from FILE` starts a run from them, so
//! that gpubench and PyTorch's own implementation (`--impl pytorch`), or two
//! machines, start identical. A run without `--init-from` starts from the
//! weights `model::build_model` makes for its `--seed`.
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use tch::{nn, Device, Kind, Tensor};

use crate::config::{ModelKind, RunConfig};
use crate::error::usage;

/// `format` in an init file's metadata.
pub(crate) const INIT_FORMAT: &str = "gpubench-init-v1";
/// ddp rank r's synthetic-data seed is the run's data seed plus this times r.
pub(crate) const RANK_SEED_STRIDE: u64 = 7919;

/// The data seed a run uses when no init file says otherwise.
pub(crate) fn default_data_seed(seed: u64) -> u64 {
    seed ^ 0x5eed
}

/// An init file's metadata: what the weights are for, and the data seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InitMeta {
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
    pub(crate) fn check_fits(&self, path: &Path, model: ModelKind, num_classes: i64) -> Result<()> {
        if self.model != model.name() || self.num_classes != num_classes {
            return Err(usage(format!(
                "--init-from {} holds {} weights for {} classes, but this run is {} with {} classes; \
                 use the same --model and --num-classes as the --save-init run",
                path.display(),
                self.model,
                self.num_classes,
                model.name(),
                num_classes
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
pub(crate) fn write_init(path: &Path, vs: &nn::VarStore, meta: &InitMeta) -> Result<()> {
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
pub(crate) fn read_init_meta(path: &Path) -> Result<InitMeta> {
    let mut f = BufReader::new(open_init(path)?);
    let (_, header) = read_header(path, &mut f)?;
    meta_of(path, &header)
}

/// Reads an init file: its named tensors (on the CPU) and metadata.
pub(crate) fn read_init(path: &Path) -> Result<(Vec<(String, Tensor)>, InitMeta)> {
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
pub(crate) fn load_into(vs: &nn::VarStore, tensors: &[(String, Tensor)], path: &Path) -> Result<()> {
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
pub(crate) fn save_init(cfg: &RunConfig, path: &Path, data_seed: u64) -> Result<InitMeta> {
    let (vs, _model) = crate::model::build_model(&cfg.workload, init_device(cfg));
    let meta = InitMeta {
        model: cfg.workload.model.name().into(),
        num_classes: cfg.workload.num_classes,
        seed: cfg.workload.seed,
        data_seed,
    };
    write_init(path, &vs, &meta)?;
    Ok(meta)
}

/// The device the initial weights are drawn on: the run's first device, as
/// a gpubench run there draws them (CUDA's generator differs from the
/// CPU's), unless gpubench's own libtorch cannot use it. That is the legacy
/// route (`--impl pytorch` on a GPU this libtorch sees no driver or kernels
/// for, a K80 say; G2): no gpubench run exists there whose weights the
/// reference must match, so the CPU draws them.
fn init_device(cfg: &RunConfig) -> Device {
    let d = &cfg.placement.devices;
    let usable = d.kind == crate::device::DeviceKind::Cuda
        && d.ordinals[0] < crate::device::cuda_device_count()
        && crate::device::check_cuda(&d.ordinals[..1]).is_ok();
    if d.kind == crate::device::DeviceKind::Cuda && !usable {
        Device::Cpu
    } else {
        d.device(0)
    }
}

/// Writes the initial weights a gpubench run with `cfg` starts from to
/// `path`, where `cfg.init.writer` says: in this process, or in a
/// short-lived `write-init` child (this binary around the same command
/// line; `crate::internal::Child::WriteInit`), so that this process keeps no
/// CUDA context or cached block on a GPU it is about to benchmark, or that
/// the PyTorch reference is about to (gpu-audit F6).
pub(crate) fn write_start(cfg: &RunConfig, path: &Path) -> Result<InitMeta> {
    if cfg.init.writer != crate::config::InitWriter::Child {
        return crate::error::guarded(|| save_init(cfg, path, default_data_seed(cfg.workload.seed)));
    }
    let exe = std::env::current_exe().context("locating the gpubench binary to write the init file")?;
    let mut cmd = std::process::Command::new(exe);
    let params = [path.as_os_str().to_os_string()];
    cmd.args(crate::internal::Child::WriteInit.args(&params, crate::internal::served_line()))
        .stdout(std::process::Stdio::null());
    let ended = crate::proc::spawn(&mut cmd, None, 5).context("starting the process that writes the init file")?.wait();
    if !ended.exit.success() {
        let last = ended.tail.last().map(|l| l.trim_start_matches("error: ").to_string()).unwrap_or_default();
        anyhow::bail!("writing the initial weights to {} {}: {last}", path.display(), ended.how());
    }
    read_init_meta(path)
}

/// How a gpubench run starts: from freshly seeded weights, or from the
/// `--init-from` file, read once per process. (Who writes `--save-init` is
/// the caller's choice: one process per job.)
#[derive(Default)]
pub(crate) struct Start {
    init: Option<LoadedInit>,
}

/// The `--init-from` file: its path, its named tensors and its metadata.
type LoadedInit = (PathBuf, Vec<(String, Tensor)>, InitMeta);

impl Start {
    /// Reads the run's `--init-from` file, if it has one.
    pub(crate) fn load(cfg: &RunConfig) -> Result<Start> {
        let mut start = Start::default();
        if let Some(path) = &cfg.init.from {
            let (tensors, meta) = read_init(path)?;
            meta.check_fits(path, cfg.workload.model, cfg.workload.num_classes)?;
            start.init = Some((path.clone(), tensors, meta));
        }
        Ok(start)
    }

    /// Loads the init file's weights into a freshly built model.
    pub(crate) fn apply(&self, vs: &nn::VarStore) -> Result<()> {
        match &self.init {
            Some((path, tensors, _)) => load_into(vs, tensors, path),
            None => Ok(()),
        }
    }

    /// The data seed: the init file's, else the one derived from `seed`.
    pub(crate) fn data_seed(&self, seed: u64) -> u64 {
        self.init.as_ref().map(|(_, _, m)| m.data_seed).unwrap_or_else(|| default_data_seed(seed))
    }
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
}
