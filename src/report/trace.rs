//! `gpubench trace-summary DIR`: where each rank's traced steps went, from
//! the Chrome traces `run --profile` wrote. Over the span of the traced
//! steps (the `ProfilerStep#N` ranges gpubench opens, named as
//! torch.profiler names its steps, so that HTA and TensorBoard find them), per rank:
//! - **communication**: collectives (`gloo:*` on the CPU, NCCL kernels on
//!   GPUs);
//! - **compute**: GPU kernels other than NCCL's on a CUDA run's trace, the
//!   CPU's aten ops other than c10d's dispatch on a CPU run's;
//! - **data wait**: gpubench's `gpubench.data_wait` ranges;
//! - **idle**: the span covered by none of them;
//! - **overlap**: the share of communication time during which compute ran.
//!
//! Each is the length of a union of intervals, so nested ops and parallel
//! threads are not counted twice.
//!
//! Kineto copies a user range onto the GPU stream whose kernels it launched
//! (`gpu_user_annotation`); only the CPU range counts, or steps and data
//! waits would be counted twice.
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};

use crate::error::usage;

/// Sorted, merged intervals (µs).
fn union(mut v: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = vec![];
    for (s, e) in v {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

fn length(v: &[(f64, f64)]) -> f64 {
    // + 0.0: an empty f64 sum is -0.0, which would print as "-0.0".
    v.iter().map(|(s, e)| e - s).sum::<f64>() + 0.0
}

/// The intersection of two merged interval lists.
fn intersect(a: &[(f64, f64)], b: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let (mut i, mut j, mut out) = (0, 0, vec![]);
    while i < a.len() && j < b.len() {
        let (s, e) = (a[i].0.max(b[j].0), a[i].1.min(b[j].1));
        if s < e {
            out.push((s, e));
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// One rank's breakdown, in ms over the traced steps.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RankSummary {
    pub rank: i64,
    pub file: PathBuf,
    pub steps: usize,
    pub span_ms: f64,
    pub compute_ms: f64,
    pub comm_ms: f64,
    pub data_wait_ms: f64,
    pub idle_ms: f64,
    /// Share of communication time with compute running beside it (None without communication).
    pub overlap: Option<f64>,
    /// CPU ops on the thread that ran the steps (dp: the master's), and on
    /// the other threads that ran ops, on average (dp: the replicas'), ms:
    /// their difference is the master's extra work.
    pub main_thread_ms: f64,
    pub other_threads_ms: Option<f64>,
    /// CPU ops on autograd's device threads, which run backward on CUDA (on
    /// the CPU it runs on the caller): kept out of `other_threads_ms`, which
    /// would otherwise compare the master with the backward pass.
    pub autograd_threads_ms: Option<f64>,
}

/// Categories only CUPTI's activities and callbacks produce: a trace written
/// before gpubench recorded its device is a CUDA run's if it holds any.
const CUDA_CATEGORIES: [&str; 6] =
    ["cuda_runtime", "cuda_driver", "kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"];

/// Whether trace `t` is a CUDA run's.
fn is_cuda(t: &serde_json::Value, events: &[serde_json::Value]) -> bool {
    match t["gpubench"]["device"].as_str() {
        Some(d) => d == "cuda",
        // Without CUPTI a CUDA run's trace has no CUDA categories, so older
        // traces are told by NCCL too.
        None => {
            t["distributedInfo"]["backend"] == "nccl"
                || events.iter().any(|e| e["cat"].as_str().is_some_and(|c| CUDA_CATEGORIES.contains(&c)))
        }
    }
}

/// The threads Kineto names after autograd's device threads
/// (`"thread 123 (pt_autograd_0)"`). A thread is named again when it renames
/// itself, so any of its names counts.
fn autograd_threads(events: &[serde_json::Value]) -> std::collections::HashSet<i64> {
    events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .filter(|e| e["args"]["name"].as_str().is_some_and(|n| n.contains("(pt_autograd_")))
        .filter_map(|e| e["tid"].as_i64())
        .collect()
}

/// The breakdown of one Chrome trace (`text`).
pub(crate) fn summarize_trace(text: &str, file: &Path) -> Result<RankSummary> {
    // A file that is not a trace is bad input (exit 2), like any other wrong file.
    let t: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        usage(format!("{} is not JSON ({e}): give the directory `run --profile DIR` wrote", file.display()))
    })?;
    let events = t["traceEvents"].as_array().ok_or_else(|| {
        usage(format!("{} has no traceEvents: not a Chrome trace of `run --profile`", file.display()))
    })?;
    let autograd = autograd_threads(events);
    let mut steps = vec![];
    let mut step_tid = None;
    let mut by_thread: std::collections::BTreeMap<i64, Vec<(f64, f64)>> = Default::default();
    let (mut comm, mut cpu, mut kernels, mut wait) = (vec![], vec![], vec![], vec![]);
    for e in events.iter().filter(|e| e["ph"] == "X") {
        let (Some(name), Some(ts), Some(dur)) = (e["name"].as_str(), e["ts"].as_f64(), e["dur"].as_f64()) else {
            continue;
        };
        let iv = (ts, ts + dur);
        let cat = e["cat"].as_str().unwrap_or("");
        if cat == "gpu_user_annotation" {
            continue;
        }
        let lower = name.to_ascii_lowercase();
        let tid = e["tid"].as_i64();
        if name.starts_with("ProfilerStep#") {
            steps.push(iv);
            step_tid = step_tid.or(tid);
        } else if name == "gpubench.data_wait" {
            wait.push(iv);
        } else if lower.starts_with("gloo:") || lower.contains("nccl") {
            comm.push(iv);
        } else if cat == "kernel" {
            kernels.push(iv);
        } else if cat == "cpu_op" && !name.starts_with("c10d::") {
            cpu.push(iv);
            if let Some(t) = tid {
                by_thread.entry(t).or_default().push(iv);
            }
        }
    }
    if steps.is_empty() {
        return Err(usage(format!(
            "{}: no ProfilerStep ranges; trace-summary reads traces written by gpubench run --profile",
            file.display()
        )));
    }
    let cuda = is_cuda(&t, events);
    if cuda && kernels.is_empty() {
        return Err(usage(format!(
            "{}: a CUDA run's trace holds no GPU kernel: CUPTI was unavailable (another CUPTI client such as \
             Nsight Systems/Compute or DCGM profiling held it, or the container denies it), so Kineto recorded \
             CPU ops only; rerun --profile without the other profiler",
            file.display()
        )));
    }
    let span = union(vec![(
        steps.iter().map(|s| s.0).fold(f64::INFINITY, f64::min),
        steps.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max),
    )]);
    let compute = intersect(&union(if cuda { kernels } else { cpu }), &span);
    let comm = intersect(&union(comm), &span);
    let wait = intersect(&union(wait), &span);
    let busy = union(compute.iter().chain(&comm).chain(&wait).copied().collect());
    let comm_len = length(&comm);
    let busy_ms = |v: &Vec<(f64, f64)>| length(&intersect(&union(v.clone()), &span)) / 1e3;
    let main_thread_ms = step_tid.and_then(|t| by_thread.get(&t)).map_or(0.0, busy_ms);
    let others: Vec<f64> = by_thread
        .iter()
        .filter(|(t, _)| Some(**t) != step_tid && !autograd.contains(*t))
        .map(|(_, v)| busy_ms(v))
        .collect();
    // One figure for all device threads: their union, as for the whole backward.
    let autograd_ops: Vec<(f64, f64)> =
        by_thread.iter().filter(|(t, _)| autograd.contains(*t)).flat_map(|(_, v)| v.iter().copied()).collect();
    Ok(RankSummary {
        rank: t["distributedInfo"]["rank"].as_i64().unwrap_or(0),
        file: file.to_path_buf(),
        steps: steps.len(),
        span_ms: length(&span) / 1e3,
        compute_ms: length(&compute) / 1e3,
        comm_ms: comm_len / 1e3,
        data_wait_ms: length(&wait) / 1e3,
        idle_ms: (length(&span) - length(&busy)) / 1e3,
        overlap: (comm_len > 0.0).then(|| (length(&intersect(&compute, &comm)) / comm_len).clamp(0.0, 1.0)),
        main_thread_ms,
        other_threads_ms: (!others.is_empty()).then(|| others.iter().sum::<f64>() / others.len() as f64),
        autograd_threads_ms: (!autograd_ops.is_empty()).then(|| busy_ms(&autograd_ops)),
    })
}

/// Every `*.json` trace in `dir`, by rank.
pub(crate) fn summarize_dir(dir: &Path) -> Result<Vec<RankSummary>> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| usage(format!("trace-summary {}: cannot read the directory ({e})", dir.display())))?;
    let mut files: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "json")).collect();
    files.sort();
    if files.is_empty() {
        return Err(usage(format!(
            "trace-summary {}: no .json trace in it; write some with gpubench run --profile {}",
            dir.display(),
            dir.display()
        )));
    }
    let mut out = vec![];
    for f in files {
        let text = std::fs::read_to_string(&f).with_context(|| format!("cannot read {}", f.display()))?;
        out.push(summarize_trace(&text, &f)?);
    }
    out.sort_by_key(|r| r.rank);
    Ok(out)
}

/// The per-rank table.
pub(crate) fn table(rows: &[RankSummary]) -> String {
    let mut t = format!(
        "{:>4} {:>5} {:>9} {:>11} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9} {:>11}\n",
        "rank",
        "steps",
        "span ms",
        "compute ms",
        "comm ms",
        "data ms",
        "idle ms",
        "overlap",
        "main ms",
        "others ms",
        "autograd ms"
    );
    for r in rows {
        t += &format!(
            "{:>4} {:>5} {:>9.1} {:>11.1} {:>9.1} {:>9.1} {:>9.1} {:>8} {:>8.1} {:>9} {:>11}\n",
            r.rank,
            r.steps,
            r.span_ms,
            r.compute_ms,
            r.comm_ms,
            r.data_wait_ms,
            r.idle_ms,
            r.overlap.map_or("-".into(), |o| format!("{:.0}%", (o * 100.0).max(0.0))),
            r.main_thread_ms,
            r.other_threads_ms.map_or("-".into(), |o| format!("{o:.1}")),
            r.autograd_threads_ms.map_or("-".into(), |o| format!("{o:.1}"))
        );
    }
    t += "compute: kernels (GPU) or aten ops (CPU), c10d dispatch and collectives excluded; comm: gloo/NCCL \
          collectives; overlap: share of comm time with compute beside it; main / others: CPU ops on the \
          thread that ran the steps and, on average, on the other threads that ran ops (dp: the master's and \
          the replicas'; the difference is the master's extra work); autograd: CPU ops on autograd's device \
          threads, which run backward on CUDA, kept out of others\n";
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(name: &str, cat: &str, ts: f64, dur: f64) -> serde_json::Value {
        serde_json::json!({"ph": "X", "name": name, "cat": cat, "ts": ts, "dur": dur, "tid": 1})
    }

    #[test]
    fn the_main_threads_extra_work_over_the_other_threads() {
        // dp-like: the master thread (the steps') runs ops 0-60, a replica thread 10-30.
        let mut replica = ev("aten::conv2d", "cpu_op", 10.0, 20.0);
        replica["tid"] = serde_json::json!(2);
        let t = serde_json::json!({"traceEvents": [
            ev("ProfilerStep#0", "user_annotation", 0.0, 100.0),
            ev("aten::copy_", "cpu_op", 0.0, 60.0),
            replica,
        ]});
        let r = summarize_trace(&t.to_string(), Path::new("t.json")).unwrap();
        assert!((r.main_thread_ms - 0.06).abs() < 1e-12 && (r.other_threads_ms.unwrap() - 0.02).abs() < 1e-12, "{r:?}");
        // Union over threads: compute is 0-60.
        assert!((r.compute_ms - 0.06).abs() < 1e-12);
    }

    #[test]
    fn a_known_trace_breaks_down_exactly() {
        // One 100 us step: data wait 0-10, ops 10-60 (one nested inside
        // another), all-reduce 50-80 (10 us beside compute), idle 80-100.
        let t = serde_json::json!({
            "distributedInfo": {"rank": 3},
            "traceEvents": [
                ev("ProfilerStep#0", "user_annotation", 0.0, 100.0),
                ev("gpubench.data_wait", "user_annotation", 0.0, 10.0),
                ev("aten::conv2d", "cpu_op", 10.0, 50.0),
                ev("aten::mkldnn_convolution", "cpu_op", 20.0, 20.0),
                ev("c10d::allreduce_", "cpu_op", 50.0, 1.0),
                ev("gloo:all_reduce", "user_annotation", 50.0, 30.0),
            ]
        });
        let r = summarize_trace(&t.to_string(), Path::new("t.json")).unwrap();
        assert_eq!((r.rank, r.steps), (3, 1));
        assert!((r.span_ms - 0.1).abs() < 1e-12);
        assert!((r.compute_ms - 0.05).abs() < 1e-12, "{r:?}");
        assert!((r.comm_ms - 0.03).abs() < 1e-12);
        assert!((r.data_wait_ms - 0.01).abs() < 1e-12);
        assert!((r.idle_ms - 0.02).abs() < 1e-12, "{r:?}");
        assert!((r.overlap.unwrap() - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn gpu_kernels_count_as_compute_when_the_trace_has_them() {
        let t = serde_json::json!({"traceEvents": [
            ev("ProfilerStep#0", "user_annotation", 0.0, 100.0),
            ev("aten::conv2d", "cpu_op", 0.0, 5.0),
            ev("volta_sgemm", "kernel", 10.0, 40.0),
            ev("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "kernel", 30.0, 40.0),
        ]});
        let r = summarize_trace(&t.to_string(), Path::new("t.json")).unwrap();
        assert!((r.compute_ms - 0.04).abs() < 1e-12 && (r.comm_ms - 0.04).abs() < 1e-12, "{r:?}");
        assert!((r.overlap.unwrap() - 0.5).abs() < 1e-12);
    }

    #[test]
    fn a_file_that_is_not_a_gpubench_trace_is_refused() {
        assert!(summarize_trace("{}", Path::new("x.json")).is_err());
        let e = summarize_trace(r#"{"traceEvents": []}"#, Path::new("x.json")).unwrap_err();
        assert!(e.to_string().contains("no ProfilerStep ranges"), "{e}");
    }

    fn on(mut e: serde_json::Value, tid: i64) -> serde_json::Value {
        e["tid"] = serde_json::json!(tid);
        e
    }

    fn thread_name(tid: i64, name: &str) -> serde_json::Value {
        serde_json::json!({"ph": "M", "name": "thread_name", "pid": 1, "tid": tid,
            "args": {"name": format!("thread {tid} ({name})")}})
    }

    #[test]
    fn autograds_device_threads_are_not_the_other_threads() {
        // single on CUDA: the steps' thread runs forward 0-30, autograd's
        // device thread (named twice, as on a rename) backward 40-80.
        let mut events = vec![
            thread_name(3, "python"),
            thread_name(3, "pt_autograd_0"),
            ev("ProfilerStep#0", "user_annotation", 0.0, 100.0),
            ev("aten::conv2d", "cpu_op", 0.0, 30.0),
            on(ev("aten::convolution_backward", "cpu_op", 40.0, 40.0), 3),
            on(ev("sm90_gemm", "kernel", 10.0, 60.0), 7),
        ];
        let t = serde_json::json!({"gpubench": {"device": "cuda"}, "traceEvents": events});
        let r = summarize_trace(&t.to_string(), Path::new("t.json")).unwrap();
        assert_eq!(r.other_threads_ms, None, "{r:?}");
        assert!((r.autograd_threads_ms.unwrap() - 0.04).abs() < 1e-12 && (r.main_thread_ms - 0.03).abs() < 1e-12);
        let json = serde_json::to_value(&r).unwrap();
        assert!((json["autograd_threads_ms"].as_f64().unwrap() - 0.04).abs() < 1e-12, "{json}");
        let table = table(&[r]);
        assert!(table.lines().next().unwrap().ends_with("others ms autograd ms"), "{table}");
        let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(row[row.len() - 2..], ["-", "0.0"], "{table}");

        // dp: a replica thread is still one of the others.
        events.push(on(ev("aten::conv2d", "cpu_op", 10.0, 20.0), 2));
        let t = serde_json::json!({"gpubench": {"device": "cuda"}, "traceEvents": events});
        let r = summarize_trace(&t.to_string(), Path::new("t.json")).unwrap();
        assert!((r.other_threads_ms.unwrap() - 0.02).abs() < 1e-12, "{r:?}");
        assert!((r.autograd_threads_ms.unwrap() - 0.04).abs() < 1e-12);
    }

    #[test]
    fn a_cpu_trace_has_no_autograd_column() {
        let t = serde_json::json!({"gpubench": {"device": "cpu"}, "traceEvents": [
            ev("ProfilerStep#0", "user_annotation", 0.0, 100.0),
            ev("aten::conv2d", "cpu_op", 0.0, 30.0),
        ]});
        let r = summarize_trace(&t.to_string(), Path::new("t.json")).unwrap();
        assert_eq!(r.autograd_threads_ms, None);
        assert!(serde_json::to_value(&r).unwrap()["autograd_threads_ms"].is_null());
        assert!((r.compute_ms - 0.03).abs() < 1e-12, "{r:?}");
    }

    #[test]
    fn gpu_copies_of_cpu_ranges_are_ignored() {
        // Kineto's stream copies come first, as they may in the file.
        let t = serde_json::json!({"gpubench": {"device": "cuda"}, "traceEvents": [
            on(ev("ProfilerStep#0", "gpu_user_annotation", 5.0, 90.0), 7),
            on(ev("gpubench.data_wait", "gpu_user_annotation", 20.0, 30.0), 7),
            ev("ProfilerStep#0", "user_annotation", 0.0, 100.0),
            ev("gpubench.data_wait", "user_annotation", 0.0, 10.0),
            ev("aten::conv2d", "cpu_op", 10.0, 20.0),
            on(ev("sm90_gemm", "kernel", 20.0, 30.0), 7),
        ]});
        let r = summarize_trace(&t.to_string(), Path::new("t.json")).unwrap();
        assert_eq!(r.steps, 1, "{r:?}");
        assert!((r.main_thread_ms - 0.02).abs() < 1e-12, "the steps' thread is the CPU's: {r:?}");
        assert!((r.data_wait_ms - 0.01).abs() < 1e-12, "{r:?}");
        assert!((r.span_ms - 0.1).abs() < 1e-12);
    }

    fn assert_cupti_error(t: serde_json::Value) {
        let e = summarize_trace(&t.to_string(), Path::new("d/rank0.json")).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("d/rank0.json: ") && msg.contains("CUPTI was unavailable"), "{msg}");
        assert!(!msg.contains('\n') && crate::error::exit_code(&e) == 2, "{msg}");
    }

    #[test]
    fn a_cuda_trace_without_kernels_is_an_error_naming_cupti() {
        let steps = [ev("ProfilerStep#0", "user_annotation", 0.0, 100.0), ev("aten::conv2d", "cpu_op", 0.0, 30.0)];
        assert_cupti_error(serde_json::json!({"gpubench": {"device": "cuda"}, "traceEvents": steps}));
        // Traces from before gpubench recorded its device: told by a CUDA
        // category, or by NCCL.
        let mut runtime = steps.to_vec();
        runtime.push(ev("cudaLaunchKernel", "cuda_runtime", 1.0, 2.0));
        assert_cupti_error(serde_json::json!({"traceEvents": runtime}));
        assert_cupti_error(serde_json::json!({"distributedInfo": {"backend": "nccl"}, "traceEvents": steps}));
        // The recorded device wins over the fall-back.
        let r = serde_json::json!({"gpubench": {"device": "cpu"}, "distributedInfo": {"backend": "nccl"},
            "traceEvents": steps});
        assert!(summarize_trace(&r.to_string(), Path::new("t.json")).is_ok());
    }
}
