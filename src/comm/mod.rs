//! Communication: `allreduce` times libtorch's own c10d all-reduce (NCCL
//! on GPUs, Gloo on the CPU) per message size as nccl-tests does, one
//! process per device through the launcher `run --strategy ddp` uses;
//! `predict` turns one device's profile and such a curve into DDP's
//! expected step time on N devices.
pub mod allreduce;
pub mod predict;
