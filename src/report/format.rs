//! Number and text formats shared by tables, charts and one-line outputs
//! (report, compare, check, sweep, max-batch), like hyperfine's output/format.
use crate::results::csv::Row;

/// Images per second: no false precision on big numbers, enough on small.
pub fn fmt_rate(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

pub fn fmt_pct(fraction: f64) -> String {
    format!("{:.1}%", fraction * 100.0)
}

pub fn fmt_ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

pub fn fmt_ratio(v: f64) -> String {
    format!("{v:.2}x")
}

/// Peak memory of a row, for one-line outputs: the allocator's on CUDA, else
/// NVML's, else the process's resident set.
pub fn row_peak_mem(r: &Row) -> Option<(f64, &'static str)> {
    r.peak_mem_alloc_mb
        .map(|m| (m, "alloc"))
        .or(r.nvml_mem_peak_mb.map(|m| (m, "nvml")))
        .or(r.peak_rss_mb.map(|m| (m, "rss")))
}

pub fn fmt_mib(mb: f64) -> String {
    if mb >= 1024.0 {
        format!("{:.1} GiB", mb / 1024.0)
    } else {
        format!("{mb:.0} MiB")
    }
}

/// The error, short enough for one line.
pub fn short_error(e: &str, max: usize) -> String {
    let e = e.trim();
    if e.chars().count() <= max {
        return e.to_string();
    }
    let cut: String = e.chars().take(max).collect();
    format!("{cut}…")
}
