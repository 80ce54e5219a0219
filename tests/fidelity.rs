//! Fidelity on the CPU: gpubench and PyTorch's own implementation (the Python
//! reference, `--impl pytorch`) compute the same per-step losses from the same
//! start; `--save-init` / `--init-from` carry that start; dp on several
//! replicas matches one device on the global batch.
mod common;
use common::*;
use std::path::Path;

/// Relative tolerance on each step's loss.
const TOL: f64 = 1e-4;

fn json_of(o: &std::process::Output) -> serde_json::Value {
    let out = stdout(o);
    assert!(o.status.success(), "exit {:?}\nstdout {out}\nstderr {}", o.status.code(), stderr(o));
    let start = out.find('{').unwrap_or_else(|| panic!("no JSON in {out:?}"));
    serde_json::from_str(&out[start..]).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Runs `gpubench run --json` with `args`; returns (per-step losses, row).
fn run(args: &[&str]) -> (Vec<f64>, serde_json::Value) {
    let mut v = vec!["run", "--json", "--warmup", "0", "--steps", "5"];
    if !args.contains(&"--cpu") {
        v.push("--cpu");
    }
    v.extend(args);
    let j = json_of(&gpubench(&v));
    let losses: Vec<f64> = j["losses"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    assert_eq!(losses.len(), 5, "{j}");
    (losses, j["row"].clone())
}

fn assert_close(a: &[f64], b: &[f64], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: {a:?} vs {b:?}");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let rel = (x - y).abs() / y.abs().max(1e-12);
        assert!(rel <= TOL, "{what}: step {i}: {x} vs {y} (relative {rel:.2e} > {TOL:e}); all {a:?} vs {b:?}");
    }
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// gpubench writes the start (--save-init), PyTorch starts from it
/// (--init-from); both rows land in the same CSV.
fn gpubench_vs_pytorch(cfg: &str) {
    let dir = tempfile::tempdir().unwrap();
    let init = dir.path().join("init.safetensors");
    let out = dir.path().join("r.csv");
    let cfg: Vec<&str> = cfg.split_whitespace().collect();
    let mut a = cfg.clone();
    a.extend(["--seed", "3", "--save-init", path_str(&init), "--out", path_str(&out)]);
    let (ours, row) = run(&a);
    assert_eq!(row["impl"], "gpubench");
    let mut b = cfg.clone();
    // Another --seed: weights and data must come from the file.
    b.extend(["--impl", "pytorch", "--seed", "11", "--init-from", path_str(&init), "--out", path_str(&out)]);
    let (theirs, row) = run(&b);
    assert_eq!(row["impl"], "pytorch");
    assert_eq!(row["status"], "ok");
    assert!(row["note"].as_str().unwrap().contains("PyTorch 2."), "{row}");
    assert_close(&theirs, &ours, &format!("pytorch vs gpubench ({})", cfg.join(" ")));
    let rows = read_csv(&out);
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0]["impl"].as_str(), rows[1]["impl"].as_str()), ("gpubench", "pytorch"));
    assert_eq!(rows[0]["strategy"], rows[1]["strategy"]);
    assert_eq!(rows[0]["global_batch"], rows[1]["global_batch"]);
    assert!(num(&rows[1], "throughput_img_s") > 0.0);
}

#[test]
fn single_tinycnn_losses_match_pytorch() {
    gpubench_vs_pytorch("--model tinycnn --image-size 16 --num-classes 10 --batch-size 8");
}

#[test]
fn single_resnet18_losses_match_pytorch() {
    gpubench_vs_pytorch("--model resnet18 --image-size 32 --num-classes 10 --batch-size 4");
}

#[test]
fn ddp_gloo_two_ranks_tinycnn_losses_match_pytorch() {
    gpubench_vs_pytorch("--strategy ddp --cpu 2 --model tinycnn --image-size 16 --num-classes 10 --batch-size 4");
}

#[test]
fn without_init_file_pytorch_starts_from_gpubench_weights_for_the_seed() {
    let cfg = ["--model", "tinycnn", "--image-size", "16", "--num-classes", "10", "--batch-size", "8", "--seed", "4"];
    let (ours, _) = run(&cfg);
    let mut b = cfg.to_vec();
    b.extend(["--impl", "pytorch"]);
    let (theirs, row) = run(&b);
    assert_close(&theirs, &ours, "same --seed, no init file");
    assert!(row["note"].as_str().unwrap().contains("seed 4"), "{row}");
}

fn init_from_sets_weights_and_data_seed(cfg: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let init = dir.path().join("i.safetensors");
    let mut a = cfg.to_vec();
    a.extend(["--seed", "5", "--save-init", path_str(&init)]);
    let (seed5, _) = run(&a);
    let mut b = cfg.to_vec();
    b.extend(["--seed", "9"]);
    let (seed9, _) = run(&b);
    assert_ne!(seed5, seed9, "different seeds must give different runs for this test to mean anything");
    b.extend(["--init-from", path_str(&init)]);
    let (from_file, _) = run(&b);
    assert_eq!(from_file, seed5, "--init-from reproduces the --save-init run exactly");
}

const TINY: &str = "--model tinycnn --image-size 16 --num-classes 10";

#[test]
fn single_init_from_sets_weights_and_data_seed() {
    let cfg = format!("{TINY} --batch-size 8");
    init_from_sets_weights_and_data_seed(&cfg.split_whitespace().collect::<Vec<_>>());
}

#[test]
fn ddp_init_from_sets_weights_and_data_seed_on_every_rank() {
    let cfg = format!("--strategy ddp --cpu 2 {TINY} --batch-size 4");
    init_from_sets_weights_and_data_seed(&cfg.split_whitespace().collect::<Vec<_>>());
}

#[test]
fn dp_two_replicas_match_single_on_the_global_batch() {
    let opts = ["--model", "tinycnn", "--image-size", "16", "--num-classes", "10", "--lr", "0.05"];
    let mut a = vec!["--strategy", "dp", "--batch-size", "4"];
    a.extend(opts);
    let mut v = vec!["run", "--cpu", "2", "--json", "--warmup", "0", "--steps", "5"];
    v.extend(&a);
    let j = json_of(&gpubench(&v));
    let dp: Vec<f64> = j["losses"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    let mut s = vec!["--batch-size", "8"];
    s.extend(opts);
    let (single, _) = run(&s);
    assert_close(&dp, &single, "dp --cpu 2 vs single on the global batch");
}

#[test]
fn bad_fidelity_input_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let init = dir.path().join("i.safetensors");
    let tiny = ["--model", "tinycnn", "--image-size", "16", "--num-classes", "10", "--batch-size", "2"];
    let mut a = vec!["run", "--cpu", "--steps", "1", "--warmup", "0", "--quiet", "--save-init", path_str(&init)];
    a.extend(tiny);
    assert!(gpubench(&a).status.success());

    let base = ["run", "--cpu", "--steps", "1", "--model", "tinycnn", "--image-size", "16", "--num-classes"];
    let mut wrong = base.to_vec();
    wrong.extend(["7", "--init-from", path_str(&init)]);
    assert_usage_error(&wrong, "--num-classes");
    let mut wrong_model = vec!["run", "--cpu", "--steps", "1", "--model", "resnet18", "--init-from", path_str(&init)];
    assert_usage_error(&wrong_model, "tinycnn");
    wrong_model.extend(["--impl", "pytorch"]);
    assert_usage_error(&wrong_model, "tinycnn");
    assert_usage_error(&["run", "--cpu", "--init-from", "/nonexistent/init.safetensors"], "cannot read");
    let junk = dir.path().join("junk.safetensors");
    std::fs::write(&junk, b"not a tensor file").unwrap();
    assert_usage_error(&["run", "--cpu", "--init-from", path_str(&junk)], "--save-init");
    assert_usage_error(&["run", "--impl", "pytorch", "--strategy", "dp", "--cpu", "2"], "DataParallel");
    assert_usage_error(&["run", "--impl", "tensorflow"], "--impl");
    assert_usage_error(&["run", "--impl", "pytorch", "--cpu", "--breakdown"], "--breakdown");
}

#[test]
fn missing_torch_python_is_one_line_with_the_fix() {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_gpubench"))
        .args(["run", "--impl", "pytorch", "--cpu", "--model", "tinycnn", "--image-size", "16", "--steps", "1"])
        .env("GPUBENCH_PYTHON", "/nonexistent/python")
        .env_remove("GPUBENCH_PYTHON_BIN")
        .env("GPUBENCH_HOME", "/nonexistent")
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("scripts/setup") && err.contains("GPUBENCH_PYTHON"), "{err}");
}
