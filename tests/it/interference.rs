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
    let said = v["row"]["interference"].as_str().unwrap();
    assert!(said.contains("host busy: other processes used"), "{said:?}");
}
