//! Background sampling of per-device telemetry (NVML) and of the process
//! (CPU time, RSS). Sources sit behind a trait so that aggregation, imbalance
//! and the CSV outputs can be tested with a fake source of known values.
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// One reading of one device. Fields a source cannot read are None.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct DeviceSample {
    /// Seconds since the sampler started.
    pub t: f64,
    /// Wall-clock time of the reading, RFC 3339 with milliseconds.
    pub timestamp: String,
    /// "cuda:N" (CUDA ordinal, as the run names devices).
    pub device: String,
    pub gpu_util_pct: Option<f64>,
    pub mem_util_pct: Option<f64>,
    pub mem_used_mb: Option<f64>,
    pub mem_total_mb: Option<f64>,
    pub power_w: Option<f64>,
    pub sm_clock_mhz: Option<f64>,
    pub temperature_c: Option<f64>,
    /// Why the clocks are held down ("thermal", "power", "hw", "app clocks",
    /// joined by "+"; empty when they are not); None when not read.
    pub throttle: Option<String>,
    /// GPU memory held by compute processes that are not this run's, MiB.
    pub other_procs_mb: Option<f64>,
    /// The sampling process itself (CPU runs): CPU time ÷ wall time since
    /// the previous sample, in % of one core, and resident memory.
    pub process_cpu_pct: Option<f64>,
    pub process_rss_mb: Option<f64>,
    /// The device's energy counter, joules since some fixed point: NVML's
    /// total energy (Volta and newer) on a GPU, RAPL's packages on a CPU
    /// that exposes them. Only its differences mean anything, so it stays
    /// out of the telemetry file.
    #[serde(skip)]
    pub energy_j: Option<f64>,
}

/// The CPU packages' energy from RAPL (`/sys/class/powercap/intel-rapl:N`,
/// packages only, not their sub-domains), joules; None where the host does
/// not expose it (most VMs) or it cannot be read (it is root-only on recent
/// kernels).
pub(crate) fn rapl_joules() -> Option<f64> {
    let dir = std::fs::read_dir("/sys/class/powercap").ok()?;
    let mut total = None;
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        // "intel-rapl:0" is a package; "intel-rapl:0:1" a domain inside it.
        if name.starts_with("intel-rapl:") && name.matches(':').count() == 1 {
            let uj: f64 = std::fs::read_to_string(e.path().join("energy_uj")).ok()?.trim().parse().ok()?;
            total = Some(total.unwrap_or(0.0) + uj / 1e6);
        }
    }
    total
}

/// Something that can read every device of the run at once.
pub(crate) trait DeviceSource: Send {
    fn sample(&mut self) -> Vec<DeviceSample>;
    /// The energy counters alone (samples with only `device` and
    /// `energy_j`): cheap enough to read at the timed window's bounds.
    fn energy(&mut self) -> Vec<DeviceSample> {
        vec![]
    }
}

/// Normalises a PCI bus id ("00000000:3B:00.0", "0000:3b:00.0") to
/// "0000:3b:00.0": NVML pads the domain to 8 digits, CUDA to 4.
pub(crate) fn normalize_pci(id: &str) -> String {
    let id = id.trim().to_ascii_lowercase();
    match id.split_once(':') {
        Some((domain, rest)) => {
            let d = u32::from_str_radix(domain, 16).unwrap_or(0);
            format!("{d:04x}:{rest}")
        }
        None => id,
    }
}

/// For each CUDA device (ordinal, PCI bus id), the NVML index with the same
/// bus id. CUDA orders devices fastest first and CUDA_VISIBLE_DEVICES
/// renumbers them, while NVML counts in PCI order, so indices cannot be
/// assumed equal.
pub(crate) fn map_cuda_to_nvml(cuda: &[(usize, String)], nvml: &[(u32, String)]) -> Vec<(usize, Option<u32>)> {
    cuda.iter()
        .map(|(ord, pci)| {
            let want = normalize_pci(pci);
            (*ord, nvml.iter().find(|(_, p)| normalize_pci(p) == want).map(|(i, _)| *i))
        })
        .collect()
}

#[cfg(feature = "torch")]
pub(crate) use super::nvml::NvmlSource;

/// Samples this process (CPU runs have no device telemetry to read).
pub(crate) struct ProcessSource {
    last: Option<(Instant, f64)>,
}

impl ProcessSource {
    pub(crate) fn new() -> Self {
        ProcessSource { last: None }
    }
}

impl Default for ProcessSource {
    fn default() -> Self {
        Self::new()
    }
}

impl DeviceSource for ProcessSource {
    fn sample(&mut self) -> Vec<DeviceSample> {
        let now = Instant::now();
        let cpu = process_cpu_seconds();
        let pct = match (self.last, cpu) {
            (Some((t, c0)), Some(c1)) if now > t => Some((c1 - c0) / (now - t).as_secs_f64() * 100.0),
            _ => None,
        };
        if let Some(c) = cpu {
            self.last = Some((now, c));
        }
        let rss = std::fs::read_to_string("/proc/self/status").ok().and_then(|s| {
            let l = s.lines().find(|l| l.starts_with("VmRSS:"))?.to_string();
            l.split_whitespace().nth(1)?.parse::<f64>().ok().map(|kb| kb / 1024.0)
        });
        vec![DeviceSample {
            device: "cpu".into(),
            process_cpu_pct: pct,
            process_rss_mb: rss,
            energy_j: rapl_joules(),
            ..Default::default()
        }]
    }

    fn energy(&mut self) -> Vec<DeviceSample> {
        match rapl_joules() {
            Some(j) => vec![DeviceSample { device: "cpu".into(), energy_j: Some(j), ..Default::default() }],
            None => vec![],
        }
    }
}

pub(crate) const MB: f64 = 1024.0 * 1024.0;

type Shared<T> = Arc<Mutex<T>>;

/// Samples a source every `interval` on a background thread until stopped.
pub(crate) struct Sampler {
    stop: Arc<AtomicBool>,
    samples: Shared<Vec<DeviceSample>>,
    source: Shared<Box<dyn DeviceSource>>,
    handle: Option<JoinHandle<()>>,
    started: Instant,
}

/// Reads the energy counters when the timed window opens and closes (H3 of
/// the third GPU audit): the sampler's readings are `interval` apart (100 ms
/// by default), so a window of one second measured between its first and
/// last readings inside could miss a fifth of it. The counter's own update
/// period (tens of ms on NVIDIA parts) still bounds the precision.
#[derive(Clone)]
pub struct EnergyMarks {
    samples: Shared<Vec<DeviceSample>>,
    source: Shared<Box<dyn DeviceSource>>,
    started: Instant,
}

impl EnergyMarks {
    /// Reads every counter now and files the readings at `at` (the window's
    /// bound, taken just before; the device is synchronized, so nothing it
    /// does between the two is timed work).
    pub fn mark(&self, at: Instant) {
        let mut batch = self.source.lock().expect("sampler source lock").energy();
        let t = at.saturating_duration_since(self.started).as_secs_f64();
        let ts = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
        for s in &mut batch {
            s.t = t;
            s.timestamp = ts.clone();
        }
        self.samples.lock().expect("sampler lock").extend(batch);
    }
}

impl Sampler {
    pub(crate) fn start(source: Box<dyn DeviceSource>, interval: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(vec![]));
        let source = Arc::new(Mutex::new(source));
        let started = Instant::now();
        let (st, sa, so) = (Arc::clone(&stop), Arc::clone(&samples), Arc::clone(&source));
        let handle = std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                let t = started.elapsed().as_secs_f64();
                let ts = humantime::format_rfc3339_millis(SystemTime::now()).to_string();
                let mut batch = so.lock().expect("sampler source lock").sample();
                for s in &mut batch {
                    s.t = t;
                    s.timestamp = ts.clone();
                }
                sa.lock().expect("sampler lock").extend(batch);
                // Sleep in short slices so stop() returns promptly.
                let until = Instant::now() + interval;
                while Instant::now() < until && !st.load(Ordering::Relaxed) {
                    std::thread::sleep(interval.min(Duration::from_millis(20)));
                }
            }
        });
        Sampler { stop, samples, source, handle: Some(handle), started }
    }

    /// A handle that reads the energy counters at the window's bounds.
    pub(crate) fn energy_marks(&self) -> EnergyMarks {
        EnergyMarks { samples: Arc::clone(&self.samples), source: Arc::clone(&self.source), started: self.started }
    }

    /// An instant as seconds on the sampler's clock (0 = its start).
    pub(crate) fn clock(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.started).as_secs_f64()
    }

    /// Stops sampling and returns every sample, in time order (the marks
    /// land between the thread's readings).
    pub(crate) fn finish(mut self) -> Vec<DeviceSample> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        let mut v = std::mem::take(&mut *self.samples.lock().expect("sampler lock"));
        v.sort_by(|a, b| a.t.total_cmp(&b.t));
        v
    }
}

/// The process's own CPU time (user + system) in seconds, from /proc.
pub(crate) fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = after.split_whitespace().collect();
    // After the command name: state is field 3, utime 14 and stime 15 (1-based).
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / clock_ticks())
}

fn clock_ticks() -> f64 {
    // USER_HZ is 100 on every Linux architecture gpubench builds for.
    100.0
}

/// Peak resident set size of this process (VmHWM), in MiB.
pub(crate) fn peak_rss_mb() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_ids_normalise_across_nvml_and_cuda_spellings() {
        assert_eq!(normalize_pci("00000000:3B:00.0"), "0000:3b:00.0");
        assert_eq!(normalize_pci("0000:3b:00.0"), "0000:3b:00.0");
        assert_eq!(normalize_pci("00000001:AF:00.0"), "0001:af:00.0");
    }

    #[test]
    fn cuda_ordinals_map_to_nvml_by_bus_id_not_by_index() {
        // CUDA puts the fast card at 0; NVML counts in PCI order; cuda:2 has
        // no NVML counterpart (e.g. hidden from NVML).
        let cuda = vec![(0, "0000:af:00.0".to_string()), (1, "0000:3b:00.0".to_string()), (2, "0000:d8:00.0".into())];
        let nvml = vec![(0, "00000000:3B:00.0".to_string()), (1, "00000000:AF:00.0".to_string())];
        assert_eq!(map_cuda_to_nvml(&cuda, &nvml), vec![(0, Some(1)), (1, Some(0)), (2, None)]);
    }

    struct Fake(f64);
    impl DeviceSource for Fake {
        fn sample(&mut self) -> Vec<DeviceSample> {
            self.0 += 1.0;
            vec![DeviceSample { device: "cuda:0".into(), gpu_util_pct: Some(self.0), ..Default::default() }]
        }
    }

    #[test]
    fn sampler_collects_timestamped_samples_and_stops() {
        let s = Sampler::start(Box::new(Fake(0.0)), Duration::from_millis(5));
        std::thread::sleep(Duration::from_millis(60));
        let v = s.finish();
        assert!(v.len() >= 3, "{}", v.len());
        assert!(v.windows(2).all(|w| w[0].t <= w[1].t));
        assert_eq!(v[0].gpu_util_pct, Some(1.0));
        assert!(v[0].timestamp.ends_with('Z'));
    }

    /// A counter whose joules the test sets.
    struct Counter(Arc<Mutex<f64>>);
    impl DeviceSource for Counter {
        fn sample(&mut self) -> Vec<DeviceSample> {
            self.energy()
        }
        fn energy(&mut self) -> Vec<DeviceSample> {
            let j = *self.0.lock().unwrap();
            vec![DeviceSample { device: "cuda:0".into(), energy_j: Some(j), ..Default::default() }]
        }
    }

    #[test]
    fn energy_is_read_at_the_windows_bounds_not_only_every_interval() {
        // The thread reads once, at its start; a window that opens later and
        // lasts less than the interval has no reading of its own inside. The
        // counter reads 3 J when it opens and 11 J when it closes.
        let joules = Arc::new(Mutex::new(0.0));
        let s = Sampler::start(Box::new(Counter(Arc::clone(&joules))), Duration::from_secs(30));
        let marks = s.energy_marks();
        std::thread::sleep(Duration::from_millis(20));
        *joules.lock().unwrap() = 3.0;
        let a = Instant::now();
        marks.mark(a);
        std::thread::sleep(Duration::from_millis(50));
        *joules.lock().unwrap() = 11.0;
        let b = Instant::now();
        marks.mark(b);
        let (t0, t1) = (s.clock(a), s.clock(b));
        let v = s.finish();
        assert!(v.windows(2).all(|w| w[0].t <= w[1].t), "time order");
        let mut m = crate::metrics::devices::DeviceMetrics { device: "cuda:0".into(), ..Default::default() };
        crate::metrics::devices::apply_samples(&mut m, &v, t0, t1);
        // The readings are filed at the bounds themselves: 8 J over the window.
        let w = m.energy_w.expect("two readings inside the window");
        assert!((w - 8.0 / (t1 - t0)).abs() < 1e-9, "{w} W over {} s", t1 - t0);
    }

    #[test]
    fn process_counters_are_readable() {
        assert!(process_cpu_seconds().unwrap() >= 0.0);
        assert!(peak_rss_mb().unwrap() > 1.0);
    }
}
