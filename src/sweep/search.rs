//! max-batch's search: the largest batch that fits, by doubling from a start
//! (halving if it does not fit) and then binary search, assuming that if a
//! batch fits every smaller one does. The probe is a trait, so the search is
//! tested without running anything.
use anyhow::Result;

/// What a probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fit {
    Fits,
    Oom,
}

/// Tries one batch size. A failure other than out-of-memory is an error,
/// which ends the search.
pub(crate) trait Probe {
    fn probe(&mut self, batch: i64) -> Result<Fit>;
}

impl<F: FnMut(i64) -> Result<Fit>> Probe for F {
    fn probe(&mut self, batch: i64) -> Result<Fit> {
        self(batch)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Search {
    /// Largest batch that fit.
    pub best: Option<i64>,
    /// Smallest batch that did not (None: `max` fit).
    pub first_oom: Option<i64>,
    /// Every probe in order.
    pub probes: Vec<(i64, Fit)>,
}

/// How close the search gets: `granularity`, or 1/8 of the batch if closer, at least 1.
pub(crate) fn resolution(lo: i64, granularity: i64) -> i64 {
    granularity.min(lo / 8).max(1)
}

/// Doubling from `start` (halving if it does not fit), then binary search,
/// until the gap is within `resolution`. Assumes that if a batch fits, every
/// smaller one does.
pub(crate) fn search(p: &mut dyn Probe, start: i64, max: i64, granularity: i64) -> Result<Search> {
    let mut probes = vec![];
    let mut run = |b: i64, probes: &mut Vec<(i64, Fit)>| -> Result<Fit> {
        let f = p.probe(b)?;
        probes.push((b, f));
        Ok(f)
    };
    let mut b = start.clamp(1, max);
    let (mut lo, mut hi);
    if run(b, &mut probes)? == Fit::Fits {
        lo = b;
        loop {
            if b >= max {
                return Ok(Search { best: Some(b), first_oom: None, probes });
            }
            b = (b * 2).min(max);
            if run(b, &mut probes)? == Fit::Fits {
                lo = b;
            } else {
                hi = b;
                break;
            }
        }
    } else {
        hi = b;
        loop {
            if b == 1 {
                return Ok(Search { best: None, first_oom: Some(1), probes });
            }
            b /= 2;
            if run(b, &mut probes)? == Fit::Fits {
                lo = b;
                break;
            }
            hi = b;
        }
    }
    while hi - lo > resolution(lo, granularity) {
        let step = resolution(lo, granularity);
        let mut mid = (lo + hi) / 2 / step * step;
        if mid <= lo || mid >= hi {
            mid = (lo + hi) / 2;
        }
        if run(mid, &mut probes)? == Fit::Fits {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(Search { best: Some(lo), first_oom: Some(hi), probes })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fits iff batch ≤ t; counts probes.
    fn threshold(t: i64) -> impl FnMut(i64) -> Result<Fit> {
        move |b| Ok(if b <= t { Fit::Fits } else { Fit::Oom })
    }

    #[test]
    fn finds_the_threshold_within_the_resolution() {
        for t in [1, 2, 3, 7, 8, 9, 15, 16, 17, 100, 255, 256, 257, 1000, 1536, 4095, 9999] {
            for (start, g) in [(16, 8), (1, 1), (64, 32), (3, 1)] {
                let s = search(&mut threshold(t), start, 1 << 20, g).unwrap();
                let best = s.best.unwrap();
                let oom = s.first_oom.unwrap();
                assert!(best <= t && oom > t, "t={t} start={start} g={g}: {s:?}");
                assert!(oom - best <= resolution(best, g), "t={t} start={start} g={g}: {s:?}");
                // every probe agrees with the threshold, and none repeats
                assert!(s.probes.iter().all(|&(b, f)| (b <= t) == (f == Fit::Fits)));
                let mut bs: Vec<i64> = s.probes.iter().map(|p| p.0).collect();
                bs.sort();
                bs.dedup();
                assert_eq!(bs.len(), s.probes.len(), "{s:?}");
                assert!(s.probes.len() <= 2 * 21, "{s:?}");
            }
        }
        // exact with granularity 1
        assert_eq!(search(&mut threshold(1000), 16, 1 << 20, 1).unwrap().best, Some(1000));
    }

    #[test]
    fn doubles_then_bisects() {
        let s = search(&mut threshold(100), 16, 1 << 20, 8).unwrap();
        let bs: Vec<i64> = s.probes.iter().map(|p| p.0).collect();
        assert_eq!(bs[..5], [16, 32, 64, 128, 96]);
        assert_eq!((s.best, s.first_oom), (Some(96), Some(104)));
    }

    #[test]
    fn nothing_fits_and_max_fits() {
        let s = search(&mut threshold(0), 16, 1024, 8).unwrap();
        assert_eq!((s.best, s.first_oom), (None, Some(1)));
        assert_eq!(s.probes.iter().map(|p| p.0).collect::<Vec<_>>(), [16, 8, 4, 2, 1]);
        let s = search(&mut threshold(5000), 16, 1024, 8).unwrap();
        assert_eq!((s.best, s.first_oom), (Some(1024), None));
        let s = search(&mut threshold(5000), 3000, 1024, 8).unwrap();
        assert_eq!(s.probes, [(1024, Fit::Fits)]);
    }

    #[test]
    fn a_failing_probe_stops_the_search() {
        let mut n = 0;
        let mut p = |b: i64| {
            n += 1;
            if b >= 64 {
                anyhow::bail!("segfault")
            }
            Ok(Fit::Fits)
        };
        let e = search(&mut p, 16, 1024, 8).unwrap_err();
        assert_eq!(e.to_string(), "segfault");
        assert_eq!(n, 3);
    }
}
