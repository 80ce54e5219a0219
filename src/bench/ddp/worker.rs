//! One ddp rank: rendezvous over c10d's TCPStore, train under the session
//! template, report to rank 0 through the store, and on rank 0 combine every
//! rank's measurements into the job's row.
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::env::DistEnv;
use crate::bench::measure::Measurement;
use crate::bench::session::{self, Gather, Gathered, Local, Session};
use crate::bench::sinks::Sinks;
use crate::config::RunConfig;
use crate::data::SourceSpec;
use crate::device::DeviceKind;
use crate::dist::{ProcessGroup, Store};
use crate::init::{Start, RANK_SEED_STRIDE};
use crate::metrics::devices::DeviceMetrics;
use crate::results::Status;
use crate::strategy::{ddp::Ddp, Strategy};

/// Runs this process as rank `env.rank` of the job `cfg` describes (its
/// `devices` is this rank's device); returns the exit code.
pub fn run(cfg: &RunConfig, env: &DistEnv) -> Result<i32> {
    if env.ours {
        watch_parent();
    }
    let is0 = env.rank == 0;
    let sinks = Sinks::new(cfg, Some(env.rank));
    // Our launcher checked the outputs before it started the ranks.
    if is0 && !env.ours {
        sinks.check()?;
    }
    if cfg.devices.kind == DeviceKind::Cpu {
        // Split the cores among this node's ranks so they do not oversubscribe.
        let total = cfg.threads.unwrap_or_else(crate::device::cpu_cores);
        tch::set_num_threads((total / env.ranks_on_node()).max(1) as i32);
    } else if let Some(t) = cfg.threads {
        tch::set_num_threads(t as i32);
    }
    // Every rank loads the same --init-from weights (and its data seed).
    let start = Start::load(cfg)?;
    let timeout = cfg.ddp.timeout;
    let store =
        Store::new(&env.master_addr, env.master_port, env.rank, env.world_size, is0, timeout).context("rendezvous")?;
    let cuda_dev = (cfg.devices.kind == DeviceKind::Cuda).then(|| cfg.devices.ordinals[0]);
    let pg = ProcessGroup::new(&store, cfg.ddp.backend, env.rank, env.world_size, cuda_dev, timeout)?;
    // One run id for the whole job, chosen by rank 0, so that every rank's
    // telemetry joins the row.
    let run_id = if is0 {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        let id = crate::bench::row::new_run_id(nanos);
        store.set("gpubench/run_id", id.as_bytes())?;
        id
    } else {
        String::from_utf8_lossy(&store.get("gpubench/run_id")?).into_owned()
    };
    let mut rank = Rank { env: env.clone(), store, pg: Some(pg), run_id };
    session::run(cfg, &mut rank, &start, &sinks)
}

/// A ddp rank, as the session template's part.
pub struct Rank {
    env: DistEnv,
    store: Store,
    /// Handed to the strategy when it is built.
    pg: Option<ProcessGroup>,
    run_id: String,
}

impl Session for Rank {
    fn build(&mut self, cfg: &RunConfig) -> Result<Box<dyn Strategy>> {
        let pg = self.pg.take().expect("the strategy is built once");
        Ok(Box::new(Ddp::new(cfg, pg)?))
    }

    fn source(&self, cfg: &RunConfig, _: &dyn Strategy, start: &Start) -> SourceSpec {
        let data_seed = start.data_seed(cfg.seed);
        SourceSpec {
            batch: cfg.batch_per_device,
            device: cfg.devices.device(0),
            synthetic_seed: data_seed.wrapping_add(RANK_SEED_STRIDE * self.env.rank as u64),
            // One sampler seed for all ranks, so that their shards are disjoint.
            seed: data_seed,
            rank: self.env.rank,
            world: self.env.world_size,
            workers: cfg.workers,
        }
    }

    fn roles(&self, _: &RunConfig) -> Vec<String> {
        vec![format!("rank {}", self.env.rank)]
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
        if cfg.devices.kind == DeviceKind::Cpu {
            // Every rank's process is "cpu": tell them apart in the devices file.
            devices.iter_mut().for_each(|d| d.device = format!("cpu:rank{}", self.env.rank));
        }
        let m = l.m;
        let report = RankReport {
            rank: self.env.rank,
            step_secs: m.step_secs,
            losses: m.losses,
            warmup_steps: m.warmup_steps,
            loss_first: m.loss_first,
            status: m.status.unwrap_or(Status::Failed).name().into(),
            error: m.error,
            reducer,
            data_wait_secs: m.data_wait_secs,
            phase_secs: m.phase_secs,
            devices,
            data_bad: l.bad_files,
            skipped: l.skipped,
        };
        self.store.set(&format!("gpubench/result/{}", self.env.rank), &serde_json::to_vec(&report)?)?;
        if self.env.rank != 0 {
            // Rank 0 hosts the store: it stays up until every rank has reported.
            return Ok(Gather::NoRow { code: if report.status == Status::Ok.name() { 0 } else { 1 } });
        }
        let mut reports = vec![];
        for r in 0..self.env.world_size {
            let bytes = self
                .store
                .get(&format!("gpubench/result/{r}"))
                .with_context(|| format!("waiting for rank {r}'s result"))?;
            reports.push(serde_json::from_slice::<RankReport>(&bytes).with_context(|| format!("rank {r}'s result"))?);
        }
        let (m, reducer, devs) = combine(&reports);
        let data_skipped = distinct_bad(&reports);
        let extra = move |row: &mut crate::results::csv::Row| {
            if let Some(r) = reducer {
                row.ddp_forward_compute_ms = r.forward_compute_ms;
                row.ddp_backward_compute_ms = r.backward_compute_ms;
                row.ddp_backward_comm_ms = r.backward_comm_ms;
                row.ddp_overlap_ms = r.backward_overlap_ms;
                row.ddp_buckets = Some(r.buckets as u32);
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

/// What each rank sends rank 0 through the store after the timed window.
#[derive(Debug, Serialize, Deserialize)]
pub struct RankReport {
    pub rank: usize,
    pub step_secs: Vec<f64>,
    pub losses: Vec<f64>,
    pub warmup_steps: u64,
    pub loss_first: Option<f64>,
    pub status: String,
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
}

/// The Reducer's averaged runtime statistics (DDP logging's avg_* counters).
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct ReducerStatsLite {
    pub forward_compute_ms: Option<f64>,
    pub backward_compute_ms: Option<f64>,
    pub backward_comm_ms: Option<f64>,
    pub backward_overlap_ms: Option<f64>,
    pub buckets: usize,
}

/// Workers of our launcher exit when it goes away (SIGTERM, SIGKILL), so that
/// no worker is left behind waiting in a collective.
fn watch_parent() {
    let parent = std::os::unix::process::parent_id();
    std::thread::spawn(move || loop {
        if std::os::unix::process::parent_id() != parent {
            std::process::exit(1);
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    });
}

/// --data PATH: how many distinct files the ranks skipped. Shards are
/// reshuffled each epoch, so two ranks may meet the same bad file.
pub fn distinct_bad(reports: &[RankReport]) -> Option<u64> {
    let mut all: Vec<u32> = reports.iter().filter_map(|r| r.data_bad.as_deref()).flatten().copied().collect();
    if all.is_empty() && reports.iter().all(|r| r.data_bad.is_none()) {
        return None;
    }
    all.sort_unstable();
    all.dedup();
    Some(all.len() as u64)
}

/// Combines ranks: a step takes as long as its slowest rank; the loss is the
/// global mean (already agreed); the worst status wins, naming its rank.
pub fn combine(reports: &[RankReport]) -> (Measurement, Option<ReducerStatsLite>, Vec<DeviceMetrics>) {
    let n = reports.iter().map(|r| r.step_secs.len()).min().unwrap_or(0);
    let step_secs: Vec<f64> = (0..n).map(|i| reports.iter().map(|r| r.step_secs[i]).fold(0.0, f64::max)).collect();
    let r0 = &reports[0];
    let (status, error) = match reports.iter().find(|r| r.status != Status::Ok.name()) {
        None => (Status::Ok, String::new()),
        Some(b) => (Status::of(&b.status), format!("rank {}: {}", b.rank, b.error)),
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
    };
    (m, r0.reducer.clone(), reports.iter().flat_map(|r| r.devices.clone()).collect())
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
            status: "ok".into(),
            error: String::new(),
            reducer: None,
            data_wait_secs: vec![],
            phase_secs: None,
            devices: vec![],
            data_bad: bad,
            skipped: 0,
        }
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
        b.status = "oom".into();
        b.error = "CUDA out of memory".into();
        let (m, _, _) = combine(&[a, b]);
        assert_eq!(m.step_secs, [1.5, 2.0]);
        assert_eq!(m.status, Some(Status::Oom));
        assert_eq!(m.error, "rank 1: CUDA out of memory");
    }
}
