//! Communication: `allreduce` times libtorch's own c10d all-reduce (NCCL
//! on GPUs, Gloo on the CPU) per message size as nccl-tests does, one
//! process per device through the launcher `run --strategy ddp` uses;
//! `predict` turns one device's profile and such a curve into DDP's
//! expected step time on N devices; `curve` reads such a curve, torch-free,
//! for `report` too.
#[cfg(feature = "torch")]
pub mod allreduce;
pub mod curve;
pub mod expected;
#[cfg(feature = "torch")]
pub mod predict;
