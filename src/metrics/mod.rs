//! Measurements and their statistics.
pub mod collect;
pub mod devices;
pub mod sampler;
pub mod stats;
