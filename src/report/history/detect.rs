//! The detector's statistics, on plain numbers: where a series' level
//! changed (E-divisive's energy statistic places a split, a pooled Student
//! t-test judges it) and how fast it drifts (Theil–Sen).
//!
//! Deterministic by construction: no permutation test and no random
//! numbers, so the same series gives the same change points on every run
//! and every machine (Hunter's reason for replacing MongoDB's permutations
//! with a t-test).
//!
//! Why a *pooled* t-test: a change is usually judged soon after it began,
//! with three points on the new level and tens on the old. Welch's degrees
//! of freedom then collapse to about those three points' (2.6 for one
//! percent noise on both sides), whose two-sided p = 0.001 critical value is
//! above 10, so a clear -5 % step would wait many nights. The pooled form
//! assumes one noise level on both sides, which is what a configuration's
//! nightly noise is unless the change itself altered it.
//!
//! Two phases, as in Hunter and Otava: a split phase at a relaxed level
//! (10 × p) proposes change points, searching windows of `window` points so
//! that an old change cannot hide a new one; a merge phase at p then drops
//! the weakest proposal, re-tests its neighbours against their new segments,
//! and repeats until every change left is significant.
//!
//! One guard of our own: the medians must move with the means (the same
//! sign, at least half as far). A throttled night among the first points of
//! a new level moves the mean of three points by a third of its drop; it
//! does not move their median. Without the guard, one outlier two nights
//! from the end of a series reads as a step.
use statrs::distribution::{ContinuousCDF, Normal};

use crate::metrics::stats::{mean, std_dev};
use crate::report::significance::t_two_sided_p;

/// The detector's settings (`gpubench history --p --window --min-magnitude`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Params {
    /// Two-sided significance level of a kept change.
    pub p: f64,
    /// Points a split is searched within, and the most points either side
    /// of a change that its test pools.
    pub window: usize,
    /// Points each side of a split needs: the new level must have lasted
    /// this long before it is judged.
    pub min_size: usize,
    /// Smallest relative change of the mean that counts (0: any significant one).
    pub min_magnitude: f64,
}

impl Default for Params {
    fn default() -> Self {
        Params { p: 0.0003, window: 30, min_size: 3, min_magnitude: 0.0 }
    }
}

/// A level: the points between two changes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Level {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 for one point.
    pub sd: f64,
    pub median: f64,
}

impl Level {
    pub(crate) fn of(y: &[f64]) -> Level {
        let sd = if y.len() > 1 { std_dev(y) } else { 0.0 };
        Level { n: y.len(), mean: mean(y), sd, median: median(y) }
    }
}

/// Pooled two-sample Student t-test (scipy's `ttest_ind` with its default
/// `equal_var=True`): t of `b` against `a`, its degrees of freedom and the
/// two-sided p.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Pooled {
    pub t: f64,
    pub df: f64,
    pub p: f64,
}

/// None with fewer than two points on a side, or three in all.
pub(crate) fn pooled_t_test(a: &[f64], b: &[f64]) -> Option<Pooled> {
    let (na, nb) = (a.len(), b.len());
    if na == 0 || nb == 0 || na + nb < 3 {
        return None;
    }
    let ss = |v: &[f64]| {
        let m = mean(v);
        v.iter().map(|x| (x - m).powi(2)).sum::<f64>()
    };
    let df = (na + nb - 2) as f64;
    let sp2 = (ss(a) + ss(b)) / df;
    let diff = mean(b) - mean(a);
    let se = (sp2 * (1.0 / na as f64 + 1.0 / nb as f64)).sqrt();
    if se == 0.0 {
        // Identical points on each side: any difference is exact.
        let p = if diff == 0.0 { 1.0 } else { 0.0 };
        return Some(Pooled { t: diff.signum() * f64::INFINITY, df, p });
    }
    let t = diff / se;
    Some(Pooled { t, df, p: t_two_sided_p(t, df) })
}

pub(crate) fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// The energy statistic of every split of `x` (Matteson and James, α = 1):
/// `q[τ] = τ(m−τ)/m · (2·E|X−Y| − E|X−X'| − E|Y−Y'|)` for `X = x[..τ]`,
/// `Y = x[τ..]`, over `τ` in `lo..=hi`. Pair sums come from a prefix-summed
/// distance matrix, so all splits cost O(m²) together.
fn energy(x: &[f64], lo: usize, hi: usize) -> Vec<(usize, f64)> {
    let m = x.len();
    // p[i][j] = Σ |x_a − x_b| over a < i, b < j.
    let w = m + 1;
    let mut p = vec![0.0; w * w];
    for i in 0..m {
        let mut row = 0.0;
        for j in 0..m {
            row += (x[i] - x[j]).abs();
            p[(i + 1) * w + j + 1] = p[i * w + j + 1] + row;
        }
    }
    let block = |a: usize, b: usize, c: usize, d: usize| p[b * w + d] - p[a * w + d] - p[b * w + c] + p[a * w + c];
    (lo..=hi)
        .map(|t| {
            let (nx, ny) = (t as f64, (m - t) as f64);
            let between = block(0, t, t, m) / (nx * ny);
            let within = |a: usize, b: usize, n: f64| if n > 1.0 { block(a, b, a, b) / (n * (n - 1.0)) } else { 0.0 };
            let q = nx * ny / m as f64 * (2.0 * between - within(0, t, nx) - within(t, m, ny));
            (t, q)
        })
        .collect()
}

/// A change point: the first point of a new level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Change {
    pub at: usize,
    pub before: Level,
    pub after: Level,
    pub test: Pooled,
    /// Given, not found: a known change (`expected`) that starts a level.
    pub fixed: bool,
}

impl Change {
    /// (after − before) / before, of the means.
    pub(crate) fn relative(&self) -> f64 {
        (self.after.mean - self.before.mean) / self.before.mean
    }
}

/// The test of a split at `at` between the boundaries `lo` and `hi`, each
/// side cut to the `window` points nearest it; None when a side is shorter
/// than `min_size` or the medians do not follow the means.
fn judge(y: &[f64], lo: usize, at: usize, hi: usize, params: &Params) -> Option<(Pooled, Level, Level)> {
    let a = &y[lo.max(at.saturating_sub(params.window))..at];
    let b = &y[at..hi.min(at + params.window)];
    if a.len() < params.min_size || b.len() < params.min_size {
        return None;
    }
    let test = pooled_t_test(a, b)?;
    let (la, lb) = (Level::of(a), Level::of(b));
    let (dm, dmed) = (lb.mean - la.mean, lb.median - la.median);
    let follows = dm == 0.0 || (dmed.signum() == dm.signum() && dmed.abs() >= 0.5 * dm.abs());
    let big = la.mean != 0.0 && (dm / la.mean).abs() >= params.min_magnitude;
    (follows && big).then_some((test, la, lb))
}

/// The best split of `y[lo..hi]`, searched in windows of `params.window`
/// points (half-overlapping, the last one ending at `hi`, so the newest
/// points always have a window of their own), kept when its test passes
/// `level`.
fn best_split(y: &[f64], lo: usize, hi: usize, params: &Params, level: f64) -> Option<(usize, f64)> {
    let w = params.window.max(2 * params.min_size);
    let mut starts = vec![];
    if hi - lo <= w {
        starts.push(lo);
    } else {
        let mut s = lo;
        while s + w < hi {
            starts.push(s);
            s += w / 2;
        }
        starts.push(hi - w);
    }
    let mut best: Option<(usize, f64)> = None;
    for s in starts {
        let e = (s + w).min(hi);
        if e - s < 2 * params.min_size {
            continue;
        }
        let q = energy(&y[s..e], params.min_size, e - s - params.min_size);
        let Some(&(t, _)) = q.iter().max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0))) else { continue };
        let at = s + t;
        if let Some((test, ..)) = judge(y, lo, at, hi, params) {
            if test.p < level && best.is_none_or(|(_, p)| test.p < p) {
                best = Some((at, test.p));
            }
        }
    }
    best
}

/// The change points of `y`, in order. `fixed` are known changes
/// (acknowledged as expected): they bound the levels and are always kept.
pub(crate) fn change_points(y: &[f64], fixed: &[usize], params: &Params) -> Vec<Change> {
    let n = y.len();
    let mut cuts: Vec<usize> = fixed.iter().copied().filter(|&f| f > 0 && f < n).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let is_fixed = |c: usize| fixed.contains(&c);
    // Split: every segment proposes its best split at 10 × p until none does.
    let weak = (params.p * 10.0).min(0.5);
    let mut open = true;
    while open {
        open = false;
        let bounds: Vec<usize> = std::iter::once(0).chain(cuts.iter().copied()).chain(std::iter::once(n)).collect();
        let mut found = vec![];
        for pair in bounds.windows(2) {
            if let Some((at, _)) = best_split(y, pair[0], pair[1], params, weak) {
                found.push(at);
            }
        }
        if !found.is_empty() {
            open = true;
            cuts.extend(found);
            cuts.sort_unstable();
            cuts.dedup();
        }
    }
    // Merge: drop the weakest proposal at a time until all pass p.
    loop {
        let bounds: Vec<usize> = std::iter::once(0).chain(cuts.iter().copied()).chain(std::iter::once(n)).collect();
        let mut weakest: Option<(usize, f64)> = None;
        for i in 1..bounds.len() - 1 {
            if is_fixed(bounds[i]) {
                continue;
            }
            let p = judge(y, bounds[i - 1], bounds[i], bounds[i + 1], params).map_or(f64::INFINITY, |(t, ..)| t.p);
            if p >= params.p && weakest.is_none_or(|(_, q)| p > q) {
                weakest = Some((i - 1, p));
            }
        }
        match weakest {
            Some((i, _)) => {
                cuts.remove(i);
            }
            None => break,
        }
    }
    let bounds: Vec<usize> = std::iter::once(0).chain(cuts.iter().copied()).chain(std::iter::once(n)).collect();
    (1..bounds.len() - 1)
        .map(|i| {
            let (lo, at, hi) = (bounds[i - 1], bounds[i], bounds[i + 1]);
            let (a, b) = (&y[lo..at], &y[at..hi]);
            let test = pooled_t_test(a, b).unwrap_or(Pooled { t: f64::NAN, df: f64::NAN, p: f64::NAN });
            Change { at, before: Level::of(a), after: Level::of(b), test, fixed: is_fixed(at) }
        })
        .collect()
}

/// A Theil–Sen slope (the median of the pairwise slopes) with its
/// distribution-free interval (Sen 1968): the ranks `(N ∓ z·√V)/2` of the
/// sorted pairwise slopes, `V = n(n−1)(2n+5)/18`, `z` the normal quantile of
/// `confidence`. Robust to a few outlying nights.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Slope {
    pub slope: f64,
    pub lo: f64,
    pub hi: f64,
}

/// None with fewer than three points or no two at different x.
pub(crate) fn theil_sen(x: &[f64], y: &[f64], confidence: f64) -> Option<Slope> {
    let n = x.len().min(y.len());
    if n < 3 {
        return None;
    }
    let mut s = Vec::with_capacity(n * (n - 1) / 2);
    for i in 0..n {
        for j in i + 1..n {
            let dx = x[j] - x[i];
            if dx != 0.0 {
                s.push((y[j] - y[i]) / dx);
            }
        }
    }
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    let big_n = s.len() as f64;
    let z = Normal::new(0.0, 1.0).ok()?.inverse_cdf(0.5 + confidence / 2.0);
    let nn = n as f64;
    let c = z * (nn * (nn - 1.0) * (2.0 * nn + 5.0) / 18.0).sqrt();
    let at = |r: f64| s[(r.round().max(1.0) as usize).min(s.len()) - 1];
    Some(Slope { slope: median(&s), lo: at((big_n - c) / 2.0), hi: at((big_n + c) / 2.0 + 1.0) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1e-300)
    }

    /// Reference values from scipy 1.17's `ttest_ind(a, b)` (pooled, the
    /// default `equal_var=True`), t of a against b, so the sign flips here.
    #[test]
    fn pooled_t_matches_scipy() {
        let a = [100.0, 101.0, 99.5, 100.5, 99.0, 100.2];
        let b = [97.0, 96.5, 97.4];
        let t = pooled_t_test(&a, &b).unwrap();
        assert_eq!(t.df, 7.0);
        assert!(close(t.t, -SCIPY_T1, 1e-6), "{t:?}");
        assert!(close(t.p, SCIPY_P1, 1e-4), "{t:?}");
        // Three points after a step, as the note's back-of-envelope figure.
        let a: Vec<f64> = (0..20).map(|i| 100.0 + [-1.0, 1.0][i % 2]).collect();
        let b = [97.0, 98.0, 96.0];
        let t = pooled_t_test(&a, &b).unwrap();
        assert!(close(t.t, -SCIPY_T2, 1e-6) && close(t.p, SCIPY_P2, 1e-4), "{t:?}");
    }

    // scipy.stats.ttest_ind([100,101,99.5,100.5,99,100.2],[97,96.5,97.4])
    const SCIPY_T1: f64 = 6.692_015_300_570_479;
    const SCIPY_P1: f64 = 0.000_279_482_577_700_409_05;
    // scipy.stats.ttest_ind([99,101]*10, [97,98,96])
    const SCIPY_T2: f64 = 4.734_032_867_828_009_5;
    const SCIPY_P2: f64 = 0.000_112_574_444_693_867_23;

    #[test]
    fn degenerate_sides() {
        assert_eq!(pooled_t_test(&[1.0], &[2.0]), None);
        assert_eq!(pooled_t_test(&[1.0, 1.0], &[1.0]).unwrap().p, 1.0);
        assert_eq!(pooled_t_test(&[1.0, 1.0], &[2.0]).unwrap().p, 0.0);
    }

    #[test]
    fn energy_peaks_at_the_step() {
        let y = [0.0, 0.1, -0.1, 0.0, 5.0, 5.1, 4.9, 5.0];
        let q = energy(&y, 1, 7);
        let best = q.iter().max_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
        assert_eq!(best.0, 4);
        // By hand at τ = 4: X and Y 4 points each, E|X−Y| = 5, E|X−X'| =
        // E|Y−Y'| = 0.1 (12 ordered pairs: 0.1×4 + 0.2×2... sum 1.2 / 12).
        let within = (0.1 * 4.0 + 0.2 * 2.0 + 0.1 * 4.0 + 0.0 * 2.0) / 12.0;
        let by_hand = 4.0 * 4.0 / 8.0 * (2.0 * 5.0 - 2.0 * within);
        assert!(close(best.1, by_hand, 1e-9), "{} vs {by_hand}", best.1);
    }

    /// Noise that repeats exactly, so tests need no random numbers.
    fn wobble(i: usize) -> f64 {
        [0.3, -0.8, 1.1, -0.2, 0.6, -1.0, 0.1, 0.9, -0.5, -0.4][i % 10]
    }

    #[test]
    fn a_step_is_found_on_its_night_and_noise_is_not() {
        let y: Vec<f64> = (0..40).map(|i| 100.0 + wobble(i) - if i >= 25 { 5.0 } else { 0.0 }).collect();
        let c = change_points(&y, &[], &Params::default());
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].at, 25);
        assert!(close(c[0].relative(), -0.05, 0.05), "{}", c[0].relative());
        let flat: Vec<f64> = (0..40).map(|i| 100.0 + wobble(i)).collect();
        assert!(change_points(&flat, &[], &Params::default()).is_empty());
    }

    #[test]
    fn three_points_on_the_new_level_place_it_and_one_is_too_few() {
        let y: Vec<f64> = (0..23).map(|i| 100.0 + wobble(i) - if i >= 20 { 5.0 } else { 0.0 }).collect();
        assert_eq!(change_points(&y, &[], &Params::default()).iter().map(|c| c.at).collect::<Vec<_>>(), [20]);
        // Two nights in, a split a night early (one old point and two new ones,
        // whose median has moved) may already be found; one night in, never.
        assert!(change_points(&y[..22], &[], &Params::default()).iter().all(|c| c.at == 19 || c.at == 20));
        assert!(change_points(&y[..21], &[], &Params::default()).is_empty());
    }

    #[test]
    fn one_outlier_among_the_newest_points_is_no_step() {
        let mut y: Vec<f64> = (0..30).map(|i| 100.0 + wobble(i)).collect();
        y[27] = 85.0;
        assert!(change_points(&y, &[], &Params::default()).is_empty());
        y[27] = 100.0;
        y[12] = 85.0;
        assert!(change_points(&y, &[], &Params::default()).is_empty());
    }

    #[test]
    fn two_steps_are_two_changes_and_a_fixed_one_is_kept() {
        let y: Vec<f64> = (0..90)
            .map(|i| 100.0 + wobble(i) - if i >= 30 { 4.0 } else { 0.0 } - if i >= 60 { 4.0 } else { 0.0 })
            .collect();
        let at: Vec<usize> = change_points(&y, &[], &Params::default()).iter().map(|c| c.at).collect();
        assert_eq!(at, [30, 60]);
        let c = change_points(&y, &[45], &Params::default());
        assert_eq!(c.iter().map(|c| (c.at, c.fixed)).collect::<Vec<_>>(), [(30, false), (45, true), (60, false)]);
    }

    #[test]
    fn same_input_same_output() {
        let y: Vec<f64> = (0..80).map(|i| 100.0 + wobble(i * 7) - if i >= 50 { 3.0 } else { 0.0 }).collect();
        let a = change_points(&y, &[], &Params::default());
        assert_eq!(a, change_points(&y, &[], &Params::default()));
    }

    #[test]
    fn theil_sen_by_hand() {
        let x = [0.0, 1.0, 2.0, 3.0];
        let y = [0.0, 1.0, 2.0, 9.0];
        // Slopes: 1, 1, 3, 1, 4, 7: median of 1,1,1,3,4,7 is 2.
        let s = theil_sen(&x, &y, 0.95).unwrap();
        assert_eq!(s.slope, 2.0);
        assert!(s.lo <= s.slope && s.slope <= s.hi);
        let x: Vec<f64> = (0..30).map(f64::from).collect();
        let y: Vec<f64> = x.iter().map(|&t| 100.0 - 0.1 * t + wobble(t as usize) * 0.2).collect();
        let s = theil_sen(&x, &y, 0.99).unwrap();
        assert!(s.hi < 0.0 && close(s.slope, -0.1, 0.2), "{s:?}");
        assert_eq!(theil_sen(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0], 0.95), None);
    }
}
