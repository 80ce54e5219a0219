//! `--data PATH`: an ImageFolder tree (`PATH/train/<class>/*.JPEG`, or `PATH`
//! itself holding the class folders; labels are the sorted class names),
//! decoded and augmented by `--workers` threads per device into a bounded
//! prefetch queue.
//!
//! Each worker builds whole batches (worker w makes batches w, w+N, …) as
//! uint8 NHWC in one host buffer, pinned when the device is CUDA. The consumer
//! takes batch k from worker k mod N's queue, so the order never depends on
//! thread timing; every sample's crop and flip come from its own generator
//! keyed by (seed, epoch, position), so the same seed gives the same batches.
//! On the device the batch is copied non-blocking, laid out NCHW (or kept
//! NHWC under `--channels-last`) and normalized there from uint8 with the
//! ImageNet mean and std, as DALI does.
use anyhow::{anyhow, Context, Result};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use tch::{Device, Kind, Tensor};

use super::decode::decode_rgb;
use super::sampler::Shard;
use super::transform::{random_resized_crop, resize_crop, Rng, Scratch};
use super::{Batch, DataSource};
use crate::error::usage;

pub(crate) const MEAN: [f64; 3] = [0.485, 0.456, 0.406];
pub(crate) const STD: [f64; 3] = [0.229, 0.224, 0.225];
/// Extensions listed (case-insensitive); other files in class folders are ignored.
pub(crate) const EXTENSIONS: [&str; 3] = ["jpg", "jpeg", "png"];
/// How many unreadable files are named in warnings; the rest are only counted.
pub(crate) const NAMED_BAD: u64 = 3;
/// Batches each worker may have ready ahead of the consumer.
pub(crate) const PREFETCH_PER_WORKER: usize = 2;

const LAYOUT: &str = "give an ImageFolder tree, DIR/train/<class>/*.JPEG or DIR/<class>/*.JPEG, or `synthetic`";

/// The files of an ImageFolder tree.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// The folder that holds the class folders.
    pub root: PathBuf,
    pub classes: Vec<String>,
    pub files: Vec<PathBuf>,
    pub labels: Vec<u32>,
}

fn is_image(p: &Path) -> bool {
    p.extension().and_then(|e| e.to_str()).is_some_and(|e| EXTENSIONS.iter().any(|x| e.eq_ignore_ascii_case(x)))
}

/// The folder holding the class folders and the sorted class folders, or a
/// one-line usage error.
fn class_dirs(path: &str) -> Result<(PathBuf, Vec<(String, PathBuf)>)> {
    let p = Path::new(path);
    let meta = std::fs::metadata(p).map_err(|_| usage(format!("--data {path}: no such directory; {LAYOUT}")))?;
    if !meta.is_dir() {
        return Err(usage(format!("--data {path} is a file, not a directory; {LAYOUT}")));
    }
    let train = p.join("train");
    let root = if train.is_dir() { train } else { p.to_path_buf() };
    let mut dirs = vec![];
    let rd =
        std::fs::read_dir(&root).map_err(|e| usage(format!("--data {path}: cannot list {}: {e}", root.display())))?;
    for e in rd.flatten() {
        let ep = e.path();
        if ep.is_dir() {
            if let Some(name) = e.file_name().to_str() {
                if !name.starts_with('.') {
                    dirs.push((name.to_string(), ep));
                }
            }
        }
    }
    if dirs.is_empty() {
        return Err(usage(format!("--data {path}: no class folders in {}; {LAYOUT}", root.display())));
    }
    dirs.sort();
    Ok((root, dirs))
}

/// Cheap check for `config::validate`: class folders exist, at least one holds
/// an image, and the labels fit in `num_classes`.
pub(crate) fn check_layout(path: &str, num_classes: i64) -> Result<()> {
    let (root, dirs) = class_dirs(path)?;
    if dirs.len() as i64 > num_classes {
        return Err(usage(format!(
            "--data {path} has {} classes but --num-classes is {num_classes}; set --num-classes {}",
            dirs.len(),
            dirs.len()
        )));
    }
    let any = dirs
        .iter()
        .any(|(_, d)| std::fs::read_dir(d).map(|rd| rd.flatten().any(|e| is_image(&e.path()))).unwrap_or(false));
    if !any {
        return Err(usage(format!(
            "--data {path}: its {} class folders in {} hold no .jpg, .jpeg or .png files; {LAYOUT}",
            dirs.len(),
            root.display()
        )));
    }
    Ok(())
}

/// Lists the tree: classes sorted by name, files sorted within each class.
pub fn scan(path: &str) -> Result<Dataset> {
    let (root, dirs) = class_dirs(path)?;
    let mut ds = Dataset { root, classes: vec![], files: vec![], labels: vec![] };
    for (label, (name, dir)) in dirs.into_iter().enumerate() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .with_context(|| format!("listing {}", dir.display()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| is_image(p) && p.is_file())
            .collect();
        files.sort();
        ds.labels.extend(std::iter::repeat_n(label as u32, files.len()));
        ds.files.extend(files);
        ds.classes.push(name);
    }
    if ds.files.is_empty() {
        return Err(usage(format!("--data {path}: no .jpg, .jpeg or .png files in its class folders; {LAYOUT}")));
    }
    Ok(ds)
}

/// How a loader is set up.
#[derive(Debug, Clone)]
pub struct LoaderConfig {
    /// Images per batch (dp: the global batch; ddp: the per-rank batch).
    pub batch: usize,
    pub image_size: usize,
    pub workers: usize,
    /// The same on every rank: it orders the epochs' shuffles.
    pub seed: u64,
    pub rank: usize,
    pub world: usize,
    /// Pin the host buffers for this CUDA device.
    pub pin: Option<Device>,
    /// Warn about unreadable files on stderr.
    pub warn: bool,
}

/// One batch on the host: images uint8 (N, S, S, 3), labels, and which
/// dataset entries they came from.
pub struct HostBatch {
    pub images: Tensor,
    pub labels: Tensor,
    pub indices: Vec<u32>,
}

struct Shared {
    ds: Dataset,
    shard: Shard,
    cfg: LoaderConfig,
    bad: Vec<AtomicBool>,
    skipped: AtomicU64,
    stop: AtomicBool,
}

impl Shared {
    fn mark_bad(&self, idx: u32, err: &anyhow::Error) {
        if self.bad[idx as usize].swap(true, Ordering::Relaxed) {
            return;
        }
        let n = self.skipped.fetch_add(1, Ordering::Relaxed) + 1;
        if self.cfg.warn && n <= NAMED_BAD {
            eprintln!(
                "gpubench: warning: skipping {}: {}",
                self.ds.files[idx as usize].display(),
                crate::error::one_line(err)
            );
        } else if self.cfg.warn && n == NAMED_BAD + 1 {
            eprintln!("gpubench: warning: more unreadable files skipped; the row's data_skipped column counts them");
        }
    }
}

/// The batch stream of one rank (or of dp's master).
pub struct Loader {
    rxs: Vec<Receiver<Result<HostBatch>>>,
    handles: Vec<JoinHandle<()>>,
    shared: Arc<Shared>,
    next: u64,
}

impl Loader {
    pub fn new(ds: Dataset, cfg: LoaderConfig) -> Result<Self> {
        let shard = Shard { len: ds.files.len(), rank: cfg.rank, world: cfg.world, seed: cfg.seed };
        if shard.per_rank() == 0 {
            return Err(usage(format!(
                "--data {}: {} images cannot be shared among {} ranks",
                ds.root.display(),
                ds.files.len(),
                cfg.world
            )));
        }
        let workers = cfg.workers.max(1);
        let bad = (0..ds.files.len()).map(|_| AtomicBool::new(false)).collect();
        let shared = Arc::new(Shared { ds, shard, cfg, bad, skipped: AtomicU64::new(0), stop: AtomicBool::new(false) });
        let mut rxs = vec![];
        let mut handles = vec![];
        for w in 0..workers {
            let (tx, rx) = sync_channel(PREFETCH_PER_WORKER);
            let sh = shared.clone();
            let h = std::thread::Builder::new()
                .name(format!("gpubench-data-{w}"))
                .spawn(move || worker(sh, w as u64, workers as u64, tx))
                .context("starting a data worker")?;
            rxs.push(rx);
            handles.push(h);
        }
        Ok(Loader { rxs, handles, shared, next: 0 })
    }

    /// The next batch, in order.
    pub fn next_host(&mut self) -> Result<HostBatch> {
        let w = (self.next % self.rxs.len() as u64) as usize;
        self.next += 1;
        self.rxs[w].recv().map_err(|_| anyhow!("data worker {w} stopped"))?
    }

    /// Distinct unreadable files found so far.
    pub fn skipped(&self) -> u64 {
        self.shared.skipped.load(Ordering::Relaxed)
    }

    /// Dataset indices of the files found unreadable so far, ascending.
    pub(crate) fn bad_files(&self) -> Vec<u32> {
        let bad = &self.shared.bad;
        (0..bad.len() as u32).filter(|&i| bad[i as usize].load(Ordering::Relaxed)).collect()
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        // Dropping the receivers wakes any worker blocked on a full queue.
        self.rxs.clear();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

fn worker(sh: Arc<Shared>, first: u64, step: u64, tx: SyncSender<Result<HostBatch>>) {
    if let Some(Device::Cuda(o)) = sh.cfg.pin {
        // Pinned buffers are tied to the run's device, not to GPU 0.
        let _ = crate::ffi::cuda_set_device(o);
    }
    let mut st = WorkerState::default();
    let mut k = first;
    while !sh.stop.load(Ordering::Relaxed) {
        let b = crate::error::guarded(|| build_batch(&sh, k, &mut st));
        let failed = b.is_err();
        if tx.send(b).is_err() || failed {
            return;
        }
        k += step;
    }
}

#[derive(Default)]
struct WorkerState {
    epochs: HashMap<u64, Arc<Vec<u32>>>,
    file: Vec<u8>,
    rgb: Vec<u8>,
    scratch: Scratch,
}

impl WorkerState {
    fn epoch(&mut self, sh: &Shared, e: u64) -> Arc<Vec<u32>> {
        if let Some(v) = self.epochs.get(&e) {
            return v.clone();
        }
        self.epochs.retain(|&k, _| k + 1 >= e);
        let v = Arc::new(sh.shard.epoch_indices(e));
        self.epochs.insert(e, v.clone());
        v
    }
}

/// Reads, decodes, crops and resizes dataset entry `idx` into `out`.
fn load_one(sh: &Shared, idx: u32, rng: &mut Rng, out: &mut [u8], st: &mut WorkerState) -> Result<()> {
    let path = &sh.ds.files[idx as usize];
    st.file.clear();
    std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut st.file)).map_err(|e| anyhow!("{e}"))?;
    let dims = decode_rgb(&st.file, &mut st.rgb)?;
    let crop = random_resized_crop(dims.width, dims.height, rng);
    let flip = rng.uniform() < 0.5;
    resize_crop(&st.rgb, dims.width, crop, sh.cfg.image_size, flip, out, &mut st.scratch);
    Ok(())
}

/// Batch `k` of the endless stream: positions k·B … k·B+B−1 run over this
/// rank's epochs one after the other, so an epoch boundary may fall inside a
/// batch. An unreadable file is replaced by the next readable one of the epoch.
fn build_batch(sh: &Shared, k: u64, st: &mut WorkerState) -> Result<HostBatch> {
    let (b, s) = (sh.cfg.batch, sh.cfg.image_size);
    let per = sh.shard.per_rank() as u64;
    let images = Tensor::f_empty([b as i64, s as i64, s as i64, 3], (Kind::Uint8, Device::Cpu))?;
    let images = match sh.cfg.pin {
        Some(d) => pin(&images, d)?,
        None => images,
    };
    let n = b * s * s * 3;
    // SAFETY: a fresh contiguous uint8 tensor of n bytes that nothing else sees yet.
    let buf = unsafe { std::slice::from_raw_parts_mut(images.data_ptr() as *mut u8, n) };
    let mut labels = Vec::with_capacity(b);
    let mut indices = Vec::with_capacity(b);
    for (i, out) in buf.chunks_exact_mut(s * s * 3).enumerate() {
        let pos = k * b as u64 + i as u64;
        let (e, off) = (pos / per, pos % per);
        let order = st.epoch(sh, e);
        let mut done = false;
        for t in 0..per {
            let idx = order[((off + t) % per) as usize];
            if sh.bad[idx as usize].load(Ordering::Relaxed) {
                continue;
            }
            // The crop's generator depends on the try t alone, not on which
            // bad files another worker has already found (a timing matter).
            let mut rng = match t {
                0 => Rng::keyed(&[sh.cfg.seed, e, off, 0xC0FFEE]),
                _ => Rng::keyed(&[sh.cfg.seed, e, off, 0xC0FFEE, t]),
            };
            match load_one(sh, idx, &mut rng, out, st) {
                Ok(()) => {
                    labels.push(sh.ds.labels[idx as usize] as i64);
                    indices.push(idx);
                    done = true;
                    break;
                }
                Err(err) => sh.mark_bad(idx, &err),
            }
        }
        if !done {
            return Err(anyhow!(
                "--data {}: none of this rank's {per} images per epoch could be decoded",
                sh.ds.root.display()
            ));
        }
    }
    let labels = Tensor::f_from_slice(&labels)?;
    let labels = match sh.cfg.pin {
        Some(d) => pin(&labels, d)?,
        None => labels,
    };
    Ok(HostBatch { images, labels, indices })
}

/// A page-locked copy of `t` for copies to `d`, as PyTorch's DataLoader
/// makes with pin_memory=True. Running out of page-locked host memory is
/// not the GPU running out (G11): the caching host allocator says "out of
/// memory" either way, so the message is reworded and the row is `failed`
/// with the fix, not `oom`.
fn pin(t: &Tensor, d: Device) -> Result<Tensor> {
    t.f_pin_memory(d).map_err(|e| {
        let mb = t.numel() as f64 * t.kind().elt_size_in_bytes() as f64 / 1e6;
        anyhow!(
            "cannot page-lock a {mb:.0} MB host batch for {d:?} ({}); lower --workers or --batch-size",
            crate::error::without_oom_words(&e.to_string())
        )
    })
}

/// `--data PATH` as a `DataSource`: host batches copied to the device and
/// normalized there.
pub struct ImageFolder {
    loader: Loader,
    device: Device,
    channels_last: bool,
    scale: Tensor,
    bias: Tensor,
    name: String,
}

impl ImageFolder {
    /// `device` is where the strategy wants its input; pinned buffers and
    /// non-blocking copies when it is CUDA.
    pub fn new(ds: Dataset, mut cfg: LoaderConfig, device: Device, channels_last: bool, path: &str) -> Result<Self> {
        cfg.pin = device.is_cuda().then_some(device);
        let loader = Loader::new(ds, cfg)?;
        // x/255 normalized: (x/255 − mean)/std = x·scale + bias.
        let scale: Vec<f32> = STD.iter().map(|s| (1.0 / (255.0 * s)) as f32).collect();
        let bias: Vec<f32> = MEAN.iter().zip(STD).map(|(m, s)| (-m / s) as f32).collect();
        let scale = Tensor::f_from_slice(&scale)?.f_view([1, 3, 1, 1])?.f_to_device(device)?;
        let bias = Tensor::f_from_slice(&bias)?.f_view([1, 3, 1, 1])?.f_to_device(device)?;
        Ok(ImageFolder { loader, device, channels_last, scale, bias, name: format!("imagefolder:{path}") })
    }
}

impl DataSource for ImageFolder {
    fn next_batch(&mut self) -> Result<Batch> {
        let hb = self.loader.next_host()?;
        let nb = self.device.is_cuda();
        let x = hb.images.f_to_device_(self.device, Kind::Uint8, nb, false)?;
        let y = hb.labels.f_to_device_(self.device, Kind::Int64, nb, false)?;
        // NHWC in memory; viewed as NCHW that is the channels-last layout.
        let mut x = x.f_permute([0, 3, 1, 2])?;
        if !self.channels_last {
            x = x.f_contiguous()?;
        }
        let images = x.f_to_kind(Kind::Float)?.f_mul(&self.scale)?.f_add_(&self.bias)?;
        Ok(Batch { images, labels: y })
    }

    fn name(&self) -> String {
        self.name.clone()
    }

    fn bad_files(&self) -> Option<Vec<u32>> {
        Some(self.loader.bad_files())
    }
}
