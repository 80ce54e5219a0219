//! Interference detection through the real binary: a run with CPU hogs
//! beside it says so, and a run with nothing beside it does not.
//!
//! A test binary of its own because the clean half needs a quiet host:
//! inside `tests/it`, the other tests' runs share the machine and a correct
//! detector flags them. Cargo runs test binaries one after another, and this
//! one has a single test.
#[allow(dead_code)]
#[path = "it/common.rs"]
mod common;
use common::*;

#[test]
fn a_cpu_hog_beside_the_run_is_reported_and_a_clean_run_is_not() {
    use std::os::unix::process::CommandExt;
    let run = || {
        let o = gpubench(&format!("run --cpu {TINY} --batch-size 8 --duration 2s --warmup 2 --json")).output();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        v["row"]["interference"].as_str().unwrap().to_string()
    };
    let clean = run();
    assert_eq!(clean, "", "a run with nothing beside it was called disturbed");
    // Two busy loops in their own process group (not the run's), each bounded
    // to 10 s and killed after the run.
    let hogs: Vec<std::process::Child> = (0..2)
        .map(|_| {
            std::process::Command::new("sh")
                .args(["-c", "end=$(($(date +%s)+10)); while [ $(date +%s) -lt $end ]; do :; done"])
                .process_group(0)
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let busy = run();
    for mut h in hogs {
        let _ = h.kill();
        let _ = h.wait();
    }
    assert!(busy.contains("host busy: other processes used"), "{busy:?}");
}
