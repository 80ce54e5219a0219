//! The matrix of a sweep: which cells run, in which order, each with its
//! `gpubench run` arguments and validated configuration.
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{Impl, ModelKind, RunConfig, StrategyKind};
use crate::device::{self, Devices};
use crate::error::usage;
use crate::results::csv::Row;

/// Makes (and validates) a cell's configuration from its `gpubench run`
/// arguments on `devices`, exactly as `gpubench run` would; a bad cell is a
/// usage error before any cell starts.
pub type Validate<'a> = dyn Fn(&[String], Devices) -> Result<RunConfig> + 'a;

/// Where the cells run: a prefix of a GPU list, or N CPU replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pool {
    Gpus(Vec<usize>),
    Cpu(usize),
}

impl Pool {
    pub fn len(&self) -> usize {
        match self {
            Pool::Gpus(g) => g.len(),
            Pool::Cpu(n) => *n,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `--gpus a,b` or `--cpu n` for the first `n` devices.
    pub fn args(&self, n: usize) -> Vec<String> {
        match self {
            Pool::Gpus(g) => {
                let l: Vec<String> = g[..n].iter().map(|o| o.to_string()).collect();
                vec!["--gpus".into(), l.join(",")]
            }
            Pool::Cpu(_) => vec!["--cpu".into(), n.to_string()],
        }
    }

    pub fn devices(&self, n: usize) -> Devices {
        match self {
            Pool::Gpus(g) => Devices::cuda(g[..n].to_vec()),
            Pool::Cpu(_) => Devices::cpu(n),
        }
    }

    pub fn describe(&self) -> String {
        self.devices(self.len()).describe()
    }
}

/// `--gpus` / `--cpu` as given, else every GPU, else the CPU with `cpu_default` replicas.
pub fn resolve_pool(gpus: Option<&str>, cpu: Option<usize>, cpu_default: usize) -> Result<Pool> {
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
pub fn default_counts(n: usize) -> Vec<usize> {
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
/// of that cell (repeats share it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CellKey {
    pub host: String,
    pub implementation: String,
    pub label: String,
    pub strategy: String,
    pub devices: String,
    pub model: String,
    pub image_size: u32,
    pub precision: String,
    pub batch_per_device: u32,
    pub data: String,
}

impl CellKey {
    pub fn of_row(r: &Row) -> Option<CellKey> {
        if r.implementation != "gpubench" && r.implementation != "pytorch" {
            return None;
        }
        Some(CellKey {
            host: r.host.clone(),
            implementation: r.implementation.clone(),
            label: r.label.clone(),
            strategy: r.strategy.clone(),
            devices: r.devices.clone(),
            model: r.model.clone(),
            image_size: r.image_size?,
            precision: r.precision.clone(),
            batch_per_device: r.batch_per_device?,
            data: r.data.clone(),
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
    pub repeat: u32,
}

impl Matrix {
    /// The cells in order (repeat → model → batch → device count → strategy
    /// → implementation), `single` only at one device, and the notes that
    /// say what was left out.
    pub fn cells(&self, common: &[String], host: &str, validate: &Validate) -> Result<(Vec<Cell>, Vec<String>)> {
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
                    for &n in counts {
                        for &strategy in strategies {
                            if strategy == StrategyKind::Single && n != 1 {
                                continue;
                            }
                            // Implementations innermost: the runs to compare follow each other.
                            for &imp in impls {
                                if imp == Impl::Pytorch && strategy == StrategyKind::Dp && pytorch_dp_skipped {
                                    continue;
                                }
                                cells.push(Cell::new(imp, strategy, n, model, batch, r, pool, common, host, validate)?);
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
    pub cells: Vec<Cell>,
    pub notes: Vec<String>,
    pub out: PathBuf,
    pub charts: Option<PathBuf>,
    /// The report as one HTML page, written at the end.
    pub html: Option<PathBuf>,
    pub mem_limit: Option<u64>,
    pub cell_timeout: Option<Duration>,
    pub resume: bool,
}

/// `gpubench max-batch`, ready to search.
pub struct MaxBatchPlan {
    pub strategy: StrategyKind,
    pub model: ModelKind,
    pub pool: Pool,
    pub start: i64,
    pub max: i64,
    pub granularity: i64,
    pub out: Option<PathBuf>,
    pub mem_limit: Option<u64>,
    pub timeout: Option<Duration>,
    /// The probe's cell at the start batch (validated before any probe runs).
    pub first: Cell,
    /// The probe's cell at a batch.
    pub cell: Box<dyn Fn(i64) -> Result<Cell>>,
}

impl Plan {
    pub fn preset_creates_results_dir(&self) -> bool {
        self.out.starts_with("results") && !Path::new("results").exists()
    }

    pub fn describe(&self) -> String {
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

/// One run of the matrix.
#[derive(Debug, Clone)]
pub struct Cell {
    pub implementation: Impl,
    pub strategy: StrategyKind,
    pub n: usize,
    pub model: ModelKind,
    pub batch: i64,
    pub repeat: u32,
    /// `gpubench run` arguments, without --out and --quiet.
    pub args: Vec<String>,
    pub cfg: RunConfig,
    pub key: CellKey,
}

impl Cell {
    /// Builds a cell's `run` arguments and validates them as `run` would
    /// (through `validate`).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        implementation: Impl,
        strategy: StrategyKind,
        n: usize,
        model: ModelKind,
        batch: i64,
        repeat: u32,
        pool: &Pool,
        common: &[String],
        host: &str,
        validate: &Validate,
    ) -> Result<Cell> {
        let mut args: Vec<String> =
            vec!["--strategy".into(), strategy.name().into(), "--model".into(), model.name().into()];
        if implementation == Impl::Pytorch {
            args.extend(["--impl".to_string(), "pytorch".to_string()]);
        }
        args.extend(pool.args(n));
        args.extend(["--batch-size".to_string(), batch.to_string()]);
        args.extend(common.iter().cloned());
        let cfg = validate(&args, pool.devices(n))?;
        let key = CellKey {
            host: host.to_string(),
            implementation: implementation.name().into(),
            label: cfg.label.clone(),
            strategy: strategy.name().into(),
            devices: cfg.devices.describe(),
            model: model.name().into(),
            image_size: cfg.image_size as u32,
            precision: cfg.precision.name().to_string(),
            batch_per_device: batch as u32,
            data: cfg.data.clone(),
        };
        Ok(Cell { implementation, strategy, n, model, batch, repeat, args, cfg, key })
    }

    /// e.g. `ddp ×2 resnet50 224px b64`, with ` (pytorch)` for PyTorch's own.
    pub fn describe(&self) -> String {
        let which = if self.implementation == Impl::Pytorch { " (pytorch)" } else { "" };
        let (s, n, m) = (self.strategy.name(), self.n, self.model.name());
        format!("{s} ×{n} {m} {}px b{}{which}", self.cfg.image_size, self.batch)
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
