//! `gpubench allreduce`'s arguments (nccl-tests' flags where they match), and
//! their one conversion into an `AllreduceConfig`.
use anyhow::Result;
use clap::Args;

use super::opts::{CommitOpts, DeviceOpts, DistOpts, OutputOpts};
use super::parse::{parse_duration, parse_size};
use super::{Configure, Job};
use crate::bench::ddp::env::DistEnv;
use crate::config::{AllreduceConfig, Backend, CommDtype};
use crate::device::capacity::{check_cpu_workers, Workers};
use crate::device::{self, DeviceKind, Devices};
use crate::error::usage;
use crate::report::export::Format;

/// Time c10d's all-reduce per message size, as nccl-tests does (algbw,
/// busbw, correctness), one process per device.
#[derive(Args, Debug, Clone)]
pub(crate) struct AllreduceArgs {
    #[command(flatten)]
    pub devices: DeviceOpts,
    #[command(flatten)]
    pub dist: DistOpts,
    /// Smallest message (e.g. 8, 1K, 32M).
    #[arg(short = 'b', long = "minbytes", default_value = "8", allow_hyphen_values = true, value_name = "SIZE")]
    pub minbytes: String,
    /// Largest message.
    #[arg(short = 'e', long = "maxbytes", default_value = "64M", allow_hyphen_values = true, value_name = "SIZE")]
    pub maxbytes: String,
    /// Each size is the previous one times this (at least 2).
    #[arg(short = 'f', long = "stepfactor", default_value_t = 2, value_name = "F")]
    pub stepfactor: u64,
    /// Timed operations per size and placement.
    #[arg(short = 'n', long = "iters", default_value_t = 20, value_name = "N")]
    pub iters: u64,
    /// Untimed warm-up operations per size.
    #[arg(short = 'w', long = "warmup_iters", default_value_t = 5, value_name = "N")]
    pub warmup_iters: u64,
    /// Element type.
    #[arg(long, value_enum, default_value_t = CommDtype::Fp32)]
    pub dtype: CommDtype,
    /// Reduction; c10d's sum (the only one measured).
    #[arg(long, default_value = "sum", value_name = "OP")]
    pub op: String,
    // json: nccl-tests' JSON (its -J field names); csv: the rows.
    #[command(flatten)]
    pub output: OutputOpts,
    #[command(flatten)]
    pub commit: CommitOpts,
}

impl Configure for AllreduceArgs {
    fn configure(self) -> Result<Job> {
        self.commit.export();
        self.into_job(false)
    }
}

impl AllreduceArgs {
    /// The job of this process: the launcher, or (`ours`) a rank our
    /// launcher started (the hidden `rank` subcommand).
    pub(crate) fn into_job(self, ours: bool) -> Result<Job> {
        let (env, cfg) = self.job(ours)?;
        Ok(Box::new(move || crate::commands::allreduce::run(env, cfg)))
    }

    /// This process's place (None: the launcher) and its configuration.
    pub(crate) fn job(self, ours: bool) -> Result<(Option<DistEnv>, AllreduceConfig)> {
        let a = self;
        let mut output = a.output.output("allreduce", &[Format::Table, Format::Csv, Format::Json])?;
        let d = &a.dist;
        let min_bytes = parse_size("-b/--minbytes", &a.minbytes)?;
        let max_bytes = parse_size("-e/--maxbytes", &a.maxbytes)?;
        if min_bytes > max_bytes {
            return Err(usage(format!(
                "-b {} is larger than -e {}; give the smallest size first",
                a.minbytes, a.maxbytes
            )));
        }
        if a.stepfactor < 2 {
            return Err(usage(format!("-f {} would not grow the size; use a step factor of 2 or more", a.stepfactor)));
        }
        if a.iters == 0 {
            return Err(usage("-n must be at least 1"));
        }
        if a.op != "sum" {
            return Err(usage(format!("--op {}: only sum is measured (c10d's all_reduce default)", a.op)));
        }
        super::run::check_nodes(*d.nnodes, d.node_rank, d.master_addr.as_deref(), d.master_port)?;
        let env = DistEnv::from_process(d.master_addr.as_deref(), d.master_port, ours)?;
        // Only rank 0 of a job speaks.
        output.quiet |= env.as_ref().is_some_and(|e| e.rank != 0);
        let node = match (&a.devices.gpus, a.devices.cpu) {
            (Some(g), _) => device::resolve(Some(g), None, true)?,
            (None, Some(n)) => Devices::cpu(n),
            (None, None) => match device::cuda_device_count() {
                0 => Devices::cpu(2),
                n => {
                    // Every visible GPU, checked as --gpus would be (G14).
                    let all: Vec<usize> = (0..n).collect();
                    device::check_cuda(&all)?;
                    Devices::cuda(all)
                }
            },
        };
        if env.is_none() && node.kind == DeviceKind::Cpu {
            // Each rank is a libtorch process: 1000 of them once woke the OOM killer.
            check_cpu_workers(node.len(), Workers::Processes, output.quiet)?;
        }
        let backend = d.backend.unwrap_or(Backend::default_for(node.kind));
        if backend == Backend::Nccl && node.kind == DeviceKind::Cpu {
            return Err(usage("--backend nccl needs CUDA devices; use --backend gloo on the CPU"));
        }
        if node.len() * *d.nnodes < 2 {
            return Err(usage(
                "an all-reduce needs at least 2 ranks: list 2 or more --gpus, or --cpu 2, or run on more --nnodes",
            ));
        }
        let devices = match &env {
            Some(e) => match node.kind {
                DeviceKind::Cpu => Devices::cpu(1),
                DeviceKind::Cuda => {
                    let o = *node.ordinals.get(e.local_rank).ok_or_else(|| {
                        usage(format!("LOCAL_RANK {} has no device in {}", e.local_rank, node.describe()))
                    })?;
                    Devices::cuda(vec![o])
                }
            },
            None => node.clone(),
        };
        Ok((
            env,
            AllreduceConfig {
                devices,
                node_devices: node,
                backend,
                min_bytes,
                max_bytes,
                factor: a.stepfactor,
                iters: a.iters,
                warmup: a.warmup_iters,
                dtype: a.dtype,
                nnodes: *d.nnodes,
                node_rank: d.node_rank,
                master_addr: d.master_addr.clone(),
                master_port: d.master_port,
                timeout: parse_duration("--dist-timeout", &d.dist_timeout)?,
                output,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    /// 1000 ranks once woke the kernel's OOM killer: refused before any starts.
    #[test]
    fn ranks_beyond_the_host_are_refused_before_any_starts() {
        let v = ["gpubench", "allreduce", "--cpu", "100000", "-q"];
        let crate::cli::Command::Allreduce(a) = crate::cli::Cli::parse_args(v).unwrap().command else {
            unreachable!()
        };
        let e = a.job(false).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 2);
        assert!(e.to_string().contains("8 per core"), "{e}");
    }
}
