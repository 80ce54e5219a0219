//! All-reduce curves: a message's all-reduce time from a measured curve
//! (`gpubench allreduce --out FILE` rows) or from a bus bandwidth. Torch-free,
//! so that `report` can say what a run's all-reduce alone should cost;
//! `predict` simulates DDP's buckets on them.
use crate::config::{Backend, CommHook, CurveSource};
use crate::metrics::stats::percentile;
use crate::results::Fields;

/// nccl-tests' bus-bandwidth factor for all-reduce.
pub(crate) fn bus_factor(world: usize) -> f64 {
    if world <= 1 {
        1.0
    } else {
        2.0 * (world as f64 - 1.0) / world as f64
    }
}

/// All-reduce time of a message, in seconds.
pub(crate) trait Curve {
    fn time(&self, bytes: f64) -> f64;
    fn describe(&self) -> String;
}

/// `latency + bytes / algbw`, from a bus bandwidth at world size `n`.
pub(crate) struct Linear {
    pub latency: f64,
    pub busbw_gbs: f64,
    pub n: usize,
}

impl Curve for Linear {
    fn time(&self, bytes: f64) -> f64 {
        let algbw = self.busbw_gbs * 1e9 / bus_factor(self.n);
        self.latency + bytes / algbw
    }

    fn describe(&self) -> String {
        format!("busbw {} GB/s, latency {:.0} us", self.busbw_gbs, self.latency * 1e6)
    }
}

/// Measured (bytes, seconds) points, interpolated in log-log; flat below the
/// smallest size, at the last two points' bandwidth above the largest.
pub(crate) struct Measured {
    pub points: Vec<(f64, f64)>,
    pub what: String,
}

impl Curve for Measured {
    fn time(&self, bytes: f64) -> f64 {
        let p = &self.points;
        let b = bytes.max(1.0);
        if b <= p[0].0 || p.len() == 1 {
            return p[0].1;
        }
        for w in p.windows(2) {
            let ((x0, y0), (x1, y1)) = (w[0], w[1]);
            if b <= x1 {
                let f = (b.ln() - x0.ln()) / (x1.ln() - x0.ln());
                return (y0.ln() + f * (y1.ln() - y0.ln())).exp();
            }
        }
        let ((x0, y0), (x1, y1)) = (p[p.len() - 2], p[p.len() - 1]);
        let per_byte = ((y1 - y0) / (x1 - x0)).max(0.0);
        y1 + (b - x1) * per_byte
    }

    fn describe(&self) -> String {
        self.what.clone()
    }
}

/// The curve for world size `n` from `src` (a file's rows read once by the
/// caller); None when the file has no all-reduce at that size (`backend` must
/// match too). Of a file's dtypes, the one the gradients travel in is used
/// (`hook`: fp16 or bf16, else fp32), else fp32: dtypes are never pooled.
pub(crate) fn curve(
    src: &CurveSource,
    rows: &[crate::results::csv::Row],
    n: usize,
    backend: Backend,
    hook: CommHook,
) -> Option<Box<dyn Curve>> {
    match src {
        CurveSource::Busbw { busbw_gbs, latency } => {
            Some(Box::new(Linear { latency: latency.as_secs_f64(), busbw_gbs: *busbw_gbs, n }))
        }
        CurveSource::File(path) => {
            let usable: Vec<_> = rows
                .iter()
                .filter(|r| {
                    r.is_allreduce()
                        && r.status == crate::results::Status::Ok
                        && r.in_place == Some(true)
                        && r.n_devices as usize == n
                        && r.backend == backend.name()
                })
                .collect();
            let wire = if hook == CommHook::None { "fp32" } else { hook.name() };
            let dtype = [wire, "fp32"].into_iter().find(|d| usable.iter().any(|r| r.precision == *d))?;
            let mut by: std::collections::BTreeMap<u64, Vec<f64>> = Default::default();
            for r in usable.iter().filter(|r| r.precision == dtype) {
                // Log-log interpolation needs sizes and times above zero.
                if let (Some(b), Some(ms)) = (r.bytes.filter(|&b| b > 0), r.step_ms_mean.filter(|&t| t > 0.0)) {
                    by.entry(b).or_default().push(ms / 1e3);
                }
            }
            if by.is_empty() {
                return None;
            }
            let points: Vec<(f64, f64)> = by.into_iter().map(|(b, t)| (b as f64, percentile(&t, 50.0))).collect();
            let what = format!("{} ({} sizes of {dtype}, {} ×{n})", path.display(), points.len(), backend.name());
            Some(Box::new(Measured { points, what }))
        }
    }
}
