//! `--find-max-streams` / `--find-max-rate`: the largest load whose p99
//! latency stays within the bound with at most `--max-drop-rate` dropped.
//! From the starting load, doubling until a probe misses (or halving until
//! one meets), then bisection between the last load that met and the first
//! that missed, until they are within 5 % (streams: or one stream) of each
//! other. Each probe is a whole measured load with its own row.
use anyhow::Result;

use crate::config::CapacitySearch;
use crate::results::csv::Row;
use crate::results::Status;

/// How close the answer's bracket gets, relative to the answer.
pub(crate) const RESOLUTION: f64 = 0.05;
/// Doubling stops here (×start): a load this large is beyond any box.
const MAX_DOUBLINGS: u32 = 20;

/// Whether a probe's row meets the bound; the reason when it does not.
pub(crate) fn verdict(row: &Row, s: &CapacitySearch) -> Result<(), String> {
    match row.status {
        // The drop rate is judged below, against the search's own limit.
        Status::Ok | Status::Overloaded => {}
        Status::Oom => return Err("does not fit (out of memory)".into()),
        _ => return Err(format!("status {}", row.status)),
    }
    let bound = s.bound.as_secs_f64() * 1e3;
    match row.latency_ms_p99 {
        Some(p) if p > bound => return Err(format!("p99 {p:.1} ms > {bound:.0} ms")),
        None => return Err("no request was answered".into()),
        _ => {}
    }
    let (req, dropped) = (row.requests.unwrap_or(0), row.dropped.unwrap_or(0));
    let rate = if req == 0 { 1.0 } else { dropped as f64 / req as f64 };
    if rate > s.max_drop_rate {
        return Err(format!("{:.1}% dropped > {:.1}%", rate * 100.0, s.max_drop_rate * 100.0));
    }
    Ok(())
}

/// The search's outcome.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Found {
    /// The largest load that met the bound (None: not even the smallest).
    pub best: Option<f64>,
    /// The smallest load that missed it (None: none missed up to the cap).
    pub first_miss: Option<f64>,
    /// Every probe, in order: load and whether it met the bound.
    pub probes: Vec<(f64, bool)>,
}

/// Searches from `start`; `integer` loads (streams) are whole and at least 1.
/// `probe` measures a load and says whether it met the bound.
pub(crate) fn find_max(start: f64, integer: bool, probe: &mut dyn FnMut(f64) -> Result<bool>) -> Result<Found> {
    let norm = |x: f64| if integer { x.floor().max(1.0) } else { x };
    let mut probes = vec![];
    let mut run = |x: f64, probes: &mut Vec<(f64, bool)>| -> Result<bool> {
        let ok = probe(x)?;
        probes.push((x, ok));
        Ok(ok)
    };
    let mut hi = None;
    let mut x = norm(start);
    let mut lo;
    if run(x, &mut probes)? {
        lo = Some(x);
        for _ in 0..MAX_DOUBLINGS {
            x = norm(x * 2.0);
            if run(x, &mut probes)? {
                lo = Some(x);
            } else {
                hi = Some(x);
                break;
            }
        }
    } else {
        hi = Some(x);
        loop {
            let next = norm(x / 2.0);
            if next == x || (!integer && next < start / 1e6) {
                return Ok(Found { best: None, first_miss: hi, probes });
            }
            x = next;
            if run(x, &mut probes)? {
                lo = Some(x);
                break;
            }
            hi = Some(x);
        }
    }
    while let (Some(l), Some(h)) = (lo, hi) {
        let close = if integer { h - l <= (l * RESOLUTION).max(1.0) } else { h - l <= l * RESOLUTION };
        if close {
            break;
        }
        let mid = norm((l + h) / 2.0);
        if mid <= l || mid >= h {
            break;
        }
        if run(mid, &mut probes)? {
            lo = Some(mid);
        } else {
            hi = Some(mid);
        }
    }
    Ok(Found { best: lo, first_miss: hi, probes })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(start: f64, integer: bool, capacity: f64) -> Found {
        find_max(start, integer, &mut |x| Ok(x <= capacity)).unwrap()
    }

    #[test]
    fn finds_a_capacity_above_the_start_within_the_resolution() {
        let f = search(10.0, false, 737.0);
        let best = f.best.unwrap();
        assert!((737.0 * (1.0 - RESOLUTION)..=737.0).contains(&best), "{f:?}");
        assert!(f.first_miss.unwrap() > 737.0);
        assert!(f.probes.len() < 16, "{} probes", f.probes.len());
    }

    #[test]
    fn streams_are_whole_and_found_to_one_stream_when_few() {
        let f = search(4.0, true, 13.0);
        assert_eq!(f.best, Some(13.0), "{f:?}");
        assert_eq!(f.first_miss, Some(14.0));
        assert!(f.probes.iter().all(|(x, _)| x.fract() == 0.0));
    }

    #[test]
    fn a_start_above_capacity_halves_down() {
        let f = search(200.0, true, 30.0);
        let best = f.best.unwrap();
        assert!((28.0..=30.0).contains(&best), "{f:?}");
        assert_eq!(search(8.0, true, 0.5).best, None, "even one stream misses");
    }

    #[test]
    fn verdict_needs_the_bound_and_the_drop_rate() {
        let s = CapacitySearch {
            bound: std::time::Duration::from_millis(100),
            max_drop_rate: 0.01,
            min_duration: std::time::Duration::from_secs(1),
            min_requests: 10,
        };
        let row = |p99: f64, dropped: u64| Row {
            status: crate::results::Status::Ok,
            latency_ms_p99: Some(p99),
            requests: Some(1000),
            dropped: Some(dropped),
            ..Default::default()
        };
        assert!(verdict(&row(90.0, 10), &s).is_ok());
        assert!(verdict(&row(110.0, 0), &s).unwrap_err().contains("p99"));
        assert!(verdict(&row(50.0, 11), &s).unwrap_err().contains("dropped"));
        assert!(verdict(&Row { status: crate::results::Status::Oom, ..row(1.0, 0) }, &s)
            .unwrap_err()
            .contains("does not fit"));
    }
}
