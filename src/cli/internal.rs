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
