//! Every request's fate, and the figures a row reports from them.
//!
//! A record is written for every request a server takes, served or dropped,
//! by gpubench's server, each of its worker processes and the PyTorch
//! server alike (one CSV format, `id,worker,status,sched,taken,closed,
//! copied,computed,done,batch`, times in seconds after the load's start), so
//! that one function computes every row's figures.
//!
//! Latency runs from a request's *scheduled* arrival to its result on the
//! host, with the device synchronised: a request the generator or a busy
//! queue delayed is charged the delay (no coordinated omission). Its parts:
//! queue (scheduled → taken by a worker), batch (taken → batch closed),
//! input (preprocessing and host-to-device copy), compute (forward),
//! output (device-to-host of the predictions).
use anyhow::{anyhow, Context, Result};
use std::path::Path;

use crate::metrics::interval::{mean_interval, Interval};
use crate::metrics::stats::{mean, summarize};

/// A served request's batch timestamps (seconds after the start).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Served {
    pub closed: f64,
    pub copied: f64,
    pub computed: f64,
    pub done: f64,
    /// Size of the batch it was served in.
    pub batch: u32,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Record {
    pub id: u64,
    pub worker: u32,
    /// When it was scheduled to arrive.
    pub sched: f64,
    /// When a worker took it from the queue (or dropped it).
    pub taken: f64,
    /// None: dropped (too old when taken, or still queued when the run ended).
    pub served: Option<Served>,
}

pub(crate) const HEADER: &str = "id,worker,status,sched,taken,closed,copied,computed,done,batch";

pub(crate) fn to_csv(records: &[Record]) -> String {
    let mut s = String::with_capacity(64 * (records.len() + 1));
    s += HEADER;
    s.push('\n');
    for r in records {
        match r.served {
            Some(v) => {
                s += &format!(
                    "{},{},done,{:.9},{:.9},{:.9},{:.9},{:.9},{:.9},{}\n",
                    r.id, r.worker, r.sched, r.taken, v.closed, v.copied, v.computed, v.done, v.batch
                )
            }
            None => s += &format!("{},{},dropped,{:.9},{:.9},,,,,\n", r.id, r.worker, r.sched, r.taken),
        }
    }
    s
}

/// Reads a records file; a malformed line is an error naming the file and line.
pub(crate) fn read(path: &Path) -> Result<Vec<Record>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    parse(&text).with_context(|| format!("in {}", path.display()))
}

pub(crate) fn parse(text: &str) -> Result<Vec<Record>> {
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some(HEADER) {
        return Err(anyhow!("not a records file: the header is not {HEADER}"));
    }
    let mut v = vec![];
    for (i, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let bad = || anyhow!("line {}: cannot parse {line:?}", i + 2);
        let f: Vec<&str> = line.trim().split(',').collect();
        if f.len() != 10 {
            return Err(bad());
        }
        let num = |k: usize| f[k].parse::<f64>().map_err(|_| bad());
        let served = match f[2] {
            "done" => Some(Served {
                closed: num(5)?,
                copied: num(6)?,
                computed: num(7)?,
                done: num(8)?,
                batch: f[9].parse().map_err(|_| bad())?,
            }),
            "dropped" => None,
            _ => return Err(bad()),
        };
        v.push(Record {
            id: f[0].parse().map_err(|_| bad())?,
            worker: f[1].parse().map_err(|_| bad())?,
            sched: num(3)?,
            taken: num(4)?,
            served,
        });
    }
    Ok(v)
}

/// What a row reports of a serving run.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ServeFigures {
    pub requests: u64,
    pub completed: u64,
    pub dropped: u64,
    pub batches: u64,
    pub batch_mean: Option<f64>,
    /// Requests answered inside the load's window, per second.
    pub achieved_rate: f64,
    /// Its 95 % interval: batch means over 100 ms windows (`metrics::interval`).
    pub achieved_ci: Option<Interval>,
    /// Latency percentiles from the scheduled arrival (ms); None for offline,
    /// whose requests are all "scheduled" at the start.
    pub latency_ms: Option<[f64; 4]>,
    /// Means over requests of the parts (ms): queue, batch, and their
    /// batch's input, compute, output (a batch's times, not per frame).
    pub parts_ms: Option<[f64; 5]>,
    /// Input (preprocessing and copy) per frame, ms: every batch's input
    /// time over the requests served.
    pub input_ms_per_frame: Option<f64>,
}

/// The figures of `records` for a load of `duration` seconds. `latency`:
/// whether latency from the schedule means anything (not for offline).
/// `backlog` (offline, single-stream: no batch starts after the window, and
/// every one finishes): the rate is every answer over the time they took,
/// so the last batch's tail past the window is neither lost nor free.
pub(crate) fn figures(records: &[Record], duration: f64, latency: bool, backlog: bool) -> ServeFigures {
    let served: Vec<(&Record, &Served)> = records.iter().filter_map(|r| r.served.as_ref().map(|s| (r, s))).collect();
    let completed = served.len() as u64;
    // Each batch of b requests leaves b records that say b.
    let batches = served.iter().map(|(_, s)| 1.0 / s.batch.max(1) as f64).sum::<f64>().round() as u64;
    let last = served.iter().map(|(_, s)| s.done).fold(duration, f64::max);
    let span = if backlog { last } else { duration };
    let in_window: Vec<f64> = served.iter().map(|(_, s)| s.done).filter(|&d| d <= span).collect();
    let achieved_rate = in_window.len() as f64 / span;
    let duration = span;
    // Completions per 100 ms window (at least 10 windows), batch means over them.
    let n_win = ((duration / 0.1).floor() as usize).max(10);
    let w = duration / n_win as f64;
    let mut counts = vec![0.0; n_win];
    for d in &in_window {
        counts[((d / w) as usize).min(n_win - 1)] += 1.0;
    }
    let rates: Vec<f64> = counts.iter().map(|c| c / w).collect();
    let achieved_ci = mean_interval(&rates).map(|(_, i)| Interval { lo: i.lo.max(0.0), hi: i.hi });
    let lat: Vec<f64> = served.iter().map(|(r, s)| (s.done - r.sched) * 1e3).collect();
    let latency_ms = (latency && !lat.is_empty()).then(|| {
        let s = summarize(&lat);
        [s.p50, s.p90, s.p99, s.max]
    });
    let part =
        |f: &dyn Fn(&Record, &Served) -> f64| mean(&served.iter().map(|(r, s)| f(r, s) * 1e3).collect::<Vec<_>>());
    let parts_ms = (!served.is_empty()).then(|| {
        [
            part(&|r, _| r.taken - r.sched),
            part(&|r, s| s.closed - r.taken),
            part(&|_, s| s.copied - s.closed),
            part(&|_, s| s.computed - s.copied),
            part(&|_, s| s.done - s.computed),
        ]
    });
    let input_ms_per_frame = (!served.is_empty()).then(|| part(&|_, s| (s.copied - s.closed) / s.batch.max(1) as f64));
    ServeFigures {
        input_ms_per_frame,
        requests: records.len() as u64,
        completed,
        dropped: records.len() as u64 - completed,
        batches,
        batch_mean: (batches > 0).then(|| completed as f64 / batches as f64),
        achieved_rate,
        achieved_ci,
        latency_ms,
        parts_ms,
    }
}

/// Ids that appear more than once, or ids of `expected` that never appear:
/// every request must be answered or dropped exactly once.
pub(crate) fn accounting_errors(records: &[Record], expected: impl Iterator<Item = u64>) -> Vec<String> {
    let mut seen = std::collections::HashMap::new();
    for r in records {
        *seen.entry(r.id).or_insert(0u32) += 1;
    }
    let mut errs: Vec<String> =
        seen.iter().filter(|(_, &n)| n > 1).map(|(id, n)| format!("request {id} recorded {n} times")).collect();
    for id in expected {
        if !seen.contains_key(&id) {
            errs.push(format!("request {id} never answered nor dropped"));
        }
    }
    errs.sort();
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: u64, sched: f64, done: Option<(f64, u32)>) -> Record {
        Record {
            id,
            worker: 0,
            sched,
            taken: sched + 0.001,
            served: done.map(|(d, b)| Served {
                closed: sched + 0.002,
                copied: sched + 0.003,
                computed: d - 0.001,
                done: d,
                batch: b,
            }),
        }
    }

    #[test]
    fn records_round_trip_through_csv() {
        let v = vec![rec(0, 0.5, Some((0.6, 2))), rec(1, 0.5, Some((0.6, 2))), rec(2, 0.7, None)];
        assert_eq!(parse(&to_csv(&v)).unwrap(), v);
        assert!(parse("id,x\n").is_err());
        let e = parse(&format!("{HEADER}\n1,0,done,0.1\n")).unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
    }

    #[test]
    fn figures_count_batches_drops_and_latency_from_the_schedule() {
        // Two batches of 2 and one of 1, one drop; latencies 100, 100, 200, 200, 50 ms.
        let v = vec![
            rec(0, 0.0, Some((0.1, 2))),
            rec(1, 0.0, Some((0.1, 2))),
            rec(2, 0.1, Some((0.3, 2))),
            rec(3, 0.1, Some((0.3, 2))),
            rec(4, 0.5, Some((0.55, 1))),
            rec(5, 0.6, None),
        ];
        let f = figures(&v, 1.0, true, false);
        assert_eq!((f.requests, f.completed, f.dropped, f.batches), (6, 5, 1, 3));
        assert!((f.batch_mean.unwrap() - 5.0 / 3.0).abs() < 1e-12);
        assert!((f.achieved_rate - 5.0).abs() < 1e-12);
        let l = f.latency_ms.unwrap();
        assert!((l[0] - 100.0).abs() < 1e-6 && (l[3] - 200.0).abs() < 1e-6, "{l:?}");
        let p = f.parts_ms.unwrap();
        assert!((p[0] - 1.0).abs() < 1e-6 && (p[1] - 1.0).abs() < 1e-6, "{p:?}");
        assert!(figures(&v, 1.0, false, false).latency_ms.is_none());
        // A backlog's last batch past the window counts, over the time it took.
        let tail = vec![rec(0, 0.0, Some((0.5, 1))), rec(1, 0.0, Some((1.25, 1)))];
        assert!((figures(&tail, 1.0, false, true).achieved_rate - 2.0 / 1.25).abs() < 1e-12);
        assert!((figures(&tail, 1.0, false, false).achieved_rate - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_steady_rate_gets_a_narrow_interval_around_it() {
        // 1000 requests evenly over 10 s.
        let v: Vec<Record> = (0..1000).map(|i| rec(i, i as f64 * 0.01, Some((i as f64 * 0.01 + 0.005, 1)))).collect();
        let f = figures(&v, 10.0, true, false);
        let ci = f.achieved_ci.unwrap();
        assert!(ci.lo <= 100.0 && ci.hi >= 100.0 && ci.hi - ci.lo < 5.0, "{ci:?}");
    }

    #[test]
    fn accounting_finds_lost_and_doubled_requests() {
        let v = vec![rec(0, 0.0, None), rec(0, 0.0, None), rec(2, 0.0, None)];
        let e = accounting_errors(&v, 0..3);
        assert_eq!(e, vec!["request 0 recorded 2 times", "request 1 never answered nor dropped"]);
    }
}
