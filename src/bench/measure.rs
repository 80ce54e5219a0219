//! The measurement loop, one for every strategy: warm-up, timed steps, a device synchronization before every
//! clock read, divergence and failure handling. Strategies only step; this decides what is timed.
//!
//! - **Warm-up** (`--warmup` steps, default 5, or `--warmup-time`) runs first and is never timed: cuDNN
//!   autotuning, caching-allocator growth and lazy initialisation happen there. When it ends, every device is
//!   synchronized and the allocator's peak statistics are reset, so peak memory describes the timed window.
//! - **Timed steps** (`--steps`, default 30, or `--duration` by wall clock) are each bracketed by clock reads,
//!   and every device is synchronized before each read, so a step's time is the time of its finished work, not
//!   of its queued kernels. The price is the overlap of one step's CPU launch with the previous step's GPU tail;
//!   `scripts/bench-overhead` (`benches/overhead.rs`) measures it.
//! - A step's clock starts before its batch is fetched, so the step time includes any wait for input; that wait
//!   is also kept on its own (the row's `data_wait_ms`).
//! - The loss is read, and ddp's ranks agree on the loss and on stopping (`Strategy::agree`: rank 0 decides, so
//!   every rank stops at the same step), after the closing clock read, outside the timed region.
//!
//! **Figures** (`figures`): every timed step's duration is kept; the row reports the median, mean, p90, p99 and
//! sample standard deviation (`metrics::stats`: percentiles interpolate linearly, numpy's default). Throughput is
//! global images × steps ÷ the sum of step times; per device, that divided by the number of devices. `--format json`
//! prints every step time and every loss beside the row (`bench::sinks`).
//!
//! **Outcomes**: a non-finite loss (warm-up or timed) ends the run `diverged`, the error naming the step. An
//! error, including a libtorch panic (tch panics on C++ errors; `error::guarded` catches it), ends it `oom` when
//! the message says the CUDA or CPU allocator ran out of memory (`error::is_oom`), else `failed`. What was
//! measured is kept, the row is still written, and the exit code is 1.
//!
//! **`--breakdown`** ends every phase of a step (forward, backward, optimizer) with a device sync and times each.
//! Those syncs remove overlap between phases, so a `--breakdown` run's step time is not the one to compare
//! strategies by.
//!
//! **Overhead benchmark** (`scripts/bench-overhead`): a bare tch loop, `single`, `dp` on one device and `single`
//! with the telemetry sampler running (at the run's `--sample-interval` and at 10 ms) take turns in short blocks,
//! the order rotating each round (`--rounds`, default 15; `--steps` timed steps per block). Targets:
//! single/bare ≥ 0.98, dp×1/single ≥ 0.97, sampled/single ≥ 0.99. Each ratio gets a 95 % interval from a paired
//! bootstrap over rounds and is called met or missed only when the interval clears the target, else
//! inconclusive; each variant's fastest step is printed too. Speed targets are checked there, never by timed
//! tests. Figures: `results/README.md`.
use anyhow::Result;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use std::io::IsTerminal;
use std::time::Instant;

use crate::config::{Length, RunConfig};
use crate::data::DataSource;
use crate::error::{guarded, is_oom};
use crate::metrics::interference::{host_window, HostSnapshot};
use crate::metrics::interval::{
    median_interval, precise_enough, steady, throughput_interval, throughput_precision, Interval,
};
use crate::metrics::sampler::EnergyMarks;
use crate::metrics::stats::{summarize, Summary};

/// `--duration auto` times at least this many steps.
pub(crate) const AUTO_MIN_STEPS: usize = 20;
/// `--warmup auto` ends here if the steps never settle.
pub(crate) const WARMUP_CAP_STEPS: u64 = 200;
pub(crate) const WARMUP_CAP_TIME: std::time::Duration = std::time::Duration::from_secs(60);
use crate::results::Status;
use crate::strategy::{Phase, PhaseClock, Strategy};

/// What one process measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Measurement {
    /// Duration of every timed step, in seconds, in order.
    pub step_secs: Vec<f64>,
    /// Loss of every timed step.
    pub losses: Vec<f64>,
    pub warmup_steps: u64,
    /// The loss of the first step, warm-up included (None if none ran).
    pub loss_first: Option<f64>,
    pub status: Option<Status>,
    pub error: String,
    /// Time each timed step waited for its input, in seconds.
    pub data_wait_secs: Vec<f64>,
    /// With `--breakdown`: per timed step, seconds in forward, backward and
    /// optimizer (each ended by a device sync).
    pub phase_secs: Option<[Vec<f64>; 3]>,
    /// The timed window, for the per-device metrics.
    #[serde(skip)]
    pub window: Option<crate::metrics::collect::Window>,
    /// How warm-up ended: "steps", "time", "steady after N steps", or "not
    /// steady after N steps (the cap)".
    pub warmup_end: String,
    /// How the timed steps ended: "steps", "duration", or for --duration
    /// auto "target met: ±x%" / "max duration reached: ±x%".
    pub timed_end: String,
    /// What disturbed the host during the timed window (`metrics::interference`).
    pub interference: Vec<String>,
    /// When the run stopped without status ok (wall clock, so that ddp's
    /// ranks can tell which of them failed first).
    #[serde(skip)]
    pub failed_at: Option<std::time::SystemTime>,
    /// Memory by part on this process's first device (`session` fills the
    /// parts the strategy knows; the activations are measured here).
    #[serde(skip)]
    pub mem: MemParts,
    /// dp: the master's work in each timed step, where it could be timed
    /// exactly (`strategy::MasterWork`); empty otherwise.
    #[serde(skip)]
    pub master_work: Vec<crate::strategy::MasterWork>,
}

/// Where a training step's memory goes, in bytes, on the run's first device
/// (the master, rank 0's): exact byte counts for the tensors gpubench holds,
/// the optimizer's state from its buffers or, for libtorch's own loop, from
/// its definition, and the activations measured as the largest step peak
/// above what was live when the step began (CUDA: the caching allocator;
/// CPU: libtorch's allocations, counted by the shim).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MemParts {
    pub params: Option<u64>,
    pub grads: Option<u64>,
    pub optimizer: Option<u64>,
    /// ddp's gradient buckets.
    pub buckets: Option<u64>,
    pub activations: Option<u64>,
    /// dp on 2+ devices: the master's extra memory by cause.
    pub dp_master: Option<crate::strategy::MasterParts>,
}

/// The step-by-step activation measurement: what was live when a step
/// began, against the peak it reached.
struct ActivationProbe {
    cuda: Option<usize>,
    /// CUDA: what was live when the first timed step began (the peak was
    /// reset just before, and is the window's, which the device metrics read too).
    first_live: Option<i64>,
    live: i64,
    most: i64,
}

impl ActivationProbe {
    fn new(devices: &crate::device::Devices) -> ActivationProbe {
        let cuda = (devices.kind == crate::device::DeviceKind::Cuda).then(|| devices.ordinals[0]);
        ActivationProbe { cuda, first_live: None, live: 0, most: 0 }
    }

    /// Before a timed step (after the previous one's sync).
    fn begin(&mut self) {
        match self.cuda {
            Some(d) => {
                if self.first_live.is_none() {
                    self.first_live = crate::ffi::cuda_memory_stats(d).ok().map(|s| s.allocated);
                }
            }
            None => self.live = crate::ffi::cpu_memory(true).0,
        }
    }

    /// After the step's sync.
    fn end(&mut self) {
        let above = match self.cuda {
            Some(d) => crate::ffi::cuda_memory_stats(d).ok().zip(self.first_live).map(|(s, l)| s.peak_allocated - l),
            None => Some(crate::ffi::cpu_memory(false).1 - self.live),
        };
        self.most = self.most.max(above.unwrap_or(0));
    }

    fn bytes(&self) -> Option<u64> {
        (self.most > 0).then_some(self.most as u64)
    }
}

/// For `--breakdown`: synchronizes the devices at the end of each phase and
/// adds the time since the previous mark to that phase.
struct SyncClock<'a> {
    devices: &'a crate::device::Devices,
    last: Instant,
    secs: [f64; 3],
    /// The phases as trace ranges too, while profiling.
    ranges: Option<RangeClock>,
}

impl PhaseClock for SyncClock<'_> {
    fn synced(&self) -> bool {
        true
    }

    fn mark(&mut self, phase: Phase) {
        self.devices.synchronize();
        let now = Instant::now();
        let i = match phase {
            Phase::Forward => 0,
            Phase::Backward | Phase::Accumulated => 1,
            Phase::Optimizer => 2,
        };
        self.secs[i] += (now - self.last).as_secs_f64();
        self.last = now;
        if let Some(r) = &mut self.ranges {
            r.mark(phase);
        }
    }
}

/// For `--profile`: names the phases of a step as ranges in the trace
/// (forward, backward, optimizer), with no device sync.
struct RangeClock(Option<crate::ffi::Range>);

impl RangeClock {
    fn new() -> Self {
        RangeClock(Some(crate::ffi::Range::begin("gpubench.forward")))
    }
}

impl PhaseClock for RangeClock {
    fn mark(&mut self, phase: Phase) {
        // End the phase before the next begins (assigning would begin it first).
        self.0 = None;
        self.0 = match phase {
            Phase::Forward => Some(crate::ffi::Range::begin("gpubench.backward")),
            Phase::Backward => Some(crate::ffi::Range::begin("gpubench.optimizer")),
            // The next micro-batch's forward follows.
            Phase::Accumulated => Some(crate::ffi::Range::begin("gpubench.forward")),
            Phase::Optimizer => None,
        };
    }
}

/// Starts PyTorch's profiler for `--profile`, with the `distributedInfo`
/// Holistic Trace Analysis reads (rank, world size, backend) and the device
/// gpubench ran on.
fn start_profile(p: &crate::config::ProfileSpec, cuda: bool) -> Result<()> {
    std::fs::create_dir_all(&p.dir)
        .map_err(|e| crate::error::usage(format!("--profile {}: cannot create it ({e})", p.dir.display())))?;
    crate::ffi::profiler_start(cuda)?;
    // trace-summary tells a CUDA run from this, not from CUDA events, which
    // are missing exactly when CUPTI was unavailable.
    crate::ffi::profiler_metadata("gpubench", if cuda { r#"{"device": "cuda"}"# } else { r#"{"device": "cpu"}"# })?;
    // Spaced as Python's json.dumps writes it: HTA finds the rank with the
    // pattern `"rank":\s+(\d+)`.
    let info = format!(
        r#"{{"backend": {}, "rank": {}, "world_size": {}}}"#,
        serde_json::Value::from(p.backend.as_str()),
        p.rank,
        p.world
    );
    crate::ffi::profiler_metadata("distributedInfo", &info)
}

/// A failed run's status and error: out of memory, or failed.
pub(crate) fn failure(err: &anyhow::Error) -> (Status, String) {
    let msg = crate::error::failure_message(err);
    (if is_oom(&msg) { Status::Oom } else { Status::Failed }, msg)
}

pub(crate) fn progress(cfg: &RunConfig) -> ProgressBar {
    let visible = cfg.output.talks() && std::io::stderr().is_terminal();
    if !visible {
        return ProgressBar::hidden();
    }
    let pb = match cfg.schedule.timed {
        Length::Steps(n) => ProgressBar::new(n),
        Length::Time(d) => ProgressBar::new(d.as_millis() as u64),
        Length::Auto => ProgressBar::new(cfg.schedule.max_duration.as_millis() as u64),
    };
    pb.set_draw_target(ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template("{spinner} {prefix} [{bar:30}] {msg} ({elapsed})")
            .expect("static template")
            .progress_chars("=> "),
    );
    pb
}

/// Warm-up then timed steps. The device is synchronized before every clock
/// read, so a step's time covers its finished work; warm-up steps are not timed.
/// A failure after the run started is recorded in the measurement, not lost.
/// `energy`, when telemetry runs, reads the energy counters as the timed
/// window opens and closes.
pub fn measure(
    cfg: &RunConfig,
    strat: &mut dyn Strategy,
    data: &mut dyn DataSource,
    pb: &ProgressBar,
    energy: Option<&EnergyMarks>,
) -> Measurement {
    let mut m = Measurement::default();
    let global = cfg.global_batch() as f64;
    let res = guarded(|| -> Result<()> {
        pb.set_prefix("warm-up");
        let t_warm = Instant::now();
        let mut warming = cfg.schedule.warmup != Length::Steps(0);
        // --warmup auto times each warm-up step (with a sync: warm-up is not
        // measured, so the sync costs nothing that counts).
        let mut warm_secs = vec![];
        while warming {
            let t0 = Instant::now();
            let batch = data.next_step()?;
            let loss_t = strat.step_timed(&batch, &mut crate::strategy::NoClock)?;
            m.warmup_steps += 1;
            let stop = match cfg.schedule.warmup {
                Length::Steps(k) => m.warmup_steps >= k,
                Length::Time(d) => t_warm.elapsed() >= d,
                Length::Auto => {
                    strat.devices().synchronize();
                    warm_secs.push(t0.elapsed().as_secs_f64());
                    steady(&warm_secs) || m.warmup_steps >= WARMUP_CAP_STEPS || t_warm.elapsed() >= WARMUP_CAP_TIME
                }
            };
            let (loss, stop) = strat.agree(&loss_t, stop)?;
            m.loss_first.get_or_insert(loss);
            pb.tick();
            if !loss.is_finite() {
                m.status = Some(Status::Diverged);
                m.error = format!("loss became {loss} during warm-up step {}", m.warmup_steps);
                return Ok(());
            }
            warming = !stop;
        }
        m.warmup_end = match cfg.schedule.warmup {
            Length::Steps(_) => "steps".into(),
            Length::Time(_) => "time".into(),
            Length::Auto if steady(&warm_secs) => format!("steady after {} steps", m.warmup_steps),
            Length::Auto => format!("not steady after {} steps (the cap)", m.warmup_steps),
        };
        // The profiler's set-up is not part of the timed run.
        let mut profiling = match &cfg.instruments.profile {
            Some(p) => {
                start_profile(p, strat.devices().kind == crate::device::DeviceKind::Cuda)?;
                Some(p)
            }
            None => None,
        };
        strat.devices().synchronize();
        crate::metrics::collect::reset_peaks(strat.devices());
        pb.set_prefix("timed");
        let t_run = Instant::now();
        if let Some(e) = energy {
            e.mark(t_run);
        }
        let host0 = HostSnapshot::take();
        let cpu0 = crate::metrics::sampler::process_cpu_seconds();
        if cfg.instruments.breakdown {
            m.phase_secs = Some([vec![], vec![], vec![]]);
        }
        crate::ffi::set_nvtx(cfg.instruments.nvtx);
        let mut probe = ActivationProbe::new(strat.devices());
        loop {
            probe.begin();
            let t0 = Instant::now();
            // Ranges while the profiler records, and on every step with --nvtx.
            let ranged = profiling.is_some() || cfg.instruments.nvtx;
            let range = |name: &str| ranged.then(|| crate::ffi::Range::begin(name));
            let step_range = ranged.then(|| crate::ffi::Range::begin(&format!("ProfilerStep#{}", m.step_secs.len())));
            let wait_range = range("gpubench.data_wait");
            let batch = data.next_step()?;
            drop(wait_range);
            let t_data = Instant::now();
            m.data_wait_secs.push((t_data - t0).as_secs_f64());
            let loss_t = if let Some(p) = m.phase_secs.as_mut() {
                let devices = strat.devices().clone();
                let ranges = ranged.then(RangeClock::new);
                let mut clock = SyncClock { devices: &devices, last: t_data, secs: [0.0; 3], ranges };
                let l = strat.step_timed(&batch, &mut clock)?;
                for (v, x) in p.iter_mut().zip(clock.secs) {
                    v.push(x);
                }
                l
            } else if ranged {
                strat.step_timed(&batch, &mut RangeClock::new())?
            } else {
                strat.step_timed(&batch, &mut crate::strategy::NoClock)?
            };
            strat.devices().synchronize();
            let t1 = Instant::now();
            m.master_work.extend(strat.master_work());
            probe.end();
            // Under --cuda-graphs a step allocates nothing: its activations
            // live in the graph's private pool, allocated once at the capture
            // (peak_mem_alloc_mb holds them), so there is no per-step figure.
            m.mem.activations = if cfg.cuda_graphs { None } else { probe.bytes() };
            let dt = (t1 - t0).as_secs_f64();
            m.step_secs.push(dt);
            strat.timed_step_done();
            let cpu = crate::metrics::sampler::process_cpu_seconds();
            m.window = Some(crate::metrics::collect::Window {
                start: t_run,
                end: t1,
                cpu_secs: cpu0.zip(cpu).map(|(a, b)| b - a),
            });
            let n = m.step_secs.len();
            let stop = match cfg.schedule.timed {
                Length::Steps(k) => {
                    pb.set_position(n as u64);
                    n as u64 >= k
                }
                // Judged at the step's end, the window's end: a clock read
                // after the bookkeeping above could stop a window shorter
                // than --duration.
                Length::Time(d) => {
                    pb.set_position((t1 - t_run).as_millis().min(d.as_millis()) as u64);
                    t1 - t_run >= d
                }
                Length::Auto => {
                    pb.set_position(t_run.elapsed().as_millis().min(cfg.schedule.max_duration.as_millis()) as u64);
                    // The check is O(n): after the first 200 steps, every 1 % more.
                    let check = n <= 200 || n % (n / 100) == 0;
                    (check && precise_enough(&m.step_secs, cfg.schedule.ci_target, AUTO_MIN_STEPS))
                        || t_run.elapsed() >= cfg.schedule.max_duration
                }
            };
            let agree_range = range("gpubench.agree");
            let (loss, stop) = strat.agree(&loss_t, stop)?;
            drop(agree_range);
            drop(step_range);
            if let Some(p) = profiling.filter(|p| stop || n as u64 >= p.steps) {
                strat.devices().synchronize();
                crate::ffi::profiler_stop(&p.trace_path())?;
                profiling = None;
            }
            m.losses.push(loss);
            m.loss_first.get_or_insert(loss);
            let elapsed: f64 = m.step_secs.iter().sum();
            pb.set_message(format!("{:.1} img/s, loss {loss:.4}", global * n as f64 / elapsed));
            if !loss.is_finite() {
                m.status = Some(Status::Diverged);
                m.error = format!("loss became {loss} at timed step {n}");
                return Ok(());
            }
            if stop {
                if let Some(e) = energy {
                    e.mark(t1);
                }
                m.timed_end = match cfg.schedule.timed {
                    Length::Steps(_) => "steps".into(),
                    Length::Time(_) => "duration".into(),
                    Length::Auto => {
                        let p =
                            throughput_precision(&m.step_secs).map_or("n/a".into(), |p| format!("±{:.1}%", p * 100.0));
                        if precise_enough(&m.step_secs, cfg.schedule.ci_target, AUTO_MIN_STEPS) {
                            format!("target met: {p}")
                        } else {
                            format!("max duration reached: {p}")
                        }
                    }
                };
                if let (Some(a), Some(b)) = (host0, HostSnapshot::take()) {
                    let cores = crate::device::cpu_cores();
                    // A CPU run's intra-op threads on this host: --threads, split
                    // among its replicas or ranks, else one per core.
                    let threads = (strat.devices().kind == crate::device::DeviceKind::Cpu)
                        .then(|| cfg.host.count().unwrap_or(cores));
                    m.interference = host_window(&a, &b, cores).map(|w| w.notes(threads)).unwrap_or_default();
                }
                return Ok(());
            }
        }
    });
    let end = std::time::SystemTime::now();
    pb.finish_and_clear();
    match res {
        Ok(()) => {
            m.status.get_or_insert(Status::Ok);
        }
        Err(e) => {
            let (s, msg) = failure(&e);
            m.status = Some(s);
            m.error = msg;
        }
    }
    if m.status != Some(Status::Ok) {
        m.failed_at = Some(end);
    }
    m
}

/// The figures a run reports, derived from its samples.
#[derive(Debug, Clone, Serialize)]
pub struct Figures {
    pub throughput_img_s: f64,
    pub throughput_per_device_img_s: f64,
    /// Step time statistics in milliseconds.
    pub step_ms: Summary,
    /// 95 % intervals within this run (`metrics::interval`): throughput
    /// (batch means) and the median step time in ms (block bootstrap); None
    /// below `metrics::interval::MIN_STEPS` timed steps.
    pub throughput_ci: Option<Interval>,
    pub step_ms_p50_ci: Option<Interval>,
}

pub fn figures(step_secs: &[f64], global_batch: i64, n_devices: usize) -> Option<Figures> {
    if step_secs.is_empty() {
        return None;
    }
    let total: f64 = step_secs.iter().sum();
    let thr = global_batch as f64 * step_secs.len() as f64 / total;
    let ms: Vec<f64> = step_secs.iter().map(|s| s * 1e3).collect();
    Some(Figures {
        throughput_img_s: thr,
        throughput_per_device_img_s: thr / n_devices as f64,
        step_ms: summarize(&ms),
        throughput_ci: throughput_interval(step_secs, global_batch as f64),
        step_ms_p50_ci: median_interval(&ms),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::placement::Seat;
    use crate::cli::run::parse_run_args;
    use crate::data::Batch;
    use crate::device::Devices;
    use std::time::Duration;
    use tch::{nn, Device, Tensor};

    /// A strategy whose losses (and failures) are scripted, step by step.
    struct Mock {
        devices: Devices,
        vs: nn::VarStore,
        /// Loss of step i (warm-up included); an Err is a failing step.
        script: Vec<Result<f64, &'static str>>,
        step: usize,
        /// ddp's collective decision at step i: Some(stop) overrides the local one.
        agree_at: Vec<(usize, bool)>,
        sleep: Duration,
        /// Step i sleeps this long instead of `sleep`, where given.
        sleeps: Vec<Duration>,
    }

    impl Mock {
        fn new(script: Vec<Result<f64, &'static str>>) -> Mock {
            let vs = nn::VarStore::new(Device::Cpu);
            Mock {
                devices: Devices::cpu(1),
                vs,
                script,
                step: 0,
                agree_at: vec![],
                sleep: Duration::ZERO,
                sleeps: vec![],
            }
        }
    }

    impl Strategy for Mock {
        fn input_device(&self) -> Device {
            Device::Cpu
        }
        fn input_batch(&self) -> i64 {
            1
        }
        fn step_timed(&mut self, _: &[Batch], clock: &mut dyn PhaseClock) -> Result<tch::Tensor> {
            std::thread::sleep(self.sleeps.get(self.step).copied().unwrap_or(self.sleep));
            let s = self.script.get(self.step).copied().unwrap_or(Ok(1.0));
            self.step += 1;
            clock.mark(Phase::Forward);
            clock.mark(Phase::Backward);
            clock.mark(Phase::Optimizer);
            match s {
                Ok(l) => Ok(Tensor::from(l)),
                Err(e) => anyhow::bail!(e),
            }
        }
        fn agree(&mut self, loss: &Tensor, stop: bool) -> Result<(f64, bool)> {
            let forced = self.agree_at.iter().find(|(i, _)| *i == self.step).map(|(_, s)| *s);
            Ok((loss.f_double_value(&[])?, forced.unwrap_or(stop)))
        }
        fn devices(&self) -> &crate::device::Devices {
            &self.devices
        }
        fn optimizer_state_bytes(&self) -> u64 {
            0
        }
        fn var_store(&self) -> &nn::VarStore {
            &self.vs
        }
    }

    /// Batches from memory; fails at the given call.
    struct Source {
        calls: usize,
        fail_at: Option<usize>,
    }

    impl DataSource for Source {
        fn next_batch(&mut self) -> Result<Batch> {
            self.calls += 1;
            if Some(self.calls) == self.fail_at {
                anyhow::bail!("truncated JPEG");
            }
            Ok(Batch { images: Tensor::zeros([1], (tch::Kind::Float, Device::Cpu)), labels: Tensor::from(0i64) })
        }
        fn name(&self) -> String {
            "memory".into()
        }
    }

    fn cfg(args: &str) -> RunConfig {
        let v: Vec<&str> = args.split_whitespace().collect();
        parse_run_args(&v).unwrap().into_config(Seat::Local(Devices::cpu(1))).unwrap()
    }

    fn run(args: &str, strat: &mut Mock) -> Measurement {
        measure(&cfg(args), strat, &mut Source { calls: 0, fail_at: None }, &ProgressBar::hidden(), None)
    }

    #[test]
    fn warm_up_steps_are_not_timed() {
        let mut m = Mock::new(vec![Ok(9.0), Ok(8.0), Ok(7.0), Ok(6.0), Ok(5.0)]);
        let r = run("--warmup 2 --steps 3 --breakdown", &mut m);
        assert_eq!(r.status, Some(Status::Ok));
        assert_eq!((r.warmup_steps, r.step_secs.len()), (2, 3));
        assert_eq!(r.loss_first, Some(9.0), "the first loss is the first warm-up step's");
        assert_eq!(r.losses, [7.0, 6.0, 5.0]);
        assert_eq!(r.data_wait_secs.len(), 3);
        assert!(r.phase_secs.as_ref().is_some_and(|p| p.iter().all(|v| v.len() == 3)));
        assert!(r.window.is_some());
    }

    #[test]
    fn warm_up_and_timed_phases_by_wall_time() {
        let mut m = Mock::new(vec![]);
        m.sleep = Duration::from_millis(2);
        let t = Instant::now();
        let r = run("--warmup-time 20ms --duration 30ms", &mut m);
        assert_eq!(r.status, Some(Status::Ok));
        assert!(r.warmup_steps >= 1 && !r.step_secs.is_empty());
        assert!(t.elapsed() >= Duration::from_millis(50), "stopped before both phases' time had passed");
        let w = r.window.unwrap();
        assert!(w.end - w.start >= Duration::from_millis(30));
        assert_eq!(m.step as u64, r.warmup_steps + r.step_secs.len() as u64);
    }

    #[test]
    fn auto_warm_up_waits_for_steady_steps_and_auto_duration_for_precision() {
        // Slow first steps (autotuning), then steady 2 ms steps.
        let mut m = Mock::new(vec![]);
        m.sleeps = (0..8).map(|i| Duration::from_millis(30 - 3 * i)).collect();
        m.sleep = Duration::from_millis(2);
        let r = run("--warmup auto --duration auto --ci-target 5% --max-duration 20s", &mut m);
        assert_eq!(r.status, Some(Status::Ok));
        assert!(r.warmup_steps >= 15 && r.warmup_steps < 40, "{}", r.warmup_steps);
        assert!(r.warmup_end.starts_with("steady after"), "{}", r.warmup_end);
        assert!(r.timed_end.starts_with("target met: ±"), "{}", r.timed_end);
        assert!(r.step_secs.len() >= AUTO_MIN_STEPS);
        // An unreachable target stops at --max-duration, saying what it reached.
        let mut m = Mock::new(vec![]);
        m.sleeps = (0..400).map(|i| Duration::from_micros(if i % 7 == 0 { 8000 } else { 500 })).collect();
        let r = run("--warmup 0 --duration auto --ci-target 0.0001% --max-duration 300ms", &mut m);
        assert!(r.timed_end.starts_with("max duration reached: ±"), "{}", r.timed_end);
    }

    #[test]
    fn no_warm_up_at_all() {
        let r = run("--warmup 0 --steps 2", &mut Mock::new(vec![]));
        assert_eq!((r.warmup_steps, r.step_secs.len()), (0, 2));
    }

    #[test]
    fn a_non_finite_loss_diverges_in_warm_up_or_timed_steps() {
        let r = run("--warmup 3 --steps 3", &mut Mock::new(vec![Ok(1.0), Ok(f64::NAN)]));
        assert_eq!(r.status, Some(Status::Diverged));
        assert_eq!(r.error, "loss became NaN during warm-up step 2");
        assert!(r.step_secs.is_empty());
        let r = run("--warmup 1 --steps 5", &mut Mock::new(vec![Ok(1.0), Ok(1.0), Ok(f64::INFINITY)]));
        assert_eq!(r.status, Some(Status::Diverged));
        assert_eq!(r.error, "loss became inf at timed step 2");
        assert_eq!(r.step_secs.len(), 2, "the diverged step's time is kept");
    }

    #[test]
    fn errors_become_failed_or_oom_and_keep_what_was_measured() {
        let r = run("--warmup 1 --steps 5", &mut Mock::new(vec![Ok(1.0), Ok(1.0), Err("shape mismatch")]));
        assert_eq!((r.status, r.error.as_str()), (Some(Status::Failed), "shape mismatch"));
        assert_eq!(r.losses, [1.0]);
        let oom = Err("CUDA out of memory. Tried to allocate 2.00 GiB");
        let r = run("--warmup 1 --steps 5", &mut Mock::new(vec![Ok(1.0), oom]));
        assert_eq!(r.status, Some(Status::Oom));
        let mut data = Source { calls: 0, fail_at: Some(3) };
        let r = measure(&cfg("--warmup 1 --steps 5"), &mut Mock::new(vec![]), &mut data, &ProgressBar::hidden(), None);
        assert_eq!((r.status, r.error.as_str()), (Some(Status::Failed), "truncated JPEG"));
        assert_eq!(r.step_secs.len(), 1);
    }

    #[test]
    fn the_collective_decision_ends_each_phase() {
        // Rank 0 says stop at step 3 (the second timed step) although this
        // rank would go on: all ranks stop together.
        let mut m = Mock::new(vec![]);
        m.agree_at = vec![(1, true), (3, true)];
        let r = run("--warmup 5 --steps 10", &mut m);
        assert_eq!((r.warmup_steps, r.step_secs.len()), (1, 2));
        // …and a rank whose own count is reached waits for rank 0's word.
        let mut m = Mock::new(vec![]);
        m.agree_at = vec![(1, false), (2, true), (3, false), (4, false)];
        let r = run("--warmup 1 --steps 1", &mut m);
        assert_eq!((r.warmup_steps, r.step_secs.len()), (2, 3));
    }
}
