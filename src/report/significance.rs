//! Welch's t-test, for `check`: is the difference between baseline and
//! current repeats larger than their run-to-run noise? Welch's form does not
//! assume equal variances (a new driver may well change the spread) and works
//! from two runs per side, where a rank test such as Mann–Whitney cannot reach
//! p < 0.05 with fewer than four.
//!
//! The p-value comes from Student's t distribution (statrs).
//!
//! With one run per side there are no repeats to compare: `check` then asks
//! whether the two runs' within-run 95 % intervals (`metrics::interval`) are
//! apart instead (`intervals_apart`).

use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::metrics::interval::Interval;
use crate::metrics::stats::{mean, std_dev};

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Welch {
    pub t: f64,
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

/// None when either side has fewer than two samples: there is no spread to
/// compare against.
pub(crate) fn welch_t_test(a: &[f64], b: &[f64]) -> Option<Welch> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (va, vb) = (std_dev(a).powi(2) / na, std_dev(b).powi(2) / nb);
    let diff = mean(b) - mean(a);
    let se2 = va + vb;
    if se2 == 0.0 {
        // Identical repeats on both sides: any difference is exact.
        let p = if diff == 0.0 { 1.0 } else { 0.0 };
        return Some(Welch { t: diff.signum() * f64::INFINITY, df: na + nb - 2.0, p });
    }
    let t = diff / se2.sqrt();
    let df = se2 * se2 / (va * va / (na - 1.0) + vb * vb / (nb - 1.0));
    Some(Welch { t, df, p: t_two_sided_p(t, df) })
}

/// P(|T| ≥ |t|) for Student's t with `df` degrees of freedom.
pub(crate) fn t_two_sided_p(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return 0.0;
    }
    match StudentsT::new(0.0, 1.0, df) {
        Ok(d) => (2.0 * (1.0 - d.cdf(t.abs()))).clamp(0.0, 1.0),
        Err(_) => f64::NAN,
    }
}

/// With one run per side: the difference is significant when the two 95 %
/// intervals do not overlap (a conservative test: non-overlap of two 95 %
/// intervals means p < 0.01 or so for similar widths).
pub(crate) fn intervals_apart(a: &Interval, b: &Interval) -> bool {
    !a.overlaps(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() < tol
    }

    #[test]
    fn single_runs_compare_by_their_intervals() {
        let a = Interval { lo: 95.0, hi: 105.0 };
        assert!(!intervals_apart(&a, &Interval { lo: 100.0, hi: 110.0 }));
        assert!(intervals_apart(&a, &Interval { lo: 80.0, hi: 90.0 }));
    }

    #[test]
    fn t_p_values_match_tables() {
        // Two-sided 5% critical values of Student's t.
        for (t, df) in [(12.706_204_736, 1.0), (2.776_445_105, 4.0), (2.228_138_852, 10.0), (1.983_971_519, 100.0)] {
            assert!(close(t_two_sided_p(t, df), 0.05, 1e-7), "t={t} df={df}: {}", t_two_sided_p(t, df));
        }
        assert!(close(t_two_sided_p(2.0, 10.0), 0.073_388_034, 1e-7));
        assert!(close(t_two_sided_p(0.0, 7.0), 1.0, 1e-12));
        assert_eq!(t_two_sided_p(f64::INFINITY, 3.0), 0.0);
    }

    #[test]
    fn welch_on_known_samples() {
        // Wikipedia's Welch example; t, df and p checked with mpmath.
        let a = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4];
        let b = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4];
        let w = welch_t_test(&a, &b).unwrap();
        assert!(close(w.t, 2.455_356_398, 1e-8), "t {}", w.t);
        assert!(close(w.df, 24.988_529_29, 1e-7), "df {}", w.df);
        assert!(close(w.p, 0.021_378_001, 1e-8), "p {}", w.p);
    }

    #[test]
    fn degenerate_samples() {
        assert_eq!(welch_t_test(&[1.0], &[1.0, 2.0]), None);
        assert_eq!(welch_t_test(&[5.0, 5.0], &[5.0, 5.0]).unwrap().p, 1.0);
        assert_eq!(welch_t_test(&[5.0, 5.0], &[4.0, 4.0]).unwrap().p, 0.0);
    }

    #[test]
    fn clear_shift_is_significant_and_noise_is_not() {
        let base = [1000.0, 1004.0, 996.0];
        assert!(welch_t_test(&base, &[900.0, 903.0, 897.0]).unwrap().p < 0.001);
        assert!(welch_t_test(&base, &[1001.0, 995.0, 1003.0]).unwrap().p > 0.5);
    }
}
