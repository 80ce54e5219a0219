//! Figures as table cells: values, their `±` and the raw bounds.

use crate::report::export::Cell;
use crate::report::format::fmt_half_width;

use crate::metrics::interval::Interval;

/// A whole number as a table cell, empty when unknown.
pub(crate) fn int_cell(v: Option<u32>) -> Cell {
    v.map_or_else(Cell::none, |x| Cell::num(x as f64, x.to_string()))
}

pub(crate) fn cell_opt(v: Option<f64>, fmt: fn(f64) -> String) -> Cell {
    v.map_or_else(Cell::none, |x| Cell::num(x, fmt(x)))
}

/// "1234 ±25", with `*` when the interval is one run's own; the raw value
/// stays the estimate.
pub(crate) fn cell_spread(v: Option<f64>, s: Option<Spread>, fmt: fn(f64) -> String) -> Cell {
    match (v, s) {
        (Some(x), Some(s)) if s.half_width().is_finite() => {
            let pm = fmt_half_width(fmt, x, s.half_width());
            Cell::num(x, format!("{} ±{pm}{}", fmt(x), if s.within_run { "*" } else { "" }))
        }
        _ => cell_opt(v, fmt),
    }
}

/// The interval's bounds as two raw-only cells (CSV and JSON).
pub(crate) fn spread_bounds(s: Option<Spread>) -> [Cell; 2] {
    match s {
        Some(s) => [Cell::num(s.ci.lo, ""), Cell::num(s.ci.hi, "")],
        None => [Cell::none(), Cell::none()],
    }
}

/// Which figures rest on one run's interval: "within-run", "repeats" or "".
pub(crate) fn spread_basis(s: Option<Spread>) -> Cell {
    Cell::text(match s {
        Some(s) if s.within_run => "within-run",
        Some(_) => "repeats",
        None => "",
    })
}

/// A group's 95 % interval for one figure, and what it rests on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Spread {
    pub ci: Interval,
    /// One run's own interval: run-to-run drift is not in it.
    pub within_run: bool,
}

impl Spread {
    pub(crate) fn half_width(&self) -> f64 {
        (self.ci.hi - self.ci.lo) / 2.0
    }

    /// Two figures whose intervals overlap cannot be ranked.
    pub(crate) fn overlaps(&self, other: &Spread) -> bool {
        self.ci.overlaps(&other.ci)
    }
}
