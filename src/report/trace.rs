//! `gpubench trace-summary DIR`: where each rank's traced steps went, from
//! the Chrome traces `run --profile` wrote. Over the span of the traced
//! steps (the `ProfilerStep#N` ranges gpubench opens, named as
//! torch.profiler names its steps, so that HTA and TensorBoard find them), per rank:
//! - **communication**: collectives (`gloo:*` on the CPU, NCCL kernels on
//!   GPUs);
//! - **compute**: GPU kernels other than NCCL's when the trace has kernels,
//!   else the CPU's aten ops other than c10d's dispatch;
//! - **data wait**: gpubench's `gpubench.data_wait` ranges;
//! - **idle**: the span covered by none of them;
//! - **overlap**: the share of communication time during which compute ran.
//!
//! Each is the length of a union of intervals, so nested ops and parallel
//! threads are not counted twice.
use anyhow::{anyhow, Context, Result};
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
}

/// The breakdown of one Chrome trace (`text`).
pub(crate) fn summarize_trace(text: &str, file: &Path) -> Result<RankSummary> {
    let t: serde_json::Value = serde_json::from_str(text).with_context(|| format!("{} is not JSON", file.display()))?;
    let events = t["traceEvents"]
        .as_array()
        .ok_or_else(|| anyhow!("{} has no traceEvents: not a Chrome trace", file.display()))?;
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
    let span = union(vec![(
        steps.iter().map(|s| s.0).fold(f64::INFINITY, f64::min),
        steps.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max),
    )]);
    let compute = intersect(&union(if kernels.is_empty() { cpu } else { kernels }), &span);
    let comm = intersect(&union(comm), &span);
    let wait = intersect(&union(wait), &span);
    let busy = union(compute.iter().chain(&comm).chain(&wait).copied().collect());
    let comm_len = length(&comm);
    let busy_ms = |v: &Vec<(f64, f64)>| length(&intersect(&union(v.clone()), &span)) / 1e3;
    let main_thread_ms = step_tid.and_then(|t| by_thread.get(&t)).map_or(0.0, busy_ms);
    let others: Vec<f64> = by_thread.iter().filter(|(t, _)| Some(**t) != step_tid).map(|(_, v)| busy_ms(v)).collect();
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
        "{:>4} {:>5} {:>9} {:>11} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9}\n",
        "rank", "steps", "span ms", "compute ms", "comm ms", "data ms", "idle ms", "overlap", "main ms", "others ms"
    );
    for r in rows {
        t += &format!(
            "{:>4} {:>5} {:>9.1} {:>11.1} {:>9.1} {:>9.1} {:>9.1} {:>8} {:>8.1} {:>9}\n",
            r.rank,
            r.steps,
            r.span_ms,
            r.compute_ms,
            r.comm_ms,
            r.data_wait_ms,
            r.idle_ms,
            r.overlap.map_or("-".into(), |o| format!("{:.0}%", (o * 100.0).max(0.0))),
            r.main_thread_ms,
            r.other_threads_ms.map_or("-".into(), |o| format!("{o:.1}"))
        );
    }
    t += "compute: kernels (GPU) or aten ops (CPU), c10d dispatch and collectives excluded; comm: gloo/NCCL \
          collectives; overlap: share of comm time with compute beside it; main / others: CPU ops on the \
          thread that ran the steps and, on average, on the other threads (dp: the master's and the replicas'; \
          the difference is the master's extra work)\n";
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
}
