//! One module per subcommand: the glue between a configuration and the
//! engines (printing, exit codes). Commands take plain configurations;
//! parsing and validating the command line is `cli`'s.
pub mod allreduce;
pub mod data_bench;
pub mod infer;
pub mod info;
pub mod max_batch;
pub mod predict;
pub mod report;
pub mod run;
pub mod schema;
pub mod sweep;
pub mod upgrade;
