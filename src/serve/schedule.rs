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
/// order; empty for offline and single-stream.
pub(crate) fn arrivals(scenario: &Scenario, duration: f64, workers: u32, seed: u64) -> Vec<Arrival> {
    let workers = workers.max(1);
    let mut rng = Rng::keyed(&[seed, 0x5e_7e]);
    let mut v: Vec<(f64, u32)> = match *scenario {
        Scenario::Server { rate } => {
            let mut t = 0.0;
            let mut out = vec![];
            loop {
                // Inverse CDF of the exponential; 1 - u is in (0, 1].
                t += -(1.0 - rng.uniform()).ln() / rate;
                if t >= duration {
                    break out;
                }
                out.push((t, (rng.next_u64() % workers as u64) as u32));
            }
        }
        Scenario::Streams { streams, fps } => {
            let period = 1.0 / fps;
            let mut out = vec![];
            for s in 0..streams {
                let mut t = rng.uniform() * period;
                while t < duration {
                    out.push((t, s % workers));
                    t += period;
                }
            }
            out.sort_by(|a, b| a.0.total_cmp(&b.0));
            out
        }
        Scenario::Offline | Scenario::SingleStream => vec![],
    };
    v.drain(..).enumerate().map(|(i, (offset, worker))| Arrival { id: i as u64, offset, worker }).collect()
}

/// The schedule as the PyTorch server reads it: `id offset worker` per line.
pub(crate) fn to_text(arrivals: &[Arrival]) -> String {
    let mut s = String::with_capacity(arrivals.len() * 24);
    for a in arrivals {
        s += &format!("{} {:.9} {}\n", a.id, a.offset, a.worker);
    }
    s
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

    #[test]
    fn the_same_seed_gives_the_same_schedule() {
        let s = Scenario::Server { rate: 100.0 };
        assert_eq!(arrivals(&s, 5.0, 1, 3), arrivals(&s, 5.0, 1, 3));
        assert_ne!(arrivals(&s, 5.0, 1, 3), arrivals(&s, 5.0, 1, 4));
        assert!(arrivals(&Scenario::Offline, 5.0, 1, 3).is_empty());
    }
}
