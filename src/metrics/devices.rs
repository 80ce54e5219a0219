//! Per-device figures over the timed window, and the imbalance between
//! devices that explains a strategy's speed (DataParallel's master fills up
//! and works harder than the rest).
use serde::{Deserialize, Serialize};

use super::sampler::DeviceSample;
use super::stats::{mean, percentile};

/// One device's (or, on the CPU, one process's) summary.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DeviceMetrics {
    /// "cuda:0", or "cpu" / "cpu:rank1" for CPU runs.
    pub device: String,
    /// "master" or "replica" (dp), "rank N" (ddp), "single".
    pub role: String,
    /// CUDA caching allocator, peak since the end of warm-up.
    pub peak_alloc_mb: Option<f64>,
    pub peak_reserved_mb: Option<f64>,
    /// NVML: peak memory used on the device (all processes), mean and p95
    /// utilization, mean power, over the timed window.
    pub nvml_mem_peak_mb: Option<f64>,
    pub mem_total_mb: Option<f64>,
    pub util_mean_pct: Option<f64>,
    pub util_p95_pct: Option<f64>,
    pub mem_util_mean_pct: Option<f64>,
    pub power_mean_w: Option<f64>,
    pub sm_clock_mean_mhz: Option<f64>,
    pub temperature_max_c: Option<f64>,
    /// The process driving this device: CPU time ÷ wall time over the timed
    /// window, in % of one core (200 = two cores busy), and peak RSS.
    pub cpu_util_pct: Option<f64>,
    pub peak_rss_mb: Option<f64>,
    /// CUDA allocator: cudaMalloc retries and out-of-memory errors in this
    /// process so far. In the row only (the devices file's columns are
    /// fixed); a ddp rank's never leave it, so the row's are rank 0's.
    #[serde(skip)]
    pub alloc_retries: Option<u64>,
    #[serde(skip)]
    pub alloc_ooms: Option<u64>,
    /// NVML: the most memory other processes held on this device during the window (row only, as above).
    #[serde(skip)]
    pub other_procs_mb: Option<f64>,
    /// Mean power over the window from the device's energy counter (NVML's,
    /// or RAPL's on a CPU), watts (row only, as above).
    #[serde(skip)]
    pub energy_w: Option<f64>,
}

/// Mean power from one device's samples inside the window (in time order)
/// and their energy counter: the first and last readings; None with fewer
/// than two, or a counter that went backwards (RAPL's wraps).
fn energy_power(mine: &[&DeviceSample]) -> Option<f64> {
    let readings: Vec<(f64, f64)> = mine.iter().filter_map(|s| Some((s.t, s.energy_j?))).collect();
    let (&(ta, ea), &(tb, eb)) = (readings.first()?, readings.last()?);
    (tb > ta && eb >= ea).then(|| (eb - ea) / (tb - ta))
}

fn col(samples: &[&DeviceSample], f: impl Fn(&DeviceSample) -> Option<f64>) -> Vec<f64> {
    samples.iter().filter_map(|s| f(s)).collect()
}

fn opt(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// Fills the NVML fields of `m` from the samples of `m.device` taken inside
/// the window [t0, t1] (seconds on the sampler's clock).
pub(crate) fn apply_samples(m: &mut DeviceMetrics, samples: &[DeviceSample], t0: f64, t1: f64) {
    let mine: Vec<&DeviceSample> = samples.iter().filter(|s| s.device == m.device && s.t >= t0 && s.t <= t1).collect();
    if mine.is_empty() {
        return;
    }
    let util = col(&mine, |s| s.gpu_util_pct);
    m.util_mean_pct = opt(mean(&util));
    m.util_p95_pct = opt(percentile(&util, 95.0));
    m.mem_util_mean_pct = opt(mean(&col(&mine, |s| s.mem_util_pct)));
    m.nvml_mem_peak_mb = col(&mine, |s| s.mem_used_mb).into_iter().reduce(f64::max);
    m.mem_total_mb = col(&mine, |s| s.mem_total_mb).into_iter().reduce(f64::max);
    m.power_mean_w = opt(mean(&col(&mine, |s| s.power_w)));
    m.sm_clock_mean_mhz = opt(mean(&col(&mine, |s| s.sm_clock_mhz)));
    m.temperature_max_c = col(&mine, |s| s.temperature_c).into_iter().reduce(f64::max);
    m.other_procs_mb = col(&mine, |s| s.other_procs_mb).into_iter().reduce(f64::max);
    m.energy_w = energy_power(&mine);
}

/// How unevenly the work and memory fell on the devices.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub(crate) struct Imbalance {
    /// max ÷ min peak memory across devices (allocator, else NVML); 1 = even.
    pub mem_imbalance: Option<f64>,
    /// max − min mean utilization across devices, percentage points.
    pub util_spread_pct: Option<f64>,
    /// dp: the master's peak memory over the mean of the others, in %.
    pub master_mem_excess_pct: Option<f64>,
    /// dp: the master's mean utilization minus the others' mean, points.
    pub master_util_excess_pct: Option<f64>,
}

fn peak_mem(m: &DeviceMetrics) -> Option<f64> {
    m.peak_alloc_mb.or(m.nvml_mem_peak_mb)
}

/// Imbalance across `devs`; `master` is the index of dp's master, if any.
pub(crate) fn imbalance(devs: &[DeviceMetrics], master: Option<usize>) -> Imbalance {
    let mems: Vec<f64> = devs.iter().filter_map(peak_mem).collect();
    let utils: Vec<f64> = devs.iter().filter_map(|d| d.util_mean_pct).collect();
    let mut out = Imbalance::default();
    if devs.len() >= 2 && mems.len() == devs.len() {
        let (lo, hi) = (mems.iter().cloned().fold(f64::INFINITY, f64::min), mems.iter().cloned().fold(0.0, f64::max));
        out.mem_imbalance = (lo > 0.0).then(|| hi / lo);
    }
    if devs.len() >= 2 && utils.len() == devs.len() {
        let (lo, hi) = (utils.iter().cloned().fold(f64::INFINITY, f64::min), utils.iter().cloned().fold(0.0, f64::max));
        out.util_spread_pct = Some(hi - lo);
    }
    if let Some(mi) = master.filter(|&i| i < devs.len() && devs.len() >= 2) {
        let others: Vec<&DeviceMetrics> = devs.iter().enumerate().filter(|(i, _)| *i != mi).map(|(_, d)| d).collect();
        if let Some(mm) = peak_mem(&devs[mi]) {
            let om: Vec<f64> = others.iter().filter_map(|d| peak_mem(d)).collect();
            if om.len() == others.len() && mean(&om) > 0.0 {
                out.master_mem_excess_pct = Some((mm / mean(&om) - 1.0) * 100.0);
            }
        }
        if let Some(mu) = devs[mi].util_mean_pct {
            let ou: Vec<f64> = others.iter().filter_map(|d| d.util_mean_pct).collect();
            if ou.len() == others.len() {
                out.master_util_excess_pct = Some(mu - mean(&ou));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(device: &str, t: f64, util: f64, mem: f64) -> DeviceSample {
        DeviceSample {
            t,
            device: device.into(),
            gpu_util_pct: Some(util),
            mem_used_mb: Some(mem),
            mem_total_mb: Some(16000.0),
            power_w: Some(100.0 + util),
            ..Default::default()
        }
    }

    /// Power from the energy counter: the first and last readings inside the
    /// window, a counter going backwards (RAPL wrapping) gives none.
    #[test]
    fn energy_counter_gives_the_windows_mean_power() {
        let e = |t: f64, j: f64| DeviceSample { device: "cuda:0".into(), t, energy_j: Some(j), ..Default::default() };
        // What apply_samples finds for `device` inside [t0, t1].
        let energy_power = |v: &[DeviceSample], device: &str, t0: f64, t1: f64| {
            let mut m = DeviceMetrics { device: device.into(), ..Default::default() };
            apply_samples(&mut m, v, t0, t1);
            m.energy_w
        };
        let v = [e(1.0, 100.0), e(2.0, 350.0), e(3.0, 600.0), e(4.0, 1000.0)];
        assert_eq!(energy_power(&v, "cuda:0", 1.5, 3.5), Some(250.0));
        assert_eq!(energy_power(&v, "cuda:1", 1.5, 3.5), None);
        assert_eq!(energy_power(&v[..1], "cuda:0", 0.0, 9.0), None, "one reading");
        let wrapped = [e(1.0, 900.0), e(2.0, 10.0)];
        assert_eq!(energy_power(&wrapped, "cuda:0", 0.0, 9.0), None);
    }

    #[test]
    fn window_excludes_warmup_samples() {
        let samples = vec![
            s("cuda:0", 0.5, 0.0, 100.0),
            s("cuda:0", 1.5, 80.0, 900.0),
            s("cuda:0", 2.5, 100.0, 1000.0),
            s("cuda:1", 1.5, 10.0, 5.0),
        ];
        let mut m = DeviceMetrics { device: "cuda:0".into(), ..Default::default() };
        apply_samples(&mut m, &samples, 1.0, 3.0);
        assert_eq!(m.util_mean_pct, Some(90.0));
        assert_eq!(m.nvml_mem_peak_mb, Some(1000.0));
        assert_eq!(m.power_mean_w, Some(190.0));
        assert!((m.util_p95_pct.unwrap() - 99.0).abs() < 1e-9);
        assert_eq!(m.mem_total_mb, Some(16000.0));
    }

    #[test]
    fn no_samples_leaves_fields_empty() {
        let mut m = DeviceMetrics { device: "cuda:3".into(), ..Default::default() };
        apply_samples(&mut m, &[s("cuda:0", 1.0, 1.0, 1.0)], 0.0, 2.0);
        assert_eq!(m.util_mean_pct, None);
    }

    fn dev(alloc: f64, util: f64) -> DeviceMetrics {
        DeviceMetrics { peak_alloc_mb: Some(alloc), util_mean_pct: Some(util), ..Default::default() }
    }

    #[test]
    fn dp_master_stands_out() {
        let devs = vec![dev(4000.0, 95.0), dev(1000.0, 60.0), dev(1000.0, 70.0), dev(2000.0, 65.0)];
        let i = imbalance(&devs, Some(0));
        assert_eq!(i.mem_imbalance, Some(4.0));
        assert_eq!(i.util_spread_pct, Some(35.0));
        assert!((i.master_mem_excess_pct.unwrap() - 200.0).abs() < 1e-9);
        assert!((i.master_util_excess_pct.unwrap() - 30.0).abs() < 1e-9);
    }

    #[test]
    fn one_device_or_missing_figures_give_no_imbalance() {
        assert_eq!(imbalance(&[dev(1.0, 1.0)], Some(0)), Imbalance::default());
        let mut partial = vec![dev(1.0, 1.0), DeviceMetrics::default()];
        partial[1].util_mean_pct = Some(3.0);
        let i = imbalance(&partial, None);
        assert_eq!(i.mem_imbalance, None);
        assert_eq!(i.util_spread_pct, Some(2.0));
    }
}
