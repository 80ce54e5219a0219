//! Helpers for tests that run the real binary.
#![allow(dead_code)]
use std::path::Path;
use std::process::{Command, Output};

pub fn gpubench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpubench"))
        .args(args)
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .env_remove("LOCAL_RANK")
        .env_remove("SLURM_PROCID")
        .env_remove("SLURM_NTASKS")
        .output()
        .expect("running gpubench")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Asserts a usage error: exit 2, one line on stderr mentioning `needle`, no panic.
pub fn assert_usage_error(args: &[&str], needle: &str) {
    let o = gpubench(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "args {args:?}: stderr {err}");
    assert!(err.contains(needle), "args {args:?}: expected {needle:?} in {err:?}");
    assert_eq!(err.trim_end().lines().count(), 1, "args {args:?}: not one line: {err:?}");
    assert!(!err.contains("panicked") && !err.contains("RUST_BACKTRACE"), "{err}");
}

/// Reads a results CSV as header→value maps.
pub fn read_csv(path: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let mut r = csv::Reader::from_path(path).expect("reading results csv");
    let headers = r.headers().unwrap().clone();
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            headers.iter().zip(rec.iter()).map(|(h, v)| (h.to_string(), v.to_string())).collect()
        })
        .collect()
}

pub fn num(row: &std::collections::HashMap<String, String>, col: &str) -> f64 {
    row[col].parse().unwrap_or_else(|_| panic!("column {col} = {:?} is not a number", row[col]))
}
