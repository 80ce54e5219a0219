//! Every command's `--format json` is the one envelope (docs/json.md),
//! checked against docs/json.schema.json: the commands that print JSON are
//! found through `--help`, so a new one cannot be left out.
use super::common::{assert_envelope, gpubench, stderr, stdout, TINY};
use std::path::Path;

/// Commands whose `--format json` another test runs and checks with
/// `assert_envelope`, beside its own assertions: they need input made there.
const CHECKED_ELSEWHERE: [&str; 2] = [
    "data-bench",    // data::runs_end_to_end_single_dp_and_ddp (an image folder)
    "trace-summary", // profile::single_and_ddp_traces_hold_ops_ranges_collectives_and_ranks (traced runs)
];

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report").join(name).display().to_string()
}

/// The document a command printed, whatever it exits with (check and
/// diagnose say "regressed" with 1).
fn json_of(a: &str, dir: &Path) -> serde_json::Value {
    let o = gpubench(a).cwd(dir).env("GPUBENCH_PEAKS", dir.join("peaks.json")).output();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{a}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{a}: {e}\n{}", stdout(&o)))
}

#[test]
fn every_format_json_is_the_one_envelope() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("nights.csv"), super::history::nights(26, 20)).unwrap();
    let (v100, k80) = (fixture("v100.csv"), fixture("k80.csv"));
    let (base, regressed) = (fixture("baseline.csv"), fixture("current_regressed.csv"));
    let tiny_run = format!("{TINY} --batch-size 2 --steps 2 --warmup 0");
    let runs: Vec<(&str, String)> = vec![
        ("info", "info --format json".into()),
        ("run", format!("run --cpu {tiny_run} --format json -q --out r.csv")),
        (
            "infer",
            "infer --cpu 1 --model tinycnn --image-size 8 --num-classes 10 --frame-size 8x8 --warmup-batches 1 \
             --scenario server --rate 50 --duration 300ms --format json -q"
                .into(),
        ),
        (
            "predict",
            format!("predict --cpu --device-counts 2 {TINY} --batch-size 4 --steps 2 --min-time 0s --warmup 1 --busbw 10 --latency 50us --format json"),
        ),
        ("report", format!("report {v100} --format json")),
        ("compare", format!("compare {v100} {k80} --format json")),
        ("check", format!("check --baseline {base} --current {regressed} --format json")),
        ("diagnose", format!("diagnose {v100} --format json")),
        ("history", "history nights.csv --format json".into()),
        (
            "sweep",
            format!("sweep --cpu 1 --strategies single --models tinycnn --batch-sizes 2 --out s.csv --format json -- {} --steps 1 --warmup 0", "--image-size 16 --num-classes 10"),
        ),
        (
            "max-batch",
            "max-batch --frontier --cpu --start 4 --max 4 --format json -- --model tinycnn --image-size 16 --num-classes 10 --steps 1 --warmup 0".into(),
        ),
        ("peak", "peak --cpu --precisions fp32 --size 64 --rounds 1 --round-time 10ms --format json".into()),
        ("schema", "schema --format json".into()),
    ];
    for (name, a) in &runs {
        let v = json_of(a, d);
        assert_envelope(&v);
        // Each says what it is for in its place: not an empty shell.
        let has = |k: &str| v[k].as_array().is_some_and(|a| !a.is_empty()) || v[k].is_object();
        let what = match *name {
            "info" => has("info"),
            "run" => has("rows") && has("run"),
            "infer" => v["rows"].as_array().unwrap().len() == 1,
            "predict" => has("predictions") && has("rows"),
            "history" => has("tables") && has("history"),
            _ => has("tables"),
        };
        assert!(what, "{name}: {v}");
    }
    // allreduce alone keeps nccl-tests' document, as documented.
    let ar = json_of("allreduce --cpu 2 -b 1K -e 2K -f 2 -n 2 -w 1 --format json", d);
    assert!(ar["results"].is_array() && ar.get("tables").is_none(), "{ar}");

    // Every command that takes --format json is among those above or checked elsewhere.
    let help = stdout(&gpubench("--help").output());
    let commands: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .unwrap()
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 18, "{commands:?}");
    for c in commands {
        let h = stdout(&gpubench(&format!("{c} --help")).output());
        if !h.contains("--format") || !h.contains("json") || c == "allreduce" {
            continue;
        }
        assert!(
            runs.iter().any(|(n, _)| *n == c) || CHECKED_ELSEWHERE.contains(&c),
            "{c} prints --format json: add it to this test"
        );
    }
}
