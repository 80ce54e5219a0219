//! Fidelity: PyTorch's own implementation of the same run, side by side. gpubench claims its `dp` and `ddp`
//! behave like `torch.nn.DataParallel` and `DistributedDataParallel`; `gpubench run --impl pytorch …` checks
//! that on the user's machine, appending PyTorch's row to the same `--out` with `impl=pytorch`, so `report` and
//! `compare` show the two side by side (`sweep --impl gpubench,pytorch` runs every cell under both).
//!
//! `pytorch_bench.py` and `pytorch_common.py` (beside this file) are compiled into the binary and written to a temporary directory at run
//! time, so an installed binary needs no source tree. It is the same training loop in PyTorch Python:
//! torchvision's ResNet layout (written out; torchvision is not needed) and `tinycnn`, with gpubench's parameter
//! names; the same synthetic data; SGD with the same hyperparameters (the learning rate passed resolved);
//! forward and loss under autocast for fp16/bf16, `zero_grad`, backward, step; the same untimed warm-up, device
//! synchronization before each clock read, and loss read outside the timed region; for ddp the loss averaged
//! over ranks with rank 0 deciding when to stop, and each step as long as its slowest rank. The precision knobs
//! are mirrored (`fp32` turns TF32 off as gpubench does, `--channels-last`, `--cudnn-benchmark`,
//! `--deterministic`, fp16 through `torch.amp.GradScaler`).
//! - `single`: the module on one device.
//! - `dp`: `torch.nn.DataParallel` over `--gpus`, CUDA only: on the CPU it just calls the module, so
//!   `--impl pytorch --strategy dp` on the CPU is a usage error rather than a row that is not DataParallel.
//! - `ddp`: `DistributedDataParallel` under `python -m torch.distributed.run` (gloo or NCCL as `--backend`;
//!   the bucket, buffer, node and master options passed through; CPU ranks split the cores as gpubench's do).
//!
//! The script writes JSON (step times, losses, outcome) and the row is built here with `bench::row`, so there
//! is one schema; its `note` says which torch and Python ran and where the weights came from. `--breakdown` and
//! `--telemetry` measure gpubench's own process and are refused with `--impl pytorch`.
//!
//! Which Python (`python`): `$GPUBENCH_PYTHON`, else `$GPUBENCH_PYTHON_BIN` (set-up's `env.sh`), else set-up's
//! venv `torch-2.11.0-py*/bin/python` under `$GPUBENCH_HOME` or `~/.cache/gpubench`, else `python3`: the first
//! that has torch installed. If none does, one line says to run `scripts/setup` or set `GPUBENCH_PYTHON`; another torch
//! version is used with a warning.
//!
//! Same start: with `--init-from FILE` both implementations start from its weights and data seed, whatever
//! `--seed` says; without it, the reference starts from the weights gpubench builds for `--seed` (written to a
//! temporary init file; gpubench's initialisers are tch's, not torchvision's). The synthetic batches match
//! because tch and torch share libtorch's generators: `torch.manual_seed(s)` then `randn`, `randint` in the same
//! order reproduce `data::synthetic` (data seed `--seed ^ 0x5eed`, plus 7919 × rank under ddp). `tests/it/fidelity.rs`
//! checks per-step losses within 1e-4 relative for single `tinycnn`, single `resnet18` and ddp gloo (2 ranks).
//!
//! Speed: `scripts/fidelity` runs both implementations interleaved (A B, then B A, so slow drift cancels) and
//! prints the throughput ratio per pair with its median and spread, and the fastest-step ratio: other load only
//! ever slows a step, so fastest steps estimate the uncontended ratio better. Figures: `results/README.md`.
pub mod python;

use anyhow::{Context, Result};
use serde::Deserialize;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::bench::ddp::env::RANK_VARS;
use crate::bench::measure::{figures, Measurement};
use crate::bench::row::{base_row, fill_row};
use crate::bench::sinks::{Outcome, Sinks};
use crate::config::{Length, RunConfig, StrategyKind};
use crate::device::{self, DeviceKind};
use crate::error::{is_oom, usage};
use crate::init::{read_init_meta, write_start};
use crate::proc;
use crate::results::Status;
use python::{find_python, TempDir, TORCH_VERSION};

/// The reference script, embedded so that an installed binary needs no source tree.
pub(crate) const SCRIPT: &str = include_str!("pytorch_bench.py");
/// What the training and the serving scripts share (models, settings,
/// helpers); written beside either.
pub(crate) const COMMON: &str = include_str!("pytorch_common.py");

/// What the script reports (rank 0 for ddp).
#[derive(Debug, Deserialize)]
pub(crate) struct ScriptSummary {
    pub torch_version: String,
    pub python_version: String,
    pub device_name: String,
    /// The CUDA the reference's torch was built for (on the legacy route,
    /// another than gpubench's).
    #[serde(default)]
    pub cuda_version: Option<String>,
    pub threads: u32,
    #[serde(default)]
    pub backend: String,
    pub step_secs: Vec<f64>,
    /// null for a non-finite loss (JSON has no NaN).
    pub losses: Vec<Option<f64>>,
    pub warmup_steps: u64,
    pub loss_first: Option<f64>,
    pub status: String,
    #[serde(default)]
    pub error: String,
    /// fp16: steps GradScaler skipped (None when it cannot be told).
    #[serde(default)]
    pub skipped_steps: Option<u64>,
}

fn secs(d: std::time::Duration) -> String {
    format!("{}", d.as_secs_f64())
}

/// The script's arguments for this run (everything already validated).
fn script_args(cfg: &RunConfig, init: &Path, json_out: &Path) -> Vec<String> {
    let mut v: Vec<String> = vec![
        "--strategy".into(),
        cfg.strategy.name().into(),
        "--device".into(),
        if cfg.placement.devices.kind == DeviceKind::Cuda { "cuda" } else { "cpu" }.into(),
        "--model".into(),
        cfg.workload.model.name().into(),
        "--num-classes".into(),
        cfg.workload.num_classes.to_string(),
        "--image-size".into(),
        cfg.workload.image_size.to_string(),
        "--batch-size".into(),
        cfg.batch_per_device.to_string(),
        "--lr".into(),
        cfg.optim.lr.to_string(),
        "--optimizer".into(),
        cfg.optim.optimizer.name().into(),
        "--grad-accum".into(),
        cfg.grad_accum.to_string(),
        "--momentum".into(),
        cfg.optim.momentum.to_string(),
        "--weight-decay".into(),
        cfg.optim.weight_decay.to_string(),
        // The same step implementation as gpubench's row, like with like.
        "--optimizer-impl".into(),
        cfg.optim.optimizer_impl.resolve().name().into(),
        "--seed".into(),
        cfg.workload.seed.to_string(),
        "--init".into(),
        init.display().to_string(),
        "--json-out".into(),
        json_out.display().to_string(),
    ];
    match cfg.schedule.timed {
        Length::Steps(n) => v.extend(["--steps".into(), n.to_string()]),
        Length::Time(d) => v.extend(["--duration".into(), secs(d)]),
        Length::Auto => unreachable!("--duration auto is refused with --impl pytorch (cli::run)"),
    }
    match cfg.schedule.warmup {
        Length::Steps(n) => v.extend(["--warmup".into(), n.to_string()]),
        Length::Time(d) => v.extend(["--warmup-time".into(), secs(d)]),
        Length::Auto => unreachable!("--warmup auto is refused with --impl pytorch (cli::run)"),
    }
    if let Some(t) = cfg.host.count() {
        v.extend(["--threads".into(), t.to_string()]);
    }
    v.extend(["--precision".into(), cfg.workload.precision.name().into()]);
    for (on, flag) in [
        (cfg.workload.channels_last, "--channels-last"),
        (cfg.workload.cudnn_benchmark, "--cudnn-benchmark"),
        (cfg.workload.deterministic, "--deterministic"),
        (cfg.checkpoint, "--checkpoint"),
        (cfg.cuda_graphs, "--cuda-graphs"),
    ] {
        if on {
            v.push(flag.into());
        }
    }
    // single and dp on CUDA: our ordinals (the child inherits our
    // CUDA_VISIBLE_DEVICES, so they mean the same devices there).
    if cfg.strategy != StrategyKind::Ddp && cfg.placement.devices.kind == DeviceKind::Cuda {
        let ids: Vec<String> = cfg.placement.devices.ordinals.iter().map(|o| o.to_string()).collect();
        v.extend(["--gpus".into(), ids.join(",")]);
    }
    if cfg.strategy == StrategyKind::Ddp {
        let d = &cfg.ddp;
        v.extend(["--bucket-cap-mb".into(), d.bucket_cap_mb.to_string()]);
        v.extend(["--backend".into(), d.backend.name().into()]);
        if d.gradient_as_bucket_view {
            v.push("--gradient-as-bucket-view".into());
        }
        if d.find_unused_parameters {
            v.push("--find-unused-parameters".into());
        }
        if !d.broadcast_buffers {
            v.push("--no-broadcast-buffers".into());
        }
        v.extend(["--dist-timeout".into(), secs(d.timeout)]);
        v.extend(["--comm-hook".into(), d.comm_hook.name().into()]);
    }
    v
}

/// The most telling line of a failed child's stderr: the first exception
/// line of a Python traceback (torchrun's own summary and rank prefixes left
/// out) or our script's `error:` line, else the last line.
fn failure_line(lines: &[String]) -> String {
    let strip = |l: &str| -> String {
        let t = l.trim();
        match t.strip_prefix("[rank") {
            Some(rest) => rest.split_once("]:").map(|(_, m)| m.trim().to_string()).unwrap_or_else(|| t.to_string()),
            None => t.to_string(),
        }
    };
    let is_err = |t: &String| {
        let head = t.split(':').next().unwrap_or("");
        let exception = !head.contains(' ') && (head.ends_with("Error") || head.ends_with("Exception"));
        (t.starts_with("error:") || exception) && !t.contains("ChildFailedError") && t.len() > head.len() + 2
    };
    let cleaned: Vec<String> = lines.iter().map(|l| strip(l)).collect();
    cleaned.iter().find(|t| is_err(t)).or_else(|| cleaned.last()).cloned().unwrap_or_default()
}

/// `gpubench run --impl pytorch`: the run `cfg` describes, by PyTorch.
pub(crate) fn run(cfg: &RunConfig) -> Result<i32> {
    let ddp = cfg.strategy == StrategyKind::Ddp;
    let local = &cfg.placement.devices;
    let writes_row = !ddp || cfg.ddp.node_rank == 0;
    let sinks = Sinks::new(cfg, None);
    let py = find_python()?;
    let tmp = TempDir::new()?;
    let script = tmp.0.join("pytorch_bench.py");
    std::fs::write(&script, SCRIPT).with_context(|| format!("writing {}", script.display()))?;
    let common = tmp.0.join("pytorch_common.py");
    std::fs::write(&common, COMMON).with_context(|| format!("writing {}", common.display()))?;
    let json_out = tmp.0.join("summary.json");

    // The start: the given init file, or gpubench's own weights for --seed.
    let (init_path, meta) = match &cfg.init.from {
        Some(p) => {
            let meta = read_init_meta(p)?;
            if let Some(s) = &cfg.init.save {
                std::fs::copy(p, s).map_err(|e| usage(format!("--save-init {}: cannot write ({e})", s.display())))?;
            }
            (p.clone(), meta)
        }
        None => {
            let p = cfg.init.save.clone().unwrap_or_else(|| tmp.0.join("init.safetensors"));
            let meta = write_start(cfg, &p)?;
            (p, meta)
        }
    };

    if cfg.output.talks() {
        let base = py.torch_version.split('+').next().unwrap_or("");
        if base != TORCH_VERSION {
            eprintln!(
                "gpubench: warning: {} has torch {}, gpubench is built on {TORCH_VERSION}; kernels may differ",
                py.path.display(),
                py.torch_version
            );
        }
        eprintln!(
            "gpubench: PyTorch reference ({}, torch {}): {} on {}: batch {} per device × {} = {} global",
            py.path.display(),
            py.torch_version,
            cfg.strategy.name(),
            local.describe(),
            cfg.batch_per_device,
            cfg.placement.world,
            cfg.global_batch()
        );
    }
    // Made now, so that its timestamp is the run's start.
    let mut row = base_row(cfg);
    let args = script_args(cfg, &init_path, &json_out);
    let mut cmd = Command::new(&py.path);
    if ddp {
        let addr = cfg.ddp.master_addr.clone().unwrap_or_else(|| "127.0.0.1".into());
        let port = match cfg.ddp.master_port {
            Some(p) => p,
            None => crate::dist::free_port()?,
        };
        cmd.args(["-W", "ignore", "-m", "torch.distributed.run"])
            // The underscore spellings: torch 2.x takes both, torch 1.x only these.
            .arg(format!("--nnodes={}", cfg.ddp.nnodes))
            .arg(format!("--node_rank={}", cfg.ddp.node_rank))
            .arg(format!("--nproc_per_node={}", local.len()))
            .arg(format!("--master_addr={addr}"))
            .arg(format!("--master_port={port}"))
            .arg(&script)
            .args(&args);
        match local.kind {
            DeviceKind::Cpu => {
                let total = cfg.host.count().unwrap_or_else(device::cpu_cores);
                // torch.distributed.run would otherwise set 1 (and say so); the
                // script sets the same split itself.
                cmd.env("OMP_NUM_THREADS", (total / local.len()).max(1).to_string());
            }
            // torchrun gives local rank i cuda:i: the ranks see exactly our
            // devices, numbered from 0, mapped through our own
            // CUDA_VISIBLE_DEVICES (its entries may be UUIDs or MIG ids).
            DeviceKind::Cuda => {
                let cvd = std::env::var("CUDA_VISIBLE_DEVICES").ok();
                cmd.env("CUDA_VISIBLE_DEVICES", device::visible_ids(&local.ordinals, cvd.as_deref()));
            }
        }
    } else {
        cmd.arg(&script).args(&args);
    }
    // Our ddp variables must not leak into the reference's processes.
    for k in RANK_VARS {
        cmd.env_remove(k);
    }
    cmd.stdout(Stdio::null());
    let forward = (!cfg.output.quiet).then(|| "[pytorch] ".to_string());
    let ended = proc::spawn(&mut cmd, forward, 40).with_context(|| format!("starting {}", py.path.display()))?.wait();
    if !writes_row {
        return Ok(ended.exit.code());
    }

    row.libtorch_version = py.torch_version.split('+').next().unwrap_or("").to_string();
    let summary: Result<ScriptSummary, String> = match std::fs::read(&json_out) {
        Ok(b) => serde_json::from_slice(&b).map_err(|e| format!("unreadable summary ({e})")),
        Err(_) => Err(failure_line(&ended.tail)),
    };
    let (m, note) = match summary {
        Ok(s) => {
            row.threads = Some(s.threads);
            row.skipped_steps = s.skipped_steps;
            if !s.device_name.is_empty() {
                row.device_name = s.device_name.clone();
            }
            if let Some(v) = &s.cuda_version {
                row.cuda_version = v.clone();
            }
            if !s.backend.is_empty() {
                row.backend = s.backend.clone();
            }
            let m = Measurement {
                step_secs: s.step_secs,
                losses: s.losses.into_iter().map(|l| l.unwrap_or(f64::NAN)).collect(),
                warmup_steps: s.warmup_steps,
                loss_first: s.loss_first,
                status: Some(Status::of(&s.status)),
                error: s.error,
                ..Default::default()
            };
            (m, format!("PyTorch {} (Python {})", s.torch_version, s.python_version))
        }
        Err(line) => {
            let msg = format!("PyTorch reference {}: {line}", ended.how());
            let st = if is_oom(&line) || ended.looks_oom() { Status::Oom } else { Status::Failed };
            (
                Measurement { status: Some(st), error: msg, ..Default::default() },
                format!("PyTorch {}", py.torch_version),
            )
        }
    };
    let what = match cfg.strategy {
        StrategyKind::Single => "single device".to_string(),
        StrategyKind::Dp => "torch.nn.DataParallel".to_string(),
        StrategyKind::Ddp => {
            format!("DistributedDataParallel via torch.distributed.run, bucket_cap_mb {}", cfg.ddp.bucket_cap_mb)
        }
    };
    let start = match &cfg.init.from {
        Some(p) => format!("init from {} (data seed {})", p.display(), meta.data_seed),
        None => format!("init: gpubench's weights for seed {}", meta.seed),
    };
    row.note = format!("{note}; {what}; {start}");
    let fig = figures(&m.step_secs, cfg.global_batch(), cfg.placement.world);
    fill_row(&mut row, &m, fig.as_ref());
    crate::bench::row::fill_efficiency(
        &mut row,
        crate::arch::train_gflop_per_img(cfg.workload.model, cfg.workload.image_size, cfg.workload.num_classes),
    );
    sinks.write(&Outcome { row: &row, m: &m, fig: fig.as_ref(), devs: &[] })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_line_prefers_the_error() {
        let l: Vec<String> =
            ["Traceback", "  File x", "[rank1]: RuntimeError: boom", "[W] noise", "x.ChildFailedError: "]
                .map(String::from)
                .into();
        assert_eq!(failure_line(&l), "RuntimeError: boom");
        assert_eq!(failure_line(&["a".to_string(), "b".to_string()]), "b");
    }
}
