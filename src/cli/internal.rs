//! The hidden subcommands of gpubench's own child processes
//! (`crate::internal::Role`): each wraps the command line it serves, which
//! `app` parses again as gpubench's own.
use clap::Args;
use std::ffi::OsString;
use std::path::PathBuf;

/// `rank CMD …`: one rank of a job gpubench's launcher started.
#[derive(Args, Debug, Clone)]
pub(crate) struct Wrapped {
    /// The command line served (`run …` or `allreduce …`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    pub line: Vec<OsString>,
}

/// `infer-worker K P DIR infer …`: serving process K of P.
#[derive(Args, Debug, Clone)]
pub(crate) struct InferWorkerArgs {
    pub index: u32,
    pub of: u32,
    /// Where the parent wrote the load and this worker writes its records.
    pub dir: PathBuf,
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    pub line: Vec<OsString>,
}

/// `write-init PATH run …`: the run's initial weights to PATH.
#[derive(Args, Debug, Clone)]
pub(crate) struct WriteInitArgs {
    pub path: PathBuf,
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    pub line: Vec<OsString>,
}

/// `validate [--assume-gpus N] CMD …`: builds CMD's configuration, as a run
/// would, and stops before any device work: scripts check their gpubench
/// lines on any machine (scripts/gpu-smoke --plan).
#[derive(Args, Debug, Clone)]
pub(crate) struct ValidateArgs {
    /// CUDA devices to take as present, each passing the kernel check;
    /// without it, this machine's own.
    #[arg(long, value_name = "N")]
    pub assume_gpus: Option<usize>,
    /// The command line checked (`run …`, `infer …`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    pub line: Vec<OsString>,
}
