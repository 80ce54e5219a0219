//! The matrix of a sweep: which cells run, in which order, each with its
//! `gpubench run` arguments and validated configuration, and the key that
//! tells its rows from every other cell's.
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{Impl, ModelKind, RunConfig, StrategyKind};
use crate::device::{self, Devices};
use crate::error::usage;
use crate::results::Fields;
use crate::results::Implementation;

pub use super::vary::Vary;
use crate::config::Format;

/// Makes (and validates) a cell's configuration from its `gpubench run`
/// arguments on `devices`, exactly as `gpubench run` would; a bad cell is a
/// usage error before any cell starts.
pub(crate) type Validate<'a> = dyn Fn(&[String], Devices) -> Result<RunConfig> + 'a;

/// Where the cells run: a prefix of a GPU list, or N CPU replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pool {
    Gpus(Vec<usize>),
    Cpu(usize),
}

impl Pool {
    pub(crate) fn is_cpu(&self) -> bool {
        matches!(self, Pool::Cpu(_))
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Pool::Gpus(g) => g.len(),
            Pool::Cpu(n) => *n,
        }
    }

    /// `--gpus a,b` or `--cpu n` for the first `n` devices.
    pub(crate) fn args(&self, n: usize) -> Vec<String> {
        match self {
            Pool::Gpus(g) => {
                let l: Vec<String> = g[..n].iter().map(|o| o.to_string()).collect();
                vec!["--gpus".into(), l.join(",")]
            }
            Pool::Cpu(_) => vec!["--cpu".into(), n.to_string()],
        }
    }

    pub(crate) fn devices(&self, n: usize) -> Devices {
        match self {
            Pool::Gpus(g) => Devices::cuda(g[..n].to_vec()),
            Pool::Cpu(_) => Devices::cpu(n),
        }
    }

    pub(crate) fn describe(&self) -> String {
        self.devices(self.len()).describe()
    }
}

/// `--gpus` / `--cpu` as given, else every GPU, else the CPU with `cpu_default` replicas.
pub(crate) fn resolve_pool(gpus: Option<&str>, cpu: Option<usize>, cpu_default: usize) -> Result<Pool> {
    if let Some(n) = cpu {
        if n == 0 {
            return Err(usage("--cpu takes the largest number of replicas or ranks to run, at least 1"));
        }
        return Ok(Pool::Cpu(n));
    }
    if gpus.is_some() {
        let d = device::resolve(gpus, None, true)?;
        return Ok(Pool::Gpus(d.ordinals));
    }
    let count = device::cuda_device_count();
    if count > 0 {
        eprintln!("gpubench: no --gpus or --cpu given; using all {count} GPU(s)");
        Ok(Pool::Gpus((0..count).collect()))
    } else {
        eprintln!("gpubench: no --gpus or --cpu given and no CUDA device found; using the CPU (--cpu {cpu_default})");
        Ok(Pool::Cpu(cpu_default))
    }
}

/// 1, 2, 4, … below `n`, and `n`.
pub(crate) fn default_counts(n: usize) -> Vec<usize> {
    let mut v = vec![];
    let mut c = 1;
    while c < n {
        v.push(c);
        c *= 2;
    }
    v.push(n.max(1));
    v
}

/// Identity of a cell in the results file: a row with the same key is a run
/// of that cell (repeats share it). Every column that a run option sets is
/// in it (the `variant` column holds the options without one), so a sweep
/// that varies any option never takes one variant's row for another's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CellKey {
    pub host: String,
    pub implementation: Implementation,
    pub label: String,
    pub strategy: String,
    pub backend: String,
    pub comm_hook: String,
    pub devices: String,
    pub model: String,
    pub image_size: u32,
    pub precision: String,
    pub channels_last: Option<bool>,
    pub cudnn_benchmark: Option<bool>,
    pub deterministic: Option<bool>,
    pub batch_per_device: u32,
    pub data: String,
    pub variant: String,
}

impl CellKey {
    pub(crate) fn of_row(r: &impl Fields) -> Option<CellKey> {
        if !r.implementation().is_measured() {
            return None;
        }
        Some(CellKey {
            host: r.host().to_string(),
            implementation: r.implementation(),
            label: r.label().to_string(),
            strategy: r.strategy().to_string(),
            backend: r.backend().to_string(),
            comm_hook: r.comm_hook().to_string(),
            devices: r.devices().to_string(),
            model: r.model().to_string(),
            image_size: r.image_size()?,
            precision: r.precision().to_string(),
            channels_last: r.channels_last(),
            cudnn_benchmark: r.cudnn_benchmark(),
            deterministic: r.deterministic(),
            batch_per_device: r.batch_per_device()?,
            data: r.data().to_string(),
            variant: r.variant().to_string(),
        })
    }
}

/// What to sweep, every list already checked (non-empty, no duplicates,
/// device counts within the pool).
#[derive(Debug, Clone)]
pub struct Matrix {
    pub pool: Pool,
    pub strategies: Vec<StrategyKind>,
    pub counts: Vec<usize>,
    pub batches: Vec<i64>,
    pub models: Vec<ModelKind>,
    pub impls: Vec<Impl>,
    /// `--vary` axes, in the order given.
    pub vary: Vec<Vary>,
    pub repeat: u32,
    /// `--node-counts`: nodes per ddp cell (1 for the other strategies).
    pub nodes: Vec<usize>,
}

/// Every combination of the `--vary` axes' values, the first axis outermost:
/// one (option index, value) list per combination.
fn combinations(vary: &[Vary]) -> Vec<Vec<(usize, String)>> {
    let mut all: Vec<Vec<(usize, String)>> = vec![vec![]];
    for (i, v) in vary.iter().enumerate() {
        all = all
            .into_iter()
            .flat_map(|c| v.values.iter().map(move |x| [c.clone(), vec![(i, x.clone())]].concat()))
            .collect();
    }
    all
}

impl Matrix {
    /// The cells in order (repeat → model → batch → device count → strategy
    /// → `--vary` values → implementation), `single` only at one device, and
    /// the notes that say what was left out.
    pub(crate) fn cells(&self, common: &[String], validate: &Validate) -> Result<(Vec<SweepCell>, Vec<String>)> {
        let (pool, strategies, counts, impls) = (&self.pool, &self.strategies, &self.counts, &self.impls);
        let (models, batches, repeat) = (&self.models, &self.batches, self.repeat);
        let mut notes = vec![];
        if strategies.contains(&StrategyKind::Single) && counts.iter().any(|&c| c > 1) {
            notes.push("single runs at 1 device only".to_string());
        }
        let pytorch_dp_skipped =
            impls.contains(&Impl::Pytorch) && strategies.contains(&StrategyKind::Dp) && matches!(pool, Pool::Cpu(_));
        if pytorch_dp_skipped {
            notes.push(
                "no PyTorch dp cells on the CPU: torch.nn.DataParallel needs CUDA devices (gpubench's dp still runs)"
                    .to_string(),
            );
        }
        let mut cells = vec![];
        for r in 0..repeat {
            for &model in models {
                for &batch in batches {
                    for (&n, &m) in counts.iter().flat_map(|n| self.nodes.iter().map(move |m| (n, m))) {
                        for &strategy in strategies {
                            if strategy == StrategyKind::Single && n != 1 {
                                continue;
                            }
                            // Only ddp spans nodes.
                            if m > 1 && strategy != StrategyKind::Ddp {
                                continue;
                            }
                            // Variants and implementations innermost: the runs to
                            // compare follow each other.
                            for combo in combinations(&self.vary) {
                                for &imp in impls {
                                    if imp == Impl::Pytorch && strategy == StrategyKind::Dp && pytorch_dp_skipped {
                                        continue;
                                    }
                                    let mut vary: Vec<(Vary, String)> =
                                        combo.iter().map(|(i, v)| (self.vary[*i].clone(), v.clone())).collect();
                                    if m > 1 {
                                        let nnodes = Vary { option: "nnodes".into(), values: vec![], flag: false };
                                        vary.push((nnodes, m.to_string()));
                                    }
                                    let spec =
                                        CellSpec { implementation: imp, strategy, n, model, batch, vary, repeat: r };
                                    cells.push(SweepCell::new(spec, pool, common, validate)?);
                                }
                            }
                        }
                    }
                }
            }
        }
        if cells.is_empty() {
            return Err(usage(
                "the matrix is empty: --strategies single runs at 1 device only; add 1 to --device-counts or choose dp/ddp",
            ));
        }
        Ok((cells, notes))
    }
}

/// A sweep ready to run: the matrix's cells and where their rows go.
#[derive(Debug, Clone)]
pub struct Plan {
    pub matrix: Matrix,
    pub cells: Vec<SweepCell>,
    pub notes: Vec<String>,
    pub out: PathBuf,
    pub charts: Option<PathBuf>,
    /// The report as one HTML page, written at the end.
    pub html: Option<PathBuf>,
    /// How the summary prints (the cells' lines go to stderr unless it is a table).
    pub format: Format,
    pub mem_limit: Option<u64>,
    pub cell_timeout: Option<Duration>,
    pub resume: bool,
    /// `--emit slurm DIR`: write the cells for the scheduler instead.
    pub emit: Option<Emit>,
    /// The id every cell and repeat of this sweep carries (`sweep_id`): its
    /// cells are given it in their environment, the rows the sweep writes
    /// for dead cells carry it, and an emitted sweep's manifest records it.
    pub sweep_id: String,
}

/// `sweep --emit slurm|k8s DIR` and its options.
#[derive(Debug, Clone)]
pub struct Emit {
    pub dir: PathBuf,
    pub max_parallel: Option<usize>,
    /// `--max-array-size N`: tasks per Slurm array, else read off the cluster.
    pub max_array_size: Option<usize>,
    pub submit: bool,
    /// Extra `#SBATCH` options.
    pub sbatch: Vec<String>,
    /// `--emit k8s`: Indexed Jobs instead of job arrays.
    pub k8s: Option<K8s>,
}

/// `--emit k8s`'s image and volume claim.
#[derive(Debug, Clone)]
pub struct K8s {
    pub image: String,
    pub claim: String,
}

/// Makes max-batch's probe at a batch, with extra axis values (a lever's).
pub type ProbeCell = dyn Fn(i64, &[(Vary, String)]) -> Result<SweepCell>;

/// `gpubench max-batch`, ready to search.
pub struct MaxBatchPlan {
    pub strategy: StrategyKind,
    pub model: ModelKind,
    /// How `--frontier`'s table prints (the probes' lines go to stderr unless it is a table).
    pub format: Format,
    pub pool: Pool,
    pub start: i64,
    pub max: i64,
    pub granularity: i64,
    pub out: Option<PathBuf>,
    pub mem_limit: Option<u64>,
    pub timeout: Option<Duration>,
    /// The probe's cell at the start batch (validated before any probe runs).
    pub first: SweepCell,
    /// The probe's cell at a batch, with a lever's run options.
    pub cell: Box<ProbeCell>,
    pub frontier: Option<FrontierPlan>,
}

/// `max-batch --frontier`: the levers (each with why it is skipped, if it
/// is), the global batch to reach, and where the chart and page go.
pub struct FrontierPlan {
    pub levers: Vec<(crate::sweep::frontier::Lever, Option<String>)>,
    pub target: Option<i64>,
    pub charts: Option<PathBuf>,
    pub html: Option<PathBuf>,
}

impl Plan {
    pub(crate) fn preset_creates_results_dir(&self) -> bool {
        self.out.starts_with("results") && !Path::new("results").exists()
    }

    pub(crate) fn describe(&self) -> String {
        let m = &self.matrix;
        let names = |v: &[StrategyKind]| v.iter().map(|s| s.name()).collect::<Vec<_>>().join(",");
        let list = |v: &[usize]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(",");
        let models = m.models.iter().map(|m| m.name()).collect::<Vec<_>>().join(",");
        let batches = m.batches.iter().map(|b| b.to_string()).collect::<Vec<_>>().join(",");
        let mut s = format!(
            "{} cells: {} × {} device(s) of {} × batch {} × {}",
            self.cells.len(),
            names(&m.strategies),
            list(&m.counts),
            m.pool.describe(),
            batches,
            models
        );
        for v in &m.vary {
            s += &format!(" × {} {}", v.option, v.values.join(","));
        }
        if m.impls != [Impl::Gpubench] {
            s += &format!(" × impl {}", m.impls.iter().map(|i| i.name()).collect::<Vec<_>>().join(","));
        }
        if m.repeat > 1 {
            s += &format!(" × {} repeats", m.repeat);
        }
        if let Some(m) = self.mem_limit {
            s += &format!(", memory capped at {} per process", crate::report::format::fmt_mib(m as f64 / 1048576.0));
        }
        s += &format!(" → {}", self.out.display());
        s
    }
}

/// Where one cell sits in the matrix.
#[derive(Debug, Clone)]
pub(crate) struct CellSpec {
    pub implementation: Impl,
    pub strategy: StrategyKind,
    /// Devices: the first `n` of the pool.
    pub n: usize,
    pub model: ModelKind,
    pub batch: i64,
    /// The `--vary` axes' values for this cell.
    pub vary: Vec<(Vary, String)>,
    pub repeat: u32,
}

/// One run of the matrix.
#[derive(Debug, Clone)]
pub struct SweepCell {
    pub implementation: Impl,
    pub strategy: StrategyKind,
    pub n: usize,
    pub model: ModelKind,
    pub batch: i64,
    pub repeat: u32,
    /// `option=value` for each `--vary` axis.
    pub varied: Vec<String>,
    /// `gpubench run` arguments, without --out and --quiet.
    pub args: Vec<String>,
    pub cfg: RunConfig,
    pub key: CellKey,
}

impl SweepCell {
    /// Builds a cell's `run` arguments (its place in the matrix, then the
    /// options common to every cell, then its `--vary` values) and validates
    /// them as `run` would (through `validate`). Its key is that of the row
    /// its configuration makes, so it matches the rows the cell writes.
    pub(crate) fn new(spec: CellSpec, pool: &Pool, common: &[String], validate: &Validate) -> Result<SweepCell> {
        let CellSpec { implementation, strategy, n, model, batch, vary, repeat } = spec;
        let mut args: Vec<String> =
            vec!["--strategy".into(), strategy.name().into(), "--model".into(), model.name().into()];
        if implementation == Impl::Pytorch {
            args.extend(["--impl".to_string(), "pytorch".to_string()]);
        }
        args.extend(pool.args(n));
        args.extend(["--batch-size".to_string(), batch.to_string()]);
        args.extend(common.iter().cloned());
        for (v, value) in &vary {
            args.extend(v.args(value));
        }
        let cfg = validate(&args, pool.devices(n))?;
        let key = CellKey::of_row(&crate::bench::row::base_row(&cfg)).expect("a gpubench or pytorch row");
        let varied = vary.iter().map(|(v, value)| format!("{}={value}", v.option)).collect();
        Ok(SweepCell { implementation, strategy, n, model, batch, repeat, varied, args, cfg, key })
    }

    /// A cell from its run arguments and their configuration (an emitted
    /// sweep's cell, rebuilt where it runs).
    pub(crate) fn of_config(args: Vec<String>, cfg: RunConfig) -> SweepCell {
        let key = CellKey::of_row(&crate::bench::row::base_row(&cfg)).expect("a gpubench or pytorch row");
        SweepCell {
            implementation: cfg.implementation,
            strategy: cfg.strategy,
            n: cfg.placement.devices.len(),
            model: cfg.workload.model,
            batch: cfg.batch_per_device,
            repeat: 0,
            varied: vec![],
            args,
            cfg,
            key,
        }
    }

    /// e.g. `ddp ×2 resnet50 224px b64 comm-hook=fp16`, with ` (pytorch)`
    /// for PyTorch's own.
    pub(crate) fn describe(&self) -> String {
        let which = if self.implementation == Impl::Pytorch { " (pytorch)" } else { "" };
        let (s, n, m) = (self.strategy.name(), self.n, self.model.name());
        let varied: String =
            self.varied.iter().filter(|v| !v.starts_with("nnodes=")).map(|v| format!(" {v}")).collect();
        let nodes = match self.cfg.ddp.nnodes {
            1 => String::new(),
            k => format!(" ×{k} nodes"),
        };
        format!("{s} ×{n}{nodes} {m} {}px b{}{varied}{which}", self.cfg.workload.image_size, self.batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_default_to_powers_of_two_and_all() {
        assert_eq!(default_counts(1), [1]);
        assert_eq!(default_counts(4), [1, 2, 4]);
        assert_eq!(default_counts(6), [1, 2, 4, 6]);
    }
}
