//! The real binary on the CPU: a training run's row, and every bad input
//! giving one clear line and the right exit code.
use super::common::*;

#[test]
fn tiny_cnn_run_writes_a_sane_row() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.csv");
    let o = gpubench(&format!(
        "run --cpu --model tinycnn --image-size 32 --num-classes 10 --batch-size 4 --steps 6 --warmup 2 --out {}",
        out.display()
    ))
    .args("--label")
    .arg("test box")
    .output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("4 per device × 1 device(s) = 4 global"), "{}", stdout(&o));
    // 6 timed steps are too few for an interval, and the summary says so.
    assert!(stdout(&o).contains("(no interval: fewer than 10 timed steps)"), "{}", stdout(&o));
    let rows = read_csv(&out);
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!(r["status"], "ok");
    assert_eq!(r["strategy"], "single");
    assert_eq!(r["impl"], "gpubench");
    assert_eq!(r["label"], "test box");
    assert_eq!(r["model"], "tinycnn");
    assert_eq!(r["steps"], "6");
    assert_eq!(r["warmup"], "2");
    assert_eq!(r["global_batch"], "4");
    assert_eq!(r["device_kind"], "cpu");
    assert!(r["libtorch_version"].starts_with("2.11.0"));
    assert!(num(r, "throughput_img_s") > 0.0);
    assert!((num(r, "throughput_per_device_img_s") - num(r, "throughput_img_s")).abs() < 1e-9);
    assert!(num(r, "step_ms_p50") > 0.0 && num(r, "step_ms_p99") >= num(r, "step_ms_p50"));
    assert!(num(r, "loss_first").is_finite() && num(r, "loss_last").is_finite());
    // throughput = global batch × steps / total step time
    let implied = 4.0 * 1000.0 / num(r, "step_ms_mean");
    assert!((implied / num(r, "throughput_img_s") - 1.0).abs() < 1e-6);

    // A second run appends under the same header.
    let o = gpubench(&format!(
        "run --cpu --model tinycnn --image-size 32 --batch-size 2 --steps 2 --warmup 0 --quiet --out {}",
        out.display()
    ))
    .output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());
    assert_eq!(read_csv(&out).len(), 2);
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.matches("schema_version").count(), 1);
}

/// `git` in `dir`, with a fixed identity; its trimmed output.
fn git(dir: &std::path::Path, a: &str) -> String {
    let o = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"])
        .args(args(a))
        .env_remove("GIT_DIR")
        .output()
        .expect("running git");
    assert!(o.status.success(), "git {a}: {}", stderr(&o));
    stdout(&o).trim().to_string()
}

/// A row says which code it measured: the working directory's commit and
/// branch, unless --commit and --branch say otherwise (over the CI's
/// variables too); the CI run's link where the CI's variables give one;
/// gpubench's own commit as `info` says it; no sweep id outside a sweep.
#[test]
fn a_run_row_carries_the_commit_under_test_and_commit_overrides_it() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, "init -q -b trunk");
    std::fs::write(repo.join("model.txt"), "v1\n").unwrap();
    git(&repo, "add model.txt");
    git(&repo, "commit -q -m one");
    let head = git(&repo, "rev-parse HEAD");
    let run = format!("run --cpu {TINY} --batch-size 2 --steps 1 --warmup 0 --quiet --out ../r.csv");
    let o = gpubench(&run).cwd(&repo).without_provenance().output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = gpubench(&format!("{run} --commit ABC123 --branch rel-1"))
        .cwd(&repo)
        .without_provenance()
        .env("GITHUB_SHA", "fedcba987654")
        .env("GITHUB_REF_NAME", "main")
        .env("GITHUB_SERVER_URL", "https://github.com")
        .env("GITHUB_REPOSITORY", "o/r")
        .env("GITHUB_RUN_ID", "77")
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rows = read_csv(&dir.path().join("r.csv"));
    let cols = |r: &std::collections::HashMap<String, String>| {
        ["commit", "branch", "sweep_id", "ci_url"].map(|c| r[c].clone())
    };
    assert_eq!(cols(&rows[0]), [head.as_str(), "trunk", "", ""]);
    assert_eq!(cols(&rows[1]), ["abc123", "rel-1", "", "https://github.com/o/r/actions/runs/77"]);
    let info: serde_json::Value = serde_json::from_str(&stdout(&gpubench("info --format json").output())).unwrap();
    let built = info["info"]["gpubench_commit"].as_str().unwrap();
    assert!(rows.iter().all(|r| r["gpubench_commit"] == built), "{built}");
    // Outside a repository and a CI: empty, and the run goes on.
    let o = gpubench(&run.replace("../r.csv", "r2.csv")).cwd(dir.path()).without_provenance().output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(cols(&read_csv(&dir.path().join("r2.csv"))[0]), ["", "", "", ""]);
}

/// A bad --commit or --branch is refused before any work, naming the flag,
/// in every command that takes them.
#[test]
fn a_bad_commit_or_branch_is_one_line_and_exit_2() {
    for a in [
        format!("run --cpu {TINY} --commit xyz!"),
        format!("run --cpu {TINY} --commit abc"),
        "infer --cpu --model tinycnn --commit 12345678901234567890123456789012345678901234567890123456789012345".into(),
        "allreduce --cpu 2 --branch a,b".into(),
        "sweep --cpu 1 --out x.csv --commit g00d".into(),
        "max-batch --cpu --commit main -- --model tinycnn".into(),
    ] {
        let flag = if a.contains("--branch") { "--branch" } else { "--commit" };
        assert_usage_error_of(gpubench(&a), &a, flag);
    }
    assert_usage_error(
        &format!("sweep --cpu 1 --out x.csv -- {TINY} --commit abcd"),
        "give --commit to the sweep itself",
    );
}

#[test]
fn resnet18_small_images_json_summary() {
    let o = gpubench("run --cpu --model resnet18 --image-size 32 --batch-size 2 --steps 3 --warmup 1 --format json")
        .output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON on stdout");
    assert_eq!(v["rows"][0]["status"], "ok");
    assert_eq!(v["rows"][0]["model"], "resnet18");
    assert_eq!(v["run"]["step_ms"].as_array().unwrap().len(), 3);
    assert!(v["rows"][0]["throughput_img_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn duration_based_run() {
    // One intra-op thread: beside another job's busy core, libtorch's OpenMP
    // team of two waits on it and a step can outlast a short window
    // (suite-beside-a-hog: one 361 ms step in 300 ms).
    let o = gpubench(
        "run --cpu --model tinycnn --image-size 16 --batch-size 2 --duration 1s --warmup-time 50ms --threads 1 \
         --format json",
    )
    .output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let steps = v["run"]["step_ms"].as_array().unwrap();
    let timed: f64 = steps.iter().map(|x| x.as_f64().unwrap()).sum();
    // Both phases ended by the clock, and the row counts every timed step.
    // (How much of the window the steps fill depends on the host: the loss
    // read between steps is not timed, and a busy host stretches it.)
    assert_eq!(
        (v["rows"][0]["warmup_end"].as_str(), v["rows"][0]["timed_end"].as_str()),
        (Some("time"), Some("duration"))
    );
    assert!(timed > 0.0 && steps.len() > 1, "timed {timed} ms in {} steps", steps.len());
    assert_eq!(v["rows"][0]["steps"].as_u64(), Some(steps.len() as u64));
}

#[test]
fn divergence_is_recorded_not_lost() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("d.csv");
    let o = gpubench(&format!(
        "run --cpu --model tinycnn --image-size 16 --batch-size 4 --steps 20 --warmup 0 --lr 1e30 --out {}",
        out.display()
    ))
    .output();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let rows = read_csv(&out);
    assert_eq!(rows[0]["status"], "diverged");
    assert!(rows[0]["error"].contains("loss became"));
}

#[test]
fn info_works_without_a_gpu() {
    let o = gpubench("info").output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = stdout(&o);
    assert!(s.contains("libtorch         2.11.0"), "{s}");
    assert!(s.contains("CUDA available"));
    let o = gpubench("info --format json").output();
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(v["info"]["cpu_cores"].as_u64().unwrap() >= 1);
    assert!(v["info"]["libtorch_version"].as_str().unwrap().starts_with("2.11.0"));
}

#[test]
fn bad_inputs_give_one_line_and_exit_2() {
    let base = "run --cpu --model tinycnn --image-size 16 --steps 1 --warmup 0";
    let cases = [
        ("run --strategy nope".to_string(), "nope"),
        ("run --model resnet9".into(), "resnet9"),
        (format!("{base} --batch-size 0"), "--batch-size"),
        (format!("{base} --steps 0"), "--steps"),
        // A negative number is the option's value, refused by its own check.
        (format!("{base} --batch-size -4"), "'--batch-size <N>': must be at least 1 (it is per device)"),
        (format!("{base} --steps -3"), "'--steps"),
        ("run --cpu --model resnet18 --image-size 16".into(), "too small"),
        (format!("{base} --duration soon"), "not a duration"),
        // A negative duration names its option (it was "unexpected argument '-2' found").
        (format!("{base} --duration -2s"), "--duration -2s: a duration is zero or more"),
        (format!("{base} --warmup-time -1s"), "--warmup-time -1s"),
        ("sweep --cpu 2 --out x.csv --cell-timeout -5s".into(), "--cell-timeout -5s"),
        ("allreduce --cpu 2 -b -8".into(), "--minbytes -8: a size is above zero"),
        (format!("{base} --out /nonexistent-gpubench-dir/r.csv"), "does not exist"),
        // --profile's place is checked before any work (it failed after the warm-up, as a failed row).
        (format!("{base} --profile-steps 1 --profile {}/Cargo.toml", env!("CARGO_MANIFEST_DIR")), "is a file; give"),
        (
            format!("{base} --profile-steps 1 --profile {}/Cargo.toml/traces", env!("CARGO_MANIFEST_DIR")),
            "the directory cannot be made",
        ),
        (format!("{base} --cpu 0"), "--cpu"),
        (format!("{base} --grad-accum 0"), "--grad-accum 0: micro-batches per step run from 1 to 1024"),
        (format!("{base} --checkpoint"), "tinycnn has none"),
        ("run --strategy dp --cpu 2 --model resnet18 --checkpoint".into(), "--checkpoint runs with single and ddp"),
        // Each output path names its option: a directory, a file as a directory, a place that takes no files.
        (format!("{base} --telemetry {}", env!("CARGO_MANIFEST_DIR")), "--telemetry"),
        (format!("{base} --telemetry {}/Cargo.toml/t.csv", env!("CARGO_MANIFEST_DIR")), "is a file, not a directory"),
        (format!("{base} --out {}/Cargo.toml/r.csv", env!("CARGO_MANIFEST_DIR")), "is a file, not a directory"),
        (format!("{base} --telemetry /proc/t.csv"), "--telemetry /proc/t.csv: directory /proc is not writable"),
        ("run --strategy single --cpu 2".into(), "dp or ddp"),
        ("run --strategy ddp --cpu 1000 --model tinycnn".into(), "8 per core"),
        // The Reducer's bucket size is checked where the flag is defined: run refused 0 and -1 no more than
        // predict's own copy of the check did (they reached the Reducer and the row's variant).
        ("run --strategy ddp --cpu 2 --model tinycnn --bucket-cap-mb 0".into(), "`0` must be above zero"),
        ("run --strategy ddp --cpu 2 --model tinycnn --bucket-cap-mb -1".into(), "`-1` must be above zero"),
        ("predict --cpu --model tinycnn --bucket-cap-mb 0 --device-counts 2".into(), "`0` must be above zero"),
        ("frobnicate".into(), "frobnicate"),
    ];
    for (a, needle) in cases {
        assert_usage_error(&a, needle);
    }
    // A value with a space in it is one argument.
    let mut argv = args(base);
    argv.extend(["--warmup-time".to_string(), "5 parsecs".to_string()]);
    assert_usage_error_argv(&argv, "not a duration");
}

/// What `main` makes of each kind of outcome, through the real binary (the
/// checks themselves are tested in-process): a usage error is one line on
/// stderr and exit 2, whether clap or gpubench found it; help and the
/// version go to stdout with exit 0; no subcommand prints the help, exit 2.
#[test]
fn main_prints_one_line_and_exits_by_kind() {
    assert_usage_error_of(gpubench("run --strategy nope"), "run --strategy nope", "nope");
    let a = format!("run --cpu {TINY} --batch-size 0");
    assert_usage_error_of(gpubench(&a), &a, "'--batch-size <N>': must be at least 1");
    let g = gpubench(&format!("run --cpu {TINY}")).arg("--warmup-time").arg("5 parsecs");
    assert_usage_error_of(g, "--warmup-time '5 parsecs'", "not a duration");
    for flag in ["--help", "--version", "run --help"] {
        let o = gpubench(flag).run();
        assert_eq!(o.code, 0, "{flag}: {}", o.stderr);
        assert!(o.stdout.contains("gpubench"), "{flag}: {}", o.stdout);
    }
    let o = gpubench("").run();
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("Usage") || o.stdout.contains("Usage"), "{}{}", o.stdout, o.stderr);
    // Hidden subcommands are gpubench's own: not in the help.
    let help = gpubench("--help").run().stdout;
    assert!(!help.contains("infer-worker") && !help.contains("write-init"), "{help}");
}

#[test]
fn gpu_list_errors_on_a_machine_without_cuda() {
    if gpubench::device::cuda_device_count() > 0 {
        eprintln!("skipped: this machine has CUDA; the no-CUDA message cannot be checked here");
        return;
    }
    assert_usage_error("run --gpus 0", "CUDA is not available");
    assert_usage_error_argv(&["run".into(), "--gpus".into(), String::new()], "--gpus is empty");
    assert_usage_error("run --gpus 0,x", "not a device ordinal");
    assert_usage_error("run --gpus 0 --cpu", "cannot be used with");
}

#[test]
fn a_fifo_as_results_is_refused_before_any_work() {
    // Both waited forever: the header read of `--out` and report's read opened the FIFO and blocked.
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("r.csv");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let f = fifo.display();
    assert_usage_error(
        &format!("run --cpu --model tinycnn --image-size 16 --steps 1 --out {f}"),
        "is not a regular file",
    );
    assert_usage_error_of(gpubench(&format!("report {f}")), "report FIFO", "not a regular file");
}

#[test]
fn foreign_results_file_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("other.csv");
    std::fs::write(&out, "time,value\n1,2\n").unwrap();
    assert_usage_error(&format!("run --cpu {TINY} --steps 1 --out {}", out.display()), "different header");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "time,value\n1,2\n");
}

#[test]
fn unwritable_out_directory_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("ro");
    std::fs::create_dir(&sub).unwrap();
    let mut perm = std::fs::metadata(&sub).unwrap().permissions();
    use std::os::unix::fs::PermissionsExt;
    perm.set_mode(0o555);
    std::fs::set_permissions(&sub, perm).unwrap();
    // root can write anywhere; the check is only meaningful for other users.
    if std::fs::File::create(sub.join("probe")).is_ok() {
        eprintln!("skipped: running as root, directory permissions do not apply");
        return;
    }
    let out = sub.join("r.csv");
    assert_usage_error(&format!("run --cpu --model tinycnn --out {}", out.display()), "not writable");
}

#[test]
fn dp_on_two_cpu_replicas_writes_its_row() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("dp.csv");
    let o = gpubench(&format!(
        "run --strategy dp --cpu 2 --model tinycnn --image-size 16 --batch-size 3 --steps 3 --warmup 1 --out {}",
        out.display()
    ))
    .output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("3 per device × 2 device(s) = 6 global"), "{}", stdout(&o));
    let r = &read_csv(&out)[0];
    assert_eq!(r["strategy"], "dp");
    assert_eq!(r["n_devices"], "2");
    assert_eq!(r["devices"], "cpu×2");
    assert_eq!(r["global_batch"], "6");
    assert!(r["note"].contains("master cpu:0"), "{}", r["note"]);
    assert!(num(r, "throughput_img_s") > 0.0);
}

#[test]
fn metrics_breakdown_devices_csv_and_telemetry() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.csv");
    let tel = dir.path().join("tel.csv");
    let o = gpubench(&format!(
        "run --cpu --model tinycnn --image-size 32 --batch-size 4 --duration 300ms --warmup 1 --breakdown \
         --sample-interval 10ms --out {} --telemetry {}",
        out.display(),
        tel.display()
    ))
    .output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("breakdown  forward"), "{}", stdout(&o));
    let r = &read_csv(&out)[0];
    // CPU runs report the process in place of device metrics (a window this
    // short may see no CPU tick: present, not positive, is what is asserted).
    assert!(num(r, "cpu_util_pct") >= 0.0);
    assert!(num(r, "peak_rss_mb") > 1.0);
    assert_eq!(r["util_mean_pct"], "");
    let parts = num(r, "forward_ms") + num(r, "backward_ms") + num(r, "optimizer_ms") + num(r, "data_wait_ms");
    assert!(parts <= num(r, "step_ms_mean") * 1.05, "{parts} vs {}", num(r, "step_ms_mean"));
    assert!(num(r, "data_wait_share") >= 0.0 && num(r, "data_wait_share") < 1.0);
    let devs = read_csv(&dir.path().join("m.devices.csv"));
    assert_eq!(devs.len(), 1);
    assert_eq!(devs[0]["run_id"], r["run_id"]);
    assert_eq!(devs[0]["device"], "cpu");
    // A timed window of 300 ms (not a step count, whose length is the
    // host's speed) holds several 10 ms samples on any host.
    let t = read_csv(&tel);
    assert!(t.len() >= 2, "{} samples", t.len());
    assert!(t.iter().all(|s| s["run_id"] == r["run_id"]));
}

fn json_run(args: &str) -> serde_json::Value {
    let o = gpubench(args).output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    serde_json::from_str(&stdout(&o)).expect("JSON on stdout")
}

#[test]
fn bf16_and_fp16_cpu_runs_train_and_say_so() {
    for p in ["bf16", "fp16"] {
        let v = json_run(&format!(
            "run --cpu --model resnet18 --image-size 32 --batch-size 4 --steps 3 --warmup 1 --precision {p} \
             --channels-last --format json"
        ));
        let r = &v["rows"][0];
        assert_eq!(r["precision"], p);
        assert_eq!(r["channels_last"], true);
        assert_eq!(r["status"], "ok");
        assert!(r["loss_last"].as_f64().unwrap().is_finite());
        assert!(r["skipped_steps"].as_u64().is_some(), "{r}");
    }
}

#[test]
fn deterministic_runs_give_bit_identical_losses() {
    let args = "run --cpu --model resnet18 --image-size 32 --batch-size 4 --steps 4 --warmup 1 --deterministic \
                --seed 7 --threads 2 --format json";
    let a = json_run(args);
    let b = json_run(args);
    assert_eq!(a["rows"][0]["deterministic"], true);
    let (la, lb) = (a["run"]["losses"].as_array().unwrap(), b["run"]["losses"].as_array().unwrap());
    assert_eq!(la.len(), 4);
    // compare the exact f64 bits, not approximately
    let bits = |v: &Vec<serde_json::Value>| v.iter().map(|x| x.as_f64().unwrap().to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(la), bits(lb));
}

#[test]
fn precision_bad_inputs() {
    assert_usage_error("run --cpu --precision fp8", "fp8");
    assert_usage_error("run --cpu --model tinycnn --precision tf32", "tf32");
    assert_usage_error("run --cpu --cudnn-benchmark maybe", "maybe");
}

#[test]
fn a_measured_row_reaches_report_with_its_own_interval() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.csv");
    // Steps of tens of ms, so that a busy host's interruptions are small
    // beside them. Even so, when the mean step time's interval reaches zero
    // the throughput's has no upper bound: written empty, and the report
    // then shows no ±.
    let o = gpubench(&format!(
        "run --cpu --model tinycnn --image-size 64 --num-classes 10 --batch-size 32 --steps 30 --warmup 2 --out {}",
        out.display()
    ))
    .run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("95% interval"), "{}", o.stdout);
    let row = &read_csv(&out)[0];
    let hi = if row["throughput_ci95_hi"].is_empty() { f64::INFINITY } else { num(row, "throughput_ci95_hi") };
    let (lo, t) = (num(row, "throughput_ci95_lo"), num(row, "throughput_img_s"));
    assert!(lo < t && t < hi, "{lo} {t} {hi}");
    let r = gpubench(&format!("report {}", out.display())).run();
    assert_eq!(r.code, 0, "{}", r.stderr);
    if hi.is_infinite() {
        assert!(!r.stdout.contains(" ±"), "an unbounded interval is not shown as ±: {}", r.stdout);
        return;
    }
    // One run: its own interval, marked as not covering run-to-run drift.
    assert!(r.stdout.lines().any(|l| l.contains(" ±") && l.contains('*')), "{}", r.stdout);
    assert!(r.stdout.contains("* = one run's own 95 % interval"), "{}", r.stdout);
}

#[test]
fn a_write_cut_short_by_a_full_disk_leaves_the_results_file_as_it_was() {
    // A file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) makes the append's
    // write fail part way, as a full disk does, without root or a tmpfs.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.csv");
    // A label longer than a block, so that the limit always falls inside the row.
    let label = "x".repeat(1500);
    let run =
        format!("run --cpu {TINY} --batch-size 4 --steps 2 --warmup 0 --quiet --label {label} --out {}", out.display());
    let o = gpubench(&run).output();
    assert!(o.status.success(), "{}", stderr(&o));
    let before = std::fs::read(&out).unwrap();
    // Room for part of the next row only (bash's ulimit -f counts 1024-byte blocks).
    let blocks = before.len() / 1024 + 1;
    let cmd = format!("ulimit -f {blocks}; trap '' XFSZ; exec \"$0\" \"$@\"");
    let o = std::process::Command::new("bash").args(["-c", &cmd]).arg(bin()).args(args(&run)).output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("r.csv") && err.contains("as it was before"), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), before, "the file changed");
    // And the next append, with room, lands and parses.
    assert!(gpubench(&run).output().status.success());
    assert_eq!(gpubench::results::csv::read_rows(&out).unwrap().len(), 2);
}

/// Memory by part on the CPU, ResNet-50 at 128 px, batch 16: the parameters
/// are ResNet-50's 25.56 M floats (97.5 MiB), AdamW keeps twice SGD's
/// state, and --checkpoint cuts the activations by at least 40 %. Byte
/// counts of libtorch's own allocations, after a warm-up step (the first
/// step allocates once what later ones reuse): no timing, nothing of the host's.
#[test]
fn memory_by_part_counts_parameters_optimizer_state_and_activations() {
    let part = |extra: &str| -> serde_json::Value {
        let a = format!(
            "run --cpu --model resnet50 --image-size 128 --batch-size 16 --steps 1 --warmup 1 --format json -q {extra}"
        );
        let o = gpubench(&a).output();
        assert!(o.status.success(), "{a}: {}", stderr(&o));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["rows"][0].clone()
    };
    let mb = |r: &serde_json::Value, c: &str| r[c].as_f64().unwrap_or_else(|| panic!("{c} in {r}"));
    let plain = part("");
    assert!((mb(&plain, "mem_params_mb") - 97.5).abs() <= 0.03 * 97.5, "{}", plain["mem_params_mb"]);
    assert_eq!(mb(&plain, "mem_grads_mb"), mb(&plain, "mem_params_mb"));
    assert_eq!(mb(&plain, "mem_optimizer_mb"), mb(&plain, "mem_params_mb"), "SGD's momentum");
    assert!(plain["mem_buckets_mb"].is_null(), "no buckets outside ddp");
    let adamw = part("--optimizer adamw");
    // Two moments, and a step count per tensor (161 floats).
    assert!((mb(&adamw, "mem_optimizer_mb") - 2.0 * mb(&plain, "mem_optimizer_mb")).abs() < 0.01, "{adamw}");
    let ckpt = part("--checkpoint");
    let (a, c) = (mb(&plain, "mem_activations_mb"), mb(&ckpt, "mem_activations_mb"));
    assert!(c <= 0.6 * a, "--checkpoint: activations {c:.1} MiB against {a:.1} without");
}

/// dp's master's extra memory by cause, from the sizes of what dp puts
/// there: half the global input (two replicas), 3x the gathered logits, and
/// on the CPU one gradient tensor at a time for the sum. None of it outside dp.
#[test]
fn dp_names_the_masters_extra_memory_by_cause() {
    let row = |a: &str| -> serde_json::Value {
        let o = gpubench(a).output();
        assert!(o.status.success(), "{a}: {}", stderr(&o));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["rows"][0].clone()
    };
    let tiny = "--model tinycnn --image-size 16 --num-classes 10 --batch-size 4 --steps 1 --warmup 0 --format json -q";
    let dp = row(&format!("run --strategy dp --cpu 2 {tiny}"));
    let mib = |c: &str| dp[c].as_f64().unwrap_or_else(|| panic!("{c} in {dp}")) * 1048576.0;
    assert_eq!(mib("dp_master_input_mb").round(), (8.0 * 3.0 * 16.0 * 16.0 * 4.0 / 2.0_f64).round());
    assert_eq!(mib("dp_master_outputs_mb").round(), 3.0 * 8.0 * 10.0 * 4.0);
    let reduce = mib("dp_master_reduce_mb");
    assert!(reduce > 0.0 && reduce < mib("mem_params_mb"), "one tensor of the parameters: {dp}");
    // Its work, host-timed on the CPU (where an op returns when done): every part measured.
    for c in ["dp_replicate_ms", "dp_scatter_ms", "dp_gather_ms", "dp_reduce_ms", "dp_compute_ms"] {
        assert!(dp[c].as_f64().is_some_and(|ms| ms >= 0.0), "{c} in {dp}");
    }
    let single = row(&format!("run {tiny}"));
    assert!(single["dp_master_input_mb"].is_null() && single["alloc_retries"].is_null(), "{single}");
    assert!(single["dp_replicate_ms"].is_null(), "{single}");
}

/// `gpubench peak --cpu` measures a positive matmul peak and keeps it; a run
/// on this CPU then reports its arithmetic and its MFU against that peak.
/// tinycnn's MFU is a few percent, far inside (0, 100] whatever the host does.
#[test]
fn peak_is_kept_and_runs_report_their_mfu_against_it() {
    let dir = tempfile::tempdir().unwrap();
    let peaks = dir.path().join("peaks.json");
    let p = peaks.to_str().unwrap();
    let o = gpubench("peak --cpu --precisions fp32 --size 256 --rounds 3 --round-time 100ms --format json")
        .env("GPUBENCH_PEAKS", p)
        .output();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["tables"][0]["rows"][0]["tflops"].as_f64().unwrap() > 0.0, "{v}");
    assert!(std::fs::read_to_string(&peaks).unwrap().contains("| fp32"));
    // --out keeps it as a results row too, which report shows as a peak, not a run.
    // (Its own cache, so that this small peak does not replace the one the run below reads.)
    let out = dir.path().join("peaks.csv");
    let o = gpubench(&format!(
        "peak --cpu --precisions fp32 --size 128 --rounds 1 --round-time 50ms --out {}",
        out.display()
    ))
    .env("GPUBENCH_PEAKS", dir.path().join("other.json"))
    .output();
    assert!(o.status.success(), "{}", stderr(&o));
    let o = gpubench(&format!("report {} --format json", out.display())).output();
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let docs = doc["tables"].as_array().unwrap();
    assert_eq!(docs.len(), 1, "the peaks' table alone, no training configuration: {docs:?}");
    let r = &docs[0]["rows"][0];
    assert!(r["precision"] == "fp32" && r["tflops"].as_f64().unwrap() > 0.0, "{r}");
    let o =
        gpubench("run --cpu --model tinycnn --image-size 16 --num-classes 10 --steps 3 --warmup 1 --format json -q")
            .env("GPUBENCH_PEAKS", p)
            .output();
    assert!(o.status.success(), "{}", stderr(&o));
    let r = &serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["rows"][0];
    // 3 x 2 x (8·8·3·16·9 + 4·4·16·32·9 + 32·10) multiply-adds
    let gflop = r["model_gflop_per_img"].as_f64().unwrap();
    assert!((gflop - 6.0 * 101_696.0 / 1e9).abs() < 1e-12, "{gflop}");
    // Against the peak kept above. Not bounded by 100: a peak measured while
    // the host was busy can be below what a later run achieves.
    let kept: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&peaks).unwrap()).unwrap();
    let peak =
        kept.as_object().unwrap().iter().find(|(k, _)| k.ends_with("| fp32")).unwrap().1["tflops"].as_f64().unwrap();
    let per_device = r["throughput_per_device_img_s"].as_f64().unwrap() * gflop / 1000.0;
    let mfu = r["mfu_pct"].as_f64().unwrap();
    assert!(mfu > 0.0 && (mfu - 100.0 * per_device / peak).abs() < 1e-9 * mfu, "{mfu} against peak {peak}");
    assert!(r["mfu_datasheet_pct"].is_null(), "no datasheet for a CPU");
    assert_usage_error("peak --cpu --precisions tf32", "tf32 is a CUDA tensor-core mode");
    assert_usage_error("peak --cpu --size 8", "--size 8");
    // A cache that cannot be written (/proc takes no new file, even from root)
    // loses no measurement: the row is appended, then the failure said, exit 1.
    let kept = dir.path().join("kept.csv");
    let o = gpubench(&format!(
        "peak --cpu --precisions fp32 --size 128 --rounds 1 --round-time 50ms --out {}",
        kept.display()
    ))
    .env("GPUBENCH_PEAKS", "/proc/gpubench-peaks.json")
    .output();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("measured but not kept"), "{}", stderr(&o));
    assert_eq!(gpubench::results::csv::read_rows(&kept).unwrap().len(), 1);
}

/// A CPU without AVX512-BF16 or AMX (here, as its cpuinfo says) runs bf16 on
/// reference kernels: `peak --cpu` skips it with why, and ends in its time
/// budget; `run --precision bf16` says it will be slow, in one line, first.
#[test]
fn a_cpu_without_fast_bf16_kernels_is_told_and_peak_skips_them() {
    let dir = tempfile::tempdir().unwrap();
    let info = dir.path().join("cpuinfo");
    std::fs::write(&info, "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f\n").unwrap();
    let o = gpubench("peak --cpu --size 256 --rounds 2 --round-time 20ms --format json")
        .env("GPUBENCH_TEST_CPUINFO", &info)
        .env("GPUBENCH_PEAKS", dir.path().join("peaks.json"))
        .output();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let precisions: Vec<&str> =
        v["tables"][0]["rows"].as_array().unwrap().iter().map(|r| r["precision"].as_str().unwrap()).collect();
    assert_eq!(precisions, ["fp32"], "{v}");
    let note = v["tables"][0]["notes"][0].as_str().unwrap();
    assert!(note.starts_with("bf16 skipped: this CPU (") && note.contains("has no AVX512-BF16"), "{v}");
    let o = gpubench(&format!("run --cpu {TINY} --batch-size 2 --steps 1 --warmup 0 --precision bf16 -q"))
        .env("GPUBENCH_TEST_CPUINFO", &info)
        .output();
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().filter(|l| l.contains("slow reference kernels")).count(), 1, "{err}");
    // max-batch --frontier skips the bf16 levers there, with the reason.
    let o = gpubench(&format!("max-batch --cpu --frontier --start 2 --max 2 -- {TINY} --steps 1 --warmup 0"))
        .env("GPUBENCH_TEST_CPUINFO", &info)
        .output();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = super::common::stdout(&o);
    assert!(out.contains("\nbf16: skipped, this CPU (") && out.contains("has no AVX512-BF16"), "{out}");
    // The peaks file's place is checked before any work.
    let o = gpubench("peak --cpu --size 256 --rounds 1").env("GPUBENCH_PEAKS", dir.path()).output();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is a directory"), "{}", stderr(&o));
}

/// `--threads auto`: the cores others leave free, at least one, recorded in
/// the row's threads column; 0 and words are refused naming the option.
#[test]
fn threads_auto_takes_the_free_cores() {
    let o = gpubench(&format!("run --cpu {TINY} --batch-size 2 --steps 1 --warmup 0 --threads auto --format json -q"))
        .output();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let t = v["rows"][0]["threads"].as_u64().unwrap();
    let cores = std::thread::available_parallelism().unwrap().get() as u64;
    assert!((1..=cores).contains(&t), "{t} of {cores}");
    // The configuration says auto, not the count: a sweep's cell, keyed when
    // it is planned, finds the row its run wrote whatever the neighbours left.
    assert!(v["rows"][0]["variant"].as_str().unwrap().contains("threads=auto"), "{}", v["rows"][0]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s.csv");
    let o = gpubench(&format!(
        "sweep --cpu 1 --strategies single --models tinycnn --batch-sizes 2 --out {} \
         -- --image-size 16 --num-classes 10 --steps 1 --warmup 0 --threads auto",
        out.display()
    ))
    .output();
    assert_eq!(o.status.code(), Some(0), "{}{}", super::common::stdout(&o), stderr(&o));
    let rows = gpubench::results::csv::read_rows(&out).unwrap();
    assert_eq!(rows.iter().map(|r| r.status.name()).collect::<Vec<_>>(), ["ok"]);
    assert_usage_error(&format!("run --cpu {TINY} --threads 0"), "--threads must be at least 1");
    assert_usage_error(&format!("run --cpu {TINY} --threads many"), "give N or auto");
}

#[test]
fn a_thread_count_above_the_machine_is_capped_with_one_line() {
    // --threads 100000 did not end within 120 s: the process started that many intra-op threads.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.csv");
    let o = gpubench(&format!(
        "run --cpu {TINY} --batch-size 2 --steps 1 --warmup 0 --threads 100000 --out {}",
        out.display()
    ))
    .output();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let cores = std::thread::available_parallelism().unwrap().get();
    let said = format!("--threads 100000 is more than this machine's {cores} hardware threads; using {cores}");
    assert_eq!(stderr(&o).matches(&said).count(), 1, "{}", stderr(&o));
    let rows = gpubench::results::csv::read_rows(&out).unwrap();
    assert_eq!(rows[0].threads, Some(cores as u32));
}

/// The workload and the schedule are each checked in one place: run,
/// infer, predict, max-batch and sweep (whose probes and cells take run's
/// options) refuse the same bad input with the same line. Before, each
/// command had its copy of each check, and one had drifted.
#[test]
fn the_same_bad_model_or_schedule_is_the_same_line_from_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s.csv");
    let every = |opts: &str| {
        vec![
            format!("run --cpu {opts}"),
            format!("predict --cpu --device-counts 2 --busbw 10 {opts}"),
            format!("max-batch --cpu -- {opts}"),
            format!("sweep --cpu 1 --strategies single --out {} -- {opts}", out.display()),
        ]
    };
    let model = [
        ("--model tinycnn --num-classes 1", "--num-classes must be at least 2"),
        ("--model resnet18 --image-size 16", "--image-size 16 is too small for resnet18; use at least 32"),
        (
            "--model tinycnn --precision tf32",
            "--precision tf32 is a CUDA tensor-core mode; on the CPU use fp32 or bf16",
        ),
    ];
    let schedule = [
        ("--model tinycnn --batch-size 0", "must be at least 1 (it is per device)"),
        ("--model tinycnn --steps 0", "'--steps <N>': must be at least 1"),
    ];
    for (opts, want) in model.iter().chain(&schedule) {
        let mut lines = every(opts);
        if model.iter().any(|(o, _)| o == opts) {
            lines.push(format!("infer --cpu 1 --frame-size 8x8 {opts}"));
        }
        // clap's own errors end with where to look: run's help after --.
        let problem = |line: &str| {
            line.split(" (in the run options after --").next().unwrap().replace(" (see gpubench --help)", "")
        };
        let said: Vec<String> = lines.iter().map(|a| problem(&usage_line(a))).collect();
        assert!(said[0].contains(want), "{opts}: {:?}", said[0]);
        for (a, s) in lines.iter().zip(&said) {
            assert_eq!(s, &said[0], "{a}");
        }
    }
    assert!(!out.exists(), "nothing written");
}
