//! gpubench's own process roles and its test hooks: every one is named and
//! documented here, once.
//!
//! # Roles
//!
//! gpubench starts copies of itself for work that needs a process of its
//! own. Each copy is a hidden subcommand (absent from `--help`) that wraps
//! the command line it serves, so the child builds its configuration through
//! the same parser and checks as the parent did; `cli` dispatches them.
//!
//! | subcommand | started by | the child |
//! |---|---|---|
//! | `rank run …`, `rank allreduce …` | the ddp and allreduce launcher (`bench::ddp::launcher`), with torchrun's variables set | is one rank of the job; the launcher writes the row if it dies |
//! | `infer-worker K P DIR infer …` | `infer --serving processes` (`serve::processes`) | serves worker K's share of P, reading the load from DIR and writing its records there |
//! | `write-init PATH run …` | `init::write_start`, on CUDA | writes the run's initial weights to PATH and exits, so the parent keeps no CUDA context |
//! | `cell DIR INDEX` | an emitted sweep's Slurm array task or Kubernetes pod (`fleet::slurm`, `fleet::k8s`) | runs cell INDEX of the sweep emitted into DIR, into DIR/cells/INDEX.csv |
//!
//! infer's workers and the launcher's ranks are given their parent's pid
//! (`PARENT_PID`) and exit once it is gone (`bench::ddp::worker::watch_parent`),
//! so a killed gpubench leaves no worker behind.
//!
//! The launcher variables (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`,
//! `LOCAL_WORLD_SIZE`, `MASTER_ADDR`, `MASTER_PORT`, `SLURM_*`) are not
//! ours: torchrun and Slurm set them, and `bench::ddp::env` reads them.
//!
//! # Test hooks
//!
//! Environment variables that only gpubench's own tests set, each off
//! unless set to a non-empty value (`Hook`). A run that one changed says so
//! in its row's note or error.
use std::ffi::OsString;

/// The variable a parent sets to its own pid for its children (infer's
/// workers), which exit once their parent is another: race-free even when
/// the parent dies before the child looks.
pub(crate) const PARENT_PID: &str = "GPUBENCH_PARENT_PID";

/// A copy of gpubench started by gpubench, as a hidden subcommand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Child {
    /// One rank of a job our launcher started (ddp's `run`, or `allreduce`).
    Rank,
    /// One serving process of `infer --serving processes`.
    InferWorker,
    /// Writes a run's initial weights, then exits.
    WriteInit,
    /// Runs one cell of an emitted sweep (what a Slurm array task or a
    /// Kubernetes pod runs).
    Cell,
}

impl Child {
    /// The hidden subcommand's name.
    pub(crate) const fn subcommand(self) -> &'static str {
        match self {
            Child::Rank => "rank",
            Child::InferWorker => "infer-worker",
            Child::WriteInit => "write-init",
            Child::Cell => "cell",
        }
    }

    /// The child's arguments: the role's subcommand, its own `params`, then
    /// `line`, the command line it serves (`run …`, `infer …`).
    pub(crate) fn args<I, S>(self, params: &[OsString], line: I) -> Vec<OsString>
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        let mut v: Vec<OsString> = vec![self.subcommand().into()];
        v.extend(params.iter().cloned());
        v.extend(line.into_iter().map(Into::into));
        v
    }
}

/// This process's own command line after the program name, with the
/// wrapping role's subcommand and parameters left out: what a child started
/// for another role must serve.
pub(crate) fn served_line() -> Vec<OsString> {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let skip = match args.first().and_then(|a| a.to_str()) {
        Some(s) if s == Child::Rank.subcommand() => 1,
        Some(s) if s == Child::InferWorker.subcommand() => 4,
        Some(s) if s == Child::WriteInit.subcommand() => 2,
        _ => 0,
    };
    args.into_iter().skip(skip).collect()
}

/// A test hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// `GPUBENCH_FAULT=RANK:STEP:KIND`: rank RANK of a ddp job fails at its
    /// STEP-th step (warm-up included, from 1), with the CUDA allocator's
    /// out-of-memory message (KIND `oom`), by aborting (`crash`) or by
    /// stopping, heartbeat and all (`stop`: a paused or cut-off host); for
    /// the tests that one rank's failure ends the job and names the rank, and
    /// that a silent rank is named as lost.
    Fault,
    /// `GPUBENCH_TEST_SERVICE_MS=N`: `infer`'s model becomes one that sleeps
    /// N ms per batch, a server of known capacity for the search's tests and
    /// the serving benchmark's machinery-only figure.
    ServiceMs,
    /// `GPUBENCH_INFER_CRASH=K`: worker K of `infer --serving processes`
    /// says it is ready, then dies.
    InferCrash,
    /// `GPUBENCH_SERVE_CRASH=1`: worker 1 of the PyTorch server dies
    /// (passed to the Python script as `--test-crash-worker 1`).
    ServeCrash,
    /// `GPUBENCH_INIT_IN_CHILD=1`: `--save-init` is written by a
    /// `write-init` child on the CPU too, as it is on CUDA.
    InitInChild,
    /// `GPUBENCH_SWEEP_CHILD=PROGRAM`: sweep and max-batch start PROGRAM
    /// instead of gpubench for each cell (with the same arguments), so a
    /// test can delay or wrap a cell.
    SweepChild,
    /// `GPUBENCH_TEST_SLOW_RANK=RANK:MS[:N]`: ddp rank RANK sleeps MS ms inside
    /// every forward pass (the first N only, when given): a straggler of known
    /// size for the verdict's test, or a slow first iteration.
    SlowRank,
    /// `GPUBENCH_TEST_CPUINFO=FILE`: read the CPU's flags from FILE instead
    /// of /proc/cpuinfo, so a test sees a CPU without fast bf16 kernels.
    CpuInfo,
    /// `GPUBENCH_TEST_PREDICTIONS=DIR`: each of gpubench's serving workers
    /// writes DIR/worker-K.txt, one line per served request: its id and its
    /// logits; so a test holds one serving path's outputs to another's.
    Predictions,
}

impl Hook {
    #[cfg(test)]
    pub(crate) const ALL: [Hook; 9] = [
        Hook::Fault,
        Hook::ServiceMs,
        Hook::InferCrash,
        Hook::ServeCrash,
        Hook::InitInChild,
        Hook::SweepChild,
        Hook::SlowRank,
        Hook::CpuInfo,
        Hook::Predictions,
    ];

    /// The environment variable.
    pub const fn var(self) -> &'static str {
        match self {
            Hook::Fault => "GPUBENCH_FAULT",
            Hook::ServiceMs => "GPUBENCH_TEST_SERVICE_MS",
            Hook::InferCrash => "GPUBENCH_INFER_CRASH",
            Hook::ServeCrash => "GPUBENCH_SERVE_CRASH",
            Hook::InitInChild => "GPUBENCH_INIT_IN_CHILD",
            Hook::SweepChild => "GPUBENCH_SWEEP_CHILD",
            Hook::SlowRank => "GPUBENCH_TEST_SLOW_RANK",
            Hook::CpuInfo => "GPUBENCH_TEST_CPUINFO",
            Hook::Predictions => "GPUBENCH_TEST_PREDICTIONS",
        }
    }

    /// Its value, when set and not empty.
    pub(crate) fn get(self) -> Option<String> {
        std::env::var(self.var()).ok().filter(|v| !v.is_empty())
    }

    pub(crate) fn is_set(self) -> bool {
        self.get().is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hook_has_its_own_variable() {
        let mut v: Vec<&str> = Hook::ALL.iter().map(|h| h.var()).collect();
        v.sort();
        v.dedup();
        assert_eq!(v.len(), Hook::ALL.len());
        assert!(v.iter().all(|n| n.starts_with("GPUBENCH_")));
    }

    #[test]
    fn a_child_serves_the_parent_line() {
        let a = Child::InferWorker.args(&["1".into(), "2".into(), "/tmp/d".into()], ["infer", "--cpu", "2"]);
        let a: Vec<&str> = a.iter().map(|s| s.to_str().unwrap()).collect();
        assert_eq!(a, ["infer-worker", "1", "2", "/tmp/d", "infer", "--cpu", "2"]);
    }
}
