//! `report`, `compare` and `check` through the real binary, on the CSV
//! fixtures in tests/fixtures/report (run from that directory, so paths in
//! messages are short and stable) and on results/reference.
//!
//! v100.csv has schema 1's full header (no `variant` column); k80.csv and
//! the check fixtures have the shorter header of an even earlier gpubench:
//! committed baselines stay readable as the schema grows.
use super::common::{gpubench, Gpubench, Out};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report")
}

fn reference() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("results/reference")
}

/// gpubench, run from the fixtures directory.
fn fx(a: &str) -> Gpubench {
    gpubench(a).cwd(fixtures())
}

const NOTES_V100: &str = "\
figures are medians over repeated runs of a config
scaling = img/s / (devices x img/s of the 1-device run with the same hardware, model, image size, precision and batch/dev); '-' where there is no such run
mem imbalance = max/min peak memory across a run's devices
± = half-width of the spread: with repeats, from the lowest to the highest of their own 95 % intervals; * = one run's own 95 % interval (batch means over its steps), which does not cover run-to-run drift: repeat runs (--repeat) for that
fastest on 2 devices (Tesla V100-SXM2-16GB resnet50 224px fp32 b64): ddp 720 > dp 560
fastest on 4 devices (Tesla V100-SXM2-16GB resnet50 224px fp32 b64): ddp 1400 > dp 900
excluded v100.csv:17 (resnet50 224px fp32 dp x4 b128): status oom: CUDA out of memory. Tried to allocate 2.00 GiB
Tesla V100-SXM2-16GB resnet50 fp32 single×1: 370 img/s is 100% of Lambda deeplearning-benchmark (PyTorch)'s figure for V100 16GB (369 img/s, batch not given; stack: PyTorch, NGC container, DLE ResNet-50 v1.5; yours: batch 64)
Tesla V100-SXM2-16GB resnet50 fp32 single×1: 370 img/s is 101% of NVIDIA DeepLearningExamples's figure for V100 16GB (DGX-1) (367 img/s, batch not given; stack: PyTorch 21.03 NGC container, DLE ResNet-50 v1.5; yours: batch 64)
";

#[test]
fn report_table_snapshot() {
    let o = fx("report v100.csv").run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let want = "\
gpubench report: 15 ok runs from v100.csv

hardware              label     model     image  precision  strategy  devices  batch/dev  runs  excluded     img/s  img/s/dev      scaling  step p50 ms  step p90 ms  mem imbalance
--------------------  --------  --------  -----  ---------  --------  -------  ---------  ----  --------  --------  ---------  -----------  -----------  -----------  -------------
Tesla V100-SXM2-16GB  V100 box  resnet50    224  fp32       single          1         64     3              370 ±2        370       100.0%          173          178              -
Tesla V100-SXM2-16GB  V100 box  resnet50    224  fp32       dp              2         64     3              560 ±5        280  75.7% ±0.8%          229          235          1.88x
Tesla V100-SXM2-16GB  V100 box  resnet50    224  fp32       dp              4         64     3             900 ±10        225  60.8% ±0.8%          284          293          1.88x
Tesla V100-SXM2-16GB  V100 box  resnet50    224  fp32       ddp             2         64     3              720 ±6        360  97.3% ±1.0%          178          183          1.00x
Tesla V100-SXM2-16GB  V100 box  resnet50    224  fp32       ddp             4         64     3            1400 ±10        350  94.6% ±0.8%          183          188          1.01x
Tesla V100-SXM2-16GB  V100 box  resnet50    224  fp32       dp              4        128     0  1 oom            -          -            -            -            -              -

";
    // Then the verdicts: these fixture rows measured none of the parts, so all is unexplained.
    let (main, why) = o.stdout.split_at(want.len() + NOTES_V100.len());
    assert_eq!(main, format!("{want}{NOTES_V100}"));
    assert!(why.starts_with("why: the shortfall from ideal scaling, in points of ideal\n"), "{why}");
    assert!(
        why.contains(
            "ddp on 4 devices reaches 3.78x of single (95 %): 5 % unexplained, as these rows measured none of the parts"
        ),
        "{why}"
    );
    assert_eq!(o.stderr, "");
}

#[test]
fn report_markdown_snapshot() {
    let o = fx("report v100.csv --format markdown").run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let want = "\
**gpubench report: 15 ok runs from v100.csv**

| hardware | label | model | image | precision | strategy | devices | batch/dev | runs | excluded | img/s | img/s/dev | scaling | step p50 ms | step p90 ms | mem imbalance |
|---|---|---|--:|---|---|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|
| Tesla V100-SXM2-16GB | V100 box | resnet50 | 224 | fp32 | single | 1 | 64 | 3 |  | 370 ±2 | 370 | 100.0% | 173 | 178 | - |
| Tesla V100-SXM2-16GB | V100 box | resnet50 | 224 | fp32 | dp | 2 | 64 | 3 |  | 560 ±5 | 280 | 75.7% ±0.8% | 229 | 235 | 1.88x |
| Tesla V100-SXM2-16GB | V100 box | resnet50 | 224 | fp32 | dp | 4 | 64 | 3 |  | 900 ±10 | 225 | 60.8% ±0.8% | 284 | 293 | 1.88x |
| Tesla V100-SXM2-16GB | V100 box | resnet50 | 224 | fp32 | ddp | 2 | 64 | 3 |  | 720 ±6 | 360 | 97.3% ±1.0% | 178 | 183 | 1.00x |
| Tesla V100-SXM2-16GB | V100 box | resnet50 | 224 | fp32 | ddp | 4 | 64 | 3 |  | 1400 ±10 | 350 | 94.6% ±0.8% | 183 | 188 | 1.01x |
| Tesla V100-SXM2-16GB | V100 box | resnet50 | 224 | fp32 | dp | 4 | 128 | 0 | 1 oom | - | - | - | - | - | - |

";
    let notes: String = NOTES_V100.lines().map(|l| format!("- {l}\n")).collect();
    assert!(o.stdout.starts_with(&format!("{want}{notes}")), "{}", o.stdout);
    assert!(o.stdout.contains("**why: the shortfall from ideal scaling, in points of ideal**"), "{}", o.stdout);
}

#[test]
fn report_csv_and_json_carry_raw_values() {
    let o = fx("report v100.csv --format csv").run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(
        lines[0],
        "hardware,label,model,image_size,precision,strategy,n_devices,batch_per_device,runs,excluded,\
         throughput_img_s,throughput_per_device_img_s,scaling_efficiency,step_ms_p50,step_ms_p90,mem_imbalance,\
         throughput_ci95_lo,throughput_ci95_hi,scaling_ci95_lo,scaling_ci95_hi,ci_basis"
    );
    assert!(
        lines[2].starts_with("Tesla V100-SXM2-16GB,V100 box,resnet50,224,fp32,dp,2,64,3,,560,280,0.7567567567567568,")
    );
    // The report's 7 lines, then the verdicts' table with its own header.
    assert!(lines[7].starts_with("config,efficiency_pct,exposed_allreduce_pct,"), "{}", o.stdout);
    // Then the waterfall's: ideal, unexplained and measured for each of the 4.
    assert!(lines[12].starts_with("config,step,from_pct,to_pct"), "{}", o.stdout);
    assert_eq!(lines.len(), 7 + 5 + 13);
    // notes stay visible, on stderr
    assert!(o.stderr.contains("note: excluded v100.csv:17"), "{}", o.stderr);

    let o = fx("report v100.csv --format json").run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    // One JSON document, which a JSON parser reads whole, holding a table
    // each: the report's, the verdicts', their waterfall.
    let doc: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let docs = doc["tables"].as_array().unwrap();
    assert_eq!(docs.len(), 3);
    assert_eq!(docs[2]["rows"][0]["step"], "ideal");
    assert_eq!(docs[1]["rows"][3]["config"], "ddp ×4 resnet50 224px fp32 b64");
    let v = docs[0].clone();
    let ddp4 = &v["rows"][4];
    assert_eq!((ddp4["strategy"].as_str(), ddp4["n_devices"].as_i64()), (Some("ddp"), Some(4)));
    assert!((ddp4["scaling_efficiency"].as_f64().unwrap() - 1400.0 / (4.0 * 370.0)).abs() < 1e-12);
    assert!(v["rows"][5]["throughput_img_s"].is_null());
    assert_eq!(v["notes"].as_array().unwrap().len(), 9);
    // The spread's bounds: these rows predate intervals, so the repeats' range.
    let (lo, hi) = (ddp4["throughput_ci95_lo"].as_f64().unwrap(), ddp4["throughput_ci95_hi"].as_f64().unwrap());
    assert!(lo < 1400.0 && 1400.0 < hi, "{lo} {hi}");
    assert_eq!(ddp4["ci_basis"], "repeats");
}

fn png_dims(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "PNG magic");
    assert_eq!(&bytes[12..16], b"IHDR");
    let be = |o: usize| u32::from_be_bytes(bytes[o..o + 4].try_into().unwrap());
    (be(16), be(20))
}

fn check_svg(p: &Path) {
    let s = std::fs::read_to_string(p).unwrap();
    assert!(s.starts_with("<svg"), "{p:?}");
    assert!(s.contains("<text") && s.trim_end().ends_with("</svg>"), "{p:?}");
    assert!((3_000..500_000).contains(&s.len()), "{p:?}: {} bytes", s.len());
}

#[test]
fn report_charts_are_valid_png_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let o = fx(&format!("report v100.csv --charts {}", d)).run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let stems = ["throughput", "scaling", "strategies", "memory_util", "step_time", "verdict"];
    for s in stems {
        check_svg(&dir.path().join(format!("{s}.svg")));
    }
    let svg = std::fs::read_to_string(dir.path().join("memory_util.svg")).unwrap();
    assert!(svg.contains("peak memory (GiB)") && svg.contains("mean utilization (%)"), "memory_util.svg");
    match gpubench::report::charts::find_font() {
        Ok(_) => {
            for s in stems {
                let p = dir.path().join(format!("{s}.png"));
                let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
                let (w, h) = png_dims(&bytes);
                assert!((600..=4000).contains(&w) && (400..=4000).contains(&h), "{p:?}: {w}x{h}");
                assert!(bytes.len() > 15_000, "{p:?} looks blank: {} bytes", bytes.len());
            }
            assert!(o.stderr.ends_with(&format!("wrote 12 chart files to {d}\n")), "{}", o.stderr);
        }
        Err(msg) => {
            assert!(o.stderr.contains(&msg), "{}", o.stderr);
            assert!(!dir.path().join("throughput.png").exists());
        }
    }
    // the table still goes to stdout
    assert!(o.stdout.starts_with("gpubench report: 15 ok runs"));
}

#[test]
fn an_unusable_font_still_gives_svg_and_one_line_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("notafont.ttf");
    std::fs::write(&bad, "nope").unwrap();
    let charts = dir.path().join("charts");
    let o = fx(&format!("report v100.csv --charts {}", charts.display())).env("GPUBENCH_FONT", &bad).run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let lines: Vec<&str> = o.stderr.lines().filter(|l| l.contains("PNG")).collect();
    assert_eq!(lines.len(), 1, "{}", o.stderr);
    assert!(lines[0].contains("notafont.ttf is not a TrueType/OpenType font"), "{}", lines[0]);
    assert!(charts.join("throughput.svg").exists());
    assert!(!charts.join("throughput.png").exists());
}

#[test]
fn a_charts_path_that_cannot_be_a_directory_is_a_usage_error() {
    let o = fx("report v100.csv --charts v100.csv/charts").run();
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    assert!(o.stderr.starts_with("error: --charts v100.csv/charts: cannot create directory"), "{}", o.stderr);
}

#[test]
fn compare_table_snapshot_shows_gaps_as_missing() {
    let o = fx("compare v100.csv k80.csv").run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let want = "\
gpubench compare: V100 box vs Tesla K80

model     image  precision  strategy  devices  batch/dev  V100 box img/s  V100 box scaling  Tesla K80 img/s  Tesla K80 scaling  Tesla K80 / V100 box
--------  -----  ---------  --------  -------  ---------  --------------  ----------------  ---------------  -----------------  --------------------
resnet50    224  fp32       single          1         64          370 ±2            100.0%             51.0             100.0%                 0.14x
resnet50    224  fp32       dp              2         64          560 ±5       75.7% ±0.8%             80.0              78.4%                 0.14x
resnet50    224  fp32       dp              4         64         900 ±10       60.8% ±0.8%          missing            missing                     -
resnet50    224  fp32       ddp             2         64          720 ±6       97.3% ±1.0%             97.0              95.1%                 0.13x
resnet50    224  fp32       ddp             4         64        1400 ±10       94.6% ±0.8%          missing            missing                     -
resnet50    224  fp32       dp              4        128           1 oom                 -          missing            missing                     -

joined on model, image size, precision, strategy, devices and batch/dev; medians over repeats
'missing': the set has no run of that config
scaling = img/s / (devices x img/s of the 1-device run with the same hardware, model, image size, precision and batch/dev); '-' where there is no such run
± = half-width of the spread: with repeats, from the lowest to the highest of their own 95 % intervals; * = one run's own 95 % interval (batch means over its steps), which does not cover run-to-run drift: repeat runs (--repeat) for that
excluded v100.csv:17 (resnet50 224px fp32 dp x4 b128): status oom: CUDA out of memory. Tried to allocate 2.00 GiB
";
    let (main, why) = o.stdout.split_at(want.len().min(o.stdout.len()));
    assert_eq!(main, want);
    // Then each set's verdicts, named by set.
    assert!(why.starts_with("why: the shortfall from ideal scaling"), "{why}");
    assert!(why.contains("\nTesla K80: ddp on 2 devices reaches 1.90x of single (95 %)"), "{why}");
}

#[test]
fn compare_against_a_published_reference_out_of_the_box() {
    let k80_ref = reference().join("tf_cnn_benchmarks_k80.csv");
    let dir = tempfile::tempdir().unwrap();
    let o = fx(&format!("compare {} k80.csv --charts {}", k80_ref.display(), dir.path().display())).run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("A = tf_cnn_benchmarks GCE K80 synthetic [published]"), "{}", o.stdout);
    assert!(o.stdout.contains("D = Tesla K80 (k80.csv)"));
    assert!(o.stdout.contains("impl 'published' rows are other people's figures"));
    let single = o.stdout.lines().find(|l| l.contains(" single ")).unwrap();
    assert!(single.contains("51.9") && single.contains("51.0") && single.ends_with("0.98x"), "{single}");
    check_svg(&dir.path().join("compare.svg"));
}

#[test]
fn compare_needs_two_sets() {
    let o = fx("compare baseline.csv").run();
    assert_eq!(o.code, 2);
    assert!(o.stderr.starts_with("error: compare needs at least two result sets"), "{}", o.stderr);
}

fn check(current: &str, extra: &str) -> Out {
    fx(&format!("check --baseline baseline.csv --current {current} {extra}")).run()
}

/// (config, metric, verdict) of each table line.
fn verdicts(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .skip(4)
        .take_while(|l| !l.is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split("  ").filter(|c| !c.trim().is_empty()).map(str::trim).collect();
            format!("{} {} {}", cols[0], cols[1], cols[cols.len() - 1])
        })
        .collect()
}

#[test]
fn check_catches_a_clear_regression() {
    let o = check("current_regressed.csv", "");
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    assert_eq!(
        verdicts(&o.stdout),
        [
            "resnet50 224px fp32 ddp x4 b64 img/s REGRESSED",
            "resnet50 224px fp32 ddp x4 b64 scaling REGRESSED",
            "resnet50 224px fp32 single x1 b64 img/s unchanged",
            "resnet50 224px fp32 dp x2 b64 img/s unchanged",
            "resnet50 224px fp32 dp x2 b64 scaling unchanged",
        ]
    );
    assert!(o.stdout.starts_with("gpubench check: 2 regressed, 0 improved, 3 unchanged, 0 missing: FAIL\n"));
}

#[test]
fn check_passes_changes_within_noise() {
    let o = check("current_noise.csv", "");
    assert_eq!(o.code, 0, "{}", o.stdout);
    assert!(o.stdout.starts_with("gpubench check: 0 regressed, 0 improved, 5 unchanged, 0 missing: PASS\n"));
    // A 7% median drop whose repeats scatter widely is not significant.
    let o = check("current_noisy_drop.csv", "");
    assert_eq!(o.code, 0, "{}", o.stdout);
    let line = o.stdout.lines().find(|l| l.contains("ddp x4") && l.contains("img/s")).unwrap();
    assert!(line.contains("-7.1%") && line.contains("0.514") && line.ends_with("unchanged"), "{line}");
    // ...but with the t-test switched off (any p counts), the threshold alone fails it.
    let o = check("current_noisy_drop.csv", "--alpha 0.99");
    assert_eq!(o.code, 1, "{}", o.stdout);
}

#[test]
fn check_reports_improvements_without_failing() {
    let o = check("current_improved.csv", "");
    assert_eq!(o.code, 0, "{}", o.stdout);
    let v = verdicts(&o.stdout);
    assert_eq!(v.iter().filter(|l| l.ends_with("improved")).count(), 3, "{v:?}");
}

#[test]
fn missing_configs_are_reported_and_fail_only_with_strict() {
    let o = check("current_missing.csv", "");
    assert_eq!(o.code, 0, "{}", o.stdout);
    assert_eq!(verdicts(&o.stdout)[0], "resnet50 224px fp32 dp x2 b64 - missing: not in current");
    let o = check("current_missing.csv", "--strict");
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(o.stdout.starts_with(
        "gpubench check: 0 regressed, 0 improved, 3 unchanged, 1 missing (--strict: missing configs fail): FAIL\n"
    ));
}

#[test]
fn check_markdown_snapshot_for_a_pr_comment() {
    let o = check("current_missing.csv", "--strict --format markdown --metric throughput");
    assert_eq!(o.code, 1);
    let want = "\
**gpubench check: 0 regressed, 0 improved, 2 unchanged, 1 missing (--strict: missing configs fail): FAIL**

| config | metric | baseline | current | change | p | runs b/c | verdict |
|---|---|--:|--:|--:|--:|---|---|
| resnet50 224px fp32 dp x2 b64 | - | - | - | - | - | 3/0 | missing: not in current |
| resnet50 224px fp32 single x1 b64 | img/s | 370 | 371 | +0.3% | 0.672 | 3/3 | unchanged |
| resnet50 224px fp32 ddp x4 b64 | img/s | 1400 | 1402 | +0.1% | 0.806 | 3/3 | unchanged |

- rule: a change beyond 5.0% that is also significant: Welch t-test p < 0.05 when both sides have 2+ runs, else the two 95 % intervals apart (p column: 'apart' or 'overlap'); with neither, the threshold alone decides
";
    assert_eq!(o.stdout, want);
}

#[test]
fn check_metric_and_threshold_options() {
    let o = check("current_regressed.csv", "--metric step-p50,step-p90");
    assert_eq!(o.code, 1);
    let v = verdicts(&o.stdout);
    assert!(v.contains(&"resnet50 224px fp32 ddp x4 b64 step p50 ms REGRESSED".to_string()), "{v:?}");
    assert!(!o.stdout.contains(" img/s "));
    // a 20% allowance lets the 14% drop through
    assert_eq!(check("current_regressed.csv", "--max-drop 20%").code, 0);
    let o = check("current_regressed.csv", "--max-drop 5");
    assert_eq!(o.code, 2);
    assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    assert!(o.stderr.contains("ambiguous"));
    // A negative drop names its option, as a negative duration does.
    let o = check("current_regressed.csv", "--max-drop -5%");
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("--max-drop") && o.stderr.contains("at least 0%"), "{}", o.stderr);
}

#[test]
fn check_warns_across_hardware_and_refuses_unrelated_results() {
    let o = check("k80.csv", "");
    assert_eq!(o.code, 1, "K80 shares single x1 and dp x2 with the baseline: {}", o.stdout);
    assert!(o.stdout.contains("baseline ran on Tesla V100-SXM2-16GB, current on Tesla K80"));
    let mut v = std::fs::read_to_string(fixtures().join("k80.csv")).unwrap();
    v = v.replace("resnet50", "resnet18");
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("r18.csv");
    std::fs::write(&other, v).unwrap();
    let o = check(other.to_str().unwrap(), "");
    assert_eq!(o.code, 2, "{}", o.stdout);
    assert!(o.stderr.contains("nothing to compare"), "{}", o.stderr);
}

#[test]
fn bad_inputs_give_one_line_with_file_and_line_and_exit_2() {
    let cases = [
        ("bad/empty.csv", "error: bad/empty.csv: the file is empty"),
        ("bad/header_only.csv", "error: bad/header_only.csv: has a header but no result rows"),
        ("bad/other_tool.csv", "error: bad/other_tool.csv:1: not a gpubench results file"),
        ("bad/schema_v9.csv", "error: bad/schema_v9.csv:1: header is written by gpubench CSV schema v9"),
        ("bad/wrong_type.csv", "error: bad/wrong_type.csv:3: column `throughput_img_s`: `fast` is not a number"),
        ("bad/truncated.csv", "error: bad/truncated.csv:3: the last line is truncated"),
        ("no-such-file.csv", "error: cannot read no-such-file.csv: no such file"),
    ];
    // Every file through report and check; each subcommand position once.
    let mut runs: Vec<(String, &str)> = vec![];
    for (file, want) in cases {
        runs.push((format!("report {file}"), want));
        runs.push((format!("check --baseline baseline.csv --current {file}"), want));
    }
    let (file, want) = cases[5];
    runs.push((format!("compare v100.csv {file}"), want));
    runs.push((format!("check --baseline {file} --current baseline.csv"), want));
    // In this process (main's printing of such an error is tested through
    // the binary in run.rs), with the fixtures' paths made absolute.
    let abs = |f: &str| fixtures().join(f).display().to_string();
    for (args, want) in runs {
        let argv: Vec<String> =
            args.split_whitespace().map(|a| if a.ends_with(".csv") { abs(a) } else { a.to_string() }).collect();
        let file = args.split_whitespace().rfind(|a| want.contains(*a)).unwrap();
        let want = want.trim_start_matches("error: ").replace(file, &abs(file));
        super::common::assert_usage_error_argv(&argv, &want);
    }
    // A page that cannot be written is refused before the report is made.
    let argv: Vec<String> = ["report", &abs("baseline.csv"), "--html", "/proc/r.html"].map(String::from).to_vec();
    super::common::assert_usage_error_argv(&argv, "--html /proc/r.html: directory /proc is not writable");
    // And once through the binary, from the fixtures directory: the line
    // main prints, with the path as given.
    let o = fx("report bad/truncated.csv").run();
    assert_eq!((o.code, o.stdout.as_str()), (2, ""), "{}", o.stderr);
    assert!(o.stderr.starts_with(cases[5].1) && o.stderr.lines().count() == 1, "{}", o.stderr);
}

#[test]
fn every_reference_csv_reads_and_is_marked_published() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(reference())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "csv"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "{files:?}");
    for f in &files {
        let rows = gpubench::results::csv::read_rows(f).unwrap_or_else(|e| panic!("{e:#}"));
        assert!(!rows.is_empty(), "{f:?}");
        for r in rows {
            assert_eq!((r.implementation.name(), r.status.name()), ("published", "ok"), "{f:?} {}", r.run_id);
            assert!(!r.source.is_empty() && r.throughput_img_s.is_some(), "{f:?} {}", r.run_id);
            // unknown columns are left empty, not made up
            assert_eq!((r.step_ms_p50, r.loss_first, r.host.as_str()), (None, None, ""), "{f:?} {}", r.run_id);
        }
    }
    // All of them in one report: each reads, and its rows are marked published.
    let all: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let o = fx(&format!("report {}", all.join(" "))).run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("published"));
    let n: usize = files.iter().map(|f| gpubench::results::csv::read_rows(f).unwrap().len()).sum();
    assert!(o.stdout.contains(&format!("{n} ok runs from {} files", files.len())), "{}", o.stdout);
    // The published scaling figures come back out of the rows.
    let o = fx(&format!("report {} --format csv", reference().join("nvidia_dle_rn50.csv").display())).run();
    let v100_fp32_8 = o.stdout.lines().find(|l| l.contains("V100") && l.contains(",fp32,ddp,8,")).unwrap();
    assert!(v100_fp32_8.contains(",2855,"), "{v100_fp32_8}");
    let seed = fx(&format!("report {}", reference().join("seed_pytorch_distributed_v100.csv").display())).run();
    let dp = seed.stdout.lines().find(|l| l.contains(" dp ")).unwrap();
    assert!(dp.contains(" 310 "), "1281167 images / 4138.3 s: {dp}");
}

/// `diagnose` on a fleet made from one real CPU run: its row as four nodes'
/// rows, then one node's figures scaled down by the test (so no timing of
/// this machine decides the outcome). The slowed node is named, alone; the
/// same fleet unscaled passes; a baseline file judges too.
#[test]
fn diagnose_names_the_one_slowed_node_and_passes_an_even_fleet() {
    use gpubench::results::csv::{append_rows, read_rows};
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one.csv");
    let o = gpubench(&format!(
        "run --cpu --model tinycnn --image-size 16 --num-classes 10 --steps 24 --warmup 2 --quiet --out {}",
        one.display()
    ))
    .output();
    assert!(o.status.success(), "{}", super::common::stderr(&o));
    let real = read_rows(&one).unwrap().remove(0);
    assert!(real.throughput_ci95_hi.is_some(), "the run has an interval");
    let fleet = |slow: Option<(usize, f64)>, name: &str| -> PathBuf {
        let p = dir.path().join(name);
        let rows: Vec<_> = (1..=4)
            .map(|i| {
                let f = slow.filter(|s| s.0 == i).map_or(1.0, |s| s.1);
                let scale = |v: Option<f64>| v.map(|x| x * f);
                let mut r = real.clone();
                r.host = format!("node-0{i}");
                r.run_id = format!("{}-{i}", real.run_id);
                r.throughput_img_s = scale(r.throughput_img_s);
                r.throughput_ci95_lo = scale(r.throughput_ci95_lo);
                r.throughput_ci95_hi = scale(r.throughput_ci95_hi);
                // Rows this test controls: a busy host would otherwise mark the
                // real run disturbed, and diagnose rightly sets such rows apart.
                r.interference.clear();
                r
            })
            .collect();
        append_rows(&p, &rows).unwrap();
        p
    };
    let even = fleet(None, "even.csv");
    let o = gpubench(&format!("diagnose {}", even.display())).output();
    assert_eq!(o.status.code(), Some(0), "{}", super::common::stdout(&o));
    assert!(super::common::stdout(&o).contains("no defect among 4 rows"));
    // Slowed by more than the widest interval a run can have here, so its interval is apart.
    let (lo, hi) = (real.throughput_ci95_lo.unwrap(), real.throughput_ci95_hi.unwrap());
    let f = (lo / hi * 0.8).min(0.8);
    let slowed = fleet(Some((3, f)), "slowed.csv");
    let o = gpubench(&format!("diagnose {} --format markdown", slowed.display())).output();
    let out = super::common::stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let defects: Vec<&str> = out.lines().take_while(|l| !l.starts_with("1 of")).collect();
    assert_eq!(defects.len(), 1, "{out}");
    assert!(
        defects[0].starts_with("node-03: tinycnn fp32 b") && defects[0].contains("below the fleet median"),
        "{out}"
    );
    assert!(out.contains("1 of 4 rows defective"), "{out}");
    // Against a baseline file: the slowed node alone, again.
    let o = gpubench(&format!("diagnose {} --baseline {} --format json", slowed.display(), even.display())).output();
    assert_eq!(o.status.code(), Some(1));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let bad: Vec<&str> = j["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["verdict"] != "ok")
        .map(|r| r["place"].as_str().unwrap())
        .collect();
    assert_eq!(bad, ["node-03"]);
    // A file that is not a gpubench results file: exit 2, one line naming it.
    let theirs = dir.path().join("theirs.csv");
    std::fs::write(&theirs, "a,b\n1,2\n").unwrap();
    let o = gpubench(&format!("diagnose {}", theirs.display())).output();
    let err = super::common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("theirs.csv") && err.contains("not a gpubench results file"), "{err}");
}

/// A measured H100 TF32 configuration (a fixture: no H100 here) beside the
/// published H100 figure, with the source named: Lambda's 1753 img/s, so
/// the median 1605 is 92 %.
#[test]
fn report_names_the_percentage_of_the_published_figure_for_the_same_gpu() {
    let o = fx("report h100_tf32.csv").output();
    let out = super::common::stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", super::common::stderr(&o));
    let line = out.lines().find(|l| l.contains("% of")).unwrap_or_else(|| panic!("no published line: {out}"));
    assert!(line.contains("1605 img/s is 92% of Lambda deeplearning-benchmark"), "{line}");
    assert!(line.contains("figure for H100 80GB SXM5 (1753 img/s, batch not given; stack: PyTorch, NGC container, DLE ResNet-50 v1.5; \
         yours: batch 256)"), "{line}");
}

/// The verdict names the straggler: rank 1 of a 2-rank ddp run sleeps 40 ms
/// in every forward (a test hook, not a loaded machine), so waiting for it
/// is the largest part of the shortfall, whatever this host's speed.
#[test]
fn the_verdict_names_waiting_for_a_slowed_rank_as_the_largest_part() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("v.csv");
    let tiny = "--model tinycnn --image-size 16 --num-classes 10 --batch-size 8 --steps 8 --warmup 2 --threads 1 -q";
    let o = gpubench(&format!("run --cpu {tiny} --out {}", out.display())).output();
    assert!(o.status.success(), "{}", super::common::stderr(&o));
    let o = gpubench(&format!("run --strategy ddp --cpu 2 {tiny} --out {}", out.display()))
        .env("GPUBENCH_TEST_SLOW_RANK", "1:40")
        .output();
    assert!(o.status.success(), "{}", super::common::stderr(&o));
    let o = gpubench(&format!("report {}", out.display())).output();
    let text = super::common::stdout(&o);
    let sentence = text.lines().find(|l| l.starts_with("ddp on 2 devices reaches")).unwrap_or_else(|| panic!("{text}"));
    // The parts are said largest first.
    let first = sentence.split(": ").nth(1).unwrap().split(", ").next().unwrap();
    assert!(first.ends_with("waiting for rank 1"), "{sentence}");
    // JSON: the verdict as an object with its efficiency and parts.
    let o = gpubench(&format!("report {} --format json", out.display())).output();
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let docs = doc["tables"].as_array().unwrap();
    let v = docs.iter().find(|d| d["title"].as_str().unwrap_or("").starts_with("why:")).expect("a verdict table");
    let r = &v["rows"][0];
    assert!(r["efficiency_pct"].as_f64().unwrap() > 0.0, "{r}");
    let parts = &r["parts"];
    assert!(parts["waiting_for_rank"].as_f64().unwrap() > parts["exposed_allreduce"].as_f64().unwrap(), "{r}");
    assert!(parts["unexplained"].is_number(), "{r}");
    let w = docs
        .iter()
        .find(|d| d["title"].as_str().unwrap_or("").starts_with("why, as a waterfall"))
        .expect("a waterfall");
    let steps: Vec<&str> = w["rows"].as_array().unwrap().iter().map(|r| r["step"].as_str().unwrap()).collect();
    assert_eq!((steps[0], *steps.last().unwrap()), ("ideal", "measured"), "{w}");
    // With an all-reduce curve of the same ranks and backend among the files,
    // the verdict says what the gradients' all-reduce alone should cost.
    let ar = dir.path().join("ar.csv");
    let o = gpubench(&format!("allreduce --cpu 2 -b 1K -e 64K -f 4 -n 3 -w 1 --out {}", ar.display())).output();
    assert!(o.status.success(), "{}", super::common::stderr(&o));
    let o = gpubench(&format!("report {} {}", out.display(), ar.display())).output();
    let text = super::common::stdout(&o);
    let sentence = text.lines().find(|l| l.starts_with("ddp on 2 devices reaches")).unwrap_or_else(|| panic!("{text}"));
    assert!(sentence.contains("; the all-reduce alone should take ") && sentence.contains("ar.csv"), "{sentence}");
    assert!(sentence.contains("the gradients in 1 equal bucket of 21.2 KiB"), "{sentence}");
}
