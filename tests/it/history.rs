//! `history` through the real binary, on nightly files made here: the night
//! a step began with its commits and the driver that changed, the gate and
//! acknowledgements, the exports, charts and page, `check
//! --baseline-from-history`, and bad input (one line, exit 2, nothing written).
use super::common::{assert_usage_error_of, gpubench, Gpubench};
use std::fmt::Write as _;
use std::path::Path;

const HEADER: &str = "schema_version,run_id,timestamp,host,impl,mode,strategy,n_devices,device_name,driver_version,\
model,image_size,precision,batch_per_device,throughput_img_s,status,commit,interference";

/// Noise that repeats exactly.
fn wobble(i: usize) -> f64 {
    [0.3, -0.8, 1.1, -0.2, 0.6, -1.0, 0.1, 0.9, -0.5, -0.4][i % 10] / 100.0
}

/// `n` nights of one single-GPU configuration on host `box`; from night
/// `step_at` on 5 % slower, on driver 560.35.
pub(super) fn nights(n: usize, step_at: usize) -> String {
    let mut s = HEADER.to_string() + "\n";
    for i in 0..n {
        let (thr, driver) = if i >= step_at { (950.0, "560.35") } else { (1000.0, "550.54") };
        let day = 1 + i % 28;
        let month = 10 + i / 28;
        writeln!(
            s,
            "6,r{i},2026-{month:02}-{day:02}T02:00:00Z,box,gpubench,train,single,1,Tesla V100,{driver},resnet50,224,\
             fp32,64,{:.2},ok,{:07x}0,",
            thr * (1.0 + wobble(i)),
            i + 1
        )
        .unwrap();
    }
    s
}

fn in_dir(dir: &Path, a: &str) -> Gpubench {
    gpubench(a).cwd(dir)
}

#[test]
fn history_names_the_night_the_commits_and_the_driver_and_gates_on_it() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("n.csv"), nights(26, 20)).unwrap();
    let o = in_dir(d.path(), "history n.csv").run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    for want in [
        "1 change (1 new unacknowledged regression)",
        "2026-10-21 00000150",
        "00000140..00000150",
        "driver 550.54 -> 560.35 on 2026-10-21",
        "REGRESSION",
        "git log --oneline 00000140..00000150",
    ] {
        assert!(o.stdout.contains(want), "{want:?} not in\n{}", o.stdout);
    }
    let gate = in_dir(d.path(), "history n.csv --gate").run();
    assert_eq!(gate.code, 1, "{}", gate.stderr);
    // Markdown for a PR comment, one JSON document with every point.
    let md = in_dir(d.path(), "history n.csv --format markdown").run();
    assert!(md.stdout.contains("| id "), "{}", md.stdout);
    let j = in_dir(d.path(), "history n.csv --format json").run();
    let v: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
    let s = &v["history"]["series"][0];
    assert_eq!(s["points"].as_array().unwrap().len(), 26);
    assert_eq!(s["changes"][0]["first_point"], "00000150");
    assert_eq!(s["changes"][0]["what_changed"][0]["after"], "560.35");
    assert_eq!(v["tables"].as_array().unwrap().len(), 2);
    // Exports, charts and the page.
    let o = in_dir(
        d.path(),
        "history n.csv --export-bmf b.json --export-gab-bigger big.json --export-gab-smaller small.json \
         --charts c --html h.html",
    )
    .run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let bmf: serde_json::Value = serde_json::from_slice(&std::fs::read(d.path().join("b.json")).unwrap()).unwrap();
    assert!(bmf["resnet50 224px fp32 single x1 b64 @ box"]["throughput"]["value"].as_f64().unwrap() > 900.0, "{bmf}");
    let big: serde_json::Value = serde_json::from_slice(&std::fs::read(d.path().join("big.json")).unwrap()).unwrap();
    assert_eq!(big[0]["unit"], "img/s");
    let svg = std::fs::read_to_string(d.path().join("c/history-01-throughput.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("-5.0%"), "the change's marker is labelled");
    let page = std::fs::read_to_string(d.path().join("h.html")).unwrap();
    assert!(page.contains("REGRESSION") && page.contains("<svg"), "the page has the table and the chart");
    // report's page has a history section when its files hold a history.
    let o = in_dir(d.path(), "report n.csv --html r.html").run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let page = std::fs::read_to_string(d.path().join("r.html")).unwrap();
    assert!(
        page.contains("history: 1 series, 1 change") && page.contains("history-01-throughput"),
        "no history section"
    );
    assert!(!o.stdout.contains("history"), "the terminal's report is unchanged:\n{}", o.stdout);
}

#[test]
fn an_acknowledged_change_passes_the_gate_and_ids_are_checked() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("n.csv"), nights(26, 20)).unwrap();
    let j = in_dir(d.path(), "history n.csv --format json").run();
    let v: serde_json::Value = serde_json::from_str(&j.stdout).unwrap();
    let id = v["history"]["series"][0]["changes"][0]["id"].as_str().unwrap().to_string();
    let o = in_dir(d.path(), &format!("history n.csv --acks acks.txt --ack {id} --kind expected"))
        .arg("--reason")
        .arg("driver 560.35 rolled out")
        .run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let acks = std::fs::read_to_string(d.path().join("acks.txt")).unwrap();
    assert!(acks.starts_with(&format!("expected {id}")) && acks.contains("rolled out"), "{acks}");
    let gate = in_dir(d.path(), "history n.csv --acks acks.txt --gate").run();
    assert_eq!(gate.code, 0, "{}\n{}", gate.stdout, gate.stderr);
    assert!(gate.stdout.contains("expected: driver 560.35 rolled out"), "{}", gate.stdout);
    // An id no change has, and a broken line: one line each, exit 2, the file untouched.
    assert_usage_error_of(
        in_dir(d.path(), "history n.csv --acks acks.txt --ack 0123456789ab --reason x"),
        "unknown id",
        "no change or drift of these files has that id",
    );
    assert_eq!(std::fs::read_to_string(d.path().join("acks.txt")).unwrap(), acks);
    std::fs::write(d.path().join("bad.txt"), "accepted 0123456789ab fine\nacepted 0123456789ab typo\n").unwrap();
    assert_usage_error_of(in_dir(d.path(), "history n.csv --acks bad.txt"), "broken line", "bad.txt:2:");
    assert_usage_error_of(
        in_dir(d.path(), &format!("history n.csv --acks a2.txt --ack {id}")),
        "no reason",
        "--reason",
    );
}

#[test]
fn check_takes_its_baseline_from_the_current_level() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("n.csv"), nights(26, 20)).unwrap();
    // Tonight is as slow as the level since night 20: against the whole file's
    // median it reads as a regression; against the current level it does not.
    let tonight = format!("{HEADER}\n6,t,2026-11-20T02:00:00Z,box,gpubench,train,single,1,Tesla V100,560.35,resnet50,224,fp32,64,948.0,ok,aaaaaaa0,\n");
    std::fs::write(d.path().join("t.csv"), tonight).unwrap();
    let whole = in_dir(d.path(), "check --baseline n.csv --current t.csv --max-drop 3%").run();
    assert_eq!(whole.code, 1, "{}", whole.stdout);
    let level = in_dir(d.path(), "check --baseline n.csv --baseline-from-history --current t.csv --max-drop 3%").run();
    assert_eq!(level.code, 0, "{}\n{}", level.stdout, level.stderr);
    assert!(level.stderr.contains("baseline from history: 6 of 26 row(s)"), "{}", level.stderr);
}

#[test]
fn bad_histories_are_one_line_and_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::write(p.join("foreign.csv"), "model,batch,img_s\nresnet50,64,1\n").unwrap();
    assert_usage_error_of(in_dir(p, "history foreign.csv"), "foreign", "not a gpubench results file");
    std::fs::write(p.join("one.csv"), nights(1, 99)).unwrap();
    assert_usage_error_of(in_dir(p, "history one.csv"), "one point", "a series needs 6 points");
    std::fs::write(p.join("four.csv"), nights(4, 99)).unwrap();
    assert_usage_error_of(in_dir(p, "history four.csv"), "short", "the longest here has 4");
    // A commit that ran again after another has no one place in commit order.
    let rerun = nights(8, 99).replace(",00000070,", ",00000020,");
    std::fs::write(p.join("rerun.csv"), rerun).unwrap();
    assert_usage_error_of(in_dir(p, "history rerun.csv"), "rerun", "ran again after commit");
    assert_eq!(in_dir(p, "history rerun.csv --order time").run().code, 0);
    let bad_time = nights(8, 99).replace("2026-10-03T02:00:00Z", "3 Oct");
    std::fs::write(p.join("time.csv"), bad_time).unwrap();
    assert_usage_error_of(in_dir(p, "history time.csv"), "timestamp", "time.csv:4: timestamp `3 Oct`");
    assert_usage_error_of(in_dir(p, "history missing.csv"), "missing", "cannot read missing.csv: no such file");
    assert_usage_error_of(in_dir(p, "history one.csv --window 4"), "window", "--window 4 is too small");
    // Nothing was written by any of them.
    let mut names: Vec<String> =
        std::fs::read_dir(p).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["foreign.csv", "four.csv", "one.csv", "rerun.csv", "time.csv"]);
}

#[test]
fn rows_without_commits_are_a_point_each_by_time() {
    // A file written before schema v6 has no commit column: each run is a point.
    let d = tempfile::tempdir().unwrap();
    let text = nights(12, 99);
    let v5: String = text
        .lines()
        .map(|l| {
            let mut f: Vec<&str> = l.split(',').collect();
            f.remove(16);
            f.join(",") + "\n"
        })
        .collect();
    std::fs::write(d.path().join("v5.csv"), v5).unwrap();
    let o = in_dir(d.path(), "history v5.csv --format json").run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let pts = v["history"]["series"][0]["points"].as_array().unwrap();
    assert_eq!((pts.len(), pts[0]["id"].as_str()), (12, Some("run r0")));
}
