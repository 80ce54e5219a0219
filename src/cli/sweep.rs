//! `gpubench sweep`: its arguments, the demo preset, and their conversion
//! into a sweep plan (`sweep::plan`); the hidden `cell DIR INDEX` of an
//! emitted sweep. A cell is a `gpubench run` argument list: the run options
//! after `--` as given (`run_line`), the matrix's axes and `--vary`'s
//! values, validated as `gpubench run` would validate them.
use anyhow::Result;
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};

use super::opts::{CommitOpts, DeviceCounts, DeviceOpts, MemLimit, OutOpt, RenderOpts};
use super::parse::{parse_duration, parse_size};
use super::run::parse_run_args;
use crate::bench::placement::Seat;
use super::run_line::{parse_vary, RunLine};
use super::{Configure, Job};
use crate::sweep::cell::CellJob;
use crate::config::{Impl, ModelKind, RunConfig, StrategyKind};
use crate::device::capacity::{check_cpu_workers, Workers};
use crate::device::{self, Devices};
use crate::error::usage;
use crate::sweep::plan::{default_counts, resolve_pool, Emit, K8s, Matrix, Plan, Pool, Vary};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Preset {
    /// All three strategies on 1 and all devices, with charts: about two
    /// minutes on a 2-core CPU (tinycnn), about a minute on GPUs (resnet50).
    Demo,
}

/// Run a matrix of configurations (strategies × devices × batch sizes ×
/// models), each cell in its own process, and summarize it; or emit it as a
/// Slurm array or Kubernetes Jobs
#[derive(Args, Debug, Clone)]
#[command(after_help = "Run options after -- go to every cell exactly as `gpubench run` takes them, e.g.\n  \
    gpubench sweep --cpu 2 --strategies dp,ddp --out r.csv -- --model tinycnn --image-size 32 --steps 5\n\
    An axis is named once: --strategies, --models, --batch-sizes and --impls are --vary strategy=…, model=…, \
    batch-size=… and impl=…; one value of an axis may also stand among the run options after --.")]
pub(crate) struct SweepArgs {
    /// Start from a ready-made matrix; flags given as well override its choices.
    #[arg(long, value_enum)]
    pub preset: Option<Preset>,
    /// The strategy axis (default: single,dp,ddp), exactly --vary strategy=LIST.
    /// `single` runs at one device only.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "LIST")]
    pub strategies: Vec<StrategyKind>,
    #[command(flatten)]
    pub devices: DeviceOpts,
    #[command(flatten)]
    pub device_counts: DeviceCounts,
    /// Nodes per ddp cell (default 1), for an emitted sweep: each node runs
    /// the cell's devices, e.g. --node-counts 1,2,4 with --gpus 0,1,2,3.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub node_counts: Vec<usize>,
    /// The per-device batch axis (default: 64), exactly --vary batch-size=LIST.
    #[arg(long, value_delimiter = ',', value_name = "LIST", allow_negative_numbers = true)]
    pub batch_sizes: Vec<i64>,
    /// The model axis (default: resnet50), exactly --vary model=LIST.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "LIST")]
    pub models: Vec<ModelKind>,
    /// The implementation axis (default: gpubench), exactly --vary impl=LIST:
    /// each cell runs under each, one after the other, into the same --out.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "LIST")]
    pub impls: Vec<Impl>,
    /// An axis over any run option, flags included (repeatable): e.g.
    /// --vary comm-hook=none,fp16 or --vary channels-last=on,off. Rows of
    /// different values are different configurations.
    #[arg(long, value_name = "OPTION=V1,V2,…")]
    pub vary: Vec<String>,
    /// Run every cell this many times (repeats go round the whole matrix).
    #[arg(long, value_name = "N")]
    pub repeat: Option<u32>,
    #[command(flatten)]
    pub out: OutOpt,
    /// Skip the cells that already have a row with status ok in --out.
    #[arg(long)]
    pub resume: bool,
    #[command(flatten)]
    pub render: RenderOpts,
    #[command(flatten)]
    pub mem_limit: MemLimit,
    /// Stop a cell that runs longer than this (its row: status failed).
    #[arg(long, allow_hyphen_values = true, value_name = "DURATION")]
    pub cell_timeout: Option<String>,
    /// Hand the cells to a cluster's scheduler instead of running them here:
    /// `--emit slurm DIR` writes DIR/manifest.jsonl and DIR/sweep.sbatch (a
    /// job array per resource shape) and prints the sbatch commands; `--emit
    /// k8s DIR` writes an Indexed Job per shape into DIR/k8s/. Each task
    /// writes DIR/cells/INDEX.csv, and `gpubench collect DIR` merges them.
    #[arg(long, num_args = 2, value_names = ["SCHEDULER", "DIR"], conflicts_with_all = ["out", "charts", "html"])]
    pub emit: Vec<String>,
    /// With --emit slurm: at most P tasks of each array at once (`--array=…%P`).
    #[arg(long, value_name = "P", requires = "emit")]
    pub max_parallel: Option<usize>,
    /// With --emit slurm: the most tasks one job array may hold (Slurm's
    /// MaxArraySize); default: what `scontrol show config` says, else
    /// Slurm's default 1001. Larger arrays are split.
    #[arg(long, value_name = "N", requires = "emit")]
    pub max_array_size: Option<usize>,
    /// With --emit slurm: submit the arrays with sbatch (job ids into DIR/jobs.txt).
    #[arg(long, requires = "emit")]
    pub submit: bool,
    /// With --emit k8s: the container image with gpubench on its PATH.
    #[arg(long, value_name = "IMAGE", requires = "emit")]
    pub image: Option<String>,
    /// With --emit k8s: the PersistentVolumeClaim that holds DIR on every
    /// pod (mounted at DIR's path).
    #[arg(long, value_name = "CLAIM", requires = "emit")]
    pub pvc: Option<String>,
    /// With --emit slurm: an sbatch option for every array, e.g.
    /// --sbatch=--partition=gpu or --sbatch=--account=proj (repeatable).
    #[arg(long, value_name = "OPTION", requires = "emit", allow_hyphen_values = true)]
    pub sbatch: Vec<String>,
    #[command(flatten)]
    pub commit: CommitOpts,
    /// `gpubench run` options for every cell, after `--`.
    #[arg(last = true, value_name = "RUN OPTIONS")]
    pub run: Vec<String>,
}

impl Configure for SweepArgs {
    fn configure(self) -> Result<Job> {
        self.commit.export();
        let p = plan(self)?;
        Ok(Box::new(move || crate::commands::sweep::run(p)))
    }
}

fn dedup<T: PartialEq + Clone>(v: &[T]) -> Vec<T> {
    let mut out: Vec<T> = vec![];
    for x in v {
        if !out.contains(x) {
            out.push(x.clone());
        }
    }
    out
}

/// The run options a sweep or max-batch chooses for its cells itself: never
/// passed through or varied.
pub(crate) const OWN: [(&str, &str); 8] = [
    ("gpus", "give --gpus to the sweep itself, before --: a cell with N devices uses the first N"),
    ("cpu", "give --cpu to the sweep itself, before --: a cell with N devices uses N CPU replicas or ranks"),
    ("out", "give --out to the sweep itself, before --: every cell appends its row there"),
    ("format", "cells report through the results file; give --format to the sweep itself, before --"),
    ("json", "cells report through the results file; give --format to the sweep itself, before --"),
    ("quiet", "cells are quiet already; the sweep prints a line per cell"),
    ("commit", "give --commit to the sweep itself, before --: it is the whole sweep's (an emitted one records it)"),
    ("branch", "give --branch to the sweep itself, before --: it is the whole sweep's (an emitted one records it)"),
];

/// Refuses the run options the sweep owns, after `--` or in `--vary`.
pub(crate) fn refuse_own<'a>(given: impl Iterator<Item = &'a str>, whose: &str) -> Result<()> {
    for g in given {
        if let Some((o, why)) = OWN.iter().find(|(o, _)| *o == g) {
            return Err(usage(format!("--{o} among {whose}: {why}")));
        }
    }
    Ok(())
}

/// An axis given as one run option after `--` (`--model resnet18`), or
/// through `--vary`: its values, parsed as the axis flag parses them.
fn axis_values<T: ValueEnum>(values: &[String], option: &str) -> Result<Vec<T>> {
    values.iter().map(|v| T::from_str(v, false).map_err(|e| usage(format!("--{option} {v}: {e}")))).collect()
}

/// The matrix's axes that a run option also names: such an option after
/// `--` sets the axis to one value, and `--vary` over it is the axis.
struct Axes<'a> {
    strategies: &'a mut Vec<StrategyKind>,
    models: &'a mut Vec<ModelKind>,
    batches: &'a mut Vec<i64>,
    impls: &'a mut Vec<Impl>,
}

impl Axes<'_> {
    /// Sets the axis `option` names to `values`; false when `option` is no axis.
    fn set(&mut self, option: &str, values: &[String], how: &str) -> Result<bool> {
        let taken = |flag: &str| usage(format!("{how} --{option} and --{flag} both set that axis; give one of them"));
        match option {
            "strategy" if self.strategies.is_empty() => *self.strategies = axis_values(values, option)?,
            "model" if self.models.is_empty() => *self.models = axis_values(values, option)?,
            "impl" if self.impls.is_empty() => *self.impls = axis_values(values, option)?,
            "batch-size" if self.batches.is_empty() => {
                *self.batches = values
                    .iter()
                    .map(|v| v.parse().map_err(|_| usage(format!("--batch-size {v}: not a whole number"))))
                    .collect::<Result<_>>()?
            }
            "strategy" => return Err(taken("strategies")),
            "model" => return Err(taken("models")),
            "impl" => return Err(taken("impls")),
            "batch-size" => return Err(taken("batch-sizes")),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// The run options for every cell (after `--`) and the `--vary` axes, with
/// the matrix's own axes taken out of both.
fn cell_options(a: &mut SweepArgs) -> Result<(RunLine, Vec<Vary>)> {
    let mut line = RunLine::parse(&a.run)?;
    refuse_own(line.options(), "the run options after --")?;
    let mut axes = Axes {
        strategies: &mut a.strategies,
        models: &mut a.models,
        batches: &mut a.batch_sizes,
        impls: &mut a.impls,
    };
    for option in ["strategy", "model", "batch-size", "impl"] {
        if let Some(v) = line.value(option).map(str::to_string) {
            axes.set(option, &[v], "after --,")?;
            line.take(option);
        }
    }
    let mut vary = vec![];
    for spec in &a.vary {
        let v = parse_vary(spec)?;
        refuse_own(std::iter::once(v.option.as_str()), "--vary")?;
        if line.has(&v.option) {
            return Err(usage(format!(
                "--vary {}: --{} is also among the run options after --; give it in one place",
                v.option, v.option
            )));
        }
        if vary.iter().any(|o: &Vary| o.option == v.option) {
            return Err(usage(format!("--vary {}: that option is varied twice; list its values once", v.option)));
        }
        if !axes.set(&v.option, &v.values, "--vary")? {
            vary.push(v);
        }
    }
    Ok((line, vary))
}

/// Fills what the preset chooses, where the command line left it open.
fn apply_preset(a: &mut SweepArgs, line: &mut RunLine) {
    if a.preset != Some(Preset::Demo) {
        return;
    }
    let gpu = a.devices.cpu.is_none() && (a.devices.gpus.is_some() || device::cuda_device_count() > 0);
    if a.strategies.is_empty() {
        a.strategies = vec![StrategyKind::Single, StrategyKind::Dp, StrategyKind::Ddp];
    }
    a.out.out.get_or_insert_with(|| PathBuf::from("results/demo.csv"));
    a.render.charts.charts.get_or_insert_with(|| PathBuf::from("results/demo-charts"));
    // Each cell twice, the repeats interleaved (repeat → model → …), so the
    // summary shows a spread and does not rank noise.
    a.repeat.get_or_insert(2);
    if !line.has("steps") && !line.has("duration") {
        line.default("duration", if gpu { "5s" } else { "3s" });
    }
    if !line.has("warmup") && !line.has("warmup-time") {
        line.default("warmup", if gpu { "5" } else { "auto" });
    }
    if gpu {
        if a.models.is_empty() {
            a.models = vec![ModelKind::Resnet50];
        }
        if a.batch_sizes.is_empty() {
            a.batch_sizes = vec![64];
        }
    } else {
        a.devices.cpu.get_or_insert(2);
        if a.models.is_empty() {
            a.models = vec![ModelKind::Tinycnn];
        }
        if a.batch_sizes.is_empty() {
            a.batch_sizes = vec![32, 128];
        }
        line.default("image-size", "64");
        line.default("num-classes", "10");
    }
}

/// Builds and validates the matrix; every problem is a usage error.
pub(crate) fn plan(mut a: SweepArgs) -> Result<Plan> {
    let (mut line, vary) = cell_options(&mut a)?;
    apply_preset(&mut a, &mut line);
    let emit = emit_of(&a)?;
    let format = *a.render.format;
    if emit.is_some() && format != crate::report::export::Format::Table {
        return Err(usage("--format is for the summary of a sweep run here; an emitted sweep's rows are collected with `gpubench collect DIR`, then reported"));
    }
    let out = match (&emit, a.out.out.clone()) {
        // Not written: each cell of an emitted sweep writes its own file.
        (Some(e), _) => e.dir.join("cells").join("unused.csv"),
        (None, Some(o)) => o,
        (None, None) => {
            return Err(usage(
                "sweep needs --out FILE.csv for its rows (or --preset demo, which writes results/demo.csv, \
                 or --emit slurm DIR)",
            ))
        }
    };
    if let (Some(_), Some(list)) = (&emit, a.devices.gpus.as_deref()) {
        // An emitted sweep's GPUs are the cluster's, not this host's (a login
        // node has none): the list is checked for its form only, and the
        // cells are checked again where they run.
        let ordinals = device::parse_gpu_list(list)?;
        device::assume_gpus(ordinals.iter().max().map_or(0, |m| m + 1));
    }
    let pool = resolve_pool(a.devices.gpus.as_deref(), a.devices.cpu, 2)?;
    let demo_default_counts = a.preset == Some(Preset::Demo) && a.device_counts.is_empty();
    let counts = if demo_default_counts {
        dedup(&[1, pool.len()])
    } else if a.device_counts.is_empty() {
        default_counts(pool.len())
    } else {
        dedup(&a.device_counts)
    };
    for &c in &counts {
        if c == 0 || c > pool.len() {
            let what = match &pool {
                Pool::Gpus(g) => format!("--gpus lists {}", g.len()),
                Pool::Cpu(n) => format!("--cpu is {n}"),
            };
            return Err(usage(format!(
                "--device-counts {c}: counts must be between 1 and the number of devices ({what})"
            )));
        }
    }
    let strategies = if a.strategies.is_empty() {
        vec![StrategyKind::Single, StrategyKind::Dp, StrategyKind::Ddp]
    } else {
        dedup(&a.strategies)
    };
    if let Pool::Cpu(_) = pool {
        // The largest cell decides; ddp's ranks (and PyTorch's) are processes.
        let workers = match strategies.contains(&StrategyKind::Ddp) {
            true => Workers::Processes,
            false => Workers::Threads,
        };
        check_cpu_workers(counts.iter().copied().max().unwrap_or(1), workers, false)?;
    }
    let batches = if a.batch_sizes.is_empty() { vec![64] } else { dedup(&a.batch_sizes) };
    if let Some(b) = batches.iter().find(|&&b| b < 1) {
        return Err(usage(format!("--batch-sizes {b}: batch sizes are per device and at least 1")));
    }
    let models = if a.models.is_empty() { vec![ModelKind::Resnet50] } else { dedup(&a.models) };
    let repeat = a.repeat.unwrap_or(1);
    if repeat == 0 {
        return Err(usage("--repeat must be at least 1"));
    }
    let mem_limit = a.mem_limit.as_deref().map(|s| parse_size("--mem-limit", s)).transpose()?;
    if mem_limit.is_some() && matches!(pool, Pool::Gpus(_)) {
        return Err(usage(
            "--mem-limit caps a process's CPU memory (RLIMIT_DATA) and cannot emulate a smaller GPU; use it with --cpu",
        ));
    }
    let cell_timeout = a.cell_timeout.as_deref().map(|s| parse_duration("--cell-timeout", s)).transpose()?;
    if let Some(dir) = a.render.charts.as_deref() {
        if dir.exists() && !dir.is_dir() {
            return Err(usage(format!("--charts {}: not a directory", dir.display())));
        }
    }
    if let Some(p) = a.render.html.as_deref() {
        crate::report::html::check_html_path(p)?;
    }

    let impls = if a.impls.is_empty() { vec![Impl::Gpubench] } else { dedup(&a.impls) };
    if impls.contains(&Impl::Pytorch) {
        if line.has("breakdown") {
            return Err(usage("--breakdown times gpubench's own process; drop it, or sweep --impls gpubench only"));
        }
        // Fail before the first cell, with the fix, rather than in every PyTorch cell.
        crate::reference::python::find_python()?;
    }
    let nodes = if a.node_counts.is_empty() { vec![1] } else { dedup(&a.node_counts) };
    if let Some(&m) = nodes.iter().find(|&&m| m == 0) {
        return Err(usage(format!("--node-counts {m}: a cell runs on one node or more")));
    }
    if nodes.iter().any(|&m| m > 1) {
        match &emit {
            None => {
                return Err(usage(
                    "--node-counts above 1 needs a cluster: a sweep here runs on this machine; add --emit slurm DIR",
                ))
            }
            Some(_) if !strategies.contains(&StrategyKind::Ddp) => {
                return Err(usage("--node-counts above 1: only ddp spans nodes; add ddp to --strategies"))
            }
            Some(_) => {}
        }
        for option in ["nnodes", "node-rank", "master-addr", "master-port"] {
            if line.has(option) {
                return Err(usage(format!(
                    "--{option} among the run options after --: an emitted multi-node cell sets it where it runs"
                )));
            }
        }
    }
    let matrix = Matrix { pool, strategies, counts, batches, models, impls, vary, repeat, nodes };
    let (cells, notes) = matrix.cells(&line.to_args(), &sweep_cell_config)?;
    Ok(Plan {
        matrix,
        cells,
        notes,
        out,
        charts: a.render.charts.charts.clone(),
        html: a.render.html.html.clone(),
        format,
        mem_limit,
        cell_timeout,
        resume: a.resume,
        emit,
        // A `--resume` is a sweep of its own (another night, maybe another
        // build), so it gets a new id; the rows it keeps keep theirs.
        sweep_id: crate::bench::row::new_sweep_id(),
    })
}

/// `--emit SCHEDULER DIR` and its options, checked before any cell is built.
fn emit_of(a: &SweepArgs) -> Result<Option<Emit>> {
    let [scheduler, dir] = a.emit.as_slice() else { return Ok(None) };
    let k8s = match scheduler.as_str() {
        "slurm" => None,
        "k8s" | "kubernetes" => {
            let need =
                |v: &Option<String>, what: &str| v.clone().ok_or_else(|| usage(format!("--emit k8s needs {what}")));
            if !a.sbatch.is_empty() {
                return Err(usage("--sbatch is for --emit slurm; a Kubernetes Job takes --image and --pvc"));
            }
            Some(K8s {
                image: need(&a.image, "--image IMAGE: the container image with gpubench on its PATH")?,
                claim: need(&a.pvc, "--pvc CLAIM: the volume claim that holds DIR on every pod")?,
            })
        }
        other => return Err(usage(format!("--emit {other}: the schedulers are slurm and k8s"))),
    };
    if k8s.is_none() && (a.image.is_some() || a.pvc.is_some()) {
        return Err(usage("--image and --pvc are for --emit k8s"));
    }
    if a.max_parallel == Some(0) {
        return Err(usage("--max-parallel 0: at least one task of an array must run"));
    }
    if a.max_array_size == Some(0) {
        return Err(usage("--max-array-size 0: an array holds at least one task; Slurm's default is 1001"));
    }
    if k8s.is_some() && a.max_array_size.is_some() {
        return Err(usage("--max-array-size is for --emit slurm; an Indexed Job has no such limit"));
    }
    let dir = PathBuf::from(dir);
    if dir.exists() && !dir.is_dir() {
        return Err(usage(format!("--emit {scheduler} {}: not a directory", dir.display())));
    }
    if crate::fleet::manifest::manifest_path(&dir).exists() && !a.resume {
        return Err(usage(format!(
            "--emit {scheduler} {}: it holds an emitted sweep already; add --resume to re-emit its missing and failed cells, \
             or choose another directory",
            dir.display()
        )));
    }
    Ok(Some(Emit { dir, max_parallel: a.max_parallel, max_array_size: a.max_array_size, submit: a.submit, sbatch: a.sbatch.clone(), k8s }))
}

/// `cell DIR INDEX`: the manifest's cell (`sweep::cell::job`), validated as
/// its run would be, on the node that runs it.
pub(crate) fn cell_job(dir: &Path, index: &str, digest: Option<&str>) -> Result<CellJob> {
    crate::sweep::cell::job(dir, index, digest, &|i, args| {
        let line = RunLine::parse(args)?;
        let cpu = match line.value("cpu") {
            Some(n) => Some(n.parse::<usize>().map_err(|_| usage(format!("cell {i}: --cpu {n} is not a count")))?),
            None => None,
        };
        sweep_cell_config(args, device::resolve(line.value("gpus"), cpu, true)?)
    })
}

/// A cell's configuration: its `gpubench run` arguments on `devices`,
/// validated as `gpubench run` validates them.
pub(crate) fn cell_config(args: &[String], devices: Devices) -> Result<RunConfig> {
    parse_run_args(args)?.into_config(Seat::Local(devices))
}

/// A sweep cell's configuration. A multi-node cell (`--nnodes`) learns its
/// node rank and rendezvous where it runs (`cell DIR INDEX`); it is checked
/// here with stand-ins for them, which its arguments never carry.
pub(crate) fn sweep_cell_config(args: &[String], devices: Devices) -> Result<RunConfig> {
    if !args.iter().any(|a| a.starts_with("--nnodes")) {
        return cell_config(args, devices);
    }
    let mut with = args.to_vec();
    with.extend(["--master-addr=127.0.0.1".to_string(), "--master-port=29500".to_string()]);
    cell_config(&with, devices)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn parse(extra: &[&str]) -> SweepArgs {
        let mut v = vec!["gpubench", "sweep"];
        v.extend(extra);
        match crate::cli::Cli::parse_args(v).unwrap().command {
            crate::cli::Command::Sweep(a) => *a,
            _ => unreachable!(),
        }
    }

    #[test]
    fn cpu_counts_beyond_the_host_are_refused_before_any_cell() {
        let e = plan(parse(&["--cpu", "100000", "--models", "tinycnn", "--out", "x.csv"])).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 2);
        assert!(e.to_string().contains("8 per core"), "{e}");
    }

    #[test]
    fn matrix_order_and_single_at_one_device() {
        let p = plan(parse(&[
            "--cpu",
            "2",
            "--strategies",
            "single,ddp",
            "--batch-sizes",
            "8,16",
            "--models",
            "tinycnn",
            "--repeat",
            "2",
            "--out",
            "x.csv",
            "--",
            "--image-size",
            "16",
        ]))
        .unwrap();
        let d: Vec<String> = p.cells.iter().map(|c| format!("{} r{}", c.describe(), c.repeat)).collect();
        assert_eq!(
            d[..6],
            [
                "single ×1 tinycnn 16px b8 r0",
                "ddp ×1 tinycnn 16px b8 r0",
                "ddp ×2 tinycnn 16px b8 r0",
                "single ×1 tinycnn 16px b16 r0",
                "ddp ×1 tinycnn 16px b16 r0",
                "ddp ×2 tinycnn 16px b16 r0"
            ]
        );
        assert_eq!(p.cells.len(), 12);
        assert_eq!(p.cells[2].key.devices, "cpu×2");
        assert!(p.cells[2].args.windows(2).any(|w| w == ["--cpu", "2"]));
        assert!(p.notes.iter().any(|n| n.contains("single runs at 1 device only")));
    }

    #[test]
    fn bad_matrices_are_usage_errors() {
        let base = ["--cpu", "2", "--models", "tinycnn", "--out", "x.csv"];
        let bad: &[&[&str]] = &[
            &["--device-counts", "3"],
            &["--device-counts", "0"],
            &["--batch-sizes", "0"],
            &["--repeat", "0"],
            &["--strategies", "single", "--device-counts", "2"],
            &["--", "--image-size", "4"],
            &["--mem-limit", "lots"],
            &["--", "--duration", "soon"],
            &["--cell-timeout", "0s"],
            &["--vary", "batch-size=8", "--batch-sizes", "16"],
        ];
        for extra in bad {
            let mut v = base.to_vec();
            v.extend_from_slice(extra);
            let e = plan(parse(&v)).unwrap_err();
            assert_eq!(crate::error::exit_code(&e), 2, "{extra:?}: {e}");
        }
        let e = plan(parse(&["--cpu", "1"])).unwrap_err();
        assert!(e.to_string().contains("--out"), "{e}");
    }

    #[test]
    fn run_options_after_the_dashes_reach_every_cell_as_run_takes_them() {
        let p = plan(parse(&[
            "--cpu",
            "1",
            "--strategies",
            "single",
            "--out",
            "x.csv",
            "--",
            "--model",
            "tinycnn",
            "--image-size",
            "16",
            "--steps",
            "2",
            "--label",
            "box A",
            "--cudnn-benchmark",
            "--channels-last",
        ]))
        .unwrap();
        let c = &p.cells[0];
        for a in ["--steps=2", "--label=box A", "--channels-last", "--cudnn-benchmark=on"] {
            assert!(c.args.iter().any(|x| x == a), "{a}: {:?}", c.args);
        }
        // --model after -- set the axis: one model, and not passed twice.
        assert_eq!((p.matrix.models.as_slice(), c.model), (&[ModelKind::Tinycnn][..], ModelKind::Tinycnn));
        assert_eq!(c.args.iter().filter(|a| a.contains("tinycnn")).count(), 1, "{:?}", c.args);
        assert!(c.cfg.workload.cudnn_benchmark && c.cfg.workload.channels_last);
        assert_eq!(c.key.label, "box A");
    }

    #[test]
    fn vary_crosses_every_value_flags_included_and_each_variant_has_its_own_key() {
        let p = plan(parse(&[
            "--cpu",
            "2",
            "--strategies",
            "ddp",
            "--device-counts",
            "2",
            "--models",
            "tinycnn",
            "--vary",
            "channels-last=on,off",
            "--vary",
            "bucket-cap-mb=1,25,50",
            "--out",
            "x.csv",
            "--",
            "--image-size",
            "16",
        ]))
        .unwrap();
        assert_eq!(p.cells.len(), 6);
        assert_eq!(p.cells[0].describe(), "ddp ×2 tinycnn 16px b64 channels-last=on bucket-cap-mb=1");
        assert!(p.cells[0].cfg.workload.channels_last && !p.cells[3].cfg.workload.channels_last);
        assert_eq!(p.cells[2].cfg.ddp.bucket_cap_mb, 50.0);
        let keys: std::collections::HashSet<_> = p.cells.iter().map(|c| c.key.clone()).collect();
        assert_eq!(keys.len(), 6, "every variant is its own cell");
        // A vary over an axis is that axis.
        let p = plan(parse(&["--cpu", "1", "--vary", "model=tinycnn,resnet18", "--out", "x.csv"])).unwrap();
        assert_eq!(p.matrix.models, [ModelKind::Tinycnn, ModelKind::Resnet18]);
    }

    #[test]
    fn demo_preset_on_the_cpu() {
        let p = plan(parse(&["--preset", "demo", "--cpu", "2"])).unwrap();
        assert_eq!(p.out, PathBuf::from("results/demo.csv"));
        assert!(p.charts.is_some());
        let strategies: std::collections::BTreeSet<&str> = p.cells.iter().map(|c| c.strategy.name()).collect();
        assert_eq!(strategies.len(), 3);
        assert_eq!(p.matrix.counts, [1, 2]);
        // 10 cells, each run twice (the repeats interleaved)
        assert_eq!((p.cells.len(), p.matrix.repeat), (20, 2));
        assert_eq!((p.cells[0].repeat, p.cells[10].repeat), (0, 1));
        assert!(p.cells[0].args.iter().any(|a| a == "--duration=3s"), "{:?}", p.cells[0].args);
        // explicit flags win over the preset
        let p = plan(parse(&[
            "--preset",
            "demo",
            "--cpu",
            "2",
            "--batch-sizes",
            "8",
            "--out",
            "y.csv",
            "--",
            "--steps",
            "4",
        ]))
        .unwrap();
        assert_eq!((p.cells.len(), p.out.as_path()), (10, Path::new("y.csv")));
        assert!(!p.cells[0].args.iter().any(|a| a.starts_with("--duration")), "{:?}", p.cells[0].args);
    }
}
