//! One process's measured run of gpubench's own implementation: the session
//! template (`session`) over the measurement loop (`measure`), the row
//! (`row`) and its outputs (`sinks`); where the process sits in its job
//! (`placement`); ddp's launcher and ranks in `ddp`; the matmul
//! microbenchmark `peak` measures.
pub mod ddp;
pub mod measure;
pub mod peak;
pub mod placement;
pub mod row;
pub mod session;
pub mod sinks;

/// How this process takes part in a `gpubench run`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// single or dp: this process is the whole run.
    Local,
    /// ddp without a rank in the environment: start this node's ranks.
    Launcher,
    /// One ddp rank (started by our launcher, torchrun or Slurm).
    Rank(ddp::env::DistEnv),
    /// `--impl pytorch`: run PyTorch's own implementation.
    Pytorch,
}
