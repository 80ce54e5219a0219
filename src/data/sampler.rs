//! DistributedSampler semantics with drop_last: each epoch the dataset is
//! shuffled with (seed, epoch), cut to a multiple of the world size (the tail
//! is dropped), and rank r takes every world-th index from r. Shards are
//! disjoint and equal in size; every rank computes the same permutation.
use super::transform::Rng;

#[derive(Debug, Clone, Copy)]
pub(crate) struct Shard {
    pub len: usize,
    pub rank: usize,
    pub world: usize,
    pub seed: u64,
}

impl Shard {
    /// Samples per rank and epoch.
    pub(crate) fn per_rank(&self) -> usize {
        self.len / self.world
    }

    /// This rank's indices for `epoch`, in order.
    pub(crate) fn epoch_indices(&self, epoch: u64) -> Vec<u32> {
        let mut perm: Vec<u32> = (0..self.len as u32).collect();
        let mut rng = Rng::keyed(&[self.seed, epoch, 0x5A3D]);
        for i in (1..perm.len()).rev() {
            let j = (rng.next_u64() % (i as u64 + 1)) as usize;
            perm.swap(i, j);
        }
        let total = self.per_rank() * self.world;
        perm[..total].iter().skip(self.rank).step_by(self.world).copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_disjoint_equal_and_reshuffled() {
        let world = 3;
        let shards: Vec<Vec<u32>> =
            (0..world).map(|rank| Shard { len: 11, rank, world, seed: 5 }.epoch_indices(0)).collect();
        let mut all: Vec<u32> = shards.concat();
        assert!(shards.iter().all(|s| s.len() == 3));
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 9);
        let s = Shard { len: 11, rank: 0, world, seed: 5 };
        assert_ne!(s.epoch_indices(0), s.epoch_indices(1));
        assert_eq!(s.epoch_indices(1), s.epoch_indices(1));
    }
}
