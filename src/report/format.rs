//! Number and text formats shared by tables, charts and one-line outputs
//! (report, compare, check, sweep, max-batch), like hyperfine's output/format.
use crate::results::Fields;

/// Images per second: no false precision on big numbers, enough on small.
pub(crate) fn fmt_rate(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

pub(crate) fn fmt_pct(fraction: f64) -> String {
    format!("{:.1}%", fraction * 100.0)
}

/// A ± half-width in `fmt`'s units, with no more decimals than the
/// estimate it belongs to shows ("1234 ±25", not "1234 ±25.0").
pub(crate) fn fmt_half_width(fmt: fn(f64) -> String, estimate: f64, half: f64) -> String {
    let decimals = |s: &str| s.split_once('.').map_or(0, |(_, f)| f.chars().take_while(char::is_ascii_digit).count());
    let (e, h) = (fmt(estimate), fmt(half));
    let keep = decimals(&e);
    if decimals(&h) <= keep {
        return h;
    }
    let digits: String = h.chars().take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-').collect();
    match digits.parse::<f64>() {
        // Round the half-width itself once, in fmt's units (x100 for percentages).
        Ok(shown) if half != 0.0 => {
            let units = (shown / half).round().max(1.0);
            format!("{:.keep$}{}", half * units, &h[digits.len()..])
        }
        _ => h,
    }
}

pub(crate) fn fmt_ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

pub(crate) fn fmt_ratio(v: f64) -> String {
    format!("{v:.2}x")
}

/// Peak memory of a row, for one-line outputs: the allocator's on CUDA, else
/// NVML's, else the process's resident set.
pub(crate) fn row_peak_mem(r: &impl Fields) -> Option<(f64, &'static str)> {
    r.peak_mem_alloc_mb()
        .map(|m| (m, "alloc"))
        .or(r.nvml_mem_peak_mb().map(|m| (m, "nvml")))
        .or(r.peak_rss_mb().map(|m| (m, "rss")))
}

pub(crate) fn fmt_mib(mb: f64) -> String {
    if mb >= 1024.0 {
        format!("{:.1} GiB", mb / 1024.0)
    } else {
        format!("{mb:.0} MiB")
    }
}

/// The error, short enough for one line.
pub(crate) fn short_error(e: &str, max: usize) -> String {
    let e = e.trim();
    if e.chars().count() <= max {
        return e.to_string();
    }
    let cut: String = e.chars().take(max).collect();
    format!("{cut}…")
}

/// A byte count in binary units: 8, 1K, 64M, 2G (one decimal when not whole).
pub(crate) fn fmt_bytes(b: f64) -> String {
    let units = [("G", 1u64 << 30), ("M", 1 << 20), ("K", 1 << 10)];
    for (u, n) in units {
        if b >= n as f64 {
            let v = b / n as f64;
            return if v.fract() == 0.0 { format!("{v:.0}{u}") } else { format!("{v:.1}{u}") };
        }
    }
    format!("{b:.0}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_widths_match_the_estimate_precision() {
        assert_eq!(fmt_half_width(fmt_rate, 1234.0, 25.0), "25");
        assert_eq!(fmt_half_width(fmt_rate, 51.9, 2.345), "2.3");
        assert_eq!(fmt_half_width(fmt_rate, 5.12, 0.031), "0.03");
        assert_eq!(fmt_half_width(fmt_pct, 0.954, 0.031), "3.1%");
        assert_eq!(fmt_half_width(fmt_rate, 1234.0, 150.0), "150");
    }

    #[test]
    fn byte_sizes_in_binary_units() {
        assert_eq!(fmt_bytes(8.0), "8");
        assert_eq!(fmt_bytes(65536.0), "64K");
        assert_eq!(fmt_bytes(1.5 * 1048576.0), "1.5M");
        assert_eq!(fmt_bytes(2.0 * 1073741824.0), "2G");
    }
}
