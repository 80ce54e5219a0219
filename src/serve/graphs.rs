//! `infer --cuda-graphs`: the forward pass captured once per batch-size
//! bucket after warm-up, then replayed. Dynamic batching makes every size
//! from 1 to `--max-batch`; a graph has one shape, so a batch runs in the
//! smallest bucket that holds it (powers of two, and `--max-batch` itself),
//! the rows past it holding whatever the buffer held (their outputs are
//! never read). Serially, every bucket reads the worker's own input buffer,
//! the one preprocessing writes into, so a batch costs no copy more than
//! eagerly. Under input overlap the graphs read a buffer of their own, and
//! each batch is copied in on the compute stream: the next batch is staged
//! into a slot while the current one may still be copying out of the other,
//! so neither slot can be the graphs' input. The buckets share one memory
//! pool: they are replayed one at a time, and each batch's predictions are
//! read before the next replay.
use anyhow::{anyhow, Result};
use tch::Tensor;

use super::forward::Forward;
use crate::ffi::CudaGraph;

/// The buckets for batches of 1 to `max_batch`: powers of two below it, and
/// `max_batch` itself.
pub(crate) fn buckets(max_batch: i64) -> Vec<i64> {
    let mut b: Vec<i64> = std::iter::successors(Some(1i64), |&x| Some(x * 2)).take_while(|&x| x < max_batch).collect();
    b.push(max_batch.max(1));
    b
}

/// The smallest bucket that holds `n`; None when none does.
pub(crate) fn bucket_for(buckets: &[i64], n: i64) -> Option<usize> {
    buckets.iter().position(|&b| b >= n)
}

/// A model whose forward is replayed from per-bucket graphs.
pub(super) struct Graphed {
    inner: Box<dyn Forward>,
    device: usize,
    /// The buffer the batches are written into: [max_batch, 3, s, s] on the device.
    input: Tensor,
    buckets: Vec<i64>,
    /// One graph and its output per bucket, once captured.
    graphs: Vec<(CudaGraph, Tensor)>,
}

impl Graphed {
    /// Graphs that read `input` (the worker's buffer), or with `own` a
    /// buffer of their own in `input`'s shape and layout (under overlap).
    pub(super) fn new(inner: Box<dyn Forward>, device: usize, input: Tensor, own: bool) -> Result<Graphed> {
        let buckets = buckets(input.size()[0]);
        let input = if own { input.f_empty_like()? } else { input };
        Ok(Graphed { inner, device, input, buckets, graphs: vec![] })
    }
}

impl Forward for Graphed {
    /// Captures every bucket, largest first (the largest sets the pool's
    /// size), each after one eager forward at its shape (cuDNN's choice for
    /// that shape is made outside the capture).
    fn capture(&mut self) -> Result<()> {
        let mut made: Vec<(CudaGraph, Tensor)> = vec![];
        for &b in self.buckets.iter().rev() {
            let x = self.input.f_narrow(0, 0, b)?;
            let _ = self.inner.forward(&x)?;
            let mut g = CudaGraph::new(self.device)?;
            let inner = &mut self.inner;
            let out = g
                .capture(made.first().map(|(g, _)| g), || inner.forward(&x))
                .map_err(|e| e.context(format!("capturing the forward of a batch of {b}")))?;
            made.push((g, out));
        }
        made.reverse();
        self.graphs = made;
        Ok(())
    }

    fn forward(&mut self, x: &Tensor) -> Result<Tensor> {
        if self.graphs.is_empty() {
            // Warm-up, before the capture.
            return self.inner.forward(x);
        }
        let n = x.size()[0];
        let i = bucket_for(&self.buckets, n)
            .ok_or_else(|| anyhow!("a batch of {n} is larger than the largest graph ({:?})", self.buckets.last()))?;
        if x.data_ptr() != self.input.data_ptr() {
            self.input.f_narrow(0, 0, n)?.f_copy_(x)?;
        }
        let (g, out) = &self.graphs[i];
        g.replay()?;
        Ok(out.f_narrow(0, 0, n)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_batch_size_has_the_smallest_bucket_that_holds_it() {
        assert_eq!(buckets(1), [1]);
        assert_eq!(buckets(8), [1, 2, 4, 8]);
        assert_eq!(buckets(12), [1, 2, 4, 8, 12]);
        let b = buckets(12);
        let pick = |n| b[bucket_for(&b, n).unwrap()];
        assert_eq!([pick(1), pick(3), pick(4), pick(5), pick(9), pick(12)], [1, 4, 4, 8, 12, 12]);
        assert_eq!(bucket_for(&b, 13), None);
    }
}
