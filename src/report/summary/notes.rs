//! The notes under a table: what `±` and scaling mean, rankings, and the
//! rows excluded or disturbed.
use std::collections::BTreeMap;

use crate::report::format::fmt_rate;
use crate::results::Fields;

use super::{group::*, runs::*};

pub(crate) const INTERVAL_NOTE: &str =
    "± = half-width of the spread: with repeats, from the lowest to the highest of their \
                                 own 95 % intervals; * = one run's own 95 % interval (batch means over its steps), \
                                 which does not cover run-to-run drift: repeat runs (--repeat) for that";

/// Per machine, workload and device count with two or more strategies: the
/// strategies fastest first, `>` between two whose throughput intervals are
/// apart and `≈` where they overlap (noise cannot rank them). Groups without
/// an interval (rows from before intervals) are left out of the ranking.
pub(crate) fn ranking_notes(groups: &[Group]) -> Vec<String> {
    let mut by: BTreeMap<(Scope, WorkloadKey, u32), Vec<&Group>> = BTreeMap::new();
    for g in groups.iter().filter(|g| g.throughput.is_some() && g.throughput_ci.is_some()) {
        by.entry((g.scope.clone(), g.key.workload(), g.key.n_devices)).or_default().push(g);
    }
    by.into_iter()
        .filter(|(_, gs)| gs.len() >= 2)
        .map(|((scope, (model, img, prec, batch, load, setup), n), mut gs)| {
            gs.sort_by(|a, b| b.throughput.unwrap().total_cmp(&a.throughput.unwrap()));
            let mut line = String::new();
            for (i, g) in gs.iter().enumerate() {
                if i > 0 {
                    let same = gs[i - 1].throughput_ci.unwrap().overlaps(&g.throughput_ci.unwrap());
                    line.push_str(if same { " ≈ " } else { " > " });
                }
                line.push_str(&format!("{} {}", g.key.strategy, fmt_rate(g.throughput.unwrap())));
                if !g.key.comm.is_empty() {
                    line.push_str(&format!(" ({})", g.key.comm));
                }
            }
            let load = [load, setup].iter().filter(|s| !s.is_empty()).map(|s| format!(" {s}")).collect::<String>();
            format!(
                "fastest on {n} device{} ({} {model} {}px {prec} b{}{load}): {line}",
                if n == 1 { "" } else { "s" },
                scope.hardware,
                opt_or(img, "?"),
                opt_or(batch, "?")
            )
        })
        .collect()
}

/// One note per ok row that recorded interference, saying whether its
/// group's figures left it out.
pub(crate) fn disturbed_notes<'a>(runs: &[Run], groups: impl IntoIterator<Item = &'a Group>) -> Vec<String> {
    let mut notes = vec![];
    for g in groups {
        for &i in &g.disturbed {
            let r = &runs[i];
            let fate = match g.pooled.contains(&i) {
                false => "left out of the pooled figures",
                true => "kept in the figures: every run of this configuration was disturbed",
            };
            notes.push(format!(
                "disturbed {} ({}): {}; {fate}",
                r.place(),
                ConfigKey::of(&r.row).describe(),
                r.row.interference()
            ));
        }
    }
    notes
}

/// "2 oom, 1 failed" for a group's excluded runs.
pub(crate) fn status_counts(runs: &[Run], idx: &[usize]) -> String {
    let mut c: BTreeMap<&str, usize> = BTreeMap::new();
    for &i in idx {
        *c.entry(runs[i].row.status().name()).or_default() += 1;
    }
    c.iter().map(|(s, n)| format!("{n} {s}")).collect::<Vec<_>>().join(", ")
}

/// One note per excluded row, saying where it is and why it does not count.
pub(crate) fn excluded_notes(runs: &[Run], idx: impl IntoIterator<Item = usize>) -> Vec<String> {
    idx.into_iter()
        .map(|i| {
            let r = &runs[i];
            let err = r.row.error().lines().next().unwrap_or("").trim();
            let why = if err.is_empty() { String::new() } else { format!(": {err}") };
            format!("excluded {} ({}): status {}{why}", r.place(), ConfigKey::of(&r.row).describe(), r.row.status())
        })
        .collect()
}

pub(crate) const SCALING_NOTE: &str =
    "scaling = img/s / (devices x img/s of the 1-device run with the same hardware, model, \
                                image size, precision and batch/dev); '-' where there is no such run";

pub(crate) const PUBLISHED_NOTE: &str = "impl 'published' rows are other people's figures on other hardware, \
                                  cited in their `source` column; they were not measured here";
