//! 95 % confidence intervals for one run's figures, and the rules that end a
//! run once its answer is known (`--duration auto`) or once its steps have
//! settled (`--warmup auto`).
//!
//! Step times are not independent: a neighbour's burst, a frequency change
//! or a garbage-collecting allocator spans several consecutive steps, so an
//! interval that treats steps as independent draws is too narrow. Two
//! methods that keep neighbouring steps together:
//! - **Throughput** (global batch ÷ mean step time): *batch means*. The timed
//!   steps are cut into k contiguous batches (k = √n, between 5 and 30); the
//!   batch means are nearly independent when batches are longer than the
//!   bursts, so Student's t over the k means (k − 1 degrees of freedom) gives
//!   the mean step time's interval, and throughput's is its inverse.
//! - **Median step time**: a *circular block bootstrap*. 1,000 resamples
//!   made of contiguous blocks of n^(1/3) steps (wrapping around), the median
//!   of each, and their 2.5 % and 97.5 % percentiles. The resampling is
//!   seeded, so a run's interval is reproducible.
//!
//! What these intervals do not cover: drift between runs (another process
//! arriving, a warmer GPU, a different placement). Only repeated runs show
//! that; `report` and `compare` prefer the spread across repeats wherever
//! there are some.
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::stats::{mean, percentile_sorted, std_dev};

/// Steps an interval needs at the least (5 batches of 2).
pub(crate) const MIN_STEPS: usize = 10;

/// A 95 % confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
}

impl Interval {
    /// Half the width relative to `estimate` (0.02 is ±2 %).
    pub(crate) fn relative_half_width(&self, estimate: f64) -> f64 {
        (self.hi - self.lo) / 2.0 / estimate.abs()
    }

    pub(crate) fn overlaps(&self, other: &Interval) -> bool {
        self.lo <= other.hi && other.lo <= self.hi
    }
}

/// Student's t quantile for a two-sided 95 % interval with `df` degrees of freedom.
pub(crate) fn t95(df: f64) -> f64 {
    StudentsT::new(0.0, 1.0, df.max(1.0)).map(|t| t.inverse_cdf(0.975)).unwrap_or(f64::NAN)
}

/// The number of batches for `n` steps.
fn batch_count(n: usize) -> usize {
    ((n as f64).sqrt().round() as usize).clamp(5, 30).min(n / 2)
}

/// The mean of `xs` with its batch-means interval; None below `MIN_STEPS`.
pub(crate) fn mean_interval(xs: &[f64]) -> Option<(f64, Interval)> {
    let n = xs.len();
    if n < MIN_STEPS {
        return None;
    }
    let k = batch_count(n);
    let means: Vec<f64> = (0..k).map(|i| mean(&xs[i * n / k..(i + 1) * n / k])).collect();
    let m = mean(xs);
    let half = t95((k - 1) as f64) * std_dev(&means) / (k as f64).sqrt();
    Some((m, Interval { lo: m - half, hi: m + half }))
}

/// Throughput's interval (images/s) for `global_batch` images per step.
pub(crate) fn throughput_interval(step_secs: &[f64], global_batch: f64) -> Option<Interval> {
    let (_, i) = mean_interval(step_secs)?;
    // The mean step lies between the fastest and the slowest step measured:
    // a disturbed run's interval, whose lower end can reach zero (one README
    // demo printed 1944 ±85331 img/s), is cut there, so the throughput never
    // exceeds what the fastest step implies.
    let fastest = step_secs.iter().copied().fold(f64::INFINITY, f64::min);
    let slowest = step_secs.iter().copied().fold(0.0, f64::max);
    let (lo_step, hi_step) = (i.lo.max(fastest), i.hi.min(slowest));
    let hi = if lo_step > 0.0 { global_batch / lo_step } else { f64::INFINITY };
    Some(Interval { lo: global_batch / hi_step, hi })
}

/// Throughput's interval half-width relative to the throughput, for the
/// auto-stop rule.
pub(crate) fn throughput_precision(step_secs: &[f64]) -> Option<f64> {
    let (m, i) = mean_interval(step_secs)?;
    // Relative precision of the mean step time and of its inverse agree to
    // first order; the larger side of the inverted interval is used.
    Some(((m / i.lo) - 1.0).max(1.0 - m / i.hi).max(0.0))
}

/// The median's circular block bootstrap interval; None below `MIN_STEPS`.
pub(crate) fn median_interval(xs: &[f64]) -> Option<Interval> {
    const RESAMPLES: usize = 1000;
    let n = xs.len();
    if n < MIN_STEPS {
        return None;
    }
    let block = ((n as f64).cbrt().ceil() as usize).max(1);
    // xorshift64*, seeded by the series' length: reproducible, no dependency.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15 ^ n as u64;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let mut medians = Vec::with_capacity(RESAMPLES);
    let mut sample = Vec::with_capacity(n + block);
    for _ in 0..RESAMPLES {
        sample.clear();
        while sample.len() < n {
            let start = (next() % n as u64) as usize;
            sample.extend((0..block).map(|j| xs[(start + j) % n]));
        }
        sample.truncate(n);
        sample.sort_by(|a, b| a.total_cmp(b));
        medians.push(percentile_sorted(&sample, 50.0));
    }
    medians.sort_by(|a, b| a.total_cmp(b));
    Some(Interval { lo: percentile_sorted(&medians, 2.5), hi: percentile_sorted(&medians, 97.5) })
}

/// `--duration auto`'s rule: stop once at least `min_steps` are timed and
/// throughput's interval is within ±`target` (relative).
pub(crate) fn precise_enough(step_secs: &[f64], target: f64, min_steps: usize) -> bool {
    step_secs.len() >= min_steps.max(MIN_STEPS) && throughput_precision(step_secs).is_some_and(|p| p <= target)
}

/// Steps per window of the steady-state rule.
pub(crate) const STEADY_WINDOW: usize = 5;
/// How close the windows' medians must be (relative) to call it steady.
pub(crate) const STEADY_TOLERANCE: f64 = 0.05;

/// `--warmup auto`'s rule: steady once the medians of the last three windows
/// of `STEADY_WINDOW` steps are within `STEADY_TOLERANCE` of each other (a
/// ramp, an autotuner still trying, or a cache still filling moves them).
pub(crate) fn steady(step_secs: &[f64]) -> bool {
    let w = STEADY_WINDOW;
    if step_secs.len() < 3 * w {
        return false;
    }
    let tail = &step_secs[step_secs.len() - 3 * w..];
    let medians: Vec<f64> = tail
        .chunks(w)
        .map(|c| {
            let mut v = c.to_vec();
            v.sort_by(|a, b| a.total_cmp(b));
            percentile_sorted(&v, 50.0)
        })
        .collect();
    let lo = medians.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = medians.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    lo > 0.0 && hi / lo - 1.0 <= STEADY_TOLERANCE
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Normal draws (Box–Muller over xorshift), reproducible.
    struct Normal(u64);
    impl Normal {
        fn uniform(&mut self) -> f64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }
        fn next(&mut self) -> f64 {
            let (u, v) = (self.uniform(), self.uniform());
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        }
    }

    /// An AR(1) series around `mu`: x_t = mu + phi (x_{t-1} - mu) + e_t.
    fn ar1(rng: &mut Normal, n: usize, mu: f64, phi: f64, sd: f64) -> Vec<f64> {
        let mut x = mu;
        (0..n)
            .map(|_| {
                x = mu + phi * (x - mu) + sd * rng.next();
                x
            })
            .collect()
    }

    /// How often the mean's interval covers the true mean, over many series.
    fn coverage(phi: f64, naive: bool) -> f64 {
        let mut rng = Normal(0x1234_5678_9abc_def1);
        let trials = 400;
        let hits = (0..trials)
            .filter(|_| {
                let xs = ar1(&mut rng, 400, 100.0, phi, 5.0);
                let i = if naive {
                    let half = 1.96 * std_dev(&xs) / (xs.len() as f64).sqrt();
                    Interval { lo: mean(&xs) - half, hi: mean(&xs) + half }
                } else {
                    mean_interval(&xs).unwrap().1
                };
                i.lo <= 100.0 && 100.0 <= i.hi
            })
            .count();
        hits as f64 / trials as f64
    }

    #[test]
    fn batch_means_cover_the_mean_of_independent_and_autocorrelated_steps() {
        let independent = coverage(0.0, false);
        assert!((0.90..=0.99).contains(&independent), "iid coverage {independent}");
        let correlated = coverage(0.8, false);
        assert!(correlated >= 0.85, "AR(1) 0.8 coverage {correlated}");
        // The reason for batch means: an interval that ignores the correlation
        // is far too narrow.
        let naive = coverage(0.8, true);
        assert!(naive < 0.75, "the naive interval covered {naive}");
    }

    #[test]
    fn the_median_bootstrap_covers_and_is_reproducible() {
        let mut rng = Normal(42);
        let trials = 200;
        let hits = (0..trials)
            .filter(|_| {
                let xs = ar1(&mut rng, 300, 50.0, 0.5, 2.0);
                let i = median_interval(&xs).unwrap();
                i.lo <= 50.0 && 50.0 <= i.hi
            })
            .count();
        let c = hits as f64 / trials as f64;
        assert!(c >= 0.85, "median coverage {c}");
        let xs = ar1(&mut Normal(7), 100, 10.0, 0.3, 1.0);
        assert_eq!(median_interval(&xs), median_interval(&xs));
        assert_eq!(median_interval(&xs[..9]), None);
    }

    #[test]
    fn throughput_inverts_the_step_time_interval() {
        let xs: Vec<f64> = (0..40).map(|i| if i % 2 == 0 { 0.09 } else { 0.11 }).collect();
        let i = throughput_interval(&xs, 8.0).unwrap();
        assert!(i.lo < 80.0 && 80.0 < i.hi, "{i:?}");
        let p = throughput_precision(&xs).unwrap();
        assert!(p > 0.0 && p < 0.05, "{p}");
        assert!((i.relative_half_width(80.0) - p).abs() < 0.01);
    }

    #[test]
    fn a_disturbed_runs_throughput_interval_stays_within_its_fastest_step() {
        // Steps of 10 ms and a few of seconds (a host that stalled): the mean
        // step's interval reaches down to zero, the throughput's no higher
        // than 10 ms steps allow.
        let xs: Vec<f64> = (0..12).map(|i| if i % 4 == 0 { 3.0 } else { 0.01 }).collect();
        let (_, m) = mean_interval(&xs).unwrap();
        assert!(m.lo < 0.01, "the case under test: {m:?}");
        let i = throughput_interval(&xs, 8.0).unwrap();
        assert!(i.hi <= 8.0 / 0.01 + 1e-9 && i.lo >= 8.0 / 3.0 - 1e-9, "{i:?}");
    }

    #[test]
    fn auto_stop_waits_for_enough_steps_and_precision() {
        let mut rng = Normal(3);
        let noisy: Vec<f64> = (0..200).map(|_| 0.1 + 0.01 * rng.next().abs()).collect();
        assert!(!precise_enough(&noisy[..8], 0.02, 10), "too few steps");
        let first = (10..=200).find(|&n| precise_enough(&noisy[..n], 0.02, 10));
        assert!(first.is_some_and(|n| n > 10), "{first:?}");
        assert!(!precise_enough(&noisy, 0.0001, 10), "an unreachable target is never met");
        let flat = vec![0.1; 30];
        assert!(precise_enough(&flat, 0.02, 20));
    }

    #[test]
    fn steady_state_after_a_ramp_and_never_in_a_drift() {
        // Slow first steps (autotuning, allocator growth), then flat.
        let ramp: Vec<f64> = (0..40).map(|i| if i < 8 { 0.5 / (i + 1) as f64 + 0.1 } else { 0.1 }).collect();
        let first = (1..=ramp.len()).find(|&n| steady(&ramp[..n])).unwrap();
        assert!((15..=25).contains(&first), "steady from step {first}");
        // A run that keeps slowing down never settles.
        let drift: Vec<f64> = (0..200).map(|i| 0.1 * 1.02f64.powi(i)).collect();
        assert!((1..=drift.len()).all(|n| !steady(&drift[..n])));
    }

    #[test]
    fn t_quantiles() {
        assert!((t95(4.0) - 2.776).abs() < 1e-3);
        assert!((t95(1000.0) - 1.962).abs() < 1e-3);
    }
}
