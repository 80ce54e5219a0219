//! One module per subcommand: the glue between a configuration and the
//! engines (printing, exit codes). Commands take plain configurations;
//! parsing and validating the command line is `cli`'s.
#[cfg(feature = "torch")]
pub mod allreduce;
pub mod collect;
#[cfg(feature = "torch")]
pub mod data_bench;
#[cfg(feature = "torch")]
pub mod infer;
pub mod info;
#[cfg(feature = "torch")]
pub mod max_batch;
#[cfg(feature = "torch")]
pub mod peak;
#[cfg(feature = "torch")]
pub mod predict;
pub mod report;
#[cfg(feature = "torch")]
pub mod run;
pub mod schema;
#[cfg(feature = "torch")]
pub mod sweep;
pub mod upgrade;
