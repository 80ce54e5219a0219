//! gpubench: which parallel training strategy is fastest on your GPUs, and why.
//!
//! `runner` measures; `strategy` holds the parallelism (single, dp, ddp);
//! `launcher` starts ddp's worker processes; `dist` reaches libtorch's c10d;
//! `report` writes rows and summaries.
pub mod cli;
pub mod config;
pub mod data;
pub mod device;
pub mod dist;
pub mod error;
pub mod ffi;
pub mod info;
pub mod launcher;
pub mod metrics;
pub mod model;
pub mod reference;
pub mod report;
pub mod runner;
pub mod strategy;
pub mod sweep;
