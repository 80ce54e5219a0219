//! ddp on the CPU over gloo: equivalence with one process on the global
//! batch, and the launcher's behaviour with real worker processes.
use super::common::*;
use gpubench::bench::ddp::env::DistEnv;
use gpubench::bench::placement::Seat;
use gpubench::data::{synthetic::Synthetic, Batch, DataSource};
use gpubench::device::Devices;
use gpubench::dist::{Backend, ProcessGroup, Store};
use gpubench::strategy::{ddp::Ddp, single::Single, Strategy};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tch::Tensor;

fn params(s: &dyn Strategy) -> Vec<Tensor> {
    s.var_store().trainable_variables().iter().map(|v| v.detach().copy()).collect()
}

/// Rank `rank`'s configuration: its one CPU device in a world of two, batch 4.
fn rank_config(rank: usize, port: u16, opts: &str) -> gpubench::config::RunConfig {
    let env = DistEnv {
        rank,
        world_size: 2,
        local_rank: rank,
        local_world: Some(2),
        master_addr: "127.0.0.1".into(),
        master_port: port,
        ours: false,
    };
    let placement = Seat::Rank { mine: Devices::cpu(1), node: Devices::cpu(2), env };
    run_config(&format!("--strategy ddp --cpu 2 --batch-size 4 {opts}"), placement)
}

fn max_rel(a: &[Tensor], b: &[Tensor]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).norm().double_value(&[]) / y.norm().double_value(&[]).max(1e-12))
        .fold(0.0, f64::max)
}

/// Images `at..at + n` of a batch.
fn rows(b: &Batch, at: i64, n: i64) -> Batch {
    Batch { images: b.images.narrow(0, at, n).copy(), labels: b.labels.narrow(0, at, n).copy() }
}

/// What one in-process rank ended with: its initial and final parameters
/// and the Reducer's iteration count.
struct RankEnd {
    init: Vec<Tensor>,
    end: Vec<Tensor>,
    iterations: u64,
}

/// Two ddp ranks over Gloo in threads, each stepping its own list of steps
/// (each step its micro-batches), with `rank_config(.., opts)`.
fn two_ranks(opts: &str, global_batch: i64, steps: [Vec<Vec<Batch>>; 2]) -> Vec<RankEnd> {
    let port = gpubench::dist::free_port().unwrap();
    let handles: Vec<_> = steps
        .into_iter()
        .enumerate()
        .map(|(rank, mine)| {
            let dcfg = rank_config(rank, port, opts);
            assert_eq!(dcfg.global_batch(), global_batch);
            std::thread::spawn(move || {
                let t = Duration::from_secs(30);
                let store = Store::new("127.0.0.1", port, rank, 2, rank == 0, t).unwrap();
                let pg = ProcessGroup::new(&store, Backend::Gloo, rank, 2, None, t).unwrap();
                let mut ddp = Ddp::new(&dcfg, pg).unwrap();
                let init = params(&ddp);
                for micro in &mine {
                    let _loss = ddp.step_timed(micro, &mut gpubench::strategy::NoClock).unwrap();
                }
                let end = RankEnd { init, end: params(&ddp), iterations: ddp.reducer_stats().unwrap().iteration };
                drop(ddp);
                // The store outlives the rank, so the other rank's last reads find it.
                (end, store)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap().0).collect()
}

/// One process's parameters after stepping `batches` from `init`.
fn single_from(init: &[Tensor], opts: &str, batches: &[Batch]) -> Vec<Tensor> {
    let scfg = run_config(&format!("--batch-size 8 {opts}"), Seat::Local(Devices::cpu(1)));
    let mut single = Single::new(&scfg).unwrap();
    tch::no_grad(|| {
        for (dst, src) in single.var_store().trainable_variables().iter().zip(init) {
            dst.shallow_clone().copy_(src);
        }
    });
    for b in batches {
        let _loss = single.step(b).unwrap();
    }
    params(&single)
}

#[test]
fn two_ranks_equal_one_process_on_the_global_batch() {
    let opts = format!("{TINY} --lr 0.05");
    let mut data = Synthetic::new(8, 16, 10, tch::Device::Cpu, 11).unwrap();
    let batches: Vec<_> = (0..3).map(|_| data.next_batch().unwrap()).collect();
    let steps = [0, 1].map(|r| batches.iter().map(|b| vec![rows(b, 4 * r, 4)]).collect());
    let results = two_ranks(&opts, 8, steps);
    // Rank 0's weights were broadcast: both ranks start and end identical.
    assert_eq!(max_rel(&results[0].init, &results[1].init), 0.0);
    assert_eq!(max_rel(&results[0].end, &results[1].end), 0.0, "ranks diverged");
    // One process on the global batch of 8, from rank 0's initial weights.
    let e = max_rel(&results[0].end, &single_from(&results[0].init, &opts, &batches));
    assert!(e < 1e-5, "parameters after 3 steps differ by {e:e} relative");
}

/// Two ranks accumulating two micro-batches of 2 each equal one process on
/// all 8 images, and the Reducer iterates once per optimizer step (the
/// first micro-batch is PyTorch's no_sync).
#[test]
fn accumulated_micro_batches_equal_the_global_batch_and_reduce_once_a_step() {
    let opts = format!("{TINY} --lr 0.05");
    let mut data = Synthetic::new(8, 16, 10, tch::Device::Cpu, 12).unwrap();
    let batches: Vec<_> = (0..3).map(|_| data.next_batch().unwrap()).collect();
    // Rank r's step: micro-batches of images 4r..4r+2 and 4r+2..4r+4.
    let steps = [0, 1].map(|r| batches.iter().map(|b| vec![rows(b, 4 * r, 2), rows(b, 4 * r + 2, 2)]).collect());
    // 4 per device x 2 ranks x 2 micro-batches.
    let results = two_ranks(&format!("{opts} --grad-accum 2"), 16, steps);
    assert_eq!(results[0].iterations, 3, "one Reducer iteration per optimizer step, not per micro-batch");
    assert_eq!(max_rel(&results[0].end, &results[1].end), 0.0, "ranks diverged");
    let e = max_rel(&results[0].end, &single_from(&results[0].init, &opts, &batches));
    assert!(e < 1e-5, "parameters after 3 accumulated steps differ by {e:e} relative");
}

/// The losses of `gpubench run ARGS --format json` (it must succeed).
fn losses_of(args: &str) -> (Vec<f64>, serde_json::Value) {
    let o = gpubench(&format!("run {args} --format json")).output();
    assert!(o.status.success(), "{args}: {}", stderr(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    (j["run"]["losses"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect(), j["rows"][0].clone())
}

/// Micro-batch k of a step sees what rank k of a K-rank job sees: single
/// and dp accumulating K micro-batches report the losses of ddp on K ranks.
#[test]
fn accumulation_reproduces_ranks_through_the_binary() {
    let losses = |a: &str| -> Vec<f64> {
        let (l, row) = losses_of(&format!("{TINY} --cpu {a} --steps 3 --warmup 0 --lr 0.05"));
        assert_eq!(row["grad_accum"].as_u64().map(|k| k > 0), Some(true), "{a}: {row}");
        l
    };
    let close = |a: &[f64], b: &[f64], what: &str| {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "{what}: {a:?} vs {b:?}");
        }
    };
    let ranks = losses("4 --strategy ddp --batch-size 4");
    close(&losses("1 --strategy single --batch-size 4 --grad-accum 4"), &ranks, "single x4 vs ddp on 4 ranks");
    close(&losses("2 --strategy ddp --batch-size 4 --grad-accum 2"), &ranks, "ddp 2 ranks x2 vs 4 ranks");
    // dp's micro-batch is its global batch of 2 x 4: as ddp on 2 ranks of 8.
    close(
        &losses("2 --strategy dp --batch-size 4 --grad-accum 2"),
        &losses("2 --strategy ddp --batch-size 8"),
        "dp x2",
    );
}

/// Checkpointed ddp: several backward passes per step under the Reducer
/// (every parameter's gradient arrives in one of them), accumulating too;
/// the losses are those of the plain run.
#[test]
fn checkpointed_ddp_reports_the_plain_runs_losses() {
    let losses = |extra: &str| -> Vec<f64> {
        losses_of(&format!(
            "--strategy ddp --cpu 2 --model resnet18 --image-size 32 --num-classes 10 --batch-size 2 --steps 3 \
             --warmup 0 --lr 0.05 {extra}"
        ))
        .0
    };
    for extra in ["", "--grad-accum 2"] {
        let (plain, ckpt) = (losses(extra), losses(&format!("{extra} --checkpoint")));
        for (p, c) in plain.iter().zip(&ckpt) {
            assert!((p - c).abs() <= 1e-4 * p.abs().max(1.0), "{extra}: {ckpt:?} vs {plain:?}");
        }
    }
}

/// The Reducer's columns describe the timed steps: a first iteration made
/// 400 ms slower (a test hook, as cuDNN's autotuning would) is warm-up and
/// stays out of them. Before, its running average over every iteration put
/// forward + backward above the whole step.
#[test]
fn the_reducer_columns_leave_a_slow_warm_up_iteration_out() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ddp.csv");
    let o = gpubench(&format!(
        "run --strategy ddp --cpu 1 --model tinycnn --image-size 16 --num-classes 10 --batch-size 8 --steps 6 \
         --warmup 1 --threads 1 --quiet --out {}",
        out.display()
    ))
    .env("GPUBENCH_TEST_SLOW_RANK", "0:400:1")
    .output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = &read_csv(&out)[0];
    let (fwd, bwd, step) =
        (num(r, "ddp_forward_compute_ms"), num(r, "ddp_backward_compute_ms"), num(r, "step_ms_mean"));
    // Forward and backward are parts of a timed step, whatever this host's
    // speed; 400 ms averaged over 7 iterations would be 57 ms more than it.
    assert!(fwd > 0.0 && bwd > 0.0, "{r:?}");
    assert!(fwd + bwd <= step * 1.02, "forward {fwd} + backward {bwd} ms against a {step} ms step");
}

#[test]
fn resnet18_two_ranks_row_is_sane() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ddp.csv");
    let o = gpubench(&format!(
        "run --strategy ddp --cpu 2 --model resnet18 --image-size 32 --batch-size 2 --steps 3 --warmup 1 --out {}",
        out.display()
    ))
    .output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = &read_csv(&out)[0];
    assert_eq!(r["strategy"], "ddp");
    assert_eq!(r["backend"], "gloo");
    assert_eq!(r["n_devices"], "2");
    assert_eq!(r["global_batch"], "4");
    assert_eq!(r["steps"], "3");
    assert_eq!(r["status"], "ok");
    assert!(num(r, "throughput_img_s") > 0.0);
    assert!(num(r, "loss_last").is_finite());
    // The Reducer's own statistics, and one per-device row per rank.
    assert!(num(r, "ddp_backward_comm_ms") > 0.0 && num(r, "ddp_backward_compute_ms") > 0.0);
    assert!(num(r, "ddp_buckets") >= 1.0);
    // Which rank computed longest, from every rank's Reducer statistics (which one is the host's business).
    assert!(["0", "1"].contains(&r["slowest_rank"].as_str()), "{r:?}");
    assert!(num(r, "rank_compute_excess_pct") >= 0.0);
    let devs = read_csv(&dir.path().join("ddp.devices.csv"));
    assert_eq!(devs.len(), 2);
    assert_eq!(devs[1]["role"], "rank 1");
    assert_eq!(devs[0]["run_id"], r["run_id"]);
    assert_eq!(read_csv(&out).len(), 1, "only rank 0 writes the row");
}

fn worker_pids(launcher: u32) -> Vec<u32> {
    let mut v = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
        let ppid: u32 = after.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        if ppid == launcher {
            v.push(pid);
        }
    }
    v
}

#[test]
fn killed_worker_fails_the_run_in_bounded_time_and_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("k.csv");
    let mut child = gpubench(&format!(
        "run --strategy ddp --cpu 2 --model tinycnn --image-size 16 --batch-size 2 --duration 120s --quiet --out {}",
        out.display()
    ))
    .spawn_with(Stdio::inherit(), Stdio::null());
    let t = Instant::now();
    let mut workers = vec![];
    while workers.len() < 2 && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(200));
        workers = worker_pids(child.id());
    }
    assert_eq!(workers.len(), 2, "workers did not start");
    // In the training loop by now (they started, then built a tiny model).
    std::thread::sleep(Duration::from_millis(1500));
    let victim = *workers.iter().max().unwrap();
    std::process::Command::new("kill").args(["-9", &victim.to_string()]).status().unwrap();
    let t = Instant::now();
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        // Well before the run's 120 s: the death ended it, not the clock.
        assert!(t.elapsed() < Duration::from_secs(100), "launcher did not exit");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(code, Some(1));
    for w in workers {
        assert!(!std::path::Path::new(&format!("/proc/{w}")).exists(), "worker {w} left behind");
    }
    let r = &read_csv(&out)[0];
    assert_eq!(r["status"], "failed");
    assert!(r["error"].contains("rank") && r["error"].contains("killed by SIGKILL"), "{}", r["error"]);
}

#[test]
fn two_launchers_with_nnodes_2_form_one_job() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nodes.csv");
    let port = gpubench::dist::free_port().unwrap().to_string();
    let common = format!(
        "run --strategy ddp --cpu 1 --model tinycnn --image-size 16 --batch-size 2 --steps 3 --warmup 1 --quiet \
         --nnodes 2 --master-addr 127.0.0.1 --master-port {port}"
    );
    let n0 = gpubench(&format!("{common} --node-rank 0 --out {}", out.display()))
        .spawn_with(Stdio::inherit(), Stdio::piped());
    let n1 = gpubench(&format!("{common} --node-rank 1")).spawn_with(Stdio::inherit(), Stdio::piped());
    let o0 = n0.wait_with_output().unwrap();
    let o1 = n1.wait_with_output().unwrap();
    assert_eq!(o0.status.code(), Some(0), "{}", stderr(&o0));
    assert_eq!(o1.status.code(), Some(0), "{}", stderr(&o1));
    let r = &read_csv(&out)[0];
    assert_eq!(r["n_devices"], "2");
    assert_eq!(r["global_batch"], "4");
    assert_eq!(r["status"], "ok");
    // This node's devices, and how many nodes.
    assert_eq!(r["devices"], "cpu×1 ×2 nodes");
    // Outside Slurm, the hosts the ranks ran on (both this one here).
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(r["node_list"], host.trim());
}

/// A rank that stops answering (the whole process stopped, heartbeat and
/// all, as a paused or cut-off host looks) is named as lost within seconds,
/// not after the 300 s collective timeout; the row says which and since when.
/// Rank 1 silent is seen by rank 0; rank 0 silent (the store's host) by rank 1.
#[test]
fn a_silent_rank_is_named_lost_long_before_the_collective_timeout() {
    let cases = [("1:3:stop", "lost rank 1 on host "), ("0:3:stop", "lost rank 0 on host ")];
    // Both jobs at once: each spends its time waiting out silence (10 s),
    // the run's end and the launcher's grace, not computing, so together
    // they take the time of one (the suite's slowest test, one after the other).
    let dir = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let jobs: Vec<_> = cases
        .iter()
        .enumerate()
        .map(|(i, (fault, _))| {
            let out = dir.path().join(format!("lost-{i}.csv"));
            let child = gpubench(&format!(
                "run --strategy ddp --cpu 2 {TINY} --batch-size 2 --steps 200 --warmup 1 --dist-timeout 300s --quiet --out {}",
                out.display()
            ))
            .env("GPUBENCH_FAULT", fault)
            .spawn();
            (out, child)
        })
        .collect();
    for ((fault, says), (out, child)) in cases.into_iter().zip(jobs) {
        let o = child.wait_with_output().unwrap();
        let took = t.elapsed();
        assert_eq!(o.status.code(), Some(1), "{fault}: {}", stderr(&o));
        // 10 s of silence, 5 s for the run to end by itself, the launcher's
        // 10 s grace: far below the timeout, whatever the host's load.
        assert!(took < Duration::from_secs(200), "{fault}: took {took:?}");
        let rows = read_csv(&out);
        assert_eq!(rows.len(), 1, "{fault}");
        assert_eq!(rows[0]["status"], "failed");
        let e = &rows[0]["error"];
        assert!(e.starts_with(says) && e.contains("(node 0") && e.contains("no heartbeat since "), "{fault}: {e}");
        let err = stderr(&o);
        assert_eq!(err.trim_end().lines().count(), 1, "{fault}: {err}");
        assert!(err.starts_with(&format!("error: {says}")), "{fault}: {err}");
    }
}

#[test]
fn unreachable_master_is_a_clear_error_within_the_timeout() {
    let port = gpubench::dist::free_port().unwrap().to_string();
    let t = Instant::now();
    let o = gpubench("run --strategy ddp --cpu --model tinycnn --image-size 16 --dist-timeout 1s")
        .env("RANK", "1")
        .env("WORLD_SIZE", "2")
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", &port)
        .output();
    // A hang guard: the 1 s timeout ends it, whatever the host's speed.
    assert!(t.elapsed() < Duration::from_secs(60), "took {:?}", t.elapsed());
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("rendezvous") && err.contains(&port), "{err}");
}

#[test]
fn one_failing_rank_ends_the_job_quickly_and_the_row_names_it() {
    // (fault, status, what the error must say)
    // Each rank and each kind once: an error rank 1 reports to rank 0, and
    // a rank 0 that dies, whose row the launcher writes.
    let cases = [
        ("1:3:oom", "oom", "rank 1: CUDA out of memory"),
        ("0:3:crash", "failed", "rank 0 failed (killed by signal 6 (SIGABRT))"),
    ];
    for (fault, status, says) in cases {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("f.csv");
        let t = Instant::now();
        let o = gpubench(&format!(
            "run --strategy ddp --cpu 2 {TINY} --batch-size 2 --steps 200 --warmup 1 --dist-timeout 120s --quiet --out {}",
            out.display()
        ))
        .env("GPUBENCH_FAULT", fault)
        .output();
        let took = t.elapsed();
        assert_eq!(o.status.code(), Some(1), "{fault}: {}", stderr(&o));
        // The failure ends the job, not the 120 s collective timeout the
        // other rank would otherwise wait out.
        assert!(took < Duration::from_secs(100), "{fault}: the launcher took {took:?}");
        let rows = read_csv(&out);
        assert_eq!(rows.len(), 1, "{fault}: one row, not one per rank");
        assert_eq!(rows[0]["status"], status, "{fault}: {}", rows[0]["error"]);
        assert!(rows[0]["error"].contains(says), "{fault}: {}", rows[0]["error"]);
        // --quiet: one line says what failed, not every rank's echo of it.
        let err = stderr(&o);
        assert_eq!(err.trim_end().lines().count(), 1, "{fault}: {err}");
        assert!(err.starts_with("error: ") && err.contains(says), "{fault}: {err}");
    }
}

/// With `--comm-hook bf16` (and fp16), each rank's gradient is rounded to
/// half precision, halved and summed there: the averaged gradient the
/// optimizer sees equals that rounded average, not the exact one.
#[test]
fn compressed_gradients_equal_the_rounded_average() {
    for (hook, kind) in [("bf16", tch::Kind::BFloat16), ("fp16", tch::Kind::Half)] {
        // lr 1, no weight decay: one SGD step moves each parameter by exactly its gradient.
        let opts = format!("{TINY} --lr 1 --weight-decay 0 --comm-hook {hook}");
        let mut data = Synthetic::new(8, 16, 10, tch::Device::Cpu, 5).unwrap();
        let b = data.next_batch().unwrap();
        let chunks: Vec<(Tensor, Tensor)> =
            (0..2).map(|r| (b.images.narrow(0, 4 * r, 4).copy(), b.labels.narrow(0, 4 * r, 4).copy())).collect();
        let port = gpubench::dist::free_port().unwrap();
        let handles: Vec<_> = chunks
            .into_iter()
            .enumerate()
            .map(|(rank, (x, y))| {
                let dcfg = rank_config(rank, port, &opts);
                std::thread::spawn(move || {
                    let t = Duration::from_secs(30);
                    let store = Store::new("127.0.0.1", port, rank, 2, rank == 0, t).unwrap();
                    let pg = ProcessGroup::new(&store, Backend::Gloo, rank, 2, None, t).unwrap();
                    let mut ddp = Ddp::new(&dcfg, pg).unwrap();
                    let p0 = params(&ddp);
                    // This rank's own gradient, from the same weights and chunk.
                    let (vs, model) = gpubench::model::build_model(&dcfg.workload, tch::Device::Cpu);
                    tch::no_grad(|| {
                        for (d, s) in vs.trainable_variables().iter().zip(&p0) {
                            d.shallow_clone().copy_(s);
                        }
                    });
                    let loss = gpubench::strategy::loss_fn(&model.forward_t(&x, true), &y).unwrap();
                    loss.backward();
                    let local: Vec<Tensor> = vs.trainable_variables().iter().map(|v| v.grad().copy()).collect();
                    let _ = ddp.step(&gpubench::data::Batch { images: x, labels: y }).unwrap();
                    let applied: Vec<Tensor> = p0.iter().zip(params(&ddp)).map(|(a, b)| a - b).collect();
                    drop(ddp);
                    (local, applied, store)
                })
            })
            .collect();
        let r: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let (mut changed, mut worst) = (0.0f64, 0.0f64);
        for i in 0..r[0].0.len() {
            let half = |g: &Tensor| g.to_kind(kind) / 2.0;
            let rounded = (half(&r[0].0[i]) + half(&r[1].0[i])).to_kind(tch::Kind::Float);
            let exact = (&r[0].0[i] + &r[1].0[i]) / 2.0;
            let applied = &r[0].1[i];
            let scale = rounded.abs().max().double_value(&[]).max(1e-12);
            // One unit in the last place of the half-precision sum, plus the
            // rounding of p0 - p1 in fp32.
            let ulp = if hook == "bf16" { 2f64.powi(-8) } else { 2f64.powi(-11) };
            worst = worst.max((applied - &rounded).abs().max().double_value(&[]) / scale / ulp);
            changed = changed.max((applied - &exact).abs().max().double_value(&[]) / scale);
        }
        assert!(worst <= 1.0, "{hook}: applied gradient off the rounded average by {worst:.2} ulp");
        assert!(changed > 1e-6, "{hook}: the applied gradient is the exact average: the hook did nothing");
    }
}

/// Two CPU ranks started as a Kubeflow PyTorchJob starts its pods: RANK,
/// WORLD_SIZE, MASTER_ADDR, MASTER_PORT in a Kubernetes pod and no
/// LOCAL_RANK. Each is local rank 0 of its own node; rank 0 writes one ok
/// row, which says it ran under Kubernetes.
#[test]
fn two_ranks_started_the_pytorchjob_way_write_one_ok_row() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("k.csv");
    let port = gpubench::dist::free_port().unwrap().to_string();
    let line = format!(
        "run --strategy ddp --cpu --model tinycnn --image-size 16 --batch-size 2 --steps 2 --warmup 1 --threads 1 \
         --quiet --out {}",
        out.display()
    );
    let pod = |rank: &str| {
        gpubench(&line)
            .env("RANK", rank)
            .env("WORLD_SIZE", "2")
            .env("MASTER_ADDR", "127.0.0.1")
            .env("MASTER_PORT", &port)
            .env("KUBERNETES_PORT", "tcp://10.96.0.1:443")
            .env("KUBERNETES_SERVICE_HOST", "10.96.0.1")
            .env("GPUBENCH_JOB_ID", "sweep-pytorchjob")
            .spawn_with(Stdio::inherit(), Stdio::piped())
    };
    let (p0, p1) = (pod("0"), pod("1"));
    let (o0, o1) = (p0.wait_with_output().unwrap(), p1.wait_with_output().unwrap());
    assert_eq!(o0.status.code(), Some(0), "{}", stderr(&o0));
    assert_eq!(o1.status.code(), Some(0), "{}", stderr(&o1));
    let rows = read_csv(&out);
    assert_eq!(rows.len(), 1, "one row, from rank 0");
    let r = &rows[0];
    assert_eq!((r["status"].as_str(), r["n_devices"].as_str()), ("ok", "2"));
    assert_eq!((r["scheduler"].as_str(), r["job_id"].as_str()), ("kubernetes", "sweep-pytorchjob"));
    // each pod is a node of its own
    assert_eq!(r["devices"], "cpu×1 ×2 nodes");
}

/// Several ranks on one GPU (`--gpus 0,0`) are the one-GPU test mode over
/// Gloo, checked here with a GPU assumed (this machine has none); NCCL, which
/// refuses two ranks on one GPU, is refused first with the way out.
#[test]
fn ranks_sharing_a_gpu_are_a_gloo_test_mode_and_nccl_is_refused() {
    let tiny = "--model tinycnn --image-size 16 --num-classes 10 --steps 1";
    let validate = |extra: &str| {
        let mut argv = vec!["validate".to_string(), "--assume-gpus".into(), "1".into()];
        argv.extend(format!("run --strategy ddp --gpus 0,0 {tiny} {extra}").split_whitespace().map(String::from));
        std::process::Command::new(super::common::bin()).args(&argv).output().unwrap()
    };
    let o = validate("--backend gloo");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = validate("");
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("lists GPU 0 twice: NCCL refuses two ranks on one GPU; add --backend gloo"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let o = validate("--backend nccl");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // single and dp keep their rules: dp may repeat a GPU, single takes one.
    assert_usage_error(&format!("run --strategy single --gpus 0,0 {tiny}"), "lists device 0 twice");
}
