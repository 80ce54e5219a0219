//! `report` for serving rows (`gpubench infer`): one table of configurations
//! and loads, each with its achieved rate and interval, latency from the
//! schedule, drops and batching. Repeats reduce to medians, as training's do.
use std::path::PathBuf;

use super::export::{Cell, Column, Table};
use super::format::{fmt_ms, fmt_pct, fmt_rate};
use super::summary::{
    cell_opt, cell_spread, column_median, disturbed_notes, excluded_notes, files_phrase, int_cell, ranking_notes,
    spread_bounds, status_counts, ConfigKey, Group, Run, INTERVAL_NOTE,
};
use crate::results::packed::Packed;
use crate::results::Fields;

fn drop_share(r: &Packed) -> Option<f64> {
    match (r.dropped(), r.requests()) {
        (Some(d), Some(n)) if n > 0 => Some(d as f64 / n as f64),
        _ => None,
    }
}

/// Whether the servers compared had the same intra-op threads per worker:
/// CPU-side work (`--preprocess cpu`, dynamic batching's host side) scales
/// with them, so rows with different counts do not compare like with like.
fn threads_note(runs: &[Run]) -> Option<String> {
    let mut seen: Vec<(String, u32)> = vec![];
    for r in runs.iter().filter(|r| r.is_ok()) {
        if let Some(t) = r.row.threads() {
            let who = (r.row.implementation().name().to_string(), t);
            if !seen.contains(&who) {
                seen.push(who);
            }
        }
    }
    let mut counts: Vec<u32> = seen.iter().map(|(_, t)| *t).collect();
    counts.sort_unstable();
    counts.dedup();
    match counts.as_slice() {
        [] => None,
        [t] => {
            Some(format!("threads: every server ran {t} intra-op thread{} per worker", if *t == 1 { "" } else { "s" }))
        }
        _ => {
            let list: Vec<String> = seen.iter().map(|(who, t)| format!("{who} {t}")).collect();
            Some(format!(
                "threads per worker differ between rows ({}): their CPU-side work is not compared like with like",
                list.join(", ")
            ))
        }
    }
}

pub(crate) fn serving_table(runs: &[Run], groups: &[Group], files: &[PathBuf]) -> Table {
    let any_label = groups.iter().any(|g| !g.scope.label.is_empty());
    let any_impl = groups.iter().any(|g| g.scope.implementation != crate::results::Implementation::Gpubench);
    let any_excluded = groups.iter().any(|g| !g.excluded.is_empty());
    let mut columns = vec![Column::text("hardware", "hardware")];
    if any_label {
        columns.push(Column::text("label", "label"));
    }
    if any_impl {
        columns.push(Column::text("impl", "impl"));
    }
    let any_variant = ConfigKey::any_variant(groups.iter().map(|g| &g.key));
    let mut key_cols = ConfigKey::columns(true, any_variant);
    // For serving, the batch column is dynamic batching's largest batch.
    if let Some(c) = key_cols.iter_mut().find(|c| c.key == "batch_per_device") {
        *c = Column::num("max_batch", "max batch");
    }
    columns.extend(key_cols);
    columns.push(Column::num("runs", "runs"));
    if any_excluded {
        columns.push(Column::text("excluded", "excluded"));
    }
    columns.extend([
        Column::num("offered_rate", "offered/s"),
        Column::num("achieved_rate", "answered/s"),
        Column::num("latency_ms_p50", "p50 ms"),
        Column::num("latency_ms_p99", "p99 ms"),
        Column::num("latency_bound_ms", "bound ms"),
        Column::num("dropped_share", "dropped"),
        Column::num("batch_mean", "batch mean"),
        Column::raw("achieved_ci95_lo"),
        Column::raw("achieved_ci95_hi"),
    ]);
    let rows = groups
        .iter()
        .map(|g| {
            let m = |f: fn(&Packed) -> Option<f64>| column_median(runs, &g.pooled, f);
            let mut row = vec![Cell::text(&g.scope.hardware)];
            if any_label {
                row.push(Cell::text(&g.scope.label));
            }
            if any_impl {
                row.push(Cell::text(g.scope.implementation.name()));
            }
            row.extend(g.key.cells(true, any_variant));
            row.push(int_cell(Some(g.ok.len() as u32)));
            if any_excluded {
                row.push(Cell::text(status_counts(runs, &g.excluded)));
            }
            row.extend([
                cell_opt(m(|r| r.offered_rate()), fmt_rate),
                cell_spread(g.throughput, g.throughput_ci, fmt_rate),
                cell_opt(m(|r| r.latency_ms_p50()), fmt_ms),
                cell_opt(m(|r| r.latency_ms_p99()), fmt_ms),
                cell_opt(m(|r| r.latency_bound_ms()), fmt_ms),
                cell_opt(m(drop_share), fmt_pct),
                cell_opt(m(|r| r.batch_mean()), |v| format!("{v:.1}")),
            ]);
            row.extend(spread_bounds(g.throughput_ci));
            row
        })
        .collect();
    let n_ok: usize = groups.iter().map(|g| g.ok.len()).sum();
    let mut notes = vec![
        "serving: answered/s = requests answered inside the load's window per second; latency runs from each \
         request's scheduled arrival to its result on the host (queueing included)"
            .to_string(),
        INTERVAL_NOTE.to_string(),
    ];
    notes.extend(threads_note(runs));
    notes.extend(ranking_notes(groups));
    notes.extend(excluded_notes(runs, groups.iter().flat_map(|g| g.excluded.iter().copied())));
    notes.extend(disturbed_notes(runs, groups.iter()));
    Table {
        title: format!(
            "gpubench serving report: {n_ok} ok run{} from {}",
            if n_ok == 1 { "" } else { "s" },
            files_phrase(files)
        ),
        columns,
        rows,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::summary::summarize;
    use crate::report::summary::tests::{row, runs_of};
    use crate::report::summary::Scope;
    use crate::results::csv::Row;
    use crate::results::long::DeviceData;

    fn infer(strategy: &str, n: u32, streams: u32, answered: f64, p99: f64) -> Row {
        Row {
            mode: crate::results::Mode::Infer,
            scenario: "streams".into(),
            streams: Some(streams),
            fps: Some(5.0),
            offered_rate: Some(streams as f64 * 5.0),
            achieved_rate: Some(answered),
            latency_ms_p99: Some(p99),
            requests: Some(100),
            dropped: Some(2),
            ..row(strategy, n, answered)
        }
    }

    #[test]
    fn the_threads_per_worker_of_the_servers_compared_are_named() {
        let with = |imp, t| Row { implementation: imp, threads: Some(t), ..infer("replicas", 1, 100, 500.0, 40.0) };
        use crate::results::Implementation::{Gpubench, Pytorch};
        let same = runs_of(vec![with(Gpubench, 16), with(Pytorch, 16)]);
        assert_eq!(threads_note(&same).unwrap(), "threads: every server ran 16 intra-op threads per worker");
        let differ = threads_note(&runs_of(vec![with(Gpubench, 16), with(Pytorch, 1)])).unwrap();
        assert!(
            differ.contains("gpubench 16, pytorch 1") && differ.contains("not compared like with like"),
            "{differ}"
        );
    }

    #[test]
    fn serving_rows_group_by_load_and_never_pool_with_training() {
        let runs = runs_of(vec![
            row("single", 1, 100.0),
            infer("replicas", 1, 100, 500.0, 40.0),
            infer("replicas", 1, 20, 100.0, 10.0),
            infer("replicas", 1, 20, 100.0, 12.0),
        ]);
        let all: Vec<usize> = (0..runs.len()).collect();
        let groups = summarize(&runs, &all, Scope::of, &DeviceData::default());
        let (serving, training): (Vec<Group>, Vec<Group>) = groups.into_iter().partition(|g| g.key.is_infer());
        assert_eq!(training.len(), 1);
        // Loads in numeric order; the two runs at 20 streams are repeats.
        let loads: Vec<(&str, usize)> = serving.iter().map(|g| (g.key.load.as_str(), g.ok.len())).collect();
        assert_eq!(loads, vec![("streams 20×5fps", 2), ("streams 100×5fps", 1)]);
        // A serving group is no baseline for training's scaling, nor the reverse.
        assert_eq!(training[0].efficiency, Some(1.0));
        let t = serving_table(&runs, &serving, &["r.csv".into()]);
        let col = |k: &str| t.columns.iter().position(|c| c.key == k).unwrap();
        assert_eq!(t.rows[0][col("load")].display(), "streams 20×5fps");
        assert_eq!(t.rows[0][col("latency_ms_p99")].display(), "11.0");
        assert_eq!(t.rows[1][col("dropped_share")].display(), "2.0%");
    }
}
