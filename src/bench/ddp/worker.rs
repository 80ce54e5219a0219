//! One ddp rank: rendezvous over c10d's TCPStore, train under the session
//! template, report to rank 0 through the store, and on rank 0 combine every
//! rank's measurements into the job's row.
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use tch::{nn, Device, Tensor};

use super::env::DistEnv;
use super::keys;
use super::liveness::{Liveness, Place};
use crate::bench::measure::Measurement;
use crate::bench::session::{self, Gather, Gathered, Local, Session};
use crate::bench::sinks::Sinks;
use crate::config::RunConfig;
use crate::data::{Batch, SourceSpec};
use crate::device::{DeviceKind, Devices};
use crate::dist::{ProcessGroup, Store};
use crate::error::usage;
use crate::init::Start;
use crate::metrics::devices::DeviceMetrics;
use crate::results::Status;
use crate::strategy::{ddp::Ddp, PhaseClock, Strategy};

/// How long rank 0, after failing itself, waits for the other ranks' results
/// (they may be blocked in a collective with it and never send one).
const FAILED_WAIT: Duration = Duration::from_secs(5);

/// Runs this process as rank `env.rank` of the job `cfg` describes (its
/// `devices` is this rank's device); returns the exit code.
pub(crate) fn run(cfg: &RunConfig, env: &DistEnv) -> Result<i32> {
    if env.ours {
        watch_parent();
    }
    let is0 = env.rank == 0;
    let fault = Fault::from_env(env.rank)?;
    // The outputs were checked with the role (`cli::run::job`).
    let sinks = Sinks::new(cfg, Some(env.rank));
    // This node's ranks share its cores (`device::default_threads`): all of
    // them on the CPU; on a GPU, a few each for staging batches.
    tch::set_num_threads(crate::device::threads_per_worker(
        cfg.placement.devices.kind,
        cfg.host.count(),
        env.ranks_on_node(),
    ) as i32);
    if cfg.placement.devices.kind == DeviceKind::Cuda {
        // The rank's GPU is current on this thread from the start (the
        // shim sets it again for NCCL), whatever backend it uses.
        crate::ffi::cuda_set_device(cfg.placement.devices.ordinals[0])?;
    }
    // Every rank loads the same --init-from weights (and its data seed).
    let start = Start::load(cfg)?;
    let timeout = cfg.ddp.timeout;
    let store =
        Store::new(&env.master_addr, env.master_port, env.rank, env.world_size, is0, timeout).context("rendezvous")?;
    let cuda_dev = (cfg.placement.devices.kind == DeviceKind::Cuda).then(|| cfg.placement.devices.ordinals[0]);
    let pg = ProcessGroup::new(&store, cfg.ddp.backend, env.rank, env.world_size, cuda_dev, timeout)?;
    // One run id for the whole job, chosen by rank 0, so that every rank's
    // telemetry joins the row.
    let run_id = if is0 {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        let id = crate::bench::row::new_run_id(nanos);
        store.set(keys::RUN_ID, id.as_bytes())?;
        id
    } else {
        String::from_utf8_lossy(&store.get(keys::RUN_ID)?).into_owned()
    };
    let places = super::liveness::exchange(&store, env).context("rendezvous: where each rank runs")?;
    let liveness = Liveness::start(env, places.clone(), timeout, end_lost(cfg, env, sinks.clone()))?;
    let mut rank = Rank { env: env.clone(), store, pg: Some(pg), run_id, fault, places, liveness };
    let res = session::run(cfg, &mut rank, &start, &sinks);
    // A rank that failed because its peer's host went away says which.
    res.map_err(|e| {
        let said = crate::error::one_line(&e);
        let explained = rank.liveness.explain(&said);
        if explained == said {
            e
        } else {
            anyhow::anyhow!(explained)
        }
    })
}

/// What the liveness watcher does with a run still blocked after its verdict:
/// say it as this process's last line (our launcher names the loss from it),
/// append the `failed` row where no launcher of ours will (rank 0 for a lost
/// peer; a node's first rank for a lost store host), and end the process.
fn end_lost(cfg: &RunConfig, env: &DistEnv, sinks: Sinks) -> Box<dyn FnOnce(&str) + Send> {
    let cfg = cfg.clone();
    let writes = !env.ours && (env.rank == 0 || env.local_rank == 0);
    Box::new(move |verdict: &str| {
        let held = sinks.append_once(|| match (&cfg.output.out, writes) {
            (Some(out), true) => {
                let mut row = crate::bench::row::base_row(&cfg);
                row.status = Status::Failed;
                row.error = verdict.to_string();
                crate::results::csv::append_rows(out, &[row])
            }
            _ => Ok(()),
        });
        if let Err(e) = &held {
            eprintln!("error: writing the failed row: {}", crate::error::one_line(e));
        }
        eprintln!("error: {verdict}");
        // The main thread is blocked in a collective: no destructor may run
        // beside it, so the process ends here, the row lock still held.
        unsafe { libc::_exit(1) }
    })
}

/// A ddp rank, as the session template's part.
pub(crate) struct Rank {
    env: DistEnv,
    store: Store,
    /// Handed to the strategy when it is built.
    pg: Option<ProcessGroup>,
    run_id: String,
    /// The test hook's fault for this rank, if any.
    fault: Option<Fault>,
    /// Every rank's host and node, in rank order.
    places: Vec<Place>,
    liveness: Liveness,
}

impl Session for Rank {
    fn build(&mut self, cfg: &RunConfig) -> Result<Box<dyn Strategy>> {
        let pg = self.pg.take().expect("the strategy is built once");
        let ddp = Box::new(Ddp::new(cfg, pg)?);
        Ok(match self.fault.take() {
            Some(f) => Box::new(Faulty { inner: ddp, fault: f, steps: 0 }),
            None => ddp,
        })
    }

    fn source(&self, cfg: &RunConfig, _: &dyn Strategy, start: &Start) -> SourceSpec {
        let data_seed = start.data_seed(cfg.workload.seed);
        SourceSpec {
            batch: cfg.batch_per_device,
            device: cfg.placement.devices.device(0),
            // One seed for all ranks: their shards are disjoint, and synthetic
            // data is offset by the rank (`data::make_source`).
            seed: data_seed,
            rank: self.env.rank,
            world: self.env.world_size,
            workers: cfg.host.workers,
        }
    }

    fn roles(&self, _: &RunConfig) -> Vec<String> {
        vec![format!("rank {}", self.env.rank)]
    }

    fn note(&self, cfg: &RunConfig) -> String {
        match cfg.placement.node_devices.shares_a_gpu() {
            true => "TEST MODE: several ranks share a GPU over Gloo (the rendezvous, Reducer and rank combining run, \
                     but this is not a multi-GPU measurement)"
                .into(),
            false => String::new(),
        }
    }

    fn run_id(&self) -> Option<String> {
        Some(self.run_id.clone())
    }

    /// A rank that cannot build its replica leaves its peers waiting in the
    /// Reducer's first collective; the process ends with the error, and the
    /// launcher stops the others and writes the row naming this rank.
    fn abort_on_setup_failure(&self) -> bool {
        true
    }

    fn gather(&mut self, cfg: &RunConfig, l: Local) -> Result<Gather> {
        let reducer = l.reducer.map(|s| ReducerStatsLite {
            forward_compute_ms: s.avg_forward_compute_ms,
            backward_compute_ms: s.avg_backward_compute_ms,
            backward_comm_ms: s.avg_backward_comm_ms,
            backward_overlap_ms: s.avg_backward_overlap_ms,
            buckets: s.num_buckets,
        });
        let mut devices = l.devs;
        if cfg.placement.devices.kind == DeviceKind::Cpu {
            // Every rank's process is "cpu": tell them apart in the devices file.
            devices.iter_mut().for_each(|d| d.device = format!("cpu:rank{}", self.env.rank));
        }
        let m = l.m;
        let mem = m.mem;
        let status = m.status.unwrap_or(Status::Failed);
        if status != Status::Ok {
            // Said here, on this rank's stderr: the launcher names the rank
            // from it when this rank's result cannot reach the row.
            eprintln!("error: {}", m.error);
        }
        let epoch = |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let failed_at = m.failed_at.map(|t| epoch(t).as_secs_f64());
        let devices_energy = devices.iter().map(|d| d.energy_w).collect();
        let report = RankReport {
            rank: self.env.rank,
            step_secs: m.step_secs,
            losses: m.losses,
            warmup_steps: m.warmup_steps,
            loss_first: m.loss_first,
            status,
            error: m.error,
            reducer,
            data_wait_secs: m.data_wait_secs,
            phase_secs: m.phase_secs,
            devices,
            data_bad: l.bad_files,
            skipped: l.skipped,
            failed_at,
            warmup_end: m.warmup_end,
            timed_end: m.timed_end,
            interference: m.interference,
            energy_w: devices_energy,
        };
        self.store.set(&keys::result(self.env.rank), &serde_json::to_vec(&report)?)?;
        if self.env.rank != 0 {
            // Rank 0 hosts the store: it stays up until every rank has reported.
            return Ok(Gather::NoRow { code: if status == Status::Ok { 0 } else { 1 } });
        }
        // Rank 0 waits for every rank while it is well; once it has failed, the
        // others may be stuck in a collective with it, so it waits briefly.
        let mut reports = vec![report];
        let mut missing = vec![];
        for r in 1..self.env.world_size {
            let key = keys::result(r);
            let bytes = if status == Status::Ok {
                Some(self.store.get(&key).with_context(|| format!("waiting for rank {r}'s result"))?)
            } else {
                self.store.get_within(&key, FAILED_WAIT)?
            };
            match bytes {
                Some(b) => reports
                    .push(serde_json::from_slice::<RankReport>(&b).with_context(|| format!("rank {r}'s result"))?),
                None => missing.push(r),
            }
        }
        if !missing.is_empty() {
            // Ranks that send nothing may be gone with their host: name it.
            let explained = self.liveness.explain(&reports[0].error);
            if explained != reports[0].error {
                eprintln!("error: {explained}");
                reports[0].error = explained;
            }
            if self.env.ours {
                // Our launcher sees every rank end and names the first that
                // failed; a row from here could only guess.
                return Ok(Gather::NoRow { code: 1 });
            }
            let list: Vec<String> = missing.iter().map(|r| r.to_string()).collect();
            reports[0].error += &format!("; no result from rank(s) {} (they stopped without one)", list.join(", "));
        }
        let (mut m, reducer, mut devs) = combine(&reports);
        if cfg.placement.node_devices.shares_a_gpu() {
            // The one-GPU test mode: every rank reports the same GPU, whose
            // counters would be summed once per rank. Rank 0's line stands for it.
            let mut seen: Vec<String> = vec![];
            devs.retain(|d| {
                let first = !seen.contains(&d.device);
                seen.push(d.device.clone());
                first
            });
        }
        let slowest = slowest_rank(&reports);
        // Memory by part is rank 0's own: its device is the row's first.
        m.mem = mem;
        let data_skipped = distinct_bad(&reports);
        // Outside Slurm (which names its nodes), the hosts the ranks ran on.
        let nodes = super::liveness::node_list(&self.places);
        let extra = move |row: &mut crate::results::csv::Row| {
            if row.node_list.is_empty() {
                row.node_list = nodes;
            }
            if let Some(r) = reducer {
                row.ddp_forward_compute_ms = r.forward_compute_ms;
                row.ddp_backward_compute_ms = r.backward_compute_ms;
                row.ddp_backward_comm_ms = r.backward_comm_ms;
                row.ddp_overlap_ms = r.backward_overlap_ms;
                row.ddp_buckets = Some(r.buckets as u32);
            }
            if let Some((rank, excess, wait)) = slowest {
                row.slowest_rank = Some(rank as u32);
                row.rank_compute_excess_pct = Some(excess);
                row.rank_wait_ms = Some(wait);
            }
        };
        // fp16: every rank unscales the same averaged gradients, so rank 0's
        // count of skipped steps is the job's.
        Ok(Gather::Row(Box::new(Gathered {
            m,
            devs,
            skipped: reports[0].skipped,
            data_skipped,
            extra: Box::new(extra),
        })))
    }
}

/// The test hook `crate::internal::Hook::Fault`, as set.
const FAULT_ENV: &str = crate::internal::Hook::Fault.var();

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FaultKind {
    Oom,
    Crash,
    /// The whole process stops (SIGSTOP), heartbeat included, as a paused
    /// or cut-off host looks to its peers.
    Stop,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Fault {
    step: u64,
    kind: FaultKind,
}

impl Fault {
    /// The fault the hook sets for `rank`, if any. `allreduce`'s ranks take
    /// STEP as the message size's place in the sweep (from 1).
    pub(crate) fn from_env(rank: usize) -> Result<Option<Fault>> {
        match crate::internal::Hook::Fault.get() {
            Some(v) => Fault::parse(&v, rank),
            None => Ok(None),
        }
    }

    /// At `step`: the injected error (`oom`), or the process ends (`crash`).
    pub(crate) fn strike(&self, step: u64) -> Result<()> {
        if step != self.step {
            return Ok(());
        }
        match self.kind {
            FaultKind::Crash => std::process::abort(),
            FaultKind::Stop => {
                // SAFETY: raising a signal at this process; it resumes (or is
                // killed) from outside.
                unsafe { libc::raise(libc::SIGSTOP) };
                Ok(())
            }
            FaultKind::Oom => Err(anyhow::anyhow!(
                "CUDA out of memory. Tried to allocate 2.00 GiB (injected by {FAULT_ENV} at step {step})"
            )),
        }
    }

    /// The fault `spec` sets for `rank`, if it is that rank's.
    fn parse(spec: &str, rank: usize) -> Result<Option<Fault>> {
        let bad =
            || usage(format!("{FAULT_ENV}={spec:?} is not RANK:STEP:KIND (KIND oom, crash or stop, STEP from 1)"));
        let parts: Vec<&str> = spec.split(':').collect();
        let [r, step, kind] = parts[..] else { return Err(bad()) };
        let r: usize = r.parse().map_err(|_| bad())?;
        let step: u64 = step.parse().ok().filter(|&s| s >= 1).ok_or_else(bad)?;
        let kind = match kind {
            "oom" => FaultKind::Oom,
            "crash" => FaultKind::Crash,
            "stop" => FaultKind::Stop,
            _ => return Err(bad()),
        };
        Ok((r == rank).then_some(Fault { step, kind }))
    }
}

/// A strategy that fails as its `Fault` says, and otherwise is `inner`.
struct Faulty {
    inner: Box<dyn Strategy>,
    fault: Fault,
    steps: u64,
}

impl Strategy for Faulty {
    fn input_device(&self) -> Device {
        self.inner.input_device()
    }
    fn input_batch(&self) -> i64 {
        self.inner.input_batch()
    }
    fn step_timed(&mut self, batch: &[Batch], clock: &mut dyn PhaseClock) -> Result<Tensor> {
        self.steps += 1;
        self.fault.strike(self.steps)?;
        self.inner.step_timed(batch, clock)
    }
    fn devices(&self) -> &Devices {
        self.inner.devices()
    }
    fn agree(&mut self, loss: &Tensor, stop: bool) -> Result<(f64, bool)> {
        self.inner.agree(loss, stop)
    }
    fn skipped_steps(&self) -> u64 {
        self.inner.skipped_steps()
    }
    fn reducer_stats(&mut self) -> Option<crate::dist::ReducerStats> {
        self.inner.reducer_stats()
    }
    fn timed_step_done(&mut self) {
        self.inner.timed_step_done()
    }
    fn var_store(&self) -> &nn::VarStore {
        self.inner.var_store()
    }
    fn optimizer_state_bytes(&self) -> u64 {
        self.inner.optimizer_state_bytes()
    }
}

/// What each rank sends rank 0 through the store after the timed window.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct RankReport {
    pub rank: usize,
    pub step_secs: Vec<f64>,
    pub losses: Vec<f64>,
    pub warmup_steps: u64,
    pub loss_first: Option<f64>,
    pub status: Status,
    pub error: String,
    pub reducer: Option<ReducerStatsLite>,
    pub data_wait_secs: Vec<f64>,
    pub phase_secs: Option<[Vec<f64>; 3]>,
    /// This rank's device (allocator peaks, NVML, its process's CPU and RSS).
    pub devices: Vec<DeviceMetrics>,
    /// --data PATH: dataset indices of the unreadable files this rank skipped.
    #[serde(default)]
    pub data_bad: Option<Vec<u32>>,
    /// fp16 steps this rank's loss scaler skipped.
    #[serde(default)]
    pub skipped: u64,
    /// When this rank's run failed (seconds since the epoch): the earliest
    /// failure is the cause, the later ones its consequences (a peer gone
    /// from a collective).
    #[serde(default)]
    pub failed_at: Option<f64>,
    #[serde(default)]
    pub warmup_end: String,
    #[serde(default)]
    pub timed_end: String,
    /// What disturbed this rank's run.
    #[serde(default)]
    pub interference: Vec<String>,
    /// Each of `devices`' mean power from its energy counter: a field the
    /// devices file does not carry (`DeviceMetrics::energy_w` is skipped
    /// there), sent here so that a row of several ranks measures energy as a
    /// single process's does, not from NVML's averaged power.
    #[serde(default)]
    pub energy_w: Vec<Option<f64>>,
}

/// The Reducer's averaged runtime statistics (DDP logging's avg_* counters).
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub(crate) struct ReducerStatsLite {
    pub forward_compute_ms: Option<f64>,
    pub backward_compute_ms: Option<f64>,
    pub backward_comm_ms: Option<f64>,
    pub backward_overlap_ms: Option<f64>,
    pub buckets: usize,
}

/// Workers of our launcher exit when it goes away (SIGTERM, SIGKILL), so that
/// no worker is left behind waiting in a collective. The parent's pid comes
/// from `GPUBENCH_PARENT_PID` where the parent set it (`crate::internal`),
/// so a parent killed before this runs is noticed too.
pub(crate) fn watch_parent() {
    let parent = std::env::var(crate::internal::PARENT_PID)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(std::os::unix::process::parent_id);
    std::thread::spawn(move || loop {
        if std::os::unix::process::parent_id() != parent {
            std::process::exit(1);
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    });
}

/// --data PATH: how many distinct files the ranks skipped. Shards are
/// reshuffled each epoch, so two ranks may meet the same bad file.
pub(crate) fn distinct_bad(reports: &[RankReport]) -> Option<u64> {
    let mut all: Vec<u32> = reports.iter().filter_map(|r| r.data_bad.as_deref()).flatten().copied().collect();
    if all.is_empty() && reports.iter().all(|r| r.data_bad.is_none()) {
        return None;
    }
    all.sort_unstable();
    all.dedup();
    Some(all.len() as u64)
}

/// The rank whose compute (the Reducer's forward plus backward compute time,
/// averaged over its sampled iterations) is the longest; how much longer
/// than the median of the other ranks' it is, in % and in ms (what the
/// others wait for it each step). Wall step times cannot tell: the
/// all-reduce makes every rank wait for the slowest.
pub(crate) fn slowest_rank(reports: &[RankReport]) -> Option<(usize, f64, f64)> {
    let compute: Vec<(usize, f64)> = reports
        .iter()
        .filter_map(|r| {
            let s = r.reducer.as_ref()?;
            Some((r.rank, s.forward_compute_ms? + s.backward_compute_ms?))
        })
        .collect();
    if compute.len() < 2 || compute.len() != reports.len() {
        return None;
    }
    let (rank, ms) = compute.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
    let others: Vec<f64> = compute.iter().filter(|c| c.0 != rank).map(|c| c.1).collect();
    let median = crate::metrics::stats::percentile(&others, 50.0);
    (median > 0.0).then(|| (rank, (ms / median - 1.0) * 100.0, ms - median))
}

/// Combines ranks: a step takes as long as its slowest rank; the loss is the
/// global mean (already agreed); the first rank to fail sets the status,
/// named in the error.
pub(crate) fn combine(reports: &[RankReport]) -> (Measurement, Option<ReducerStatsLite>, Vec<DeviceMetrics>) {
    let n = reports.iter().map(|r| r.step_secs.len()).min().unwrap_or(0);
    let step_secs: Vec<f64> = (0..n).map(|i| reports.iter().map(|r| r.step_secs[i]).fold(0.0, f64::max)).collect();
    let r0 = &reports[0];
    let first_failure = reports
        .iter()
        .filter(|r| r.status != Status::Ok)
        .min_by(|a, b| a.failed_at.unwrap_or(f64::MAX).total_cmp(&b.failed_at.unwrap_or(f64::MAX)));
    let (status, error) = match first_failure {
        None => (Status::Ok, String::new()),
        Some(b) => (b.status, format!("rank {}: {}", b.rank, b.error)),
    };
    let m = Measurement {
        step_secs,
        losses: r0.losses.clone(),
        warmup_steps: r0.warmup_steps,
        loss_first: r0.loss_first,
        status: Some(status),
        error,
        // Rank 0's view: its wait for data and its phases.
        data_wait_secs: r0.data_wait_secs.clone(),
        phase_secs: r0.phase_secs.clone(),
        window: None,
        failed_at: None,
        // Rank 0's, set by the caller (it is not in the reports).
        mem: Default::default(),
        master_work: vec![],
        warmup_end: r0.warmup_end.clone(),
        timed_end: r0.timed_end.clone(),
        // Every rank's findings, each once (ranks on one host see the same).
        interference: {
            let mut v: Vec<String> = vec![];
            for n in reports.iter().flat_map(|r| r.interference.iter()) {
                if !v.contains(n) {
                    v.push(n.clone());
                }
            }
            v
        },
    };
    let devices = reports
        .iter()
        .flat_map(|r| {
            r.devices.iter().enumerate().map(|(i, d)| {
                let mut d = d.clone();
                d.energy_w = d.energy_w.or(r.energy_w.get(i).copied().flatten());
                d
            })
        })
        .collect();
    (m, r0.reducer.clone(), devices)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(rank: usize, bad: Option<Vec<u32>>) -> RankReport {
        RankReport {
            rank,
            step_secs: vec![],
            losses: vec![],
            warmup_steps: 0,
            loss_first: None,
            status: crate::results::Status::Ok,
            error: String::new(),
            reducer: None,
            data_wait_secs: vec![],
            phase_secs: None,
            devices: vec![],
            data_bad: bad,
            skipped: 0,
            failed_at: None,
            warmup_end: String::new(),
            timed_end: String::new(),
            interference: vec![],
            energy_w: vec![],
        }
    }

    /// Every rank's energy counter reaches the row: through the store, where
    /// the devices' own field is not serialized.
    #[test]
    fn each_ranks_energy_survives_the_store() {
        let mut r1 = report(1, None);
        r1.devices = vec![DeviceMetrics { device: "cuda:1".into(), energy_w: Some(250.0), ..Default::default() }];
        r1.energy_w = r1.devices.iter().map(|d| d.energy_w).collect();
        let sent: RankReport = serde_json::from_slice(&serde_json::to_vec(&r1).unwrap()).unwrap();
        assert_eq!(sent.devices[0].energy_w, None, "the devices' field is not sent");
        let (_, _, devices) = combine(&[report(0, None), sent]);
        assert_eq!(devices[0].energy_w, Some(250.0));
    }

    #[test]
    fn a_bad_file_met_by_two_ranks_counts_once() {
        let r = [report(0, Some(vec![3, 9])), report(1, Some(vec![9, 4]))];
        assert_eq!(distinct_bad(&r), Some(3));
        assert_eq!(distinct_bad(&[report(0, Some(vec![])), report(1, Some(vec![]))]), Some(0));
        // Synthetic data reads no files: the column stays empty.
        assert_eq!(distinct_bad(&[report(0, None), report(1, None)]), None);
    }

    #[test]
    fn the_slowest_rank_sets_each_step_and_the_worst_status_names_its_rank() {
        let mut a = report(0, None);
        a.step_secs = vec![1.0, 2.0, 3.0];
        let mut b = report(1, None);
        b.step_secs = vec![1.5, 1.0];
        b.status = crate::results::Status::Oom;
        b.error = "CUDA out of memory".into();
        b.failed_at = Some(100.0);
        // Rank 0 failed later, because rank 1 left the collective.
        a.status = crate::results::Status::Failed;
        a.error = "Connection closed by peer".into();
        a.failed_at = Some(101.5);
        let (m, _, _) = combine(&[a, b]);
        assert_eq!(m.step_secs, [1.5, 2.0]);
        assert_eq!(m.status, Some(Status::Oom));
        assert_eq!(m.error, "rank 1: CUDA out of memory");
    }

    #[test]
    fn faults_parse_for_their_rank_only() {
        let f = Fault::parse("1:3:oom", 1).unwrap().unwrap();
        assert_eq!((f.step, f.kind), (3, FaultKind::Oom));
        assert!(Fault::parse("1:3:oom", 0).unwrap().is_none());
        assert_eq!(Fault::parse("0:1:crash", 0).unwrap().unwrap().kind, FaultKind::Crash);
        for bad in ["1:3", "x:3:oom", "1:0:oom", "1:3:fire"] {
            assert_eq!(crate::error::exit_code(&Fault::parse(bad, 1).unwrap_err()), 2, "{bad}");
        }
    }
}
