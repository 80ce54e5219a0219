//! Synthetic data, as tf_cnn_benchmarks does it: random images and labels
//! made once on the device, so that the benchmark measures compute and
//! communication rather than input. The loop rotates among a few distinct
//! batches so that no step is served the very same tensors twice in a row.
use anyhow::Result;
use tch::{Device, Kind, Tensor};

use super::{Batch, DataSource};

pub(crate) const DISTINCT_BATCHES: usize = 4;

pub struct Synthetic {
    batches: Vec<(Tensor, Tensor)>,
    next: usize,
}

impl Synthetic {
    /// Makes the batches with libtorch's global RNG seeded by `seed`, so the same
    /// seed gives the same data (per device type).
    pub fn new(batch: i64, image_size: i64, num_classes: i64, device: Device, seed: u64) -> Result<Self> {
        tch::manual_seed(seed as i64);
        let mut batches = Vec::with_capacity(DISTINCT_BATCHES);
        for _ in 0..DISTINCT_BATCHES {
            let x = Tensor::f_randn([batch, 3, image_size, image_size], (Kind::Float, device))?;
            let y = Tensor::f_randint(num_classes, [batch], (Kind::Int64, device))?;
            batches.push((x, y));
        }
        Ok(Synthetic { batches, next: 0 })
    }
}

impl Synthetic {
    /// Lays the images out as NHWC (for `--channels-last`), once, up front.
    pub(crate) fn to_channels_last(&self) -> Result<()> {
        for (x, _) in &self.batches {
            crate::ffi::to_channels_last(x)?;
        }
        Ok(())
    }
}

impl DataSource for Synthetic {
    fn next_batch(&mut self) -> Result<Batch> {
        let (x, y) = &self.batches[self.next];
        self.next = (self.next + 1) % self.batches.len();
        // Shallow copies: same storage, no device work.
        Ok(Batch { images: x.shallow_clone(), labels: y.shallow_clone() })
    }

    fn name(&self) -> String {
        "synthetic".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_among_distinct_batches_and_is_seeded() {
        let mut a = Synthetic::new(2, 8, 10, Device::Cpu, 7).unwrap();
        let b0 = a.next_batch().unwrap();
        let b1 = a.next_batch().unwrap();
        assert_eq!(b0.images.size(), vec![2, 3, 8, 8]);
        assert!(!b0.images.equal(&b1.images));
        for _ in 2..DISTINCT_BATCHES {
            a.next_batch().unwrap();
        }
        assert!(a.next_batch().unwrap().images.equal(&b0.images));
        let mut again = Synthetic::new(2, 8, 10, Device::Cpu, 7).unwrap();
        assert!(again.next_batch().unwrap().images.equal(&b0.images));
        let max = b0.labels.max().int64_value(&[]);
        assert!((0..10).contains(&max));
    }
}
