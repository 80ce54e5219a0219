//! Per-device metrics: throughput says which strategy wins; these figures say why. Only the timed window counts:
//! the allocator's peaks are reset when warm-up ends (`collect::reset_peaks`), and device samples outside the
//! window are left out of the summaries (`devices::apply_samples`).
//!
//! Sources (`collect::Monitor` starts the right one):
//! - **Telemetry** (`sampler`): a background thread samples every `--sample-interval` (default 100ms). On CUDA
//!   it reads every device of the run through NVML, loaded at run time: GPU and memory utilization, memory used
//!   and total, power, SM clock, temperature. CUDA ordinals are matched to NVML devices by PCI bus id, since
//!   CUDA's order (fastest first, renumbered by `CUDA_VISIBLE_DEVICES`) differs from NVML's PCI order. Without
//!   NVML those figures are n/a, one line on stderr says why (`bench::session`), and the run goes on. On the
//!   CPU it samples the process instead. Sources sit behind a trait, so aggregation, imbalance and the CSV
//!   outputs are tested with a fake source of known values.
//! - **Allocator memory**: per CUDA device, the caching allocator's peak allocated and peak reserved bytes,
//!   read through the C++ shim (`ffi`; tch does not expose them). In ddp each rank reads its own device and
//!   reports to rank 0.
//! - **The process**: CPU time ÷ wall time over the timed window, in % of one core (200 = two cores busy), and
//!   peak resident memory (VmHWM, the whole process lifetime). CPU runs have only these: dp on the CPU is one
//!   process, so one per-device row with role `process`; ddp has one per rank (`cpu:rankN`).
//!
//! The main row's summary over devices (`bench::row::fill_metrics`): `peak_mem_alloc_mb`, `peak_mem_reserved_mb`
//! and `nvml_mem_peak_mb` are the maximum over devices; `util_mean_pct` and `power_mean_w` the mean of each
//! device's mean; `util_p95_pct` the maximum of each device's 95th percentile; `cpu_util_pct` and `peak_rss_mb`
//! the maximum over processes. Imbalance (`devices::imbalance`, only when at least two devices all have the
//! figure): `mem_imbalance` is max ÷ min peak memory (allocator peak, else NVML; 1.00 = even),
//! `util_spread_pct` max − min mean utilization in points; for dp, `master_mem_excess_pct` is the master's peak
//! memory over the others' mean in %, and `master_util_excess_pct` its mean utilization minus theirs, in points.
//! DataParallel's master, which fills up and works harder than the rest, is what these are meant to expose.
//!
//! Long-form files (`results::long`): `<out>.devices.csv` has one row per (run_id, device) with its role
//! (`master`/`replica` for dp, `rank N` for ddp, `single`), allocator and NVML peaks, total memory, mean and p95
//! utilization, mean memory utilization, power, SM clock, maximum temperature, CPU utilization and peak RSS.
//! `--telemetry FILE.csv` writes every sample (run_id, then every field), in place of an `nvidia-smi` log; in
//! ddp, rank r > 0 writes `FILE.rank<r>.csv`. Both are appended under a lock; a file with another header is
//! refused.
//!
//! Time breakdown: every row has `data_wait_ms` (mean wait of a timed step for its input) and `data_wait_share`
//! (that ÷ mean step time); with `--breakdown`, `forward_ms`, `backward_ms` and `optimizer_ms` (what each phase
//! covers: `strategy::Phase`). ddp reports rank 0's. `ddp_forward_compute_ms`, `ddp_backward_compute_ms`,
//! `ddp_backward_comm_ms`, `ddp_overlap_ms` (communication while backward still computed) and `ddp_buckets` are
//! rank 0's Reducer averages over the timed steps (`bench::ddp::worker`): DDP's logger samples every iteration
//! here (`strategy::ddp`), and the warm-up's share is taken out of its running averages.
#[cfg(feature = "torch")]
pub mod collect;
pub mod devices;
pub mod interference;
pub mod interval;
#[cfg(feature = "torch")]
pub mod nvml;
pub mod sampler;
pub mod stats;
