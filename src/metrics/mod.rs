//! Measurements and their statistics.
pub mod stats;
