//! scripts/gpu-smoke on a machine without a GPU: its plan fills the 7-minute
//! window exactly, every gpubench line in it passes gpubench's own checks,
//! and its python checks pass their self-tests and read only columns the
//! schema has; the run itself stops at once with one line.
use super::common::{bin, stderr, stdout};
use std::process::Command;

fn smoke(args: &[&str]) -> std::process::Output {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/gpu-smoke");
    Command::new(script).args(args).env("GPUBENCH_BIN", bin()).output().unwrap()
}

#[test]
fn plan_checks_every_line_and_fits_420_s() {
    let o = smoke(&["--plan"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    let total: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("total: ")?.strip_suffix(" s")?.parse().ok())
        .unwrap_or_else(|| panic!("no total line: {out}"));
    let steps: Vec<&str> = out.lines().filter(|l| l.contains(" s  ")).collect();
    let sum: u64 = steps.iter().map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap()).sum();
    // The limits share out the 420 s window (audit 3, 4.3): a step's limit
    // is raised by lowering another's.
    assert!(total == 420 && total == sum, "total {total}, steps add to {sum}: {out}");
    // Most valuable first: versions, the peak every later row's MFU needs, then the published comparison.
    let ids: Vec<&str> = steps.iter().map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(&ids[..4], ["env", "peak", "tf32", "fp16"], "{out}");
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "a step id twice (--only picks steps by id): {out}");
    assert!(steps.iter().all(|l| l.ends_with("[lines: ok]")), "{out}");
    // The checks.txt checks in python pass their self-tests, and every column the
    // script reads is in `gpubench schema` (H9: lastrow asked for two that were not).
    assert!(out.lines().any(|l| l.starts_with("checks: ") && l.contains(": ok, ")), "{out}");
}

#[test]
fn a_wrong_flag_is_caught_by_validate() {
    let o = Command::new(bin())
        .args(["validate", "--assume-gpus", "1", "run", "--gpus", "0", "--cudnn-bench"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = Command::new(bin())
        .args(["validate", "--assume-gpus", "1", "run", "--gpus", "0", "--batch-size", "8"])
        .output()
        .unwrap();
    assert_eq!((o.status.code(), stdout(&o).starts_with("ok: gpubench run")), (Some(0), true), "{}", stderr(&o));
}

#[test]
fn without_a_gpu_it_stops_at_once_with_one_line() {
    if Command::new("sh").args(["-c", "nvidia-smi -L 2>/dev/null | grep -q ^GPU"]).status().unwrap().success() {
        eprintln!("skipped: this machine has an NVIDIA GPU");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let o = smoke(&[dir.path().to_str().unwrap()]);
    let err = stderr(&o);
    assert_eq!((o.status.code(), err.lines().count()), (Some(2), 1), "{err}");
    assert!(err.contains("no NVIDIA GPU") && err.contains("--plan"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "wrote into the output folder");
}
