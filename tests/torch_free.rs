//! The torch-free build (`cargo test --no-default-features`): the result
//! commands work on files made elsewhere exactly as in the full build, and
//! every command that needs libtorch says so in one line, exit 2. The full
//! build's tests are tests/it (they need libtorch to link).
#![cfg(not(feature = "torch"))]
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report")
}

fn gpubench(args: &str, dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpubench")).args(args.split_whitespace()).current_dir(dir).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn info_says_which_build_this_is() {
    let o = gpubench("info --format json", &fixtures());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (j["info"]["build"].as_str(), j["info"]["libtorch_version"].is_null()),
        (Some("torch-free"), true),
        "{j}"
    );
    let o = gpubench("info", &fixtures());
    assert!(text(&o.stdout).contains("torch-free build"), "{}", text(&o.stdout));
}

#[test]
fn every_command_that_needs_libtorch_says_so_in_one_line() {
    for cmd in [
        "run --cpu",
        "infer --cpu",
        "allreduce --cpu 2",
        "predict --profile p.json",
        "sweep --preset demo",
        "max-batch --cpu -- --model tinycnn",
        "data-bench --data x",
        "peak --cpu",
    ] {
        let o = gpubench(cmd, &fixtures());
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {err}");
        assert!(o.stdout.is_empty(), "{cmd}: {}", text(&o.stdout));
        assert_eq!(err.lines().count(), 1, "{cmd}: {err}");
        let name = cmd.split_whitespace().next().unwrap();
        assert!(err.contains(&format!("`gpubench {name}` needs libtorch")) && err.contains("cargo build"), "{err}");
    }
}

#[test]
fn report_compare_and_check_work_on_files_made_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let (charts, html) = (dir.path().join("charts"), dir.path().join("r.html"));
    let o = gpubench(&format!("report v100.csv --charts {} --html {}", charts.display(), html.display()), &fixtures());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("Tesla V100-SXM2-16GB"), "{}", text(&o.stdout));
    let svg = std::fs::read_to_string(charts.join("throughput.svg")).unwrap();
    assert!(svg.contains("<svg"));
    assert!(std::fs::read_to_string(&html).unwrap().contains(svg.trim()), "the page embeds the chart");

    let o = gpubench("compare v100.csv k80.csv", &fixtures());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));

    // The CI gate: a regression fails (exit 1), noise passes.
    let o = gpubench("check --baseline baseline.csv --current current_regressed.csv", &fixtures());
    assert_eq!(o.status.code(), Some(1), "{}\n{}", text(&o.stdout), text(&o.stderr));
    let o = gpubench("check --baseline baseline.csv --current current_noise.csv", &fixtures());
    assert_eq!(o.status.code(), Some(0), "{}\n{}", text(&o.stdout), text(&o.stderr));

    let o = gpubench("schema --format markdown", &fixtures());
    assert!(o.status.success() && text(&o.stdout).contains("throughput_img_s"));
}

/// `collect` where the results land, with no libtorch: a manifest of two
/// cells, one with a results file (a fixture's row) and one without.
#[test]
fn collect_merges_an_emitted_sweep_without_libtorch() {
    let dir = tempfile::tempdir().unwrap();
    let sw = dir.path().join("sw");
    std::fs::create_dir_all(sw.join("cells")).unwrap();
    let row = gpubench::results::csv::Row { strategy: "single".into(), n_devices: 1, ..Default::default() };
    let line = |i: usize| {
        let e = serde_json::json!({"index": i, "shape": 1, "task": i, "args": [], "gpus": 0, "cpus": 1,
            "time_min": 30, "what": format!("cell {i}"), "row": row});
        e.to_string() + "\n"
    };
    std::fs::write(sw.join("manifest.jsonl"), line(0) + &line(1)).unwrap();
    let baseline = std::fs::read_to_string(fixtures().join("baseline.csv")).unwrap();
    let one: Vec<&str> = baseline.lines().take(2).collect();
    std::fs::write(sw.join("cells/0.csv"), one.join("\n") + "\n").unwrap();
    let o = gpubench("collect sw --out all.csv", dir.path());
    assert_eq!(o.status.code(), Some(1), "{}{}", text(&o.stdout), text(&o.stderr));
    assert!(text(&o.stdout).contains("1 ok, 1 missing"), "{}", text(&o.stdout));
    let all = std::fs::read_to_string(dir.path().join("all.csv")).unwrap();
    assert_eq!(all.lines().count(), 3, "{all}");
    assert!(all.lines().nth(2).unwrap().contains(",missing,"), "{all}");
}

/// `diagnose` needs no libtorch: the regressed fixture against its baseline
/// names what is slow and exits 1; the baseline against itself passes.
#[test]
fn diagnose_works_without_libtorch() {
    let o = gpubench("diagnose current_regressed.csv --baseline baseline.csv", &fixtures());
    assert_eq!(o.status.code(), Some(1), "{}{}", text(&o.stdout), text(&o.stderr));
    assert!(text(&o.stdout).contains("below the baseline"), "{}", text(&o.stdout));
    let o = gpubench("diagnose baseline.csv --baseline baseline.csv", &fixtures());
    assert_eq!(o.status.code(), Some(0), "{}{}", text(&o.stdout), text(&o.stderr));
}

#[test]
fn history_gates_without_libtorch() {
    // Twelve nights of one configuration, the last six 10 % slower.
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from(
        "schema_version,run_id,timestamp,host,impl,mode,strategy,n_devices,model,image_size,\
precision,batch_per_device,throughput_img_s,status,commit\n",
    );
    for i in 0..12 {
        let thr = if i >= 6 { 900.0 } else { 1000.0 } + [3.0, -2.0, 1.0][i % 3];
        csv += &format!(
            "6,r{i},2026-11-{:02}T02:00:00Z,box,gpubench,train,single,1,resnet50,224,fp32,64,{thr},ok,{:08x}\n",
            i + 1,
            i + 1
        );
    }
    std::fs::write(dir.path().join("n.csv"), csv).unwrap();
    let o = gpubench("history n.csv --gate", dir.path());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("00000006..00000007") && text(&o.stdout).contains("REGRESSION"),
        "{}",
        text(&o.stdout)
    );
}
