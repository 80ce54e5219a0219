//! gpubench: which parallel training strategy is fastest on your GPUs, and why.
//!
//! Layers, each importing only the layers below it (checked by
//! `.ci/check-layers`):
//!
//! | layer    | modules | what |
//! |----------|---------|------|
//! | entry    | `app`, `cli` | parse the command line; the one conversion to configurations |
//! | commands | `commands` | one module per subcommand: glue, printing, exit codes |
//! | engines  | `bench`, `reference`, `serve`, `comm`, `sweep`, `report` | a measured run; PyTorch's run; inference serving; all-reduce; a matrix of runs; analysis of rows |
//! | parts    | `strategy`, `data`, `metrics`, `model`, `init`, `results` | parallelism, input, telemetry, models, start files, file formats |
//! | base     | `config`, `device`, `dist`, `ffi`, `error`, `proc`, `internal` | configuration types, devices, c10d, C++ shims, errors, child processes, process roles and test hooks |
//!
//! A run flows `app` → `cli::run::job` (role and `RunConfig`, built and
//! checked once) → `commands::run` → `bench::session::run` (single, dp, a
//! ddp rank) or `bench::ddp::launcher` or `reference`, which write rows
//! through `bench::sinks` in `results`' formats.
pub mod app;
pub mod bench;
pub mod cli;
pub mod comm;
pub mod commands;
pub mod config;
pub mod data;
pub mod device;
pub mod dist;
pub mod error;
pub mod ffi;
pub mod init;
pub mod internal;
pub mod metrics;
pub mod model;
pub mod proc;
pub mod reference;
pub mod report;
pub mod results;
pub mod serve;
pub mod strategy;
pub mod sweep;
