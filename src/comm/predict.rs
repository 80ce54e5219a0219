//! `gpubench predict`: DDP's step time on N devices from one device's
//! profile and an all-reduce curve, so that scaling can be estimated for
//! hardware one does not have, and checked against measurement where one
//! does.
//!
//! The model (one communication stream, as DDP's Reducer on one process
//! group):
//! - the **profile** is one device running the same ddp step through
//!   libtorch's Reducer (world size 1): median forward, backward and
//!   optimizer times (the device synchronised between phases), the bucket
//!   each parameter is in after the Reducer rebuilt its buckets in
//!   gradient-ready order, and when each gradient became ready: on a GPU
//!   from CUDA events recorded after the Reducer's hook (when the gradient
//!   is done on the device), on the CPU from the Reducer's own
//!   `get_backward_stats` (host times, which on a GPU are only when the
//!   kernels were queued);
//! - bucket b is ready when its last gradient is (r_b); its all-reduce
//!   starts when it is ready and the previous bucket's is done, and takes
//!   t(S_b): `end_b = max(r_b, end_{b-1}) + t(S_b)`, buckets in index order;
//! - `step(N) = broadcast + forward + max(backward, end_last) + optimizer +
//!   wait`, where `broadcast` is the buffer broadcast DDP does before each
//!   forward (BatchNorm statistics from rank 0; `--no-broadcast-buffers`
//!   drops it), timed on the same curve as a message of the buffers' size:
//!   a broadcast moves less than an all-reduce, but these messages are
//!   small, where the curve is latency;
//!   exposed communication = `max(0, end_last - backward)`; efficiency =
//!   `step(1) / step(N)`.
//! - `wait` is the time spent waiting for the slowest rank: every
//!   collective starts when the last rank reaches it, so a step costs the
//!   slowest of N ranks' compute, not the typical one. It is estimated from
//!   the profile's own per-step samples: the median, over draws of N steps,
//!   of `max(forward + optimizer) + max(backward)` (the buffer broadcast and
//!   the last bucket are the two synchronisation points), less the median
//!   step alone. It grows with N and with the device's jitter.
//! - On the CPU nothing overlaps: Gloo's threads and the ranks' compute
//!   share the same cores, so an all-reduce during backward delays backward
//!   by as much; there the communication is added whole:
//!   `step(N) = broadcast + forward + backward + sum t(S_b) + optimizer +
//!   wait`. (Measured: the overlapping model predicted 0.86-0.88 of ddp's
//!   step time with 2 CPU ranks; see results/README.md.)
//! - t(S): interpolated (log-log) between the in-place sizes a `gpubench
//!   allreduce` file measured at world size N, or `latency + S / algbw` with
//!   `algbw = busbw × N / (2(N-1))` (nccl-tests' definition inverted).
//!   `--comm-hook fp16|bf16` halves every S.
//!
//! The profile times `--steps` steps and goes on until `--min-time` was
//! timed: a 20 ms step needs about 2 s of samples for a steady median.
//!
//! What it leaves out: jitter that is correlated between ranks, contention
//! between communication and compute for the same cores or memory on GPUs,
//! and a first bucket launched before the backward pass's first kernels
//! finish. On the CPU each rank's profile
//! uses that rank's share of the cores, with the other ranks' steps running
//! beside it.
use anyhow::{anyhow, Result};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tch::Device;

use super::curve::{curve, Curve};
use crate::config::{CommHook, CurveSource, PredictConfig};
use crate::dist::{Backend, ProcessGroup, Reducer, ReducerOptions, Store};
use crate::error::usage;
use crate::metrics::stats::percentile;
use crate::model::build_model;
use crate::strategy::precision::autocast;
use crate::strategy::{build_optimizer, loss_fn};

/// One bucket of gradients as the Reducer holds it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Bucket {
    pub bytes: u64,
    /// Seconds after the start of backward when its last gradient was ready.
    pub ready: f64,
}

/// One device's step, in seconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Profile {
    pub forward: f64,
    pub backward: f64,
    pub optimizer: f64,
    /// In the Reducer's index order.
    pub buckets: Vec<Bucket>,
    /// Intra-op threads the profile ran with (CPU).
    pub threads: Option<usize>,
    /// Every timed step's (forward, backward, optimizer), raw.
    pub samples: Vec<(f64, f64, f64)>,
    /// Bytes of the model's buffers (BatchNorm statistics), which DDP
    /// broadcasts before every forward.
    pub buffer_bytes: u64,
}

impl Profile {
    pub(crate) fn step(&self) -> f64 {
        self.forward + self.backward + self.optimizer
    }

    /// The same step's shape taking `step` seconds: phases and ready times
    /// scaled alike. The samples are dropped: another device's jitter is
    /// not this one's, so no wait for the slowest rank is predicted.
    pub(crate) fn scaled_to(&self, step: f64) -> Profile {
        let k = step / self.step();
        Profile {
            forward: self.forward * k,
            backward: self.backward * k,
            optimizer: self.optimizer * k,
            buckets: self.buckets.iter().map(|b| Bucket { bytes: b.bytes, ready: b.ready * k }).collect(),
            threads: self.threads,
            samples: vec![],
            buffer_bytes: self.buffer_bytes,
        }
    }
}

/// One world size's prediction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Prediction {
    pub n: usize,
    pub step: f64,
    pub throughput: f64,
    pub efficiency: f64,
    /// All-reduce time summed over buckets, and what of it was not hidden
    /// behind the backward pass.
    pub comm: f64,
    pub exposed: f64,
    /// Waiting for the slowest rank (see the module doc).
    pub wait: f64,
    /// The buffer broadcast before each forward.
    pub broadcast: f64,
}

/// Draws of N steps the straggler estimate takes; fixed, and drawn from a
/// fixed sequence, so one profile always gives one prediction.
const DRAWS: usize = 4000;

/// The slowest of `n` ranks against one rank alone, from the profile's
/// samples (see the module doc); 0 without at least two samples.
pub(crate) fn straggler_wait(samples: &[(f64, f64, f64)], n: usize) -> f64 {
    if n < 2 || samples.len() < 2 {
        return 0.0;
    }
    // A 64-bit LCG (Knuth's MMIX constants): reproducible and dependency-free.
    let mut state: u64 = 0x853c_49e6_748f_ea9b;
    let mut pick = || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        &samples[((state >> 33) % samples.len() as u64) as usize]
    };
    let slowest: Vec<f64> = (0..DRAWS)
        .map(|_| {
            let (mut fo, mut b) = (0.0f64, 0.0f64);
            for _ in 0..n {
                let s = pick();
                fo = fo.max(s.0 + s.2);
                b = b.max(s.1);
            }
            fo + b
        })
        .collect();
    let alone: Vec<f64> = samples.iter().map(|s| s.0 + s.1 + s.2).collect();
    (percentile(&slowest, 50.0) - percentile(&alone, 50.0)).max(0.0)
}

/// How DDP runs the step being predicted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Ddp {
    pub hook: CommHook,
    /// Whether communication runs beside backward (GPUs) or takes its time
    /// from it (CPU ranks sharing cores with Gloo).
    pub overlap: bool,
    pub broadcast_buffers: bool,
}

/// Simulates the buckets' all-reduces on one stream (see the module doc).
pub(crate) fn simulate(p: &Profile, curve: &dyn Curve, n: usize, batch: i64, ddp: Ddp) -> Prediction {
    let Ddp { hook, overlap, broadcast_buffers } = ddp;
    let scale = if hook == CommHook::None { 1.0 } else { 0.5 };
    let (mut end, mut comm) = (0.0f64, 0.0);
    for b in &p.buckets {
        let t = curve.time(b.bytes as f64 * scale);
        let ready = if overlap { b.ready } else { p.backward };
        end = end.max(ready) + t;
        comm += t;
    }
    let wait = straggler_wait(&p.samples, n);
    let broadcast = if broadcast_buffers && p.buffer_bytes > 0 { curve.time(p.buffer_bytes as f64) } else { 0.0 };
    let step = broadcast + p.forward + p.backward.max(end) + p.optimizer + wait;
    Prediction {
        n,
        step,
        throughput: n as f64 * batch as f64 / step,
        efficiency: p.step() / step,
        comm,
        exposed: (end - p.backward).max(0.0),
        wait,
        broadcast,
    }
}

/// The same training step in a loop on another thread until `stop`: a CPU
/// rank's neighbour, taking its share of memory bandwidth and caches.
/// `steady` is counted up once the neighbour has taken two steps, so that
/// the profile is not timed beside a neighbour still building its model.
fn companion(rc: crate::config::RunConfig, stop: Arc<AtomicBool>, steady: Arc<AtomicUsize>) -> Result<()> {
    use crate::data::DataSource;
    if let Some(t) = rc.host.count() {
        tch::set_num_threads(t as i32);
    }
    let (vs, model) = build_model(&rc.workload, Device::Cpu);
    let mut opt = build_optimizer(&rc, &vs)?;
    let mut data = crate::data::synthetic::Synthetic::new(
        rc.batch_per_device,
        rc.workload.image_size,
        rc.workload.num_classes,
        Device::Cpu,
        1,
    )?;
    let mut steps = 0;
    while !stop.load(Ordering::Relaxed) {
        let b = data.next_batch()?;
        opt.zero_grad()?;
        let loss =
            autocast(rc.workload.precision, Device::Cpu, || loss_fn(&model.forward_t(&b.images, true), &b.labels))??;
        loss.f_backward()?;
        opt.step()?;
        steps += 1;
        if steps == 2 {
            steady.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(())
}

/// Profiles one device: the ddp step with world size 1 through libtorch's
/// Reducer, `warmup` untimed steps then `steps` timed ones. On the CPU,
/// `neighbours` copies of the step run beside it on threads of their own,
/// as the other ranks would: two single-thread copies at once each ran 23 %
/// slower than one alone on the 2-core VM, which a lone profile misses.
pub(crate) fn profile(cfg: &PredictConfig, threads: Option<usize>, neighbours: usize) -> Result<Profile> {
    let stop = Arc::new(AtomicBool::new(false));
    let steady = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..neighbours)
        .map(|_| {
            let (rc, stop, steady) = (cfg.run_config(threads), stop.clone(), steady.clone());
            std::thread::spawn(move || crate::error::guarded(|| companion(rc, stop, steady)))
        })
        .collect();
    // Until every neighbour steps (one that failed ends the wait; its error comes from join).
    let t0 = Instant::now();
    while steady.load(Ordering::Relaxed) < neighbours
        && !handles.iter().any(|h| h.is_finished())
        && t0.elapsed() < Duration::from_secs(300)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    let res = profile_alone(cfg, threads);
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().map_err(|_| anyhow!("a neighbour thread panicked"))??;
    }
    res
}

fn profile_alone(cfg: &PredictConfig, threads: Option<usize>) -> Result<Profile> {
    let rc = cfg.run_config(threads);
    if let Some(t) = threads {
        tch::set_num_threads(t as i32);
    }
    crate::strategy::precision::apply_globals(cfg.workload.precision, cfg.workload.cudnn_benchmark, false)?;
    let device = cfg.device.device(0);
    let (backend, cuda) = match device {
        Device::Cuda(o) => (Backend::Nccl, Some(o)),
        _ => (Backend::Gloo, None),
    };
    let timeout = Duration::from_secs(120);
    let port = crate::dist::free_port()?;
    let store = Store::new("127.0.0.1", port, 0, 1, true, timeout)?;
    let pg = ProcessGroup::new(&store, backend, 0, 1, cuda, timeout)?;
    let (vs, model) = build_model(&rc.workload, device);
    let mut opt = build_optimizer(&rc, &vs)?;
    let params = vs.trainable_variables();
    let trainable: std::collections::HashSet<*mut torch_sys::C_tensor> =
        params.iter().map(|p| p.as_ptr() as *mut _).collect();
    let buffer_bytes = vs
        .variables()
        .values()
        .filter(|t| !t.requires_grad() && !trainable.contains(&(t.as_ptr() as *mut _)))
        .map(|t| t.numel() as u64 * t.kind().elt_size_in_bytes() as u64)
        .sum();
    let opts = ReducerOptions {
        bucket_cap_bytes: Some((cfg.bucket_cap_mb * 1024.0 * 1024.0) as i64),
        broadcast_buffers: false,
        stats_sample_rate: Some(1),
        comm_hook: cfg.comm_hook,
        ..Default::default()
    };
    let mut reducer = Reducer::new(&pg, &params, &[], &opts)?;
    if cuda.is_some() {
        reducer.time_ready_on_device()?;
    }
    // fp16 trains with loss scaling, as the ddp step does: its unscale and
    // its one host read per step belong in the profile's optimizer phase (G16).
    let mut amp = crate::strategy::precision::Amp::new(cfg.workload.precision);
    let mut data = crate::data::synthetic::Synthetic::new(
        cfg.batch_per_device,
        cfg.workload.image_size,
        cfg.workload.num_classes,
        device,
        cfg.workload.seed,
    )?;
    let sync = || cfg.device.synchronize();
    let (mut f, mut b, mut o) = (vec![], vec![], vec![]);
    // --steps at least, and on until --min-time of timed steps: a 20 ms step needs many to settle its median.
    let mut timed = 0.0;
    let cap = cfg.warmup + cfg.steps.max(1) * 1000;
    let mut i = 0;
    while i < cfg.warmup + cfg.steps || (timed < cfg.min_time.as_secs_f64() && i < cap) {
        use crate::data::DataSource;
        let batch = data.next_batch()?;
        opt.zero_grad()?;
        sync();
        let t0 = Instant::now();
        reducer.prepare_forward()?;
        let logits = autocast(cfg.workload.precision, device, || model.forward_t(&batch.images, true))?;
        let loss = autocast(cfg.workload.precision, device, || loss_fn(&logits, &batch.labels))??;
        reducer.prepare_backward(&[])?;
        sync();
        let t1 = Instant::now();
        amp.scaled(&loss)?.f_backward()?;
        sync();
        let t2 = Instant::now();
        if amp.should_step(&params)? {
            opt.step()?;
        }
        sync();
        let t3 = Instant::now();
        if i >= cfg.warmup {
            f.push((t1 - t0).as_secs_f64());
            b.push((t2 - t1).as_secs_f64());
            o.push((t3 - t2).as_secs_f64());
            timed += (t3 - t0).as_secs_f64();
        }
        i += 1;
    }
    let layout = reducer.param_layout(params.len())?;
    let on_device = match cuda {
        Some(_) => Some(reducer.device_ready(params.len())?),
        None => None,
    };
    let n_buckets = layout.iter().filter_map(|(b, _)| *b).max().map_or(0, |m| m + 1);
    let mut buckets = vec![Bucket { bytes: 0, ready: 0.0 }; n_buckets];
    for (i, (p, (bucket, ready))) in params.iter().zip(&layout).enumerate() {
        let bi = bucket.ok_or_else(|| anyhow!("a parameter is in no bucket of the Reducer"))?;
        let bytes = p.numel() as u64 * p.kind().elt_size_in_bytes() as u64;
        buckets[bi].bytes += bytes;
        let r = match &on_device {
            Some(d) => d[i].ok_or_else(|| anyhow!("no device ready time was recorded for a gradient"))?,
            None => ready.ok_or_else(|| anyhow!("the Reducer recorded no ready time for a gradient"))? as f64 / 1e9,
        };
        buckets[bi].ready = buckets[bi].ready.max(r);
    }
    let med = |v: &[f64]| percentile(v, 50.0);
    let samples = f.iter().zip(&b).zip(&o).map(|((f, b), o)| (*f, *b, *o)).collect();
    Ok(Profile { forward: med(&f), backward: med(&b), optimizer: med(&o), buckets, threads, samples, buffer_bytes })
}

/// A world size's profile, prediction and the curve it used.
pub(crate) type Predicted = (Profile, Prediction, String);

/// Every world size's prediction, profiling once (GPU) or once per world
/// size with that rank's share of the cores (CPU). A world size without a
/// curve is skipped with a note.
pub(crate) fn predict(cfg: &PredictConfig) -> Result<(Vec<Predicted>, Vec<String>)> {
    let cpu = !cfg.device.device(0).is_cuda();
    // Another device's figure: a GPU target, whatever ran the profile.
    let backend = cfg.target_backend();
    let target_gpu = backend == Backend::Nccl;
    let (batch, _) = cfg.target();
    let file_rows = match &cfg.curve {
        CurveSource::File(p) => crate::results::csv::read_rows(p)?,
        CurveSource::Busbw { .. } => vec![],
    };
    let mut out = vec![];
    let mut notes = vec![];
    let mut once: Option<Profile> = None;
    for &n in &cfg.devices {
        let world = n * cfg.nodes;
        let Some(c) = curve(&cfg.curve, &file_rows, world, backend, cfg.comm_hook) else {
            notes.push(format!(
                "world size {world} skipped: no {} all-reduce at that size in the file; measure it with gpubench \
                 allreduce on {world} devices, or give --busbw",
                backend.name()
            ));
            continue;
        };
        let p = if cpu && cfg.scale_to.is_none() {
            let per = (crate::device::cpu_cores() / n).max(1);
            profile(cfg, Some(per), n - 1)?
        } else {
            match &once {
                Some(p) => p.clone(),
                None => {
                    let mut p = profile(cfg, None, 0)?;
                    if let Some(s) = cfg.scale_to {
                        p = p.scaled_to(s.batch as f64 / s.throughput);
                    }
                    once = Some(p.clone());
                    p
                }
            }
        };
        let ddp = Ddp { hook: cfg.comm_hook, overlap: target_gpu, broadcast_buffers: cfg.broadcast_buffers };
        let pred = simulate(&p, c.as_ref(), world, batch, ddp);
        out.push((p, pred, c.describe()));
    }
    if out.is_empty() {
        return Err(usage(format!("nothing to predict: {}", notes.join("; "))));
    }
    if let Some(s) = cfg.scale_to {
        notes.push(format!(
            "scaled to {} img/s on one device at batch {} ({} px): the profile gave the step's shape only; no wait \
             for the slowest rank is predicted, since the target's jitter is unknown",
            s.throughput, s.batch, s.image_size
        ));
    }
    Ok((out, notes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::curve::{Linear, Measured};

    fn profile_of(buckets: &[(u64, f64)]) -> Profile {
        Profile {
            forward: 0.010,
            backward: 0.020,
            optimizer: 0.002,
            buckets: buckets.iter().map(|&(bytes, ready)| Bucket { bytes, ready }).collect(),
            threads: None,
            samples: vec![],
            buffer_bytes: 0,
        }
    }

    fn ddp(hook: CommHook, overlap: bool) -> Ddp {
        Ddp { hook, overlap, broadcast_buffers: true }
    }

    #[test]
    fn communication_hidden_behind_backward_costs_nothing() {
        // Two buckets of 1 MB ready at 5 and 15 ms; 1 ms each: done by 16 ms < 20 ms backward.
        let c = Linear { latency: 0.0, busbw_gbs: 1.0, n: 2 };
        assert!((c.time(1e6) - 1e-3).abs() < 1e-12);
        let p = simulate(&profile_of(&[(1_000_000, 0.005), (1_000_000, 0.015)]), &c, 2, 32, ddp(CommHook::None, true));
        assert!((p.step - 0.032).abs() < 1e-12 && p.exposed == 0.0 && (p.efficiency - 1.0).abs() < 1e-12);
        // Without overlap (CPU ranks) the same 2 ms come on top of backward.
        let q = simulate(&profile_of(&[(1_000_000, 0.005), (1_000_000, 0.015)]), &c, 2, 32, ddp(CommHook::None, false));
        assert!((q.step - 0.034).abs() < 1e-12 && (q.exposed - 0.002).abs() < 1e-12, "{q:?}");
        assert!((p.comm - 0.002).abs() < 1e-12);
        assert!((p.throughput - 2.0 * 32.0 / 0.032).abs() < 1e-6);
    }

    #[test]
    fn a_late_bucket_is_exposed_and_buckets_queue_on_one_stream() {
        // 10 ms each; the first ready at 18 ms runs to 28, the second waits for it: 38 ms.
        let c = Linear { latency: 0.0, busbw_gbs: 0.1, n: 2 };
        let p = simulate(&profile_of(&[(1_000_000, 0.018), (1_000_000, 0.019)]), &c, 2, 32, ddp(CommHook::None, true));
        assert!((p.exposed - 0.018).abs() < 1e-9, "{p:?}");
        assert!((p.step - (0.010 + 0.038 + 0.002)).abs() < 1e-9);
        // fp16 compression halves each message: 5 ms each, done at 28 ms.
        let h = simulate(&profile_of(&[(1_000_000, 0.018), (1_000_000, 0.019)]), &c, 2, 32, ddp(CommHook::Fp16, true));
        assert!((h.exposed - 0.008).abs() < 1e-9, "{h:?}");
    }

    #[test]
    fn the_slowest_rank_sets_the_pace_and_more_ranks_wait_longer() {
        // No jitter, no wait.
        let flat = vec![(0.01, 0.02, 0.002); 10];
        assert_eq!(straggler_wait(&flat, 8), 0.0);
        // Half the steps 10 ms slower in backward: alone the median is fast or slow by a hair, but among
        // 2 ranks the chance that neither is slow is 1/4, so the median pair waits the full 10 ms.
        let mut mixed = vec![(0.01, 0.02, 0.002); 10];
        for s in mixed.iter_mut().take(5) {
            s.1 = 0.03;
        }
        let w2 = straggler_wait(&mixed, 2);
        assert!(w2 > 0.004 && w2 <= 0.010 + 1e-12, "{w2}");
        let w8 = straggler_wait(&mixed, 8);
        assert!(w8 >= w2, "{w8} < {w2}");
        assert!((w8 - 0.005).abs() < 1e-9 || (w8 - 0.010).abs() < 1e-9, "{w8}");
        assert_eq!(straggler_wait(&mixed, 1), 0.0, "one rank waits for no one");
        // It enters the step.
        let mut p = profile_of(&[(1_000_000, 0.005)]);
        p.samples = mixed;
        let c = Linear { latency: 0.0, busbw_gbs: 1.0, n: 2 };
        let x = simulate(&p, &c, 2, 32, ddp(CommHook::None, true));
        assert!((x.step - (0.032 + x.wait)).abs() < 1e-12 && x.wait > 0.0, "{x:?}");
    }

    #[test]
    fn a_scaled_profile_keeps_its_shape() {
        let mut p = profile_of(&[(1_000_000, 0.005), (2_000_000, 0.015)]);
        p.samples = vec![(0.01, 0.02, 0.002); 3];
        let q = p.scaled_to(0.320);
        assert!((q.step() - 0.320).abs() < 1e-12);
        assert!((q.forward / q.backward - 0.5).abs() < 1e-12 && (q.buckets[1].ready - 0.150).abs() < 1e-12);
        assert_eq!((q.buckets[1].bytes, q.samples.len()), (2_000_000, 0));
    }

    #[test]
    fn buffers_are_broadcast_before_each_forward_unless_told_not_to() {
        let mut p = profile_of(&[(1_000_000, 0.005)]);
        p.buffer_bytes = 1_000_000;
        let c = Linear { latency: 0.0, busbw_gbs: 1.0, n: 2 };
        let x = simulate(&p, &c, 2, 32, ddp(CommHook::None, true));
        assert!((x.broadcast - 1e-3).abs() < 1e-12 && (x.step - 0.033).abs() < 1e-12, "{x:?}");
        let off = Ddp { broadcast_buffers: false, ..ddp(CommHook::None, true) };
        assert_eq!(simulate(&p, &c, 2, 32, off).broadcast, 0.0);
    }

    #[test]
    fn a_files_dtypes_are_never_pooled_and_the_wire_dtype_wins() {
        let point = |dtype: &str, ms: f64| crate::results::csv::Row {
            mode: crate::results::Mode::Allreduce,
            status: crate::results::Status::Ok,
            in_place: Some(true),
            n_devices: 2,
            backend: "gloo".into(),
            precision: dtype.into(),
            bytes: Some(1 << 20),
            step_ms_mean: Some(ms),
            ..Default::default()
        };
        let rows = vec![point("fp32", 1.0), point("fp32", 1.0), point("fp16", 0.5)];
        let src = CurveSource::File("curve.csv".into());
        let t = |hook| curve(&src, &rows, 2, Backend::Gloo, hook).unwrap().time((1 << 20) as f64);
        assert_eq!(t(CommHook::None), 1e-3, "fp32 alone, not the median of all three");
        assert_eq!(t(CommHook::Fp16), 0.5e-3);
        assert_eq!(t(CommHook::Bf16), 1e-3, "no bf16 rows: fp32's");
        assert!(curve(&src, &rows, 4, Backend::Gloo, CommHook::None).is_none(), "no rows at 4 ranks");
    }

    #[test]
    fn measured_curves_interpolate_in_log_log_and_extrapolate_at_bandwidth() {
        let m = Measured { points: vec![(1e3, 1e-4), (1e5, 1e-3), (1e7, 1e-2)], what: String::new() };
        assert_eq!(m.time(10.0), 1e-4);
        assert!((m.time(1e4) - 10f64.powf(-3.5)).abs() < 1e-12);
        // Beyond the last point: its bandwidth, (1e-2 - 1e-3) / (1e7 - 1e5) per byte.
        let per = (1e-2 - 1e-3) / (1e7 - 1e5);
        assert!((m.time(2e7) - (1e-2 + 1e7 * per)).abs() < 1e-12);
        // Inverting nccl-tests: busbw 10 GB/s on 4 ranks is algbw 10 × 4/6.
        let l = Linear { latency: 0.0, busbw_gbs: 10.0, n: 4 };
        assert!((l.time(1e9) - 1.0 / (10.0 * 4.0 / 6.0)).abs() < 1e-12);
    }
}
