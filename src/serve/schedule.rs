//! When requests arrive: the load generator's schedule, computed before the
//! run from the seed, so that gpubench's server, its processes and the
//! PyTorch server all face exactly the same arrivals.
//!
//! - `server`: Poisson arrivals (exponential gaps, as LoadGen's Server
//!   scenario), each routed to a uniformly random worker process: a random
//!   split of a Poisson process is again Poisson, so every process sees the
//!   same kind of load.
//! - `streams`: camera s sends a frame every 1/fps seconds from a random
//!   phase in [0, 1/fps); camera s is served by worker process s mod P, as a
//!   deployment that routes each camera to one server would.
//!
//! `offline` and `single-stream` have no schedule: their requests are made
//! as fast as they are served.
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::config::Scenario;
use crate::data::transform::Rng;

/// One scheduled request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Arrival {
    pub id: u64,
    /// Seconds after the load's start.
    pub offset: f64,
    /// The worker process it goes to (`processes`); ignored by one-process servers.
    pub worker: u32,
}

/// The arrivals of `scenario` in [0, duration), sorted by time, ids in that
/// order, made one at a time as they are taken: memory stays that of the
/// cameras (streams) or nothing (Poisson), however long the load.
pub(crate) fn schedule(scenario: &Scenario, duration: f64, workers: u32, seed: u64) -> Schedule {
    let workers = workers.max(1);
    let mut rng = Rng::keyed(&[seed, 0x5e_7e]);
    let source = match *scenario {
        Scenario::Server { rate } => Source::Poisson { rng, rate, t: 0.0 },
        Scenario::Streams { streams, fps } => {
            let period = 1.0 / fps;
            // Every camera's phase is drawn up front, in camera order, so the
            // schedule depends on the seed alone; then the cameras are merged
            // by their next frame's time (ties in camera order).
            let next = (0..streams).map(|s| Reverse(Due(rng.uniform() * period, s))).collect();
            Source::Streams { next, period }
        }
        Scenario::Offline | Scenario::SingleStream => Source::None,
    };
    Schedule { source, duration, workers, id: 0 }
}

/// `schedule`, all of it: for the tests and the PyTorch server's file.
#[cfg(test)]
pub(crate) fn arrivals(scenario: &Scenario, duration: f64, workers: u32, seed: u64) -> Vec<Arrival> {
    schedule(scenario, duration, workers, seed).collect()
}

/// The load generator's schedule, lazily; see `schedule`.
pub(crate) struct Schedule {
    source: Source,
    duration: f64,
    workers: u32,
    id: u64,
}

enum Source {
    None,
    Poisson { rng: Rng, rate: f64, t: f64 },
    Streams { next: BinaryHeap<Reverse<Due>>, period: f64 },
}

/// A camera's next frame: (offset, camera), ordered by time, then camera.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Due(f64, u32);

impl Eq for Due {}

impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0).then(self.1.cmp(&other.1))
    }
}

impl Iterator for Schedule {
    type Item = Arrival;

    fn next(&mut self) -> Option<Arrival> {
        let (offset, worker) = match &mut self.source {
            Source::None => return None,
            Source::Poisson { rng, rate, t } => {
                // Inverse CDF of the exponential; 1 - u is in (0, 1].
                *t += -(1.0 - rng.uniform()).ln() / *rate;
                if *t >= self.duration {
                    self.source = Source::None;
                    return None;
                }
                (*t, (rng.next_u64() % self.workers as u64) as u32)
            }
            Source::Streams { next, period } => {
                let Reverse(Due(t, s)) = next.pop()?;
                if t >= self.duration {
                    // The earliest frame left is past the end: so are all the others.
                    self.source = Source::None;
                    return None;
                }
                next.push(Reverse(Due(t + *period, s)));
                (t, s % self.workers)
            }
        };
        let a = Arrival { id: self.id, offset, worker };
        self.id += 1;
        Some(a)
    }
}

/// The schedule as the PyTorch server reads it: `id offset worker` per line.
pub(crate) fn write_text(arrivals: impl Iterator<Item = Arrival>, to: &mut impl std::io::Write) -> std::io::Result<()> {
    for a in arrivals {
        writeln!(to, "{} {:.9} {}", a.id, a.offset, a.worker)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_arrivals_have_the_asked_mean_rate_and_exponential_gaps() {
        let a = arrivals(&Scenario::Server { rate: 500.0 }, 60.0, 2, 7);
        let rate = a.len() as f64 / 60.0;
        // 30,000 expected; Poisson sd 173 (0.6 %): 3 % is over 5 sd.
        assert!((rate - 500.0).abs() < 15.0, "rate {rate}");
        let gaps: Vec<f64> = a.windows(2).map(|w| w[1].offset - w[0].offset).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        // Exponential: the coefficient of variation is 1 (a constant period would give 0).
        let cv = var.sqrt() / mean;
        assert!((cv - 1.0).abs() < 0.05, "cv {cv}");
        // Both workers get about half.
        let w0 = a.iter().filter(|x| x.worker == 0).count() as f64 / a.len() as f64;
        assert!((w0 - 0.5).abs() < 0.02, "{w0}");
        assert!(a.windows(2).all(|w| w[0].offset <= w[1].offset && w[1].id == w[0].id + 1));
        assert!(a.iter().all(|x| x.offset >= 0.0 && x.offset < 60.0));
    }

    #[test]
    fn every_camera_sends_at_its_period_from_its_own_phase() {
        let (streams, fps, dur) = (7u32, 5.0, 10.0);
        let a = arrivals(&Scenario::Streams { streams, fps }, dur, 3, 1);
        assert_eq!(a.len(), 7 * 50);
        // Recover each camera's frames: the k-th arrival of a worker's cameras
        // are interleaved, so group by (worker, phase).
        let mut phases: Vec<f64> = a.iter().map(|x| x.offset % 0.2).collect();
        phases.sort_by(f64::total_cmp);
        phases.dedup_by(|x, y| (*x - *y).abs() < 1e-9);
        assert_eq!(phases.len(), 7, "one phase per camera");
        for p in &phases {
            let mine: Vec<&Arrival> = a.iter().filter(|x| (x.offset % 0.2 - p).abs() < 1e-9).collect();
            assert_eq!(mine.len(), 50);
            assert!(mine.windows(2).all(|w| (w[1].offset - w[0].offset - 0.2).abs() < 1e-9));
            assert!(mine.iter().all(|x| x.worker == mine[0].worker));
        }
        // Cameras are spread over the workers: 3, 2 and 2.
        let per = |w: u32| a.iter().filter(|x| x.worker == w).count();
        assert_eq!((per(0), per(1), per(2)), (150, 100, 100));
    }

    /// The merge gives what sorting every camera's frames at once gave.
    #[test]
    fn streams_are_merged_in_time_order_as_a_full_sort_would() {
        let (streams, fps, dur) = (40u32, 7.0, 3.0);
        let mut rng = Rng::keyed(&[9, 0x5e_7e]);
        let (period, mut all) = (1.0 / fps, vec![]);
        for s in 0..streams {
            let mut t = rng.uniform() * period;
            while t < dur {
                all.push((t, s % 3));
                t += period;
            }
        }
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        let got: Vec<(f64, u32)> =
            arrivals(&Scenario::Streams { streams, fps }, dur, 3, 9).iter().map(|a| (a.offset, a.worker)).collect();
        assert!(got == all, "{} arrivals, {} from the sort", got.len(), all.len());
    }

    /// A long load is generated as it is taken, never held whole.
    #[test]
    fn a_schedule_is_made_as_it_is_taken() {
        let mut s = schedule(&Scenario::Streams { streams: 1000, fps: 30.0 }, 1e9, 1, 1);
        // 30 billion arrivals in all; the first million cost only the heap of 1000 cameras.
        assert_eq!(s.nth(999_999).map(|a| a.id), Some(999_999));
        let mut p = schedule(&Scenario::Server { rate: 1e6 }, 1e9, 4, 1);
        assert!(p.nth(1_000_000).is_some_and(|a| a.offset < 2.0));
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule() {
        let s = Scenario::Server { rate: 100.0 };
        assert_eq!(arrivals(&s, 5.0, 1, 3), arrivals(&s, 5.0, 1, 3));
        assert_ne!(arrivals(&s, 5.0, 1, 3), arrivals(&s, 5.0, 1, 4));
        assert!(arrivals(&Scenario::Offline, 5.0, 1, 3).is_empty());
    }
}
