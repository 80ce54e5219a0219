//! The hidden subcommands of gpubench's own child processes
//! (`crate::internal::Child`): each wraps the command line it serves, which
//! is parsed again as gpubench's own, so a child configures exactly as its
//! parent did.
use anyhow::Result;
use clap::Args;
use std::ffi::OsString;
use std::path::PathBuf;

use super::{parse_wrapped, Command, Configure, Job};
use crate::error::usage;

/// `rank CMD …`: one rank of a job gpubench's launcher started.
#[derive(Args, Debug, Clone)]
pub(crate) struct Wrapped {
    /// The command line served (`run …` or `allreduce …`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    pub line: Vec<OsString>,
}

impl Configure for Wrapped {
    fn configure(self) -> Result<Job> {
        match parse_wrapped(&self.line)? {
            Command::Run(a) => super::run::into_job(*a, true),
            Command::Allreduce(a) => a.into_job(true),
            _ => Err(usage("`gpubench rank` serves `run` or `allreduce` (it is started by gpubench itself)")),
        }
    }
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

impl Configure for InferWorkerArgs {
    fn configure(self) -> Result<Job> {
        let Command::Infer(a) = parse_wrapped(&self.line)? else {
            return Err(usage("`gpubench infer-worker` serves `infer` (it is started by gpubench itself)"));
        };
        let cfg = a.into_config(true)?;
        let (k, p, dir) = (self.index, self.of, self.dir);
        Ok(Box::new(move || crate::commands::infer::worker(cfg, k, p, &dir)))
    }
}

/// `write-init PATH run …`: the run's initial weights to PATH.
#[derive(Args, Debug, Clone)]
pub(crate) struct WriteInitArgs {
    pub path: PathBuf,
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    pub line: Vec<OsString>,
}

impl Configure for WriteInitArgs {
    fn configure(self) -> Result<Job> {
        let Command::Run(a) = parse_wrapped(&self.line)? else {
            return Err(usage("`gpubench write-init` serves `run` (it is started by gpubench itself)"));
        };
        let (_, cfg) = super::run::job(*a, false)?;
        let path = self.path;
        Ok(Box::new(move || crate::commands::run::write_init_only(&cfg, &path)))
    }
}

/// `cell DIR INDEX`: cell INDEX of the sweep emitted into DIR, into
/// DIR/cells/INDEX.csv (what each Slurm array task and Kubernetes pod runs).
#[derive(Args, Debug, Clone)]
pub(crate) struct CellArgs {
    /// The directory `sweep --emit` wrote.
    pub dir: PathBuf,
    /// The cell's index in its manifest.
    pub index: String,
    /// The manifest's digest when the task was emitted: a manifest changed
    /// since is refused (older scripts pass none and are not checked).
    #[arg(long, value_name = "HEX")]
    pub manifest_digest: Option<String>,
}

impl Configure for CellArgs {
    fn configure(self) -> Result<Job> {
        let c = super::sweep::cell_job(&self.dir, &self.index, self.manifest_digest.as_deref())?;
        Ok(Box::new(move || crate::sweep::cell::run(&c)))
    }
}

/// `validate [--assume-gpus N] CMD …`: builds CMD's configuration, as a run
/// would, and stops before any device work: scripts check their gpubench
/// lines on any machine (scripts/gpu-smoke --plan), and the tests check
/// every command line of README.md and docs/.
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

impl Configure for ValidateArgs {
    fn configure(self) -> Result<Job> {
        if let Some(n) = self.assume_gpus {
            crate::device::assume_gpus(n);
        }
        let line: Vec<String> = self.line.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        // Built, then dropped: nothing of the served command runs.
        drop(parse_wrapped(&self.line)?.configure()?);
        Ok(Box::new(move || {
            println!("ok: gpubench {}", line.join(" "));
            Ok(0)
        }))
    }
}
