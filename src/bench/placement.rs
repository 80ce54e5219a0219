//! Where a `gpubench run` process sits in its job, from its device flags and
//! the environment: its role (a local run, ddp's launcher, one rank, the
//! PyTorch reference), the devices its configuration is for (`Seat`), and
//! whether it writes the run's initial weights. The command line's
//! conversion (`cli::run`) asks here, with plain values, then builds the
//! configuration for the seat.
use anyhow::Result;

use super::ddp::env::DistEnv;
use super::Role;
use crate::config::{Backend, Impl, InitWriter, StrategyKind};
use crate::device::capacity::{check_cpu_workers, Workers};
use crate::device::{self, DeviceKind, Devices};
use crate::error::usage;

/// A process's seat in its job: which devices its configuration is for.
#[derive(Debug, Clone)]
pub enum Seat {
    /// This process drives `devices`: single, dp, the ddp launcher (one
    /// worker per device) and the PyTorch reference.
    Local(Devices),
    /// One ddp rank: its own device, its node's devices and the job's size.
    Rank { mine: Devices, node: Devices, env: DistEnv },
}

/// What a run's command line says about where it runs: `--gpus`, `--cpu`,
/// `--backend`, the strategy and implementation, and the rendezvous.
pub(crate) struct Ask<'a> {
    pub gpus: Option<&'a str>,
    pub cpu: Option<usize>,
    pub backend: Option<Backend>,
    pub strategy: StrategyKind,
    pub implementation: Impl,
    pub master_addr: Option<&'a str>,
    pub master_port: Option<u16>,
    /// The run prints its human summary (else device notes stay quiet).
    pub talks: bool,
}

/// This process's role and seat (`ours`: a rank our launcher started, the
/// hidden `rank` subcommand; others are told by RANK/WORLD_SIZE or Slurm's
/// variables).
pub(crate) fn seat(a: &Ask, ours: bool) -> Result<(Role, Seat)> {
    if let Some(n) = a.cpu {
        let workers = match a.strategy == StrategyKind::Ddp {
            true => Workers::Processes,
            false => Workers::Threads,
        };
        check_cpu_workers(n, workers, !a.talks || std::env::var_os("RANK").is_some())?;
    }
    if a.implementation == Impl::Pytorch {
        let devices = device::resolve_for_reference(a.gpus, a.cpu, !a.talks)?;
        return Ok((Role::Pytorch, Seat::Local(devices)));
    }
    if a.strategy != StrategyKind::Ddp {
        let repeats = a.strategy == StrategyKind::Dp;
        return Ok((Role::Local, Seat::Local(device::resolve_with(a.gpus, a.cpu, !a.talks, repeats)?)));
    }
    match DistEnv::from_process(a.master_addr, a.master_port, ours)? {
        None => {
            let devices = device::resolve_with(a.gpus, a.cpu, !a.talks, shared_gpu_test_mode(a)?)?;
            Ok((Role::Launcher, Seat::Local(devices)))
        }
        Some(env) => {
            let (mine, node) = rank_devices(a, &env)?;
            Ok((Role::Rank(env.clone()), Seat::Rank { mine, node, env }))
        }
    }
}

/// Who writes the run's initial weights, one process per job: a local run
/// or our launcher for `--save-init` (`save`); rank 0 of a job torchrun or
/// Slurm started; and the PyTorch reference always (its script starts from
/// gpubench's weights), unless it copies `--init-from` (`from`). On CUDA a
/// child writes them (`in_child` makes the CPU do so too: a test hook).
pub(crate) fn init_writer(role: &Role, save: bool, from: bool, kind: DeviceKind, in_child: bool) -> InitWriter {
    let writes = match role {
        Role::Local | Role::Launcher => save,
        Role::Rank(env) => !env.ours && env.rank == 0 && save,
        Role::Pytorch => !from,
    };
    match writes {
        false => InitWriter::Nobody,
        true if kind == DeviceKind::Cuda || in_child => InitWriter::Child,
        true => InitWriter::Here,
    }
}

/// Whether this ddp run may list a GPU more than once: the one-GPU test mode
/// (`--gpus 0,0 --backend gloo`: several ranks share the GPU, so the rank
/// combining, the straggler and the verdict run where only one GPU is at
/// hand). NCCL refuses two ranks on one GPU at its first collective
/// ("Duplicate GPU detected"), so without `--backend gloo` a repeated GPU is
/// refused here, before anything starts.
fn shared_gpu_test_mode(a: &Ask) -> Result<bool> {
    let gloo = a.backend == Some(Backend::Gloo);
    let Some(list) = a.gpus else { return Ok(gloo) };
    let ords = device::parse_gpu_list_with(list, true)?;
    match device::first_repeat(&ords) {
        Some(o) if !gloo => Err(usage(format!(
            "--gpus {list} lists GPU {o} twice: NCCL refuses two ranks on one GPU; add --backend gloo for the \
             one-GPU test mode (the ranks share the GPU, which shows the code paths, not multi-GPU speed)"
        ))),
        _ => Ok(gloo),
    }
}

/// A rank's device, `--gpus`[LOCAL_RANK] or `--cpu` when given, else
/// cuda:LOCAL_RANK where CUDA exists, else the CPU; and its node's devices:
/// the `--gpus`/`--cpu` list, or as many as the node has ranks.
fn rank_devices(a: &Ask, env: &DistEnv) -> Result<(Devices, Devices)> {
    let node_ranks = if env.ours { env.ranks_on_node() } else { env.local_world.unwrap_or(env.world_size) };
    if let Some(n) = a.cpu {
        let node = if env.ours { device::resolve(None, Some(n), true)? } else { Devices::cpu(node_ranks) };
        return Ok((Devices::cpu(1), node));
    }
    if let Some(list) = a.gpus {
        let shared = shared_gpu_test_mode(a)?;
        let ords = device::parse_gpu_list_with(list, shared)?;
        let o = *ords.get(env.local_rank).ok_or_else(|| {
            usage(format!(
                "LOCAL_RANK {} has no device in --gpus {list}; list one device per local rank",
                env.local_rank
            ))
        })?;
        let all = device::resolve_with(Some(list), None, true, shared)?;
        return Ok((Devices::cuda(vec![o]), all));
    }
    let count = device::cuda_device_count();
    match rank_gpu(env.local_rank, count)? {
        Some(o) => {
            device::check_cuda(&[o])?;
            Ok((Devices::cuda(vec![o]), Devices::cuda((0..node_ranks).collect())))
        }
        None => {
            // No GPU visible: the CPU, unless a loaded driver says there should be one.
            let cvd = std::env::var("CUDA_VISIBLE_DEVICES").ok();
            let cudart = crate::ffi::cuda_versions().cudart;
            if let Some(msg) = device::no_device_message(device::driver_version().as_deref(), cudart, cvd.as_deref()) {
                return Err(usage(msg));
            }
            Ok((Devices::cpu(1), Devices::cpu(node_ranks)))
        }
    }
}

/// The GPU of local rank `local_rank` when `count` are visible: its own
/// ordinal, or the only one when a launcher binds one GPU per task (Slurm's
/// --gpus-per-task); never the CPU while GPUs are visible. Ranks that really
/// share one GPU run with `--backend gloo`; NCCL refuses them at its first
/// collective ("Duplicate GPU detected").
fn rank_gpu(local_rank: usize, count: usize) -> Result<Option<usize>> {
    match count {
        0 => Ok(None),
        1 => Ok(Some(0)),
        n if local_rank < n => Ok(Some(local_rank)),
        n => Err(usage(format!(
            "LOCAL_RANK {local_rank} has no GPU of its own: this task sees {n}; bind one GPU per task, or list the \
             node's GPUs with --gpus"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rank_never_falls_back_to_the_cpu_while_gpus_are_visible() {
        assert_eq!(rank_gpu(0, 0).unwrap(), None);
        assert_eq!(rank_gpu(2, 4).unwrap(), Some(2));
        // One GPU bound per task: every local rank uses it.
        assert_eq!(rank_gpu(3, 1).unwrap(), Some(0));
        let e = rank_gpu(3, 2).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 2);
        assert!(e.to_string().contains("LOCAL_RANK 3"), "{e}");
    }
}
