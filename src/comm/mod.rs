//! Communication, measured as NVIDIA's nccl-tests measures it: `allreduce`
//! times libtorch's own c10d all-reduce (NCCL on GPUs, Gloo on the CPU) per
//! message size, one process per device, through the launcher `run --strategy
//! ddp` uses.
pub mod allreduce;
