//! `run --profile`: PyTorch's own profiler traces, one per process, that
//! parse as Chrome traces and hold aten ops, gpubench's ranges and, for ddp,
//! Gloo's collectives and the `distributedInfo` Holistic Trace Analysis needs.
use crate::common::*;
use std::path::Path;

fn trace(p: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", p.display()))
}

fn names(t: &serde_json::Value) -> Vec<String> {
    t["traceEvents"].as_array().unwrap().iter().filter_map(|e| e["name"].as_str().map(String::from)).collect()
}

/// The python with Holistic Trace Analysis, or None (saying so) where the
/// HolisticTraceAnalysis package is not installed in the torch venv (`pip
/// install HolisticTraceAnalysis`); scripts/test installs it and sets
/// GPUBENCH_REQUIRE_HTA=1, and then a missing package fails.
fn hta_python() -> Option<String> {
    let py = std::env::var("GPUBENCH_PYTHON_BIN").unwrap_or_else(|_| "python3".into());
    let has = std::process::Command::new(&py).args(["-c", "import hta"]).output().is_ok_and(|o| o.status.success());
    if !has {
        assert!(
            !std::env::var("GPUBENCH_REQUIRE_HTA").is_ok_and(|v| v == "1"),
            "GPUBENCH_REQUIRE_HTA=1 but `import hta` fails for {py}: pip install HolisticTraceAnalysis"
        );
        eprintln!(
            "HTA part skipped: HolisticTraceAnalysis is not installed for {py} (pip install HolisticTraceAnalysis)"
        );
    }
    has.then_some(py)
}

/// Single and ddp traces hold aten ops, gpubench's ranges, Gloo's
/// collectives and ranks; trace-summary reads them back, and so does
/// Holistic Trace Analysis, one rank each, running its temporal breakdown
/// where there are GPU kernels to break down (it has nothing to say of a
/// CPU-only trace, and says so by failing). One profiled ddp run for all.
#[test]
fn single_and_ddp_traces_hold_ops_ranges_collectives_and_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let (one, two, out) = (dir.path().join("single"), dir.path().join("ddp"), dir.path().join("r.csv"));
    let o = gpubench(&format!(
        "run --cpu {TINY} --batch-size 8 --steps 5 --warmup 1 --profile {} --profile-steps 2 -q --out {}",
        one.display(),
        out.display()
    ))
    .run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let t = trace(&one.join("rank0.pt.trace.json"));
    let n = names(&t);
    assert!(n.iter().any(|x| x.starts_with("aten::conv")), "no aten ops");
    for r in ["ProfilerStep#0", "ProfilerStep#1", "gpubench.forward", "gpubench.backward", "gpubench.optimizer"] {
        assert!(n.iter().any(|x| x == r), "no {r} range");
    }
    assert!(!n.iter().any(|x| x == "ProfilerStep#2"), "only --profile-steps 2 are traced");
    assert_eq!(t["distributedInfo"]["rank"], 0);
    assert_eq!(t["gpubench"]["device"], "cpu", "trace-summary tells CPU traces by it");
    assert!(read_csv(&out)[0]["note"].contains("profiled"), "the row says it was profiled");

    let o = gpubench(&format!(
        "run --strategy ddp --cpu 2 {TINY} --batch-size 4 --steps 3 --warmup 1 --profile {} -q",
        two.display()
    ))
    .run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    for r in 0..2 {
        let t = trace(&two.join(format!("rank{r}.pt.trace.json")));
        assert_eq!(t["distributedInfo"]["rank"], r);
        assert_eq!(t["distributedInfo"]["world_size"], 2);
        assert_eq!(t["distributedInfo"]["backend"], "gloo");
        let n = names(&t);
        assert!(n.iter().any(|x| x.starts_with("gloo:all_reduce")), "rank {r}: no gloo collective");
        assert!(n.iter().any(|x| x == "gpubench.agree"), "rank {r}: no loss agreement range");
    }
    // trace-summary reads them back: one line per rank, communication seen.
    let o = gpubench(&format!("trace-summary {} --format json", two.display())).run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_envelope(&v);
    let ranks = v["traces"].as_array().unwrap();
    assert_eq!(ranks.len(), 2);
    for (i, r) in ranks.iter().enumerate() {
        assert_eq!(r["rank"], i as i64);
        assert_eq!(r["steps"], 3);
        assert!(r["comm_ms"].as_f64().unwrap() > 0.0 && r["compute_ms"].as_f64().unwrap() > 0.0, "{r}");
        let parts: f64 =
            ["compute_ms", "comm_ms", "data_wait_ms", "idle_ms"].iter().map(|k| r[k].as_f64().unwrap()).sum();
        assert!(parts + 1e-9 >= r["span_ms"].as_f64().unwrap(), "the parts cover the span: {r}");
        assert!(r.get("autograd_threads_ms").is_some(), "the JSON has the table's autograd column: {r}");
    }
    if let Some(py) = hta_python() {
        let script = "import sys\nfrom hta.trace_analysis import TraceAnalysis\n\
                      a = TraceAnalysis(trace_dir=sys.argv[1])\nassert sorted(a.t.traces) == [0, 1], sorted(a.t.traces)\n\
                      df = a.t.get_trace(0)\n\
                      if (df['stream'] >= 0).any(): print(a.get_temporal_breakdown(visualize=False))\n\
                      else: print('no GPU kernels: temporal breakdown skipped')\n";
        let o = std::process::Command::new(&py).args(["-c", script]).arg(&two).output().unwrap();
        assert!(o.status.success(), "HTA failed: {}", String::from_utf8_lossy(&o.stderr));
    }
    assert_usage_error(&format!("trace-summary {}", dir.path().join("missing").display()), "cannot read the directory");
    let empty = tempfile::tempdir().unwrap();
    assert_usage_error(&format!("trace-summary {}", empty.path().display()), "no .json trace");
}

#[test]
fn bad_profile_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("old.json"), "{}").unwrap();
    let d = dir.path().display();
    let s = format!("run --cpu {TINY} --batch-size 4 --steps 3");
    assert_usage_error(&format!("{s} --profile {d}"), "not empty");
    assert_usage_error(&format!("{s} --profile {d}/new --profile-steps 0"), "--profile-steps must be at least 1");
    assert_usage_error(&format!("{s} --profile {d}/new --profile-steps 4"), "more than the 3 timed steps");
    assert_usage_error(&format!("{s} --profile {d}/new --impl pytorch"), "torch.profiler");
    // --force writes into it, and the old file stays.
    let o = gpubench(&format!("{s} --warmup 0 --profile {d} --force -q")).run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(dir.path().join("rank0.pt.trace.json").is_file() && dir.path().join("old.json").is_file());
}

#[test]
fn nvtx_ranges_where_the_build_has_nvtx_and_a_clear_refusal_where_not() {
    let o = gpubench(&format!("run --cpu {TINY} --batch-size 4 --steps 2 --warmup 0 --nvtx -q")).run();
    if o.code == 2 {
        assert!(o.stderr.contains("--nvtx needs a CUDA build"), "{}", o.stderr);
    } else {
        assert_eq!(o.code, 0, "{}", o.stderr);
    }
    assert_usage_error(&format!("run --cpu {TINY} --nvtx --impl pytorch"), "torch.cuda.nvtx");
}

/// A file in the trace directory that is not a Chrome trace is bad input:
/// exit 2 and one line naming it, not a run-time failure.
#[test]
fn a_trace_that_is_not_json_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("rank0.json");
    std::fs::write(&trace, "not json").unwrap();
    assert_usage_error(&format!("trace-summary {}", dir.path().display()), "is not JSON");
    std::fs::write(&trace, "{}").unwrap();
    assert_usage_error(&format!("trace-summary {}", dir.path().display()), "no traceEvents");
}
