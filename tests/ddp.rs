//! ddp on the CPU over gloo: equivalence with one process on the global
//! batch, and the launcher's behaviour with real worker processes.
mod common;
use clap::Parser;
use common::*;
use gpubench::cli::{Cli, Command, RunArgs};
use gpubench::config;
use gpubench::data::{synthetic::Synthetic, DataSource};
use gpubench::device::Devices;
use gpubench::dist::{Backend, ProcessGroup, Store};
use gpubench::strategy::{ddp::Ddp, single::Single, Strategy};
use std::time::{Duration, Instant};
use tch::Tensor;

fn args(s: &str) -> RunArgs {
    let argv: Vec<&str> = ["gpubench", "run"].into_iter().chain(s.split_whitespace()).collect();
    match Cli::try_parse_from(argv).unwrap().command {
        Command::Run(a) => *a,
        _ => unreachable!(),
    }
}

fn params(s: &dyn Strategy) -> Vec<Tensor> {
    s.var_store().trainable_variables().iter().map(|v| v.detach().copy()).collect()
}

fn max_rel(a: &[Tensor], b: &[Tensor]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).norm().double_value(&[]) / y.norm().double_value(&[]).max(1e-12))
        .fold(0.0, f64::max)
}

#[test]
fn two_ranks_equal_one_process_on_the_global_batch() {
    let opts = "--model tinycnn --image-size 16 --num-classes 10 --lr 0.05";
    let a = args(&format!("--strategy ddp --cpu 2 --batch-size 4 {opts}"));
    let dcfg = config::validate(&a, Devices::cpu(2)).unwrap();
    let scfg = config::validate(&args(&format!("--batch-size 8 {opts}")), Devices::cpu(1)).unwrap();
    let mut data = Synthetic::new(8, 16, 10, tch::Device::Cpu, 11).unwrap();
    let batches: Vec<_> = (0..3).map(|_| data.next_batch().unwrap()).collect();
    let chunks: Vec<Vec<(Tensor, Tensor)>> = (0..2)
        .map(|r| {
            batches.iter().map(|b| (b.images.narrow(0, 4 * r, 4).copy(), b.labels.narrow(0, 4 * r, 4).copy())).collect()
        })
        .collect();
    let port = gpubench::launcher::free_port().unwrap();
    let handles: Vec<_> = chunks
        .into_iter()
        .enumerate()
        .map(|(rank, my)| {
            let (dcfg, a) = (dcfg.clone(), a.clone());
            std::thread::spawn(move || {
                let t = Duration::from_secs(30);
                let store = Store::new("127.0.0.1", port, rank, 2, rank == 0, t).unwrap();
                let pg = ProcessGroup::new(&store, Backend::Gloo, rank, 2, None, t).unwrap();
                let mut ddp = Ddp::new(&dcfg, Devices::cpu(1), pg, &a.ddp).unwrap();
                let init = params(&ddp);
                for (x, y) in my {
                    let _loss = ddp.step(&gpubench::data::Batch { images: x, labels: y }).unwrap();
                }
                let p = params(&ddp);
                drop(ddp);
                (init, p, store)
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    // Rank 0's weights were broadcast: both ranks start and end identical.
    assert_eq!(max_rel(&results[0].0, &results[1].0), 0.0);
    assert_eq!(max_rel(&results[0].1, &results[1].1), 0.0, "ranks diverged");
    // One process on the global batch of 8, from rank 0's initial weights.
    let mut single = Single::new(&scfg).unwrap();
    tch::no_grad(|| {
        for (dst, src) in single.var_store().trainable_variables().iter().zip(&results[0].0) {
            dst.shallow_clone().copy_(src);
        }
    });
    for b in &batches {
        let _loss = single.step(b).unwrap();
    }
    let e = max_rel(&results[0].1, &params(&single));
    assert!(e < 1e-5, "parameters after 3 steps differ by {e:e} relative");
}

#[test]
fn resnet18_two_ranks_row_is_sane() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ddp.csv");
    let o = gpubench(&[
        "run",
        "--strategy",
        "ddp",
        "--cpu",
        "2",
        "--model",
        "resnet18",
        "--image-size",
        "32",
        "--batch-size",
        "2",
        "--steps",
        "3",
        "--warmup",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
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
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gpubench"))
        .args([
            "run",
            "--strategy",
            "ddp",
            "--cpu",
            "2",
            "--model",
            "tinycnn",
            "--image-size",
            "16",
            "--batch-size",
            "2",
            "--duration",
            "120s",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let mut workers = vec![];
    while workers.len() < 2 && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(200));
        workers = worker_pids(child.id());
    }
    assert_eq!(workers.len(), 2, "workers did not start");
    std::thread::sleep(Duration::from_secs(3));
    let victim = *workers.iter().max().unwrap();
    std::process::Command::new("kill").args(["-9", &victim.to_string()]).status().unwrap();
    let t = Instant::now();
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code();
        }
        assert!(t.elapsed() < Duration::from_secs(40), "launcher did not exit");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(code, Some(1));
    for w in workers {
        assert!(!std::path::Path::new(&format!("/proc/{w}")).exists(), "worker {w} left behind");
    }
    let r = &read_csv(&out)[0];
    assert_eq!(r["status"], "failed");
    assert!(r["error"].contains("rank"), "{}", r["error"]);
}

#[test]
fn two_launchers_with_nnodes_2_form_one_job() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nodes.csv");
    let port = gpubench::launcher::free_port().unwrap().to_string();
    let common = [
        "run",
        "--strategy",
        "ddp",
        "--cpu",
        "1",
        "--model",
        "tinycnn",
        "--image-size",
        "16",
        "--batch-size",
        "2",
        "--steps",
        "3",
        "--warmup",
        "1",
        "--quiet",
        "--nnodes",
        "2",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        &port,
    ];
    let spawn = |node: &str, extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_gpubench"))
            .args(common)
            .args(["--node-rank", node])
            .args(extra)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let n0 = spawn("0", &["--out", out.to_str().unwrap()]);
    let n1 = spawn("1", &[]);
    let o0 = n0.wait_with_output().unwrap();
    let o1 = n1.wait_with_output().unwrap();
    assert_eq!(o0.status.code(), Some(0), "{}", String::from_utf8_lossy(&o0.stderr));
    assert_eq!(o1.status.code(), Some(0), "{}", String::from_utf8_lossy(&o1.stderr));
    let r = &read_csv(&out)[0];
    assert_eq!(r["n_devices"], "2");
    assert_eq!(r["global_batch"], "4");
    assert_eq!(r["status"], "ok");
}

#[test]
fn unreachable_master_is_a_clear_error_within_the_timeout() {
    let port = gpubench::launcher::free_port().unwrap().to_string();
    let t = Instant::now();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_gpubench"))
        .args(["run", "--strategy", "ddp", "--cpu", "--model", "tinycnn", "--image-size", "16", "--dist-timeout", "3s"])
        .env("RANK", "1")
        .env("WORLD_SIZE", "2")
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", &port)
        .output()
        .unwrap();
    assert!(t.elapsed() < Duration::from_secs(30), "took {:?}", t.elapsed());
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("rendezvous") && err.contains(&port), "{err}");
}
