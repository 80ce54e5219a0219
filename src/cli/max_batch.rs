//! `gpubench max-batch`: its arguments, and their conversion into a search
//! plan (`sweep::plan::MaxBatchPlan`). Every probe is a `gpubench run` with
//! the run options after `--`, the strategy and model among them.
use anyhow::Result;
use clap::{Args, ValueEnum};

use super::opts::{CommitOpts, DeviceOpts, MemLimit, OutOpt, RenderOpts};
use super::parse::{parse_duration, parse_size};
use super::run_line::RunLine;
use super::sweep::{cell_config, refuse_own};
use super::{Configure, Job};
use crate::config::{Impl, ModelKind, StrategyKind};
use crate::device::capacity::{check_cpu_workers, Workers};
use crate::device::{self, Devices};
use crate::error::usage;
use crate::report::export::Format;
use crate::sweep::frontier::Lever;
use crate::sweep::plan::{SweepCell, CellSpec, FrontierPlan, MaxBatchPlan, Pool, Vary};

/// Find the largest per-device batch that trains without running out of
/// memory (with --frontier: for each memory lever, side by side).
#[derive(Args, Debug, Clone)]
#[command(after_help = "Run options after -- go to every probe exactly as `gpubench run` takes them, the \
    strategy and model among them, e.g.\n  \
    gpubench max-batch --cpu --mem-limit 2G -- --model resnet18 --image-size 64")]
pub(crate) struct MaxBatchArgs {
    #[command(flatten)]
    pub devices: DeviceOpts,
    /// First per-device batch to try; it doubles from there (or halves, if it
    /// does not fit).
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub start: i64,
    /// Largest per-device batch to try.
    #[arg(long, default_value_t = 65536, value_name = "N")]
    pub max: i64,
    /// Stop searching when the largest batch that fits and the smallest that
    /// does not are this close (or within 1/8 of the batch, if that is closer).
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub granularity: i64,
    #[command(flatten)]
    pub out: OutOpt,
    #[command(flatten)]
    pub mem_limit: MemLimit,
    /// Stop a probe that runs longer than this (it then counts as failed).
    #[arg(long, allow_hyphen_values = true, value_name = "DURATION")]
    pub probe_timeout: Option<String>,
    /// Search each memory lever in turn (none, --checkpoint, fp16, bf16, tf32
    /// on CUDA, and each precision with --checkpoint) and show them side by
    /// side; levers the model, strategy or device cannot use are skipped,
    /// with why.
    #[arg(long)]
    pub frontier: bool,
    /// With --frontier: the global batch to reach (batch per device ×
    /// devices × --grad-accum). Each lever reaches it with its largest
    /// micro-batch and as few accumulation steps as that needs, measured.
    #[arg(long, value_name = "N")]
    pub target_global_batch: Option<i64>,
    #[command(flatten)]
    pub render: RenderOpts,
    #[command(flatten)]
    pub commit: CommitOpts,
    /// `gpubench run` options for every probe, after `--`. Probes default to
    /// --warmup 1 --steps 3 and --lr 0.01 (so that a huge batch does not
    /// diverge before its memory peak).
    #[arg(last = true, value_name = "RUN OPTIONS")]
    pub run: Vec<String>,
}

impl Configure for MaxBatchArgs {
    fn configure(self) -> Result<Job> {
        self.commit.export();
        let p = max_batch_plan(self)?;
        Ok(Box::new(move || crate::commands::max_batch::run(p)))
    }
}

/// Checks `max-batch`'s arguments and validates its probe at the start batch.
pub(crate) fn max_batch_plan(a: MaxBatchArgs) -> Result<MaxBatchPlan> {
    let format = *a.render.format;
    if !a.frontier {
        for (given, flag) in [(a.render.charts.is_some(), "--charts"), (a.render.html.is_some(), "--html"), (a.target_global_batch.is_some(), "--target-global-batch")] {
            if given {
                return Err(usage(format!("{flag} is for --frontier's table and chart; add --frontier")));
            }
        }
        if format != Format::Table {
            return Err(usage(format!(
                "--format {}: max-batch prints its answer as text (the probes' rows are in --out); --format is for --frontier's table",
                format.name()
            )));
        }
    }
    if a.start < 1 || a.max < a.start {
        return Err(usage(format!("--start {} and --max {}: need 1 ≤ start ≤ max", a.start, a.max)));
    }
    if a.granularity < 1 {
        return Err(usage("--granularity must be at least 1"));
    }
    let mut line = RunLine::parse(&a.run)?;
    refuse_own(line.options(), "the run options after --")?;
    if line.has("batch-size") {
        return Err(usage(
            "--batch-size among the run options after --: max-batch searches it itself; give --start and --max before --",
        ));
    }
    // The probes' strategy and model are run options like any other; the
    // search names them in its lines, so they are read here.
    let strategy = match line.take("strategy") {
        Some(v) => StrategyKind::from_str(&v, false).map_err(|e| usage(format!("--strategy {v}: {e}")))?,
        None => StrategyKind::Single,
    };
    let model = match line.take("model") {
        Some(v) => ModelKind::from_str(&v, false).map_err(|e| usage(format!("--model {v}: {e}")))?,
        None => ModelKind::Resnet50,
    };
    if line.has("impl") {
        return Err(usage("--impl among the run options after --: max-batch probes gpubench's own runs"));
    }
    let devices = device::resolve(a.devices.gpus.as_deref(), a.devices.cpu, false)?;
    let pool = match devices.kind {
        device::DeviceKind::Cuda => Pool::Gpus(devices.ordinals.clone()),
        device::DeviceKind::Cpu => Pool::Cpu(devices.len()),
    };
    if let Pool::Cpu(n) = pool {
        let workers = match strategy {
            StrategyKind::Ddp => Workers::Processes,
            _ => Workers::Threads,
        };
        check_cpu_workers(n, workers, false)?;
    }
    let mem_limit = a.mem_limit.as_deref().map(|s| parse_size("--mem-limit", s)).transpose()?;
    if mem_limit.is_some() && matches!(pool, Pool::Gpus(_)) {
        return Err(usage(
            "--mem-limit caps a process's CPU memory (RLIMIT_DATA) and cannot emulate a smaller GPU; use it with --cpu",
        ));
    }
    let timeout = a.probe_timeout.as_deref().map(|s| parse_duration("--probe-timeout", s)).transpose()?;
    if !line.has("steps") && !line.has("duration") {
        line.default("steps", "3");
    }
    if !line.has("warmup") && !line.has("warmup-time") {
        line.default("warmup", "1");
    }
    line.default("lr", "0.01");
    let common = line.to_args();
    let n = pool.len();
    let spec = move |batch: i64, vary: Vec<(Vary, String)>| CellSpec {
        implementation: Impl::Gpubench,
        strategy,
        n,
        model,
        batch,
        vary,
        repeat: 0,
    };
    let first = SweepCell::new(spec(a.start, vec![]), &pool, &common, &cell_config)?;
    let frontier = match a.frontier {
        false => None,
        true => Some(frontier_plan(&a, &line, n, &devices, &|vary| {
            SweepCell::new(spec(a.start, vary), &pool, &common, &cell_config).map(|_| ())
        })?),
    };
    let probe_pool = pool.clone();
    let cell =
        move |b: i64, vary: &[(Vary, String)]| SweepCell::new(spec(b, vary.to_vec()), &probe_pool, &common, &cell_config);
    Ok(MaxBatchPlan {
        strategy,
        model,
        format,
        pool,
        start: a.start,
        max: a.max,
        granularity: a.granularity,
        out: a.out.out.clone(),
        mem_limit,
        timeout,
        first,
        cell: Box::new(cell),
        frontier,
    })
}

/// `--frontier`'s levers, each checked as its probes' runs will be: a lever
/// the run refuses (checkpointing tinycnn or dp) or the devices cannot use
/// (bf16 and TF32 before compute capability 8.0; fp16, and bf16 without
/// AVX512-BF16 or AMX, on a CPU) is skipped with the reason.
fn frontier_plan(
    a: &MaxBatchArgs,
    line: &RunLine,
    n: usize,
    devices: &Devices,
    check: &dyn Fn(Vec<(Vary, String)>) -> Result<()>,
) -> Result<FrontierPlan> {
    for (option, what) in
        [("precision", "each precision"), ("checkpoint", "--checkpoint"), ("grad-accum", "--grad-accum")]
    {
        if line.has(option) {
            return Err(usage(format!("--{option} among the run options after --: --frontier tries {what} itself")));
        }
    }
    if let Some(t) = a.target_global_batch {
        if t < 1 || t % n as i64 != 0 {
            return Err(usage(format!(
                "--target-global-batch {t}: the global batch must be a positive multiple of the {n} device(s)"
            )));
        }
    }
    if let Some(dir) = a.render.charts.as_deref() {
        if dir.exists() && !dir.is_dir() {
            return Err(usage(format!("--charts {}: not a directory", dir.display())));
        }
    }
    if let Some(p) = a.render.html.as_deref() {
        crate::report::html::check_html_path(p)?;
    }
    let (no_fp16, no_bf16, no_tf32) = match devices.kind {
        device::DeviceKind::Cuda => {
            (None, device::bf16_unsupported(&devices.ordinals), device::tf32_unsupported(&devices.ordinals))
        }
        // libtorch's CPU fp16 convolutions are reference loops: resnet18 at
        // 64 px ran 30x slower than fp32 here, so a probe would take minutes
        // to say what no one would choose. The same for bf16 on a CPU
        // without AVX512-BF16 or AMX. (tf32 the run itself refuses on a CPU.)
        device::DeviceKind::Cpu => (
            Some("the CPU has no fast fp16 kernels (libtorch falls back to slow reference loops)".to_string()),
            device::cpu_slow_bf16(),
            None,
        ),
    };
    let mut levers = vec![];
    for lever in Lever::ALL {
        // The run's own refusal first: it says what the model or strategy cannot do at all.
        let skip = match check(lever.vary()) {
            Err(e) if crate::error::exit_code(&e) == 2 => Some(e.to_string()),
            Err(e) => return Err(e),
            Ok(()) if lever.precision == Some("fp16") => no_fp16.clone(),
            Ok(()) if lever.precision == Some("bf16") => no_bf16.clone(),
            Ok(()) if lever.precision == Some("tf32") => no_tf32.clone(),
            Ok(()) => None,
        };
        levers.push((lever, skip));
    }
    Ok(FrontierPlan { levers, target: a.target_global_batch, charts: a.render.charts.charts.clone(), html: a.render.html.html.clone() })
}


#[cfg(test)]
mod tests {
    use super::*;

    fn plan(extra: &[&str]) -> Result<MaxBatchPlan> {
        let mut v = vec!["gpubench", "max-batch"];
        v.extend(extra);
        match crate::cli::Cli::parse_args(v).unwrap().command {
            crate::cli::Command::MaxBatch(a) => max_batch_plan(*a),
            _ => unreachable!(),
        }
    }

    #[test]
    fn strategy_and_model_are_run_options_after_the_dashes() {
        let p = plan(&["--cpu", "2", "--", "--strategy", "ddp", "--model", "tinycnn", "--image-size", "16"]).unwrap();
        assert_eq!((p.strategy, p.model, p.pool.len()), (StrategyKind::Ddp, ModelKind::Tinycnn, 2));
        let p = plan(&["--cpu", "--", "--model", "tinycnn", "--image-size", "16"]).unwrap();
        assert_eq!((p.strategy, p.pool.len()), (StrategyKind::Single, 1));
        for bad in [
            &["--cpu", "100000", "--", "--strategy", "ddp", "--model", "tinycnn"][..],
            &["--cpu", "--html", "x.html", "--", "--model", "tinycnn"],
            &["--cpu", "--format", "json", "--", "--model", "tinycnn"],
            &["--cpu", "--", "--model", "tinycnn", "--batch-size", "8"],
        ] {
            let Err(e) = plan(bad) else { panic!("{bad:?} was accepted") };
            assert_eq!(crate::error::exit_code(&e), 2, "{bad:?}: {e}");
        }
    }
}
