//! Repeats of one configuration reduced to medians, with their intervals
//! (`Group`, `Spread`), and the 1-device group each scales from.
use std::collections::BTreeMap;

use crate::metrics::interval::Interval;
use crate::metrics::stats;
use crate::results::long::DeviceData;
use crate::results::packed::Packed;
use crate::results::Fields;

use super::cells::Spread;
use super::runs::*;

/// Repeated runs of one config in one scope, reduced to medians.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    pub scope: Scope,
    pub key: ConfigKey,
    /// Indices into the runs, status ok.
    pub ok: Vec<usize>,
    /// Indices into the runs, other statuses.
    pub excluded: Vec<usize>,
    pub throughput: Option<f64>,
    pub per_device: Option<f64>,
    /// throughput / (n_devices × 1-device throughput); None without a
    /// 1-device group in the same scope and workload.
    pub efficiency: Option<f64>,
    /// Median of the 1-device group's throughput that `efficiency` used.
    pub base_throughput: Option<f64>,
    pub step_p50: Option<f64>,
    pub step_p90: Option<f64>,
    pub imbalance: Option<f64>,
    pub throughput_ci: Option<Spread>,
    /// None for the baseline itself, whose efficiency is 1 by definition.
    pub efficiency_ci: Option<Spread>,
    /// Indices of ok runs whose row names interference.
    pub disturbed: Vec<usize>,
    /// The ok runs its figures pool: the undisturbed ones, or every ok run
    /// when all were disturbed (the notes say which).
    pub pooled: Vec<usize>,
    /// The 1-device group this one scales from (`baseline_of`), found once
    /// for all groups: a search per group was quadratic in the groups, and
    /// a year of nightly rows holds tens of thousands.
    pub baseline: Option<usize>,
}

/// With repeats, their spread: from the lowest to the highest of the
/// repeats' own 95 % intervals (each repeat's throughput where a row has
/// none), so run-to-run drift is inside it. With one run, that run's interval.
///
/// Not Student's t over the repeats: with the two or three repeats a sweep
/// can afford, t's quantile (12.7 for two) makes the interval wider than the
/// figure itself, and a reader learns nothing. The spread is what hyperfine
/// shows as a range, widened by each run's own noise.
fn throughput_spread(runs: &[Run], ok: &[usize]) -> Option<Spread> {
    let rows: Vec<&Packed> = ok.iter().map(|&i| &runs[i].row).filter(|r| r.throughput_img_s().is_some()).collect();
    match rows.as_slice() {
        [] => None,
        [one] => Some(Spread {
            ci: Interval { lo: one.throughput_ci95_lo()?, hi: one.throughput_ci95_hi()? },
            within_run: true,
        }),
        many => {
            let lo =
                many.iter().map(|r| r.throughput_ci95_lo().or(r.throughput_img_s()).unwrap()).fold(f64::MAX, f64::min);
            let hi =
                many.iter().map(|r| r.throughput_ci95_hi().or(r.throughput_img_s()).unwrap()).fold(f64::MIN, f64::max);
            Some(Spread { ci: Interval { lo, hi }, within_run: false })
        }
    }
}

/// efficiency = T / (n·B): relative half-widths of T and B add in quadrature.
fn efficiency_spread(eff: f64, t: f64, t_ci: &Spread, b: f64, b_ci: &Spread) -> Spread {
    let rel = ((t_ci.half_width() / t).powi(2) + (b_ci.half_width() / b).powi(2)).sqrt();
    Spread {
        ci: Interval { lo: eff * (1.0 - rel), hi: eff * (1.0 + rel) },
        within_run: t_ci.within_run || b_ci.within_run,
    }
}

pub(crate) fn median(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| stats::percentile(xs, 50.0))
}

/// The median of one column over some rows (`idx` into `runs`), the rows without it left out.
pub(crate) fn column_median(runs: &[Run], idx: &[usize], f: fn(&Packed) -> Option<f64>) -> Option<f64> {
    median(&idx.iter().filter_map(|&i| f(&runs[i].row)).collect::<Vec<_>>())
}

/// Peak-memory imbalance of one run: max/min across devices. From the row's
/// `mem_imbalance` column when the schema has it, else from the per-device file.
pub(crate) fn run_imbalance(run: &Run, devices: &DeviceData) -> Option<f64> {
    run.row.mem_imbalance().or_else(|| devices.mem_imbalance(run.row.run_id()))
}

/// Groups `members` (indices into `runs`) by scope and config, sorted.
/// All-reduce rows are curves over message size, and peak rows a device's
/// ceiling, not configurations: they never form a group (`report::comm` and
/// `report::peaks` have their tables).
pub(crate) fn summarize(
    runs: &[Run],
    members: &[usize],
    scope_of: impl Fn(&Packed) -> Scope,
    devices: &DeviceData,
) -> Vec<Group> {
    let mut by: BTreeMap<(Scope, ConfigKey), (Vec<usize>, Vec<usize>)> = BTreeMap::new();
    for &i in members.iter().filter(|&&i| !runs[i].row.is_allreduce() && !runs[i].row.is_peak()) {
        let r = &runs[i];
        let e = by.entry((scope_of(&r.row), ConfigKey::of(&r.row))).or_default();
        if r.is_ok() {
            e.0.push(i);
        } else {
            e.1.push(i);
        }
    }
    let mut groups: Vec<Group> = by
        .into_iter()
        .map(|((scope, key), (ok, excluded))| {
            // A run another process slowed is not this configuration's figure:
            // its neighbours' work would be pooled with it.
            let (disturbed, clean): (Vec<usize>, Vec<usize>) =
                ok.iter().partition(|&&i| !runs[i].row.interference().is_empty());
            let pooled = if clean.is_empty() { ok.clone() } else { clean };
            let vals = |f: &dyn Fn(&Run) -> Option<f64>| -> Option<f64> {
                median(&pooled.iter().filter_map(|&i| f(&runs[i])).collect::<Vec<_>>())
            };
            let throughput = vals(&|r| r.row.throughput_img_s());
            let throughput_ci = throughput_spread(runs, &pooled);
            let n = key.n_devices.max(1) as f64;
            let per_device = vals(&|r| r.row.throughput_per_device_img_s()).or(throughput.map(|t| t / n));
            Group {
                step_p50: vals(&|r| r.row.step_ms_p50()),
                step_p90: vals(&|r| r.row.step_ms_p90()),
                imbalance: vals(&|r| run_imbalance(r, devices)),
                scope,
                key,
                ok,
                excluded,
                throughput,
                per_device,
                efficiency: None,
                base_throughput: None,
                throughput_ci,
                efficiency_ci: None,
                disturbed,
                pooled,
                baseline: None,
            }
        })
        .collect();
    for (g, b) in std::iter::zip(0..groups.len(), find_baselines(&groups)) {
        groups[g].baseline = b;
    }
    for i in 0..groups.len() {
        let Some(bi) = baseline_of(&groups, i) else { continue };
        let (base, base_ci) = (groups[bi].throughput, groups[bi].throughput_ci);
        let g = &mut groups[i];
        if let (Some(t), Some(b)) = (g.throughput, base) {
            if b > 0.0 && t > 0.0 {
                let eff = t / (g.key.n_devices as f64 * b);
                g.efficiency = Some(eff);
                g.base_throughput = Some(b);
                if let (Some(tc), Some(bc), true) = (&g.throughput_ci, &base_ci, bi != i) {
                    g.efficiency_ci = Some(efficiency_spread(eff, t, tc, b, bc));
                }
            }
        }
    }
    groups
}

/// The 1-device group that group `i` scales from: same scope and workload,
/// one device, preferring strategy `single` (then dp, ddp, ...), with a
/// throughput.
pub(crate) fn baseline_of(groups: &[Group], i: usize) -> Option<usize> {
    groups[i].baseline
}

/// `baseline_of` for every group, in one pass over them.
fn find_baselines(groups: &[Group]) -> Vec<Option<usize>> {
    let rank = |b: &Group| (strategy_rank(&b.key.strategy), b.key.strategy.clone());
    let mut best: BTreeMap<(&Scope, WorkloadKey), usize> = BTreeMap::new();
    for (j, b) in groups.iter().enumerate().filter(|(_, b)| b.key.n_devices == 1 && b.throughput.is_some()) {
        // The first of equal rank stays, as a search in group order finds it.
        let slot = best.entry((&b.scope, b.key.workload())).or_insert(j);
        if rank(b) < rank(&groups[*slot]) {
            *slot = j;
        }
    }
    groups.iter().map(|g| best.get(&(&g.scope, g.key.workload())).copied()).collect()
}
