//! `gpubench infer` on the CPU: every request answered or dropped exactly
//! once under each strategy and scenario, the capacity search against a
//! server of known capacity, a worker process that dies, and bad input.
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use crate::common::{assert_usage_error, gpubench, num, read_csv, stderr};

const SMALL: &str = "infer --model tinycnn --image-size 32 --num-classes 10 --frame-size 64x48 --warmup-batches 1";

fn rows(path: &Path) -> Vec<HashMap<String, String>> {
    read_csv(path)
}

#[test]
fn every_request_is_answered_or_dropped_exactly_once_under_each_strategy_and_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("infer.csv");
    // 20 cameras at 10 fps for 0.5 s: exactly 100 scheduled frames, under
    // every strategy; each other scenario under one strategy at least (the
    // scenarios make the schedule, the strategies answer it, and the two meet
    // only in the server's queue, which every pair here goes through).
    let streams = ("--scenario streams --streams 20 --fps 10", Some(100.0));
    let (server, offline, single) =
        (("--scenario server --rate 200", None), ("--scenario offline", None), ("--scenario single-stream", None));
    let pairs = [
        ("replicas", streams),
        ("replicas", server),
        ("replicas", offline),
        ("processes", streams),
        ("processes", single),
        ("dp", streams),
        ("dp", server),
    ];
    for (strategy, (sc, expected)) in pairs {
        let a = format!("{SMALL} --cpu 2 --serving {strategy} {sc} --duration 500ms -q --out {}", out.display());
        let o = gpubench(&a).run();
        assert_eq!(o.code, 0, "{a}: {}", o.stderr);
        let all = rows(&out);
        let r = all.last().unwrap();
        assert_eq!(r["status"], "ok", "{a}: {}", r["error"]);
        assert_eq!((r["mode"].as_str(), r["strategy"].as_str()), ("infer", strategy));
        let (req, done, dropped) = (num(r, "requests"), num(r, "completed"), num(r, "dropped"));
        assert_eq!(done + dropped, req, "{a}");
        assert!(done > 0.0, "{a}: nothing answered");
        if let Some(e) = expected {
            assert_eq!(req, e, "{a}: every scheduled frame is a request");
        }
        if sc.contains("offline") {
            assert_eq!(r["latency_ms_p50"], "", "offline has no latency from a schedule");
        } else {
            assert!(num(r, "latency_ms_p99") >= num(r, "latency_ms_p50"), "{a}");
        }
    }
    // Overloaded and dropping stale frames: drops are counted, never lost.
    // The test model's 10 ms per batch of 8 caps the server at 800 req/s on
    // any host, so the overload does not depend on how fast this one is.
    let slow = |a: &str| gpubench(a).env("GPUBENCH_TEST_SERVICE_MS", "10").run();
    let a = format!(
        "{SMALL} --cpu 1 --scenario server --rate 50000 --drop-older-than 20ms --duration 500ms -q --out {}",
        out.display()
    );
    assert_eq!(slow(&a).code, 0, "{a}");
    let all = rows(&out);
    let r = all.last().unwrap();
    // Measured as asked (exit 0), but not the load it was offered: the row says so, and why.
    assert_eq!(r["status"], "overloaded", "over 1 % dropped");
    assert!(r["error"].contains("older than --drop-older-than 20ms"), "{}", r["error"]);
    assert!(num(r, "dropped") > 0.0 && num(r, "completed") + num(r, "dropped") == num(r, "requests"));
    assert!(num(r, "achieved_rate") < num(r, "offered_rate"));
    // A serving row carries what serving did, not training columns made up for it.
    assert_eq!((r["grad_accum"].as_str(), r["global_batch"].as_str(), r["mode"].as_str()), ("", "", "infer"));
    // Without --drop-older-than, what the grace period could not serve is the reason.
    let a = format!("{SMALL} --cpu 1 --scenario server --rate 5000 --duration 300ms --out {}", out.display());
    let o = slow(&a);
    assert_eq!(o.code, 0, "{a}: {}", o.stderr);
    assert!(o.stdout.contains("status overloaded:"), "the summary says so: {}", o.stdout);
    let r = rows(&out).pop().unwrap();
    assert_eq!(r["status"], "overloaded");
    assert!(r["error"].contains("still queued when the grace period"), "{}", r["error"]);
}

#[test]
fn a_worker_process_that_dies_ends_the_run_with_a_failed_row_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("dead.csv");
    let a = format!(
        "{SMALL} --cpu 2 --serving processes --scenario streams --streams 4 --fps 5 --duration 120s -q --out {}",
        out.display()
    );
    let t = Instant::now();
    let o = gpubench(&a).env("GPUBENCH_INFER_CRASH", "1").run();
    assert_eq!(o.code, 1, "{}", o.stderr);
    // The death ended the run, not its 120 s duration.
    assert!(t.elapsed().as_secs() < 100, "took {:?}", t.elapsed());
    let r = rows(&out).pop().unwrap();
    assert_eq!(r["status"], "failed");
    assert!(r["error"].contains("worker 1 (cpu:1) exited with code 3"), "{}", r["error"]);
    // No worker left behind.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let ps = std::process::Command::new("ps").args(["-eo", "args"]).output().unwrap();
    let left = String::from_utf8_lossy(&ps.stdout).lines().filter(|l| l.contains(&out.display().to_string())).count();
    assert_eq!(left, 0, "worker processes left behind");
}

#[test]
fn bad_serving_input_is_one_line_and_exit_2() {
    let s = "infer --cpu 1 --model tinycnn --image-size 32";
    assert_usage_error(&format!("{s} --scenario streams --streams 0 --fps 5"), "--streams must be at least 1");
    assert_usage_error(&format!("{s} --scenario streams --streams 5 --fps=-1"), "--fps must be above zero");
    assert_usage_error(&format!("{s} --scenario streams --streams 5"), "needs --fps");
    assert_usage_error(&format!("{s} --scenario server --rate 0"), "--rate must be above zero");
    assert_usage_error(&format!("{s} --scenario server"), "needs --rate");
    assert_usage_error(&format!("{s} --scenario offline --fps 5"), "--fps has no meaning with --scenario offline");
    assert_usage_error(&format!("{s} --max-batch 0"), "--max-batch must be at least 1");
    assert_usage_error(&format!("{s} --scenario streams --fps 5 --find-max-streams"), "needs --latency-bound");
    assert_usage_error(
        &format!("{s} --scenario server --rate 5 --latency-bound 0ms"),
        "--latency-bound must be longer",
    );
    assert_usage_error(
        &format!("{s} --scenario offline --find-max-streams --latency-bound 1s"),
        "--find-max-streams searches",
    );
    assert_usage_error(&format!("{s} --frame-size 12by3"), "--frame-size");
    assert_usage_error(&format!("{s} --impl pytorch --serving dp"), "dp serving");
    assert_usage_error(&format!("{s} --cuda-graphs"), "this server is on the CPU");
    assert_usage_error(&format!("{s} --impl pytorch --cuda-graphs on"), "this server is on the CPU");
    // On a GPU machine (assumed: the checks need no GPU), dp serving's threads are refused.
    let o = gpubench("validate --assume-gpus 2 infer --gpus 0,1 --serving dp --cuda-graphs").output();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("dp serving runs a thread per replica") && !stderr(&o).contains("  "),
        "{}",
        stderr(&o)
    );
    let o = gpubench("validate --assume-gpus 2 infer --gpus 0,1 --cuda-graphs").output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // Loads too large to schedule, refused before any work (one aborted on a 4 GB allocation).
    assert_usage_error(&format!("{s} --scenario server --rate 1e9 --duration 10s"), "--rate 1000000000");
    assert_usage_error(&format!("{s} --scenario streams --streams 100000 --fps 5"), "lower the load or the duration");
}

#[test]
fn the_pytorch_server_answers_the_same_schedule_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("py.csv");
    for strategy in ["replicas", "processes"] {
        let a = format!(
            "{SMALL} --cpu 2 --impl pytorch --serving {strategy} --scenario streams --streams 20 --fps 10 \
             --duration 500ms -q --out {}",
            out.display()
        );
        let o = gpubench(&a).run();
        assert_eq!(o.code, 0, "{a}: {}", o.stderr);
        let r = rows(&out).pop().unwrap();
        assert_eq!((r["impl"].as_str(), r["status"].as_str()), ("pytorch", "ok"), "{}", r["error"]);
        assert_eq!(num(&r, "requests"), 100.0, "the same 100 scheduled frames");
        assert_eq!(num(&r, "completed") + num(&r, "dropped"), 100.0);
        assert!(r["libtorch_version"].starts_with("2."), "{}", r["libtorch_version"]);
        let python = if strategy == "replicas" { "python threads" } else { "python processes" };
        assert!(r["note"].contains(python), "{}", r["note"]);
    }
}

/// Frames and input as small as they go: the test model's 10 ms dominate.
const TINY_SERVER: &str = "infer --model tinycnn --image-size 8 --num-classes 10 --frame-size 8x8 --warmup-batches 1";

/// The capacity search against a server of known capacity: one replica
/// whose model sleeps 10 ms per batch of up to 8 (the test hook
/// `GPUBENCH_TEST_SERVICE_MS`), so at most 800 requests per second on any
/// host. The upper bounds follow from that limit: a probe of 0.5 s at rate r
/// queues (r - 800) / 2 requests, which stay within the 200 ms bound while r
/// is below 800 + 160 / 0.5, plus the search's 5 % resolution; achieved can never
/// pass 800 (plus counting noise). The lower ones are half of 800, a margin
/// wide enough for a host whose other processes take most of the CPU (the
/// server itself mostly sleeps).
#[test]
fn a_server_of_known_capacity_is_found_and_overload_grows_latency() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cap.csv");
    let a = format!(
        "{TINY_SERVER} --cpu 1 --max-batch 8 --max-wait 1ms --scenario server --find-max-rate --rate 400 \
         --latency-bound 200ms --min-duration 500ms --min-requests 100 --max-drop-rate 1% --format json --out {}",
        out.display()
    );
    let o = gpubench(&a).env("GPUBENCH_TEST_SERVICE_MS", "10").run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(o.stdout.trim()).expect("JSON answer");
    super::common::assert_envelope(&v);
    let best = v["search"]["answer"].as_f64().expect("an answer");
    assert!((400.0..=1180.0).contains(&best), "capacity 800 req/s, found {best}: {v}");
    let probes = rows(&out);
    assert!(probes.len() >= 4 && probes.iter().all(|r| r["note"].contains("capacity ")));
    // The answer was run again for twice as long, and held.
    let last = probes.last().unwrap();
    assert!(last["note"].contains("capacity confirmation") && last["note"].contains("within bound"), "{last:?}");
    assert_eq!(num(last, "offered_rate"), best);
    assert!(probes.iter().all(|r| r["note"].contains("TEST: a model that takes 10 ms")));

    // Twice the capacity: achieved stays at or below 800, latency from the schedule grows.
    let a = format!(
        "{TINY_SERVER} --cpu 1 --max-batch 8 --scenario server --rate 1600 --duration 1s -q --out {}",
        out.display()
    );
    assert_eq!(gpubench(&a).env("GPUBENCH_TEST_SERVICE_MS", "10").run().code, 0);
    let over = rows(&out).pop().unwrap();
    let achieved = num(&over, "achieved_rate");
    assert!((400.0..=840.0).contains(&achieved), "{achieved}");
    assert!(num(&over, "latency_ms_p50") > 200.0, "queueing must show: {:?}", over["latency_ms_p50"]);
    assert!(num(&over, "queue_ms_mean") > 100.0);
}

/// Processes whose command line holds `needle`.
fn processes_with(needle: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return vec![] };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
        .collect()
}

#[test]
fn killing_the_parent_of_processes_ends_its_workers_and_the_next_start_removes_its_folder() {
    // A unique label marks this test's workers among the host's processes.
    let tag = format!("orphan-test-{}", std::process::id());
    // A temporary directory of its own: another test's gpubench, started
    // meanwhile, would sweep the orphaned folder this test looks for.
    let tmp = tempfile::tempdir().unwrap();
    let a = format!("{TINY_SERVER} --serving processes --cpu 2 --scenario offline --duration 30s -q --label {tag}");
    let mut parent = gpubench(&a).env("GPUBENCH_TEST_SERVICE_MS", "10").env("TMPDIR", tmp.path()).spawn();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while processes_with(&tag).len() < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(processes_with(&tag).len(), 3, "the parent and its two workers");
    let folder = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains(&format!("gpubench-pytorch-{}-", parent.id())))
        .expect("the parent's temporary folder");
    parent.kill().unwrap();
    parent.wait().unwrap();
    // The workers notice within their 200 ms poll; 20 s is a hang guard.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !processes_with(&tag).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(processes_with(&tag).is_empty(), "workers left running: {:?}", processes_with(&tag));
    assert!(folder.exists(), "a killed parent cannot clean up; the next start does");
    let o = gpubench(&format!("{TINY_SERVER} --serving processes --cpu 2 --scenario offline --duration 200ms -q"))
        .env("GPUBENCH_TEST_SERVICE_MS", "10")
        .env("TMPDIR", tmp.path())
        .run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(!folder.exists(), "{} was left behind", folder.display());
}

/// The predictions hook the GPU tests compare serving paths with: one line
/// per served request, its id and its logits, warm-up left out.
#[test]
fn the_predictions_hook_writes_each_served_requests_logits() {
    for imp in ["gpubench", "pytorch"] {
        let dir = tempfile::tempdir().unwrap();
        let o = gpubench(&format!(
            "infer --cpu 1 --model tinycnn --image-size 32 --frame-size 48x40 --num-classes 7 --max-batch 3 \
             --duration 1s --warmup-batches 1 --format json --impl {imp}"
        ))
        .env("GPUBENCH_TEST_PREDICTIONS", dir.path())
        .output();
        assert_eq!(o.status.code(), Some(0), "{imp}: {}", stderr(&o));
        let row = serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["rows"][0].clone();
        let text = std::fs::read_to_string(dir.path().join("worker-0.txt")).unwrap();
        let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(' ').collect()).collect();
        assert_eq!(lines.len() as u64, row["completed"].as_u64().unwrap(), "{imp}: {row}");
        assert!(lines.iter().all(|l| l.len() == 8 && l[1..].iter().all(|v| v.parse::<f32>().is_ok())), "{imp}");
        // Offline takes ids in order from 0, batch after batch: warm-up is not among them.
        assert_eq!(lines[0][0], "0", "{imp}");
    }
}
