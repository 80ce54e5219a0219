//! gpubench: which parallel training strategy is fastest on your GPUs, and why.
//!
//! Layers, each importing only the layers below it (checked by
//! `.ci/check-layers`):
//!
//! | layer    | modules | what |
//! |----------|---------|------|
//! | entry    | `app` | run the command line's job; errors printed in one place |
//! | cli      | `cli` | clap's types, the options shared by every subcommand (`cli::opts`, each defined once), and each subcommand's one conversion into its command's configuration |
//! | commands | `commands` | one module per subcommand (the registry `subcommands!`): the engines it drives, what it prints, its exit code |
//! | engines  | `bench`, `reference`, `serve`, `comm`, `sweep`, `fleet`, `report` | a measured run; PyTorch's run; inference serving; all-reduce; a matrix of runs; cluster formats; analysis of rows |
//! | parts    | `strategy`, `data`, `metrics`, `model`, `init`, `results` | parallelism, input, telemetry, models, start files, file formats |
//! | base     | `arch`, `config`, `device`, `dist`, `ffi`, `error`, `proc`, `internal` | architectures' arithmetic, configuration types, devices, c10d, C++ shims, errors, child processes, process roles and test hooks |
//!
//! A run flows `app` → `cli::job_of` → `cli::run` (role and `RunConfig`,
//! built and checked once) → `commands::run` → `bench::session::run`
//! (single, dp, a ddp rank) or `bench::ddp::launcher` or `reference`, which
//! write rows through `bench::sinks` in `results`' formats.
//!
//! The modules under `#[cfg(feature = "torch")]` (the default feature) need
//! libtorch; the rest is the torch-free core that `--no-default-features`
//! builds alone (results, reports, charts, the CI gate), and imports none of
//! them (also checked by `.ci/check-layers`).
// Without libtorch, much of the core that the benchmarks use goes unused;
// dead code is judged in the full build, where everything is compiled.
#![cfg_attr(not(feature = "torch"), allow(dead_code))]

pub mod app;
pub mod arch;
#[cfg(feature = "torch")]
pub mod bench;
pub mod cli;
pub mod comm;
pub mod commands;
pub mod config;
#[cfg(feature = "torch")]
pub mod data;
pub mod device;
#[cfg(feature = "torch")]
pub mod dist;
pub mod error;
#[cfg(feature = "torch")]
pub mod ffi;
pub mod fleet;
#[cfg(feature = "torch")]
pub mod init;
pub mod internal;
pub mod metrics;
#[cfg(feature = "torch")]
pub mod model;
pub mod proc;
#[cfg(feature = "torch")]
pub mod reference;
pub mod report;
pub mod results;
#[cfg(feature = "torch")]
pub mod serve;
#[cfg(feature = "torch")]
pub mod strategy;
#[cfg(feature = "torch")]
pub mod sweep;
