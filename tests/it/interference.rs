//! Interference detection through the real binary, against a disturbance
//! the test makes itself: busy loops, one more than the cores, beside a run
//! are named in its row. Nothing here assumes the host is quiet: the clean
//! half of the comparison (a baseline the same test measures, with wide
//! margins) is the unit test beside the detector
//! (`metrics::interference::tests`), where this process only sleeps.
use super::common::*;

#[test]
fn a_cpu_hog_beside_the_run_is_named_in_its_row() {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let hogs = Hogs::start(cores + 1, 30);
    std::thread::sleep(std::time::Duration::from_millis(200));
    let o = gpubench(&format!("run --cpu {TINY} --batch-size 8 --duration 1s --warmup 2 --format json")).output();
    drop(hogs);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let said = v["rows"][0]["interference"].as_str().unwrap();
    assert!(said.contains("host busy: other processes used"), "{said:?}");
    // One intra-op thread per core, with every core taken by the hogs: the
    // count that would fit is said.
    if cores > 1 {
        assert!(said.contains(&format!("{cores} intra-op threads on 1 free core: rerun with --threads 1")), "{said:?}");
    }
}

/// A busy process in the run's own process group that is not the run's
/// (`prep.sh & gpubench run …` in one script): the check used to leave out
/// the whole group, and missed it; it leaves out the run's own process tree.
#[test]
fn a_busy_job_in_the_same_process_group_is_named_too() {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    // Children of this test, in its process group, as the run will be.
    let mut hogs: Vec<std::process::Child> = (0..cores + 1)
        .map(|_| {
            std::process::Command::new("timeout")
                .args(["30", "yes"])
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("starting a busy process")
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let o = gpubench(&format!("run --cpu {TINY} --batch-size 8 --duration 1s --warmup 2 --format json")).output();
    for h in &mut hogs {
        // `timeout` forwards SIGTERM to its `yes`.
        unsafe { libc::kill(h.id() as i32, libc::SIGTERM) };
        let _ = h.wait();
    }
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let said = v["rows"][0]["interference"].as_str().unwrap();
    assert!(said.contains("host busy: other processes used"), "{said:?}");
}
