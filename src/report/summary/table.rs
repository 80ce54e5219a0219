//! The `report` table: one line per (hardware, label, impl, config).
use std::path::PathBuf;

use crate::report::export::{Cell, Column, Table};
use crate::report::format::{fmt_ms, fmt_pct, fmt_rate, fmt_ratio};
use crate::results::Implementation;

use super::{cells::*, group::*, notes::*, runs::*};

/// The `report` table: one line per (hardware, label, impl, config).
pub(crate) fn report_table(runs: &[Run], groups: &[Group], files: &[PathBuf]) -> Table {
    let any_label = groups.iter().any(|g| !g.scope.label.is_empty());
    let any_impl = groups.iter().any(|g| g.scope.implementation != Implementation::Gpubench);
    let any_excluded = groups.iter().any(|g| !g.excluded.is_empty());
    let any_disturbed = groups.iter().any(|g| !g.disturbed.is_empty());
    let any_spread = groups.iter().any(|g| g.throughput_ci.is_some());
    let any_variant = ConfigKey::any_variant(groups.iter().map(|g| &g.key));

    let mut columns = vec![Column::text("hardware", "hardware")];
    if any_label {
        columns.push(Column::text("label", "label"));
    }
    if any_impl {
        columns.push(Column::text("impl", "impl"));
    }
    columns.extend(ConfigKey::columns(false, any_variant));
    columns.push(Column::num("runs", "runs"));
    if any_excluded {
        columns.push(Column::text("excluded", "excluded"));
    }
    if any_disturbed {
        columns.push(Column::num("disturbed", "disturbed"));
    }
    columns.extend([
        Column::num("throughput_img_s", "img/s"),
        Column::num("throughput_per_device_img_s", "img/s/dev"),
        Column::num("scaling_efficiency", "scaling"),
        Column::num("step_ms_p50", "step p50 ms"),
        Column::num("step_ms_p90", "step p90 ms"),
        Column::num("mem_imbalance", "mem imbalance"),
        Column::raw("throughput_ci95_lo"),
        Column::raw("throughput_ci95_hi"),
        Column::raw("scaling_ci95_lo"),
        Column::raw("scaling_ci95_hi"),
        Column::raw("ci_basis"),
    ]);

    let rows = groups
        .iter()
        .map(|g| {
            let mut row = vec![Cell::text(&g.scope.hardware)];
            if any_label {
                row.push(Cell::text(&g.scope.label));
            }
            if any_impl {
                row.push(Cell::text(g.scope.implementation.name()));
            }
            row.extend(g.key.cells(false, any_variant));
            row.push(int_cell(Some(g.ok.len() as u32)));
            if any_excluded {
                row.push(Cell::text(status_counts(runs, &g.excluded)));
            }
            if any_disturbed {
                let d = g.disturbed.len();
                row.push(if d == 0 { Cell::none() } else { Cell::num(d as f64, format!("{d}/{}", g.ok.len())) });
            }
            row.extend([
                cell_spread(g.throughput, g.throughput_ci, fmt_rate),
                cell_opt(g.per_device, fmt_rate),
                cell_spread(g.efficiency, g.efficiency_ci, fmt_pct),
                cell_opt(g.step_p50, fmt_ms),
                cell_opt(g.step_p90, fmt_ms),
                cell_opt(g.imbalance, fmt_ratio),
            ]);
            row.extend(spread_bounds(g.throughput_ci));
            row.extend(spread_bounds(g.efficiency_ci));
            row.push(spread_basis(g.throughput_ci));
            row
        })
        .collect();

    let n_ok: usize = groups.iter().map(|g| g.ok.len()).sum();
    let mut notes = vec![
        "figures are medians over repeated runs of a config".to_string(),
        SCALING_NOTE.to_string(),
        "mem imbalance = max/min peak memory across a run's devices".to_string(),
    ];
    if any_spread {
        notes.push(INTERVAL_NOTE.to_string());
    }
    if any_impl && groups.iter().any(|g| g.scope.implementation == PUBLISHED) {
        notes.push(PUBLISHED_NOTE.to_string());
    }
    notes.extend(ranking_notes(groups));
    notes.extend(excluded_notes(runs, groups.iter().flat_map(|g| g.excluded.iter().copied())));
    notes.extend(disturbed_notes(runs, groups.iter()));
    Table {
        title: format!(
            "gpubench report: {n_ok} ok run{} from {}",
            if n_ok == 1 { "" } else { "s" },
            files_phrase(files)
        ),
        columns,
        rows,
        notes,
    }
}
