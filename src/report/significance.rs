//! Welch's t-test, for `check`: is the difference between baseline and
//! current repeats larger than their run-to-run noise? Welch's form does not
//! assume equal variances (a new driver may well change the spread) and works
//! from two runs per side, where a rank test such as Mann–Whitney cannot reach
//! p < 0.05 with fewer than four.
//!
//! The p-value needs Student's t distribution, i.e. the regularized incomplete
//! beta function, computed here by its continued fraction (modified Lentz).

use crate::metrics::stats::{mean, std_dev};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Welch {
    pub t: f64,
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

/// None when either side has fewer than two samples: there is no spread to
/// compare against.
pub fn welch_t_test(a: &[f64], b: &[f64]) -> Option<Welch> {
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
pub fn t_two_sided_p(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return 0.0;
    }
    inc_beta(df / 2.0, 0.5, df / (df + t * t)).clamp(0.0, 1.0)
}

/// ln Γ(x) for x > 0: Lanczos approximation (g = 7, 9 terms), ~15 digits.
fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection keeps the series in its accurate range.
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut s = C[0];
    for (i, c) in C.iter().enumerate().skip(1) {
        s += c / (x + i as f64);
    }
    let t = x + G + 0.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + s.ln()
}

/// Regularized incomplete beta I_x(a, b).
fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    // The continued fraction converges fast only below the mean of the
    // distribution; above it, use the symmetry I_x(a,b) = 1 - I_{1-x}(b,a).
    if x < (a + 1.0) / (a + b + 2.0) {
        ln_front.exp() * beta_cf(a, b, x) / a
    } else {
        1.0 - ln_front.exp() * beta_cf(b, a, 1.0 - x) / b
    }
}

fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let fix = |v: f64| if v.abs() < TINY { TINY } else { v };
    let mut c = 1.0;
    let mut d = 1.0 / fix(1.0 - (a + b) * x / (a + 1.0));
    let mut h = d;
    for m in 1..300 {
        let m = m as f64;
        let m2 = 2.0 * m;
        // even step
        let num = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2));
        d = 1.0 / fix(1.0 + num * d);
        c = fix(1.0 + num / c);
        h *= d * c;
        // odd step
        let num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0));
        d = 1.0 / fix(1.0 + num * d);
        c = fix(1.0 + num / c);
        let delta = d * c;
        h *= delta;
        if (delta - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() < tol
    }

    #[test]
    fn ln_gamma_matches_factorials_and_sqrt_pi() {
        assert!(close(ln_gamma(5.0), 24f64.ln(), 1e-12));
        assert!(close(ln_gamma(0.5), std::f64::consts::PI.sqrt().ln(), 1e-12));
        assert!(close(ln_gamma(0.1), 2.252_712_651_734_206, 1e-10));
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
