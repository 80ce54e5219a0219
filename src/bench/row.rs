//! A run's row: identity and set-up from the configuration, results from
//! the measurement, per-device summary from the metrics. Every row gpubench
//! writes (a run's, a ddp launcher's failure row, the PyTorch reference's, a
//! sweep's row for a cell that died) starts from `base_row`, so the schema's
//! meaning lives here once.
use crate::bench::measure::{Figures, Measurement};
use crate::config::{RunConfig, StrategyKind, Workload};
use crate::device::{self, DeviceKind, Devices};
use crate::metrics::devices::DeviceMetrics;
use crate::results::csv::{Row, SCHEMA_VERSION};
use crate::results::{Implementation, Status};

/// A run id unique across hosts and processes: start time and process id.
pub(crate) fn new_run_id(nanos: u128) -> String {
    format!("{:x}-{:x}", nanos, std::process::id())
}

/// A sweep's id (the rows' `sweep_id`): `s` and a run id of the process
/// that starts it, unique across hosts and processes as run ids are.
pub(crate) fn new_sweep_id() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    format!("s{}", new_run_id(nanos))
}

/// A new row's identity and machine: run id, time, versions, host, label,
/// and the devices' kind and name (the first of `devices`). Every kind of
/// row (training, serving, all-reduce) starts from it.
pub(crate) fn identity_row(devices: &Devices, label: &str, implementation: Implementation) -> Row {
    let now = std::time::SystemTime::now();
    let nanos = now.duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    let cuda = devices.kind == DeviceKind::Cuda;
    let v = crate::ffi::cuda_versions();
    let at = crate::fleet::this_placement();
    let from = crate::fleet::this_provenance();
    Row {
        scheduler: at.scheduler,
        job_id: at.job_id,
        array_task: at.array_task,
        node_list: at.node_list,
        schema_version: SCHEMA_VERSION,
        run_id: new_run_id(nanos),
        timestamp: humantime::format_rfc3339_seconds(now).to_string(),
        gpubench_version: env!("CARGO_PKG_VERSION").into(),
        gpubench_commit: crate::results::GPUBENCH_COMMIT.into(),
        commit: from.commit.clone(),
        branch: from.branch.clone(),
        sweep_id: from.sweep_id.clone(),
        ci_url: from.ci_url.clone(),
        host: device::hostname(),
        label: label.into(),
        implementation,
        device_kind: if cuda { "cuda" } else { "cpu" }.into(),
        device_name: if cuda { device::device_name(devices.ordinals[0]) } else { device::cpu_model() },
        driver_version: device::driver_version().unwrap_or_default(),
        cuda_version: if cuda { crate::ffi::format_cuda_version(v.cudart) } else { String::new() },
        libtorch_version: crate::ffi::libtorch_version(),
        ..Default::default()
    }
}

/// Run identity and the workload on `devices`: what every row of a command
/// that built a model holds (a training run's, a serving load's).
pub(crate) fn workload_row(w: &Workload, devices: &Devices, label: &str, implementation: Implementation) -> Row {
    Row {
        devices: devices.describe(),
        n_devices: devices.len() as u32,
        model: w.model.name().into(),
        image_size: Some(w.image_size as u32),
        precision: w.precision.name().into(),
        channels_last: Some(w.channels_last),
        cudnn_benchmark: Some(w.cudnn_benchmark),
        deterministic: Some(w.deterministic),
        seed: Some(w.seed),
        ..identity_row(devices, label, implementation)
    }
}

/// Run identity, set-up and workload: everything a training row holds
/// before the run's results, the same for every row of this process.
pub(crate) fn base_row(cfg: &RunConfig) -> Row {
    let p = &cfg.placement;
    Row {
        mode: crate::results::Mode::Train,
        strategy: cfg.strategy.name().into(),
        backend: if cfg.strategy == StrategyKind::Ddp { cfg.ddp.backend.name() } else { "" }.into(),
        comm_hook: if cfg.strategy == StrategyKind::Ddp { cfg.ddp.comm_hook.name() } else { "" }.into(),
        devices: cfg.devices_column(),
        n_devices: p.world as u32,
        batch_per_device: Some(cfg.batch_per_device as u32),
        global_batch: Some(cfg.global_batch() as u32),
        grad_accum: Some(cfg.grad_accum),
        threads: Some(tch::get_num_threads() as u32),
        variant: with_shared_gpu(&cfg.variant, &p.node_devices),
        data: crate::data::column_name(&cfg.host.data),
        ..workload_row(&cfg.workload, &p.devices, &cfg.output.label, cfg.implementation.into())
    }
}

/// The `variant` word of a run whose replicas share a GPU (`--gpus 0,0`):
/// its rows are a configuration of their own, so report finds no 1-device
/// baseline for them (no scaling, no verdict), and they get no MFU.
pub(crate) const SHARED_GPU: &str = "shared-gpu";

fn with_shared_gpu(variant: &str, devices: &crate::device::Devices) -> String {
    match (devices.shares_a_gpu(), variant.is_empty()) {
        (false, _) => variant.to_string(),
        (true, true) => SHARED_GPU.to_string(),
        (true, false) => format!("{variant} {SHARED_GPU}"),
    }
}

/// Fills a row's results and outcome from the measurement.
/// The row's arithmetic: `gflop` per image (training or serving), the
/// achieved TFLOP/s, and per device against the measured peak of this
/// device and precision (`gpubench peak`) and its datasheet peak.
pub(crate) fn fill_efficiency(row: &mut Row, gflop: f64) {
    row.model_gflop_per_img = Some(gflop);
    row.achieved_tflops = row.throughput_img_s.map(|t| t * gflop / 1000.0);
    // Replicas sharing one GPU: per "device" is a fraction of that GPU.
    let shared = row.variant.split(' ').any(|w| w == SHARED_GPU);
    if let Some(per) = row.throughput_per_device_img_s.filter(|_| !shared) {
        let tflops = per * gflop / 1000.0;
        row.mfu_pct = crate::results::peak::lookup(&row.device_name, &row.precision).map(|p| 100.0 * tflops / p.tflops);
        row.mfu_datasheet_pct =
            crate::results::peak::datasheet(&row.device_name, &row.precision).map(|s| 100.0 * tflops / s);
    }
}

pub(crate) fn fill_row(row: &mut Row, m: &Measurement, fig: Option<&Figures>) {
    let mib = |b: Option<u64>| b.map(|b| b as f64 / (1024.0 * 1024.0));
    (row.mem_params_mb, row.mem_grads_mb, row.mem_optimizer_mb, row.mem_buckets_mb, row.mem_activations_mb) =
        (mib(m.mem.params), mib(m.mem.grads), mib(m.mem.optimizer), mib(m.mem.buckets), mib(m.mem.activations));
    if let Some(d) = m.mem.dp_master {
        (row.dp_master_input_mb, row.dp_master_outputs_mb, row.dp_master_reduce_mb) =
            (mib(Some(d.input)), mib(Some(d.outputs)), mib(Some(d.reduce)));
    }
    row.steps = Some(m.step_secs.len() as u32);
    row.warmup = Some(m.warmup_steps as u32);
    if let Some(f) = fig {
        row.throughput_img_s = Some(f.throughput_img_s);
        row.throughput_per_device_img_s = Some(f.throughput_per_device_img_s);
        row.step_ms_mean = Some(f.step_ms.mean);
        row.step_ms_p50 = Some(f.step_ms.p50);
        row.step_ms_p90 = Some(f.step_ms.p90);
        row.step_ms_p99 = Some(f.step_ms.p99);
        row.step_ms_std = Some(f.step_ms.std);
        row.throughput_ci95_lo = f.throughput_ci.map(|i| i.lo);
        row.throughput_ci95_hi = f.throughput_ci.map(|i| i.hi).filter(|x| x.is_finite());
        row.step_ms_p50_ci95_lo = f.step_ms_p50_ci.map(|i| i.lo);
        row.step_ms_p50_ci95_hi = f.step_ms_p50_ci.map(|i| i.hi);
    }
    row.warmup_end = m.warmup_end.clone();
    row.timed_end = m.timed_end.clone();
    row.interference = m.interference.join("; ");
    row.loss_first = m.loss_first;
    row.loss_last = m.losses.last().copied();
    row.status = m.status.unwrap_or(Status::Failed);
    row.error = m.error.clone();
}

/// The main row's per-device summary, imbalance and time breakdown.
pub(crate) fn fill_metrics(row: &mut Row, devs: &[DeviceMetrics], master: Option<usize>, m: &Measurement) {
    let max = |f: fn(&DeviceMetrics) -> Option<f64>| devs.iter().filter_map(f).reduce(f64::max);
    let avg = |f: fn(&DeviceMetrics) -> Option<f64>| {
        let v: Vec<f64> = devs.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| crate::metrics::stats::mean(&v))
    };
    row.peak_mem_alloc_mb = max(|d| d.peak_alloc_mb);
    row.peak_mem_reserved_mb = max(|d| d.peak_reserved_mb);
    row.nvml_mem_peak_mb = max(|d| d.nvml_mem_peak_mb);
    row.util_mean_pct = avg(|d| d.util_mean_pct);
    row.util_p95_pct = max(|d| d.util_p95_pct);
    row.power_mean_w = avg(|d| d.power_mean_w);
    row.cpu_util_pct = max(|d| d.cpu_util_pct);
    row.peak_rss_mb = max(|d| d.peak_rss_mb);
    let sum = |f: fn(&DeviceMetrics) -> Option<u64>| devs.iter().filter_map(f).reduce(|a, b| a + b);
    row.alloc_retries = sum(|d| d.alloc_retries);
    row.alloc_ooms = sum(|d| d.alloc_ooms);
    row.other_procs_mb = max(|d| d.other_procs_mb);
    // Images per joule: every device's energy counter when all have one, else NVML's mean power.
    let watts = match devs.iter().map(|d| d.energy_w).collect::<Option<Vec<f64>>>() {
        Some(w) if !w.is_empty() => Some(w.iter().sum::<f64>()),
        _ => devs.iter().map(|d| d.power_mean_w).collect::<Option<Vec<f64>>>().map(|w| w.iter().sum::<f64>()),
    };
    row.img_per_joule = match (row.throughput_img_s, watts) {
        (Some(t), Some(w)) if w > 0.0 => Some(t / w),
        _ => None,
    };
    let imb = crate::metrics::devices::imbalance(devs, master);
    row.mem_imbalance = imb.mem_imbalance;
    row.util_spread_pct = imb.util_spread_pct;
    row.master_mem_excess_pct = imb.master_mem_excess_pct;
    row.master_util_excess_pct = imb.master_util_excess_pct;
    if !m.data_wait_secs.is_empty() {
        let wait = crate::metrics::stats::mean(&m.data_wait_secs);
        row.data_wait_ms = Some(wait * 1e3);
        let step = crate::metrics::stats::mean(&m.step_secs);
        row.data_wait_share = (step > 0.0).then(|| wait / step);
    }
    if let Some(p) = &m.phase_secs {
        let ms = |v: &Vec<f64>| (!v.is_empty()).then(|| crate::metrics::stats::mean(v) * 1e3);
        row.forward_ms = ms(&p[0]);
        row.backward_ms = ms(&p[1]);
        row.optimizer_ms = ms(&p[2]);
    }
    if !m.master_work.is_empty() {
        let ms = |f: fn(&crate::strategy::MasterWork) -> f64| {
            Some(crate::metrics::stats::percentile(&m.master_work.iter().map(f).collect::<Vec<_>>(), 50.0) * 1e3)
        };
        (row.dp_replicate_ms, row.dp_scatter_ms, row.dp_gather_ms, row.dp_reduce_ms, row.dp_compute_ms) =
            (ms(|w| w.replicate), ms(|w| w.scatter), ms(|w| w.gather), ms(|w| w.reduce), ms(|w| w.compute));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Images per joule: the devices' energy counters when every device has
    /// one, else their mean NVML power; none without either (a CPU without RAPL).
    #[test]
    fn images_per_joule_from_energy_counters_else_power() {
        let dev = |energy: Option<f64>, power: Option<f64>| DeviceMetrics {
            energy_w: energy,
            power_mean_w: power,
            ..Default::default()
        };
        let row_of = |devs: &[DeviceMetrics]| {
            let mut r = Row { throughput_img_s: Some(1000.0), ..Default::default() };
            fill_metrics(&mut r, devs, None, &Measurement::default());
            r.img_per_joule
        };
        assert_eq!(row_of(&[dev(Some(200.0), Some(250.0)), dev(Some(300.0), Some(350.0))]), Some(2.0));
        assert_eq!(row_of(&[dev(Some(200.0), Some(250.0)), dev(None, Some(250.0))]), Some(2.0), "power for both");
        assert_eq!(row_of(&[dev(None, None)]), None);
    }

    /// `--gpus 0,0`: a variant of its own (no baseline, so no scaling and no
    /// verdict) and no MFU, since a "device" is half of one GPU.
    #[test]
    fn replicas_sharing_a_gpu_are_a_variant_without_mfu() {
        let shared = crate::device::Devices::cuda(vec![0, 0]);
        assert!(shared.shares_a_gpu() && !crate::device::Devices::cuda(vec![0, 1]).shares_a_gpu());
        assert_eq!(with_shared_gpu("", &shared), "shared-gpu");
        assert_eq!(with_shared_gpu("lr=0.1", &shared), "lr=0.1 shared-gpu");
        assert_eq!(with_shared_gpu("", &crate::device::Devices::cpu(2)), "");
        let mut r = Row {
            device_name: "NVIDIA H200".into(),
            precision: "bf16".into(),
            throughput_img_s: Some(1000.0),
            throughput_per_device_img_s: Some(500.0),
            variant: "shared-gpu".into(),
            ..Default::default()
        };
        fill_efficiency(&mut r, 24.5);
        assert_eq!((r.mfu_pct, r.mfu_datasheet_pct), (None, None));
        assert!(r.achieved_tflops.is_some(), "the run's own rate stays");
        r.variant.clear();
        fill_efficiency(&mut r, 24.5);
        assert!(r.mfu_datasheet_pct.is_some());
    }
}
