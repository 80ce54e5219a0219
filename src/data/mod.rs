//! Where each step's input comes from. The runner asks a `DataSource` for the
//! next batch and times how long it waits; strategies never see the source.
pub mod synthetic;

use anyhow::Result;
use tch::Tensor;

/// One step's input: images (N, 3, H, W) float and labels (N) int64.
#[derive(Debug)]
pub struct Batch {
    pub images: Tensor,
    pub labels: Tensor,
}

pub trait DataSource {
    /// The next batch, already on the device the strategy asked for.
    fn next_batch(&mut self) -> Result<Batch>;
    /// How the source is named in the `data` column.
    fn name(&self) -> String;
}
