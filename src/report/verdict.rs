//! Why a multi-device configuration falls short of ideal scaling, in parts
//! that were each measured, not fitted. The ideal is N times the 1-device
//! run of the same configuration; the shortfall in points of ideal is split
//! along the multi-device run's step (`step_ms_p50`, against the 1-device
//! run's), each part as its milliseconds over that step:
//!
//! - exposed all-reduce: ddp's backward communication not hidden behind
//!   compute (the Reducer's communication time minus its overlap, and minus
//!   the wait for the slowest rank, which rank 0's collective includes);
//! - waiting for the slowest rank: its compute minus the other ranks'
//!   median (`rank_wait_ms`; wall step times are equal across ranks);
//! - data wait: the multi-device run's wait for input beyond the 1-device run's;
//! - compute: a typical rank's forward and backward against the 1-device
//!   step's compute (on a CPU the ranks split the cores, so this is "shared
//!   cores"; on GPUs, contention);
//! - unexplained: the rest, said as such. dp's master work (replicate,
//!   scatter, gather) is not timed apart from its forward, so a dp verdict
//!   leaves it there and says so.
use crate::report::export::{Cell, Column, Table};
use crate::report::summary::{baseline_of, column_median, Group, Run};
use crate::results::csv::Row;

/// One configuration's verdict.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    pub config: String,
    /// Throughput over N × the 1-device throughput, %.
    pub efficiency_pct: f64,
    /// (part, points of ideal), `unexplained` last.
    pub parts: Vec<(&'static str, f64)>,
    pub sentence: String,
}

pub(crate) const PARTS: [&str; 5] = ["exposed_allreduce", "waiting_for_rank", "data_wait", "compute", "unexplained"];

/// Points rounded for a sentence, with no "-0".
fn pts_text(x: f64) -> String {
    let r = x.round();
    format!("{:.0}", if r == 0.0 { 0.0 } else { r })
}

fn words(part: &str, slowest: Option<u32>, cpu: bool) -> String {
    match part {
        "exposed_allreduce" => "exposed all-reduce".into(),
        "waiting_for_rank" => format!("waiting for rank {}", slowest.map_or("?".into(), |r| r.to_string())),
        "data_wait" => "data wait".into(),
        "compute" if cpu => "shared cores".into(),
        "compute" => "slower compute per device".into(),
        _ => "unexplained".into(),
    }
}

/// A verdict for every multi-device group that has a 1-device baseline and step times.
pub(crate) fn verdicts(runs: &[Run], groups: &[Group]) -> Vec<Verdict> {
    let mut v = vec![];
    for (i, g) in groups.iter().enumerate() {
        if g.key.n_devices < 2 || g.pooled.is_empty() {
            continue;
        }
        let (Some(b), Some(e)) = (baseline_of(groups, i), g.efficiency) else { continue };
        let base = &groups[b];
        let med = |idx: &[usize], f: fn(&Row) -> Option<f64>| column_median(runs, idx, f);
        let (Some(tn), Some(t1)) = (med(&g.pooled, |r| r.step_ms_p50), med(&base.pooled, |r| r.step_ms_p50)) else {
            continue;
        };
        if tn <= 0.0 {
            continue;
        }
        let pts = |ms: f64| 100.0 * ms.max(0.0) / tn;
        let row = &runs[g.pooled[0]].row;
        let cpu = row.device_kind == "cpu";
        let dw_n = med(&g.pooled, |r| r.data_wait_ms).unwrap_or(0.0);
        let dw_1 = med(&base.pooled, |r| r.data_wait_ms).unwrap_or(0.0);
        // Rank 0's all-reduce time includes its wait for the slowest rank to
        // arrive: that part is the straggler's, not the network's.
        let comm = med(&g.pooled, |r| {
            let wait = if r.slowest_rank == Some(0) { 0.0 } else { r.rank_wait_ms.unwrap_or(0.0) };
            Some(r.ddp_backward_comm_ms? - r.ddp_overlap_ms.unwrap_or(0.0) - wait)
        });
        let wait = med(&g.pooled, |r| r.rank_wait_ms);
        // Rank 0's compute, less the wait when rank 0 is the slowest: a typical rank's.
        let compute = med(&g.pooled, |r| {
            let c = r.ddp_forward_compute_ms? + r.ddp_backward_compute_ms?;
            Some(if r.slowest_rank == Some(0) { c - r.rank_wait_ms.unwrap_or(0.0) } else { c })
        });
        let loss = 100.0 * (1.0 - e);
        let mut parts: Vec<(&'static str, f64)> = vec![];
        if let Some(c) = comm {
            parts.push(("exposed_allreduce", pts(c)));
        }
        if let Some(w) = wait {
            parts.push(("waiting_for_rank", pts(w)));
        }
        parts.push(("data_wait", pts(dw_n - dw_1)));
        if let Some(c) = compute {
            parts.push(("compute", pts(c - (t1 - dw_1))));
        }
        let explained: f64 = parts.iter().map(|p| p.1).sum();
        parts.push(("unexplained", loss - explained));
        let mut named: Vec<&(&str, f64)> = parts.iter().filter(|p| p.0 != "unexplained").collect();
        named.sort_by(|a, b| b.1.total_cmp(&a.1));
        let mut said: Vec<String> =
            named.iter().map(|(p, x)| format!("{} % {}", pts_text(*x), words(p, row.slowest_rank, cpu))).collect();
        said.push(format!("{} % unexplained", pts_text(loss - explained)));
        if g.key.strategy == "dp" {
            said.push(
                "dp's master work (replicate, scatter, gather) is not timed apart and sits in unexplained".into(),
            );
        }
        let n = g.key.n_devices;
        let config = format!(
            "{} ×{n} {} {}px {} b{}",
            g.key.strategy,
            g.key.model,
            g.key.image_size.map_or("?".into(), |s| s.to_string()),
            g.key.precision,
            g.key.batch_per_device.map_or("?".into(), |b| b.to_string())
        );
        let sentence = format!(
            "{} on {n} devices reaches {:.2}x of {} ({:.0} %): {}",
            g.key.strategy,
            e * n as f64,
            base.key.strategy,
            100.0 * e,
            said.join(", ")
        );
        v.push(Verdict { config, efficiency_pct: 100.0 * e, parts, sentence });
    }
    v
}

/// The verdicts as a table (each part a column of points of ideal), the sentences as its notes.
pub(crate) fn table(verdicts: &[Verdict]) -> Table {
    let mut columns = vec![Column::text("config", "configuration"), Column::num("efficiency_pct", "efficiency")];
    for p in PARTS {
        columns.push(Column::num(&format!("{p}_pct"), &p.replace('_', " ")));
    }
    let rows = verdicts
        .iter()
        .map(|v| {
            let mut r = vec![Cell::text(&v.config), Cell::num(v.efficiency_pct, format!("{:.1}%", v.efficiency_pct))];
            for p in PARTS {
                r.push(match v.parts.iter().find(|x| x.0 == p) {
                    Some((_, x)) => Cell::num(*x, format!("{x:.1}")),
                    None => Cell::none(),
                });
            }
            r
        })
        .collect();
    Table {
        title: "why: the shortfall from ideal scaling, in points of ideal".into(),
        columns,
        rows,
        notes: verdicts.iter().map(|v| v.sentence.clone()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::summary::tests::{row, runs_of};
    use crate::report::summary::{summarize, Scope};
    use crate::results::long::DeviceData;

    #[test]
    fn the_shortfall_splits_into_measured_parts_and_the_rest() {
        let mut single = row("single", 1, 100.0);
        single.step_ms_p50 = Some(100.0);
        single.data_wait_ms = Some(0.0);
        single.device_kind = "cpu".into();
        // ddp on 2: 160 img/s, 80 % of ideal; its step 125 ms.
        let mut ddp = row("ddp", 2, 160.0);
        ddp.device_kind = "cpu".into();
        ddp.step_ms_p50 = Some(125.0);
        ddp.data_wait_ms = Some(2.5);
        ddp.ddp_backward_comm_ms = Some(20.0);
        ddp.ddp_overlap_ms = Some(5.0);
        ddp.ddp_forward_compute_ms = Some(35.0);
        ddp.ddp_backward_compute_ms = Some(70.0);
        ddp.slowest_rank = Some(1);
        ddp.rank_wait_ms = Some(2.5);
        let runs = runs_of(vec![single, ddp]);
        let all: Vec<usize> = (0..runs.len()).collect();
        let groups = summarize(&runs, &all, Scope::of, &DeviceData::default());
        let v = verdicts(&runs, &groups);
        assert_eq!(v.len(), 1);
        let part = |p: &str| v[0].parts.iter().find(|x| x.0 == p).unwrap().1;
        assert!((v[0].efficiency_pct - 80.0).abs() < 1e-9);
        assert!((part("exposed_allreduce") - 10.0).abs() < 1e-9); // 20 - 5 overlapped - 2.5 waiting, of 125 ms
        assert!((part("waiting_for_rank") - 2.0).abs() < 1e-9);
        assert!((part("data_wait") - 2.0).abs() < 1e-9);
        assert!((part("compute") - 4.0).abs() < 1e-9); // 105 against 100 ms
        assert!((part("unexplained") - 2.0).abs() < 1e-9);
        assert_eq!(
            v[0].sentence,
            "ddp on 2 devices reaches 1.60x of single (80 %): 10 % exposed all-reduce, 4 % shared cores, \
             2 % waiting for rank 1, 2 % data wait, 2 % unexplained"
        );
        let t = table(&v);
        assert_eq!(t.columns.len(), 2 + PARTS.len());
        assert_eq!(t.rows[0][2].display(), "10.0");
    }
}
