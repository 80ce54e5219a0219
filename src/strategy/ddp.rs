//! DistributedDataParallel: one process per device; gradients are averaged
//! by libtorch's own c10d `Reducer` (bucketed, all-reduce launched from the
//! autograd hooks as buckets fill, overlapping backward) over Gloo or NCCL,
//! exactly the engine torch.nn.parallel.DistributedDataParallel drives.
//!
//! Each step, as DDP's forward does: prepare_for_forward (+ bucket rebuild
//! after the first iteration, + buffer broadcast from rank 0), forward,
//! prepare_for_backward, backward (hooks all-reduce), optimizer step.
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use tch::{nn, Device, Kind, Tensor};

use super::precision::{autocast, Amp};
use super::{build_model, build_optimizer, loss_fn, Phase, PhaseClock, Strategy};
use crate::cli::RunArgs;
use crate::config::{self, BackendKind, RunConfig, StrategyKind};
use crate::device::{self, DeviceKind, Devices};
use crate::dist::{Backend, ProcessGroup, Reducer, ReducerOptions, ReducerStats, Store};
use crate::error::usage;
use crate::launcher::DistEnv;
use crate::metrics::devices::DeviceMetrics;
use crate::model::Model;
use crate::runner::{self, Measurement, Status};

pub struct Ddp {
    device: Devices,
    vs: nn::VarStore,
    model: Model,
    opt: nn::Optimizer,
    params: Vec<Tensor>,
    // Declared before `pg` so it is dropped first: it holds the group.
    reducer: Reducer,
    pg: ProcessGroup,
    batch: i64,
    world: usize,
    rank: usize,
    grad_as_bucket_view: bool,
    amp: Amp,
}

/// NCCL on CUDA, Gloo on the CPU, unless `--backend` says otherwise.
pub fn backend_for(choice: Option<BackendKind>, devices: &Devices) -> BackendKind {
    choice.unwrap_or(match devices.kind {
        DeviceKind::Cuda => BackendKind::Nccl,
        DeviceKind::Cpu => BackendKind::Gloo,
    })
}

impl Ddp {
    /// Builds this rank's replica (same seed on every rank; rank 0's weights
    /// are broadcast anyway, as DDP does) and the Reducer over `pg`.
    pub fn new(cfg: &RunConfig, device: Devices, pg: ProcessGroup, a: &crate::cli::DdpArgs) -> Result<Self> {
        let (vs, model) = build_model(cfg, device.device(0));
        let opt = build_optimizer(cfg, &vs)?;
        let params = vs.trainable_variables();
        let trainable: std::collections::HashSet<*mut torch_sys::C_tensor> =
            params.iter().map(|p| p.as_ptr() as *mut _).collect();
        // Buffers (BatchNorm statistics), in a fixed order on every rank.
        let mut named: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        let buffers: Vec<Tensor> = named
            .into_iter()
            .filter(|(_, t)| !t.requires_grad() && !trainable.contains(&(t.as_ptr() as *mut _)))
            .map(|(_, t)| t)
            .collect();
        let opts = ReducerOptions {
            bucket_cap_bytes: Some((a.bucket_cap_mb * 1024.0 * 1024.0) as i64),
            first_bucket_cap_bytes: None,
            find_unused_parameters: a.find_unused_parameters,
            gradient_as_bucket_view: a.gradient_as_bucket_view,
            broadcast_buffers: !a.no_broadcast_buffers,
            stats_sample_rate: None,
        };
        let reducer = Reducer::new(&pg, &params, &buffers, &opts)?;
        let (world, rank) = (pg.world(), pg.rank());
        Ok(Ddp {
            device,
            vs,
            model,
            opt,
            params,
            reducer,
            pg,
            batch: cfg.batch_per_device,
            world,
            rank,
            grad_as_bucket_view: a.gradient_as_bucket_view,
            amp: Amp::new(cfg.precision),
        })
    }

    pub fn reducer_stats(&mut self) -> Result<ReducerStats> {
        self.reducer.stats()
    }
}

impl Strategy for Ddp {
    fn input_device(&self) -> Device {
        self.device.device(0)
    }

    fn input_batch(&self) -> i64 {
        self.batch
    }

    fn step_timed(&mut self, batch: &crate::data::Batch, clock: &mut dyn PhaseClock) -> Result<Tensor> {
        if self.grad_as_bucket_view {
            // Gradients are views into the Reducer's buckets: zero them in
            // place (tch's zero_grad would try to detach them and fail).
            crate::dist::zero_grads_in_place(&self.params);
        } else {
            self.opt.zero_grad();
        }
        self.reducer.prepare_forward()?;
        let dev = self.device.device(0);
        let (logits, loss) = autocast(self.amp.precision, dev, || -> Result<(Tensor, Tensor)> {
            let logits = self.model.forward_t(&batch.images, true);
            let loss = loss_fn(&logits, &batch.labels)?;
            Ok((logits, loss))
        })??;
        self.reducer.prepare_backward(&[&logits])?;
        clock.mark(Phase::Forward);
        // fp16: the Reducer averages the scaled gradients; every rank then
        // unscales the same averaged values and so skips the same steps.
        self.amp.scaled(&loss)?.f_backward()?;
        clock.mark(Phase::Backward);
        if self.amp.should_step(&self.params)? {
            self.opt.step();
        }
        clock.mark(Phase::Optimizer);
        Ok(loss)
    }

    /// One small all-reduce of [loss / world, rank 0's stop flag]: every rank
    /// reports the global mean loss and stops at the same step.
    fn agree(&mut self, loss: &Tensor, stop: bool) -> Result<(f64, bool)> {
        let flag = if self.rank == 0 && stop { 1.0 } else { 0.0 };
        let l = loss.f_detach()?.f_to_kind(Kind::Double)?.f_to_device(Device::Cpu)?.double_value(&[]);
        let mut t = Tensor::from_slice(&[l / self.world as f64, flag]).to_device(self.device.device(0));
        self.pg.allreduce_sum(&mut t)?;
        let v: Vec<f64> = Vec::<f64>::try_from(t.to_device(Device::Cpu))?;
        Ok((v[0], v[1] > 0.5))
    }

    fn skipped_steps(&self) -> u64 {
        self.amp.skipped_steps()
    }

    fn devices(&self) -> &Devices {
        &self.device
    }

    fn backend(&self) -> String {
        self.pg.backend().as_str().into()
    }

    fn var_store(&self) -> &nn::VarStore {
        &self.vs
    }
}

/// What each rank sends rank 0 through the store after the timed window.
#[derive(Debug, Serialize, Deserialize)]
pub struct RankReport {
    pub rank: usize,
    pub device: String,
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

/// This rank's device: `--gpus`[LOCAL_RANK] or `--cpu` when given, else
/// cuda:LOCAL_RANK where CUDA exists, else the CPU.
fn rank_device(a: &RunArgs, env: &DistEnv) -> Result<Devices> {
    if a.cpu.is_some() {
        return Ok(Devices::cpu(1));
    }
    if let Some(list) = &a.gpus {
        let ords = device::parse_gpu_list(list)?;
        let o = *ords.get(env.local_rank).ok_or_else(|| {
            usage(format!(
                "LOCAL_RANK {} has no device in --gpus {list}; list one device per local rank",
                env.local_rank
            ))
        })?;
        let all = device::resolve(Some(list), None, true)?;
        debug_assert!(all.ordinals.contains(&o));
        return Ok(Devices::cuda(vec![o]));
    }
    if device::cuda_device_count() > env.local_rank {
        Ok(Devices::cuda(vec![env.local_rank]))
    } else {
        Ok(Devices::cpu(1))
    }
}

/// One ddp rank: rendezvous, train under the runner, report to rank 0, and on
/// rank 0 combine every rank's measurements into the row.
pub fn worker(a: RunArgs, env: DistEnv) -> Result<i32> {
    let is0 = env.rank == 0;
    if env.ours {
        watch_parent();
    }
    let mine = rank_device(&a, &env)?;
    let global_devices = match mine.kind {
        DeviceKind::Cpu => Devices::cpu(env.world_size),
        DeviceKind::Cuda => Devices::cuda((0..env.world_size).collect()),
    };
    let mut cfg = config::validate(&a, global_devices)?;
    cfg.quiet = cfg.quiet || !is0;
    // Every rank loads the same --init-from weights (and its data seed).
    let start = crate::reference::Start::from_init_file(&a)?;
    let backend = backend_for(a.ddp.backend, &mine);
    if backend == BackendKind::Nccl && mine.kind == DeviceKind::Cpu {
        return Err(usage("--backend nccl needs CUDA devices; use --backend gloo on the CPU"));
    }
    let timeout = config::parse_duration("--dist-timeout", &a.ddp.dist_timeout)?;
    if is0 && !env.ours {
        runner::check_outputs(&cfg)?;
    }
    if mine.kind == DeviceKind::Cpu {
        // Split the cores among this node's ranks so they do not oversubscribe.
        let local: usize = std::env::var("LOCAL_WORLD_SIZE").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
        let total = a.threads.unwrap_or_else(device::cpu_cores);
        tch::set_num_threads((total / local.max(1)).max(1) as i32);
    } else if let Some(t) = a.threads {
        tch::set_num_threads(t as i32);
    }

    let store =
        Store::new(&env.master_addr, env.master_port, env.rank, env.world_size, is0, timeout).context("rendezvous")?;
    let be = if backend == BackendKind::Nccl { Backend::Nccl } else { Backend::Gloo };
    let cuda_dev = (mine.kind == DeviceKind::Cuda).then(|| mine.ordinals[0]);
    let pg = ProcessGroup::new(&store, be, env.rank, env.world_size, cuda_dev, timeout)?;
    // One run id for the whole job, chosen by rank 0, so every rank's
    // telemetry joins the row.
    let run_id = if is0 {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        let id = runner::new_run_id(nanos);
        store.set("gpubench/run_id", id.as_bytes())?;
        id
    } else {
        String::from_utf8_lossy(&store.get("gpubench/run_id")?).into_owned()
    };

    let local_ranks: usize = std::env::var("LOCAL_WORLD_SIZE").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let workers = a.workers.unwrap_or_else(|| crate::data::default_workers(local_ranks));
    let setup = runner::guarded(|| {
        runner::apply_knobs(&cfg)?;
        let strat = Ddp::new(&cfg, mine.clone(), pg, &a.ddp)?;
        start.apply(strat.var_store())?;
        let data_seed = start.data_seed(cfg.seed);
        let spec = crate::data::SourceSpec {
            batch: cfg.batch_per_device,
            device: mine.device(0),
            synthetic_seed: data_seed.wrapping_add(crate::reference::RANK_SEED_STRIDE * env.rank as u64),
            // One sampler seed for all ranks, so that their shards are disjoint.
            seed: data_seed,
            rank: env.rank,
            world: env.world_size,
            workers,
        };
        let data = crate::data::make_source(&cfg, spec)?;
        Ok((strat, data))
    });
    let (mut strat, mut data) = setup?;
    let pb = if is0 && !cfg.quiet && !cfg.json { runner::progress(&cfg) } else { indicatif::ProgressBar::hidden() };
    let monitor = runner::start_monitor(&cfg, &mine);
    let m = runner::measure(&cfg, &mut strat, data.as_mut(), &pb);
    let skipped = strat.skipped_steps();
    let (mut my_devs, samples) = monitor.finish(&mine, &[format!("rank {}", env.rank)], m.window);
    if mine.kind == DeviceKind::Cpu {
        my_devs.iter_mut().for_each(|d| d.device = format!("cpu:rank{}", env.rank));
    }
    let reducer = strat.reducer_stats().ok().map(|s| ReducerStatsLite {
        forward_compute_ms: s.avg_forward_compute_ms,
        backward_compute_ms: s.avg_backward_compute_ms,
        backward_comm_ms: s.avg_backward_comm_ms,
        backward_overlap_ms: s.avg_backward_overlap_ms,
        buckets: s.num_buckets,
    });
    let report = RankReport {
        rank: env.rank,
        device: format!("{:?}", mine.device(0)),
        step_secs: m.step_secs.clone(),
        losses: m.losses.clone(),
        warmup_steps: m.warmup_steps,
        loss_first: m.loss_first,
        status: m.status.unwrap_or(Status::Failed).name().into(),
        error: m.error.clone(),
        reducer,
        data_wait_secs: m.data_wait_secs.clone(),
        phase_secs: m.phase_secs.clone(),
        devices: my_devs,
        data_bad: data.bad_files(),
    };
    if let Some(t) = &cfg.telemetry {
        // Each rank samples its own device; rank r appends to FILE.rank<r>.csv
        // beside FILE (rank 0 to FILE itself) so that ranks never interleave.
        let path = if is0 { t.clone() } else { t.with_extension(format!("rank{}.csv", env.rank)) };
        crate::report::long_csv::append_telemetry(&path, &run_id, &samples)?;
    }
    store.set(&format!("gpubench/result/{}", env.rank), &serde_json::to_vec(&report)?)?;
    if !is0 {
        // Keep the store's server (rank 0) up until every rank has reported.
        return Ok(if report.status == "ok" { 0 } else { 1 });
    }
    let mut reports = vec![];
    for r in 0..env.world_size {
        let bytes =
            store.get(&format!("gpubench/result/{r}")).with_context(|| format!("waiting for rank {r}'s result"))?;
        reports.push(serde_json::from_slice::<RankReport>(&bytes).with_context(|| format!("rank {r}'s result"))?);
    }
    let (m, reducer, devs) = combine(&reports);
    let fig = runner::figures(&m.step_secs, cfg.global_batch(), env.world_size);
    let mut row = runner::base_row(&cfg, StrategyKind::Ddp, backend.name());
    row.run_id = run_id;
    if mine.kind == DeviceKind::Cuda && env.ours {
        if let Some(list) = &a.gpus {
            row.devices = format!("cuda:{list}");
        } else {
            row.devices = "cuda:0".into();
        }
        row.device_name = device::device_name(mine.ordinals[0]);
    }
    let nnodes = (env.world_size
        / std::env::var("LOCAL_WORLD_SIZE").ok().and_then(|v| v.parse().ok()).unwrap_or(env.world_size))
    .max(1);
    if nnodes > 1 {
        row.devices = format!("{} ×{nnodes} nodes", row.devices);
    }
    runner::fill_row(&mut row, &m, fig.as_ref());
    row.skipped_steps = Some(skipped);
    row.data_skipped = distinct_bad(&reports);
    row.workers = (cfg.data != "synthetic").then_some(workers as u32);
    runner::fill_metrics(&mut row, &devs, None, &m);
    if let Some(r) = reducer {
        row.ddp_forward_compute_ms = r.forward_compute_ms;
        row.ddp_backward_compute_ms = r.backward_compute_ms;
        row.ddp_backward_comm_ms = r.backward_comm_ms;
        row.ddp_overlap_ms = r.backward_overlap_ms;
        row.ddp_buckets = Some(r.buckets as u32);
    }
    // Rank 0's telemetry went to the file already; the others' beside it.
    let cfg = RunConfig { telemetry: None, ..cfg };
    runner::report(&cfg, &row, &m, fig.as_ref(), &devs, &[])
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

/// Combines ranks: a step takes as long as its slowest rank; the loss is the
/// global mean (already agreed); the worst status wins, naming its rank.
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

pub fn combine(reports: &[RankReport]) -> (Measurement, Option<ReducerStatsLite>, Vec<DeviceMetrics>) {
    let n = reports.iter().map(|r| r.step_secs.len()).min().unwrap_or(0);
    let step_secs: Vec<f64> = (0..n).map(|i| reports.iter().map(|r| r.step_secs[i]).fold(0.0, f64::max)).collect();
    let r0 = &reports[0];
    let bad = reports.iter().find(|r| r.status != "ok");
    let (status, error) = match bad {
        None => (Status::Ok, String::new()),
        Some(b) => {
            let s = match b.status.as_str() {
                "diverged" => Status::Diverged,
                "oom" => Status::Oom,
                _ => Status::Failed,
            };
            (s, format!("rank {}: {}", b.rank, b.error))
        }
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
            device: "Cpu".into(),
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
}
