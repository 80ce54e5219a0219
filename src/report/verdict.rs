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
//! - compute: a typical rank's forward and backward (dp: the replicas'
//!   forward and the backward through them) against the 1-device step's
//!   compute (on a CPU the ranks split the cores, so this is "shared
//!   cores"; on GPUs, contention);
//! - dp's master work: replicate, scatter, gather with the loss, and the
//!   gradient sum (`dp_*_ms`, host-timed where that is exact: on the CPU, and
//!   on CUDA in a `--breakdown` run, which the verdict then names);
//! - unexplained: the rest, said as such.
//!
//! Where an all-reduce curve for the same world size and backend was given
//! (`gpubench allreduce --out FILE`, among the files read), the verdict also
//! states what the gradients' all-reduce alone should cost and how the
//! measured communication compares (`Expected`, computed by the caller,
//! which may run the scaling model). With energy on both sides, it sets
//! images per joule beside the 1-device run's.
use crate::report::export::{Cell, Column, Table};
use crate::report::summary::{baseline_of, column_median, Group, Run};
use crate::results::packed::Packed;
use crate::results::Fields;

/// One configuration's verdict.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    pub config: String,
    /// Throughput over N × the 1-device throughput, %.
    pub efficiency_pct: f64,
    /// (part, points of ideal), `unexplained` last.
    pub parts: Vec<(&'static str, f64)>,
    pub sentence: String,
    /// What the all-reduce alone should cost, and the measured communication (ms per step).
    pub allreduce: Option<(Expected, f64)>,
    /// Images per joule: this configuration's, and its 1-device run's.
    pub img_per_joule: Option<(f64, f64)>,
    /// On a CPU, where the compute part is the ranks' shared cores.
    pub cpu: bool,
    /// A ddp verdict that could have had an expected all-reduce cost but
    /// found no curve for its world size and backend.
    pub wants_curve: bool,
}

/// What an all-reduce curve says the step's gradient all-reduces cost.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Expected {
    /// Milliseconds per step, every bucket's all-reduce back to back.
    pub ms: f64,
    /// The curve: its file, sizes and world, for the sentence.
    pub from: String,
}

/// What the caller found for a multi-device row: the expected all-reduce
/// cost, or None when no curve fits it.
pub(crate) type ExpectFn<'a> = &'a dyn Fn(&Packed) -> Option<Expected>;

/// No all-reduce curve: for tests.
#[cfg(test)]
pub(crate) fn no_curve(_: &Packed) -> Option<Expected> {
    None
}

pub(crate) const PARTS: [&str; 6] =
    ["exposed_allreduce", "waiting_for_rank", "dp_master", "data_wait", "compute", "unexplained"];

/// The value that occurs most often (the smallest among ties), if any.
fn most_common(xs: impl Iterator<Item = u32>) -> Option<u32> {
    let mut counts = std::collections::BTreeMap::new();
    for x in xs {
        *counts.entry(x).or_insert(0usize) += 1;
    }
    counts.into_iter().max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0))).map(|(x, _)| x)
}

/// Rank 0's all-reduce time includes its wait for the slowest rank to
/// arrive (none when rank 0 is the slowest): that part is the straggler's.
fn straggling(r: &Packed) -> f64 {
    if r.slowest_rank() == Some(0) {
        0.0
    } else {
        r.rank_wait_ms().unwrap_or(0.0)
    }
}

/// Three significant figures, for figures whose scale varies (img/J).
fn sig3(x: f64) -> String {
    let digits = (2 - x.abs().max(1e-12).log10().floor() as i32).clamp(0, 6) as usize;
    format!("{x:.digits$}")
}

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
        "dp_master" => "dp's master work".into(),
        "compute" if cpu => "shared cores".into(),
        "compute" => "slower compute per device".into(),
        _ => "unexplained".into(),
    }
}

/// A verdict for every multi-device group that has a 1-device baseline and step times.
pub(crate) fn verdicts(runs: &[Run], groups: &[Group], expect: ExpectFn) -> Vec<Verdict> {
    let mut v = vec![];
    for (i, g) in groups.iter().enumerate() {
        if g.key.n_devices < 2 || g.pooled.is_empty() {
            continue;
        }
        let (Some(b), Some(e)) = (baseline_of(groups, i), g.efficiency) else { continue };
        let base = &groups[b];
        let med = |idx: &[usize], f: fn(&Packed) -> Option<f64>| column_median(runs, idx, f);
        let (Some(tn), Some(t1)) = (med(&g.pooled, |r| r.step_ms_p50()), med(&base.pooled, |r| r.step_ms_p50())) else {
            continue;
        };
        if tn <= 0.0 {
            continue;
        }
        let pts = |ms: f64| 100.0 * ms.max(0.0) / tn;
        let row = &runs[g.pooled[0]].row;
        let cpu = row.device_kind() == "cpu";
        // The straggler most repeats named (repeats of one machine agree).
        let slowest = most_common(g.pooled.iter().filter_map(|&i| runs[i].row.slowest_rank()));
        // Data wait where both runs measured it (rows of every schema since v1 do).
        let dw = med(&g.pooled, |r| r.data_wait_ms()).zip(med(&base.pooled, |r| r.data_wait_ms()));
        let dw_1 = dw.map_or(0.0, |d| d.1);
        // Less the wait for the straggler, which is not the network's.
        let comm =
            med(&g.pooled, |r| Some(r.ddp_backward_comm_ms()? - r.ddp_overlap_ms().unwrap_or(0.0) - straggling(r)));
        // All of it, hidden or not: what an all-reduce curve predicts.
        let comm_all = med(&g.pooled, |r| Some(r.ddp_backward_comm_ms()? - straggling(r)));
        let wait = med(&g.pooled, |r| r.rank_wait_ms());
        // Rank 0's compute, less the wait when rank 0 is the slowest: a typical rank's.
        // dp: its replicas' forward and the backward through them, host-timed.
        let compute = med(&g.pooled, |r| {
            let c = r.ddp_forward_compute_ms()? + r.ddp_backward_compute_ms()?;
            Some(if r.slowest_rank() == Some(0) { c - r.rank_wait_ms().unwrap_or(0.0) } else { c })
        })
        .or_else(|| med(&g.pooled, |r| r.dp_compute_ms()));
        let loss = 100.0 * (1.0 - e);
        let mut parts: Vec<(&'static str, f64)> = vec![];
        if let Some(c) = comm {
            parts.push(("exposed_allreduce", pts(c)));
        }
        if let Some(w) = wait {
            parts.push(("waiting_for_rank", pts(w)));
        }
        let master =
            med(&g.pooled, |r| Some(r.dp_replicate_ms()? + r.dp_scatter_ms()? + r.dp_gather_ms()? + r.dp_reduce_ms()?));
        if let Some(m) = master {
            parts.push(("dp_master", pts(m)));
        }
        if let Some((n, one)) = dw {
            parts.push(("data_wait", pts(n - one)));
        }
        // The compute statistics leave the optimizer step out: so does the
        // 1-device step where its row has it (--breakdown); otherwise the
        // optimizer's time sits in unexplained.
        let opt_1 = med(&base.pooled, |r| r.optimizer_ms()).unwrap_or(0.0);
        if let Some(c) = compute {
            parts.push(("compute", pts(c - (t1 - dw_1 - opt_1))));
        }
        // Rows that measured no part (older schemas, published figures) still
        // get their efficiency, all of the shortfall unexplained, said so.
        let none_measured = parts.is_empty();
        let explained: f64 = parts.iter().map(|p| p.1).sum();
        parts.push(("unexplained", loss - explained));
        let mut named: Vec<&(&str, f64)> = parts.iter().filter(|p| p.0 != "unexplained").collect();
        named.sort_by(|a, b| b.1.total_cmp(&a.1));
        // The buckets the exposed all-reduce moved, as the Reducer built them.
        let buckets = row.ddp_buckets().filter(|&n| n > 0).map(|n| {
            let s = if n == 1 { "" } else { "s" };
            match row.mem_buckets_mb() {
                Some(mb) => format!(" ({n} bucket{s} of {:.1} MiB on average)", mb / n as f64),
                None => format!(" ({n} bucket{s})"),
            }
        });
        let mut said: Vec<String> = named
            .iter()
            .map(|(p, x)| {
                let extra = if *p == "exposed_allreduce" { buckets.clone().unwrap_or_default() } else { String::new() };
                format!("{} % {}{extra}", pts_text(*x), words(p, slowest, cpu))
            })
            .collect();
        said.push(format!("{} % unexplained", pts_text(loss - explained)));
        if none_measured {
            said.push("as these rows measured none of the parts".into());
        }
        if g.key.strategy == "dp" && master.is_none() && !none_measured {
            said.push(
                "dp's master work (replicate, scatter, gather, gradient sum) was not timed and sits in unexplained \
                 (on CUDA it is timed with --breakdown)"
                    .into(),
            );
        } else if master.is_some() && !cpu && row.forward_ms().is_some() {
            said.push("dp's master work from a --breakdown run, whose device syncs slow it a little".into());
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
        let mut sentence = format!(
            "{} on {n} devices reaches {:.2}x of {} ({:.0} %): {}",
            g.key.strategy,
            e * n as f64,
            base.key.strategy,
            100.0 * e,
            said.join(", ")
        );
        let expected = if comm_all.is_some() { expect(row) } else { None };
        let wants_curve = comm_all.is_some() && expected.is_none();
        let allreduce = expected.zip(comm_all);
        if let Some((x, m)) = &allreduce {
            sentence.push_str(&format!(
                "; the all-reduce alone should take {:.1} ms a step by {} (measured {:.1} ms without the wait \
                 for the slowest rank, {:.2}x of it; exposed {:.1} ms)",
                x.ms,
                x.from,
                m,
                m / x.ms.max(f64::MIN_POSITIVE),
                comm.unwrap_or(0.0).max(0.0)
            ));
        }
        let img_per_joule = med(&g.pooled, |r| r.img_per_joule()).zip(med(&base.pooled, |r| r.img_per_joule()));
        if let Some((a, b)) = img_per_joule {
            sentence.push_str(&format!(
                "; energy: {} img/J against {} for {} ({:.2}x)",
                sig3(a),
                sig3(b),
                base.key.strategy,
                a / b
            ));
        }
        v.push(Verdict {
            config,
            efficiency_pct: 100.0 * e,
            parts,
            sentence,
            allreduce,
            img_per_joule,
            cpu,
            wants_curve,
        });
    }
    v
}

/// The verdicts as a table (each part a column of points of ideal; in JSON
/// the row's `parts` object), the sentences as its notes.
pub(crate) fn table(verdicts: &[Verdict]) -> Table {
    let mut columns = vec![Column::text("config", "configuration"), Column::num("efficiency_pct", "efficiency")];
    for p in PARTS {
        columns.push(Column::num(&format!("{p}_pct"), &p.replace('_', " ")).in_json_object("parts", p));
    }
    columns.extend([
        Column::num("allreduce_expected_ms", "all-reduce expected ms"),
        Column::num("allreduce_measured_ms", "measured ms"),
        Column::num("img_per_joule", "img/J"),
        Column::num("baseline_img_per_joule", "1-device img/J"),
    ]);
    let num = |x: Option<f64>, text: fn(f64) -> String| x.map_or(Cell::none(), |x| Cell::num(x, text(x)));
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
            let ms = |x: f64| format!("{x:.1}");
            r.push(num(v.allreduce.as_ref().map(|a| a.0.ms), ms));
            r.push(num(v.allreduce.as_ref().map(|a| a.1), ms));
            r.push(num(v.img_per_joule.map(|e| e.0), sig3));
            r.push(num(v.img_per_joule.map(|e| e.1), sig3));
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

/// One bar of a verdict's waterfall: from ideal (100 % of N × the 1-device
/// run) down through each part to what was measured.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Step {
    pub name: String,
    /// Points of ideal before and after this step; a part's bar spans the
    /// two, ideal's and measured's start at 0.
    pub from: f64,
    pub to: f64,
    pub kind: StepKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepKind {
    Ideal,
    /// A part that lost throughput (or, when negative, gained it).
    Part,
    Measured,
}

/// The waterfall of `v`: ideal, each part in the order of `PARTS`, measured.
/// The steps add up: the last part ends where measured is.
pub(crate) fn steps(v: &Verdict) -> Vec<Step> {
    let mut out = vec![Step { name: "ideal".into(), from: 0.0, to: 100.0, kind: StepKind::Ideal }];
    let mut level = 100.0;
    for (p, x) in &v.parts {
        out.push(Step {
            name: words(p, None, v.cpu).replace(" ?", ""),
            from: level,
            to: level - x,
            kind: StepKind::Part,
        });
        level -= x;
    }
    out.push(Step { name: "measured".into(), from: 0.0, to: v.efficiency_pct, kind: StepKind::Measured });
    out
}

/// Bar width of the text waterfall, in characters, for 100 points.
const BAR: f64 = 40.0;

/// A text bar over [lo, hi] points of ideal: blanks up to lo, then `fill`.
fn bar(lo: f64, hi: f64, fill: char) -> String {
    let at = |x: f64| (x.clamp(0.0, 100.0) * BAR / 100.0).round() as usize;
    let (a, b) = (at(lo.min(hi)), at(lo.max(hi)));
    let mut s = " ".repeat(a);
    // A part of a tenth of a point or more gets a mark even when it rounds to no width.
    s.extend(std::iter::repeat_n(fill, (b - a).max(usize::from(hi - lo >= 0.1))));
    s
}

/// Every verdict's waterfall as one table (a row per step), so that each
/// format carries it: the terminal and Markdown draw it as text bars, CSV
/// and JSON give each step's points.
pub(crate) fn waterfall_table(verdicts: &[Verdict]) -> Table {
    let columns = vec![
        Column::text("config", "configuration"),
        Column::text("step", "step"),
        Column::num("from_pct", "from"),
        Column::num("to_pct", "to"),
        Column::text("bar", &format!("0 {} 100 % of ideal", "-".repeat(BAR as usize - 10))),
    ];
    let mut rows = vec![];
    for v in verdicts {
        for s in steps(v) {
            let fill = match s.kind {
                StepKind::Ideal | StepKind::Measured => '#',
                StepKind::Part if s.to > s.from => '+',
                StepKind::Part => '=',
            };
            rows.push(vec![
                Cell::text(&v.config),
                Cell::text(&s.name),
                Cell::num(s.from, format!("{:.1}", s.from)),
                Cell::num(s.to, format!("{:.1}", s.to)),
                Cell::text(bar(s.from, s.to, fill)),
            ]);
        }
    }
    Table {
        title: "why, as a waterfall: from ideal scaling down to what was measured".into(),
        columns,
        rows,
        notes: vec!["=: points of ideal a part lost; +: a part that gained (negative unexplained)".into()],
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
        (ddp.ddp_buckets, ddp.mem_buckets_mb) = (Some(2), Some(50.0));
        let runs = runs_of(vec![single, ddp]);
        let all: Vec<usize> = (0..runs.len()).collect();
        let groups = summarize(&runs, &all, Scope::of, &DeviceData::default());
        let v = verdicts(&runs, &groups, &no_curve);
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
            "ddp on 2 devices reaches 1.60x of single (80 %): 10 % exposed all-reduce (2 buckets of 25.0 MiB on \
             average), 4 % shared cores, \
             2 % waiting for rank 1, 2 % data wait, 2 % unexplained"
        );
        let t = table(&v);
        assert_eq!(t.columns.len(), 2 + PARTS.len() + 4);
        assert_eq!(t.rows[0][2].display(), "10.0");
        // The waterfall adds up: from 100 down through the parts to the 80 measured.
        let w = steps(&v[0]);
        assert_eq!((w[0].to, w.last().unwrap().to), (100.0, 80.0));
        let last_part = &w[w.len() - 2];
        assert!((last_part.to - 80.0).abs() < 1e-9, "{w:?}");
        assert_eq!(w[1].name, "exposed all-reduce");
        let wt = waterfall_table(&v);
        assert_eq!(wt.rows.len(), 2 + v[0].parts.len());
        assert_eq!(wt.rows[0][4].display(), "#".repeat(40));
        assert_eq!(wt.rows[1][4].display(), format!("{}{}", " ".repeat(36), "=".repeat(4)));
    }

    fn single_and(strategy: &str, f: impl Fn(&mut crate::results::csv::Row)) -> Vec<Run> {
        let mut single = row("single", 1, 100.0);
        (single.step_ms_p50, single.data_wait_ms) = (Some(100.0), Some(0.0));
        let mut multi = row(strategy, 2, 160.0);
        (multi.step_ms_p50, multi.data_wait_ms) = (Some(125.0), Some(0.0));
        f(&mut multi);
        runs_of(vec![single, multi])
    }

    fn verdict_of(runs: &[Run], expect: ExpectFn) -> Verdict {
        let all: Vec<usize> = (0..runs.len()).collect();
        let groups = summarize(runs, &all, Scope::of, &DeviceData::default());
        verdicts(runs, &groups, expect).remove(0)
    }

    #[test]
    fn dp_master_work_is_a_part_when_timed_and_said_missing_when_not() {
        let runs = single_and("dp", |r| {
            (r.dp_replicate_ms, r.dp_scatter_ms, r.dp_gather_ms, r.dp_reduce_ms) =
                (Some(5.0), Some(2.5), Some(2.5), Some(5.0));
            r.dp_compute_ms = Some(105.0);
        });
        let v = verdict_of(&runs, &no_curve);
        let part = v.parts.iter().find(|p| p.0 == "dp_master").unwrap().1;
        assert!((part - 12.0).abs() < 1e-9, "{v:?}"); // 15 of 125 ms
        assert!(v.sentence.contains("12 % dp's master work"), "{}", v.sentence);
        // Its replicas' compute against the 1-device step: 105 against 100 ms, of 125.
        let compute = v.parts.iter().find(|p| p.0 == "compute").unwrap().1;
        assert!((compute - 4.0).abs() < 1e-9, "{v:?}");
        let untimed = verdict_of(&single_and("dp", |_| {}), &no_curve);
        // Nothing measured at all: the shortfall is all unexplained, and said why.
        let bare = verdict_of(&single_and("ddp", |r| r.data_wait_ms = None), &no_curve);
        assert_eq!((bare.parts.len(), bare.parts[0].0), (1, "unexplained"));
        assert!((bare.parts[0].1 - 20.0).abs() < 1e-9, "{:?}", bare.parts);
        assert!(
            bare.sentence.ends_with("20 % unexplained, as these rows measured none of the parts"),
            "{}",
            bare.sentence
        );
        assert!(untimed.parts.iter().all(|p| p.0 != "dp_master"));
        assert!(untimed.sentence.contains("was not timed and sits in unexplained"), "{}", untimed.sentence);
    }

    #[test]
    fn compute_is_set_against_the_1_device_step_less_its_optimizer_when_known() {
        let mut runs = single_and("ddp", |r| {
            (r.ddp_forward_compute_ms, r.ddp_backward_compute_ms) = (Some(30.0), Some(65.0));
            r.ddp_backward_comm_ms = Some(5.0);
        });
        runs[0].edit(|r| r.optimizer_ms = Some(10.0));
        let v = verdict_of(&runs, &no_curve);
        let compute = v.parts.iter().find(|p| p.0 == "compute").unwrap().1;
        assert!((compute - 4.0).abs() < 1e-9, "95 ms against 100 - 10 ms, of 125: {v:?}");
        // It had communication to hold against a curve, and found none.
        assert!(v.wants_curve);
        assert_eq!(most_common([2, 1, 2, 1, 3].into_iter()), Some(1));
        assert_eq!(most_common([0, 3, 3].into_iter()), Some(3));
        assert_eq!(most_common(std::iter::empty()), None);
    }

    #[test]
    fn the_expected_all_reduce_and_the_energy_are_set_beside_the_measured() {
        let runs = single_and("ddp", |r| {
            r.ddp_backward_comm_ms = Some(20.0);
            r.ddp_overlap_ms = Some(15.0);
            r.img_per_joule = Some(0.5);
        });
        let mut runs = runs;
        runs[0].edit(|r| r.img_per_joule = Some(0.625));
        let expect = |r: &crate::results::packed::Packed| {
            (r.n_devices() == 2).then(|| Expected { ms: 10.0, from: "ar.csv (8 sizes of fp32, gloo ×2)".into() })
        };
        let v = verdict_of(&runs, &expect);
        assert_eq!(v.allreduce.as_ref().map(|a| (a.0.ms, a.1)), Some((10.0, 20.0)));
        assert!(
            v.sentence.contains(
                "the all-reduce alone should take 10.0 ms a step by ar.csv (8 sizes of fp32, gloo ×2) (measured \
                 20.0 ms without the wait for the slowest rank, 2.00x of it; exposed 5.0 ms)"
            ),
            "{}",
            v.sentence
        );
        assert!(v.sentence.ends_with("energy: 0.500 img/J against 0.625 for single (0.80x)"), "{}", v.sentence);
        let t = table(std::slice::from_ref(&v));
        let col = |k: &str| t.columns.iter().position(|c| c.key == k).unwrap();
        assert_eq!(t.rows[0][col("allreduce_expected_ms")].display(), "10.0");
        assert_eq!(t.rows[0][col("baseline_img_per_joule")].display(), "0.625");
    }
}
