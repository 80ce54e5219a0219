//! CUDA tests, compiled only with `--features cuda-tests` (scripts/test
//! --features cuda-tests) and skipped, saying so, without a CUDA device;
//! they start the gpubench beside their own binary (`common::bin`), so a
//! copied tree runs them (scripts/gpu-smoke);
//! those that need two GPUs skip below two. None of them has run yet: this
//! project's machines have no GPU (results/README.md says what has run).
#![cfg(feature = "cuda-tests")]
use super::common::*;

/// The CUDA devices gpubench sees; prints why a test is skipped.
fn gpus(need: usize, test: &str) -> bool {
    let n = gpubench::device::cuda_device_count();
    if n < need {
        eprintln!("skipped {test}: needs {need} CUDA device(s), this machine has {n}");
    }
    n >= need
}

fn json(args: &str) -> serde_json::Value {
    let o = gpubench(args).output();
    assert_eq!(o.status.code(), Some(0), "{args}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)))
}

fn losses(v: &serde_json::Value) -> Vec<f64> {
    v["run"]["losses"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

const RUN: &str = "run --format json --model resnet18 --image-size 64 --batch-size 16 --steps 5 --warmup 2";

#[test]
fn single_on_gpu_0_reports_cuda_figures() {
    if !gpus(1, "single_on_gpu_0_reports_cuda_figures") {
        return;
    }
    // A 5-step window on an H200 lasts tens of ms, shorter than NVML's
    // default sample interval (G6): 30 steps, sampled every 10 ms.
    let v = json("run --format json --model resnet18 --image-size 64 --batch-size 16 --steps 30 --warmup 2 --gpus 0 --sample-interval 10ms");
    let r = &v["rows"][0];
    assert_eq!((r["status"].as_str(), r["device_kind"].as_str()), (Some("ok"), Some("cuda")));
    assert!(r["peak_mem_alloc_mb"].as_f64().unwrap() > 1.0, "allocator peak: {r}");
    assert!(!r["device_name"].as_str().unwrap().is_empty() && r["cuda_version"].as_str().unwrap() != "");
    // NVML is matched to cuda:0 by PCI bus id: utilization is sampled.
    assert!(r["util_mean_pct"].as_f64().is_some(), "NVML utilization missing: {r}");
}

#[test]
fn dp_on_one_gpu_and_two_replicas_on_one_gpu() {
    if !gpus(1, "dp_on_one_gpu_and_two_replicas_on_one_gpu") {
        return;
    }
    let one = json(&format!("{RUN} --strategy dp --gpus 0"));
    assert_eq!(one["rows"][0]["status"], "ok");
    let two =
        json("run --format json --strategy dp --gpus 0,0 --model tinycnn --image-size 32 --batch-size 8 --steps 5 --warmup 1");
    assert_eq!(two["rows"][0]["status"], "ok");
    assert!(two["rows"][0]["note"].as_str().unwrap().contains("TEST MODE"), "{}", two["rows"][0]);
    // On CUDA the master's work is timed only where the devices are synchronized anyway.
    assert!(two["rows"][0]["dp_replicate_ms"].is_null(), "launch times are not recorded: {}", two["rows"][0]);
    let synced = json(
        "run --format json --strategy dp --gpus 0,0 --model tinycnn --image-size 32 --batch-size 8 --steps 5 --warmup 1 \
         --breakdown",
    );
    for c in ["dp_replicate_ms", "dp_scatter_ms", "dp_gather_ms", "dp_reduce_ms", "dp_compute_ms"] {
        assert!(synced["rows"][0][c].as_f64().is_some_and(|ms| ms >= 0.0), "{c}: {}", synced["rows"][0]);
    }
}

#[test]
fn ddp_world_1_over_nccl() {
    if !gpus(1, "ddp_world_1_over_nccl") {
        return;
    }
    let v = json(&format!("{RUN} --strategy ddp --gpus 0 --backend nccl"));
    assert_eq!((v["rows"][0]["status"].as_str(), v["rows"][0]["backend"].as_str()), (Some("ok"), Some("nccl")));
    assert!(v["rows"][0]["ddp_buckets"].as_u64().unwrap() >= 1);
}

#[test]
fn amp_losses_match_pytorch_on_the_gpu() {
    if !gpus(1, "amp_losses_match_pytorch_on_the_gpu") {
        return;
    }
    for p in ["bf16", "fp16"] {
        let cfg = format!(
            "run --format json --gpus 0 --model tinycnn --image-size 32 --batch-size 16 --steps 5 --warmup 0 \
                           --precision {p} --deterministic --seed 2"
        );
        let (ours, theirs) = (json(&cfg), json(&format!("{cfg} --impl pytorch")));
        for (a, b) in losses(&ours).iter().zip(losses(&theirs)) {
            assert!((a - b).abs() <= 1e-3 * b.abs().max(1.0), "{p}: {:?} vs {:?}", losses(&ours), losses(&theirs));
        }
    }
}

#[test]
fn dp_on_two_gpus_equals_single_on_the_global_batch() {
    if !gpus(2, "dp_on_two_gpus_equals_single_on_the_global_batch") {
        return;
    }
    let opts = "--model tinycnn --image-size 32 --steps 5 --warmup 0 --deterministic --lr 0.05";
    let dp = json(&format!("run --format json --strategy dp --gpus 0,1 --batch-size 8 {opts}"));
    let single = json(&format!("run --format json --gpus 0 --batch-size 16 {opts}"));
    for (a, b) in losses(&dp).iter().zip(losses(&single)) {
        assert!((a - b).abs() <= 1e-4 * b.abs().max(1.0), "{:?} vs {:?}", losses(&dp), losses(&single));
    }
}

#[test]
fn ddp_two_ranks_over_nccl() {
    if !gpus(2, "ddp_two_ranks_over_nccl") {
        return;
    }
    let v = json(&format!("{RUN} --strategy ddp --gpus 0,1"));
    assert_eq!((v["rows"][0]["status"].as_str(), v["rows"][0]["n_devices"].as_u64()), (Some("ok"), Some(2)));
    assert!(v["rows"][0]["ddp_backward_comm_ms"].as_f64().unwrap() > 0.0);
}

/// `--cuda-graphs` replays the captured step on each new batch: with the
/// learning rate at zero (tinycnn has no BatchNorm, so nothing else
/// changes) a graphed run's losses are the eager run's, batch for batch;
/// and training graphs match PyTorch's own graphed step (the same recipe:
/// three eager steps, the capture, replays), in fp32 and in fp16, whose
/// skip is decided on the device.
#[test]
fn cuda_graphs_replay_every_batch_and_match_pytorchs_graphs() {
    if !gpus(1, "cuda_graphs_replay_every_batch_and_match_pytorchs_graphs") {
        return;
    }
    let base = "run --format json --gpus 0 --model tinycnn --image-size 32 --batch-size 16 --steps 6 --warmup 1 \
                --deterministic --lr 0";
    let (eager, graphed) = (json(base), json(&format!("{base} --cuda-graphs")));
    assert!(graphed["rows"][0]["variant"].as_str().unwrap().contains("cuda-graphs"), "{}", graphed["rows"][0]);
    let (e, g) = (losses(&eager), losses(&graphed));
    assert!(e.iter().any(|l| *l != e[0]), "the batches differ: {e:?}");
    for (a, b) in g.iter().zip(&e) {
        assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "graphed {g:?} vs eager {e:?}");
    }
    for p in ["fp32", "fp16"] {
        let cfg = format!(
            "run --format json --gpus 0 --model tinycnn --image-size 32 --batch-size 16 --steps 5 --warmup 1 \
             --precision {p} --deterministic --seed 2 --lr 0.05 --cuda-graphs"
        );
        let (ours, theirs) = (json(&cfg), json(&format!("{cfg} --impl pytorch")));
        assert_eq!(ours["rows"][0]["status"], "ok", "{}", ours["rows"][0]);
        for (a, b) in losses(&ours).iter().zip(losses(&theirs)) {
            assert!((a - b).abs() <= 1e-3 * b.abs().max(1.0), "{p}: {:?} vs {:?}", losses(&ours), losses(&theirs));
        }
    }
}

/// Serving with graphs and with input overlap (the default) answers every
/// request, in both servers, and each row says what its server did.
#[test]
fn serving_with_graphs_and_overlap_answers_every_request() {
    if !gpus(1, "serving_with_graphs_and_overlap_answers_every_request") {
        return;
    }
    let base = "infer --format json --gpus 0 --model resnet18 --image-size 64 --frame-size 320x240 --max-batch 6 \
                --duration 1s --warmup-batches 1";
    // (--overlap off: overlap_and_graphs_give_the_serial_paths_logits.)
    for extra in
        ["", "--cuda-graphs", "--cuda-graphs --impl pytorch", "--cuda-graphs --scenario streams --streams 16 --fps 20"]
    {
        // infer's row is the envelope's rows[0] (docs/json.md).
        let r = json(&format!("{base} {extra}"))["rows"][0].clone();
        assert_eq!(r["status"], "ok", "{extra}: {r}");
        let (req, done, dropped) =
            (r["requests"].as_u64().unwrap(), r["completed"].as_u64().unwrap(), r["dropped"].as_u64().unwrap());
        assert!(done > 0 && req == done + dropped, "{extra}: {r}");
        let note = r["note"].as_str().unwrap();
        assert_eq!(note.contains("CUDA graphs"), extra.contains("--cuda-graphs"), "{extra}: {note}");
        assert_eq!(note.contains("input overlapped"), !extra.contains("--overlap off"), "{extra}: {note}");
    }
}

/// The overlapped input path and the graphs serve what the serial eager
/// path serves, in both servers: each request's logits (offline: the same
/// requests in the same batches in every run; `GPUBENCH_TEST_PREDICTIONS`
/// writes them).
#[test]
fn overlap_and_graphs_give_the_serial_paths_logits() {
    if !gpus(1, "overlap_and_graphs_give_the_serial_paths_logits") {
        return;
    }
    let base = "infer --format json --gpus 0 --model resnet18 --num-classes 10 --image-size 64 --frame-size 320x240 \
                --max-batch 6 --duration 1s --warmup-batches 1";
    let logits = |extra: &str| -> std::collections::HashMap<u64, Vec<f64>> {
        let dir = tempfile::tempdir().unwrap();
        let o = gpubench(&format!("{base} {extra}")).env("GPUBENCH_TEST_PREDICTIONS", dir.path()).output();
        assert_eq!(o.status.code(), Some(0), "{extra}: {}", stderr(&o));
        let text = std::fs::read_to_string(dir.path().join("worker-0.txt")).unwrap();
        text.lines()
            .map(|l| {
                let mut w = l.split(' ');
                let id = w.next().unwrap().parse().unwrap();
                (id, w.map(|v| v.parse().unwrap()).collect())
            })
            .collect()
    };
    // gpubench's server, then PyTorch's (graphs on top of its overlap: one
    // run fewer in the smoke window), each against its own serial path.
    for (imp, extras) in [("gpubench", &["--overlap on", "--cuda-graphs"][..]), ("pytorch", &["--cuda-graphs"][..])] {
        let serial = logits(&format!("--impl {imp} --overlap off"));
        for extra in extras {
            let extra = format!("--impl {imp} {extra}");
            let got = logits(&extra);
            let common: Vec<u64> = got.keys().filter(|id| serial.contains_key(id)).copied().collect();
            assert!(common.len() >= 12, "{extra}: only {} requests in common", common.len());
            for id in common {
                for (a, b) in got[&id].iter().zip(&serial[&id]) {
                    let close = (a - b).abs() <= 1e-3 * b.abs().max(1.0);
                    assert!(close, "{extra}: request {id}: {:?} vs {:?}", got[&id], serial[&id]);
                }
            }
        }
    }
}
