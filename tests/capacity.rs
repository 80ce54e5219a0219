//! The capacity search against a server of known capacity: one replica
//! whose model takes exactly 10 ms per batch of up to 8 (the test hook
//! `GPUBENCH_TEST_SERVICE_MS`), so at most 800 requests per second.
//!
//! A test binary of its own because it measures: inside `tests/it`, the
//! other tests' runs share the machine's two cores and slow the server's own
//! work (frames, batching) beside the model. Cargo runs test binaries one
//! after another, and this one has a single test.
#[allow(dead_code)]
#[path = "it/common.rs"]
mod common;
use common::*;
use std::path::Path;

/// Frames and input as small as they go: the model's 10 ms dominate.
const TINY_SERVER: &str = "infer --model tinycnn --image-size 8 --num-classes 10 --frame-size 8x8 --warmup 1";

fn rows(path: &Path) -> Vec<std::collections::HashMap<String, String>> {
    read_csv(path)
}

#[test]
fn a_server_of_known_capacity_is_found_and_overload_grows_latency() {
    // One replica whose model takes 10 ms per batch of up to 8: 800 requests/s at most.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cap.csv");
    let a = format!(
        "{TINY_SERVER} --cpu 1 --max-batch 8 --max-wait 1ms --scenario server --find-max-rate --rate 100 \
         --latency-bound 200ms --min-duration 1s --min-requests 200 --max-drop-rate 1% --json --out {}",
        out.display()
    );
    let o = gpubench(&a).env("GPUBENCH_TEST_SERVICE_MS", "10").run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(o.stdout.trim()).expect("JSON answer");
    let best = v["answer"].as_f64().expect("an answer");
    assert!((720.0..=880.0).contains(&best), "capacity 800 req/s, found {best}: {v}");
    let probes = rows(&out);
    assert!(probes.len() >= 4 && probes.iter().all(|r| r["note"].contains("capacity probe")));
    assert!(probes.iter().all(|r| r["note"].contains("TEST: a model that takes 10 ms")));

    // Twice the capacity: achieved stays near 800, latency from the schedule grows.
    let a = format!(
        "{TINY_SERVER} --cpu 1 --max-batch 8 --scenario server --rate 1600 --duration 2s -q --out {}",
        out.display()
    );
    assert_eq!(gpubench(&a).env("GPUBENCH_TEST_SERVICE_MS", "10").run().code, 0);
    let over = rows(&out).pop().unwrap();
    let achieved = num(&over, "achieved_rate");
    assert!((640.0..=840.0).contains(&achieved), "{achieved}");
    assert!(num(&over, "latency_ms_p50") > 200.0, "queueing must show: {:?}", over["latency_ms_p50"]);
    assert!(num(&over, "queue_ms_mean") > 100.0);
}
