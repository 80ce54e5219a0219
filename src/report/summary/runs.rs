//! The analysis model: a row and where it came from (`Run`), the
//! configuration rows are repeats of (`ConfigKey`), and what they share
//! besides (`Scope`).
use anyhow::Result;
use std::path::{Path, PathBuf};

use crate::error::usage;
use crate::report::export::{Cell, Column};
use crate::results::csv::for_each_row;
use crate::results::packed::{Columns, Packed};
use crate::results::Fields;
use crate::results::Implementation;

use super::cells::*;

/// One row and where it came from (the file's name shared by its rows).
/// The row is packed: a report holds every row of its files.
#[derive(Debug, Clone)]
pub(crate) struct Run {
    pub file: std::sync::Arc<Path>,
    pub line: u64,
    pub row: Packed,
}

impl Run {
    pub(crate) fn is_ok(&self) -> bool {
        self.row.status() == crate::results::Status::Ok
    }
    /// Changes the row (tests build a file's rows, then vary one).
    #[cfg(test)]
    pub(crate) fn edit(&mut self, f: impl FnOnce(&mut crate::results::csv::Row)) {
        let mut row = self.row.unpack();
        f(&mut row);
        self.row = row.pack();
    }

    /// `file:line`, for messages about this row.
    pub(crate) fn place(&self) -> String {
        format!("{}:{}", self.file.display(), self.line)
    }
}

/// The `impl` of reference rows: other people's figures, never measured here.
pub(crate) const PUBLISHED: Implementation = Implementation::Published;

/// Reads every file; a file with a header but no rows is an error, since a
/// report or a gate over nothing is almost certainly the wrong file.
pub(crate) fn load_files(paths: &[PathBuf]) -> Result<Vec<Run>> {
    load_columns(paths, Columns::ALL)
}

/// `load_files`, keeping only the columns `keep` of each row.
pub(crate) fn load_columns(paths: &[PathBuf], keep: Columns) -> Result<Vec<Run>> {
    let mut runs = vec![];
    for p in paths {
        let before = runs.len();
        let file: std::sync::Arc<Path> = p.as_path().into();
        for_each_row(p, |line, row| runs.push(Run { file: file.clone(), line, row: row.pack_only(keep) }))?;
        if runs.len() == before {
            return Err(usage(format!("{}: has a header but no result rows", p.display())));
        }
    }
    runs.shrink_to_fit();
    Ok(runs)
}

/// Model, image size, precision, batch per device, serving load and set-up:
/// what scaling is measured across.
pub(crate) type WorkloadKey = (String, Option<u32>, String, Option<u32>, String, String);

/// The configuration a result belongs to; rows with equal keys are repeats.
/// Every option that changes the measurement is in it: precision (fp32 and
/// fp16 are different workloads), the set-up beside the columns, and ddp's
/// communication.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ConfigKey {
    pub model: String,
    pub image_size: Option<u32>,
    pub precision: String,
    pub strategy: String,
    pub n_devices: u32,
    pub batch_per_device: Option<u32>,
    /// Serving rows: the scenario and its load (`load_of`); empty for training.
    pub load: String,
    /// What else was chosen that makes another workload, for every strategy
    /// alike (`setup_of`); empty for the defaults.
    pub setup: String,
    /// ddp's communication where it is not the default (`comm_of`).
    pub comm: String,
}

/// The words of a row's set-up beside its own columns: channels-last,
/// cudnn-benchmark, deterministic, the data, then the `variant` column's.
pub(crate) fn setup_of(row: &impl Fields) -> String {
    let mut w: Vec<String> = vec![];
    for (on, word) in [
        (row.channels_last(), "channels-last"),
        (row.cudnn_benchmark(), "cudnn-benchmark"),
        (row.deterministic(), "deterministic"),
    ] {
        if on == Some(true) {
            w.push(word.into());
        }
    }
    if let Some(k) = row.grad_accum().filter(|&k| k > 1) {
        w.push(format!("grad-accum={k}"));
    }
    if !row.data().is_empty() && row.data() != "synthetic" {
        w.push(format!("data={}", row.data()));
    }
    if !row.variant().is_empty() {
        w.push(row.variant().to_string());
    }
    w.join(" ")
}

/// A ddp row's communication where it is not the default: a backend other
/// than the device's default (gloo on the CPU, nccl on CUDA), a compression hook.
pub(crate) fn comm_of(row: &impl Fields) -> String {
    let mut w: Vec<String> = vec![];
    let default_backend = if row.device_kind() == "cuda" { "nccl" } else { "gloo" };
    if !row.backend().is_empty() && row.backend() != default_backend {
        w.push(format!("backend={}", row.backend()));
    }
    if !row.comm_hook().is_empty() && row.comm_hook() != "none" {
        w.push(format!("comm-hook={}", row.comm_hook()));
    }
    w.join(" ")
}

/// A serving row's scenario and load, e.g. `streams 200×5fps`, `server
/// 500/s`, `offline`; empty for a training row.
pub(crate) fn load_of(row: &impl Fields) -> String {
    if !row.is_infer() {
        return String::new();
    }
    let num = |v: f64| if v.fract() == 0.0 { format!("{v:.0}") } else { format!("{v}") };
    match (row.scenario(), row.streams(), row.fps(), row.offered_rate()) {
        ("streams", Some(n), Some(f), _) => format!("streams {n}×{}fps", num(f)),
        ("server", _, _, Some(r)) => format!("server {}/s", num(r)),
        (s, ..) => s.to_string(),
    }
}

/// Loads in numeric order: the scenario, then its first number.
fn load_rank(load: &str) -> (String, u64, String) {
    let (kind, rest) = load.split_once(' ').unwrap_or((load, ""));
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    (kind.to_string(), digits.parse().unwrap_or(0), rest.to_string())
}

/// single, dp, ddp in that order (simplest first), then anything else by name.
pub(crate) fn strategy_rank(s: &str) -> u8 {
    match s {
        "single" => 0,
        "dp" => 1,
        "ddp" => 2,
        _ => 3,
    }
}

impl ConfigKey {
    /// The set-up and communication words, as the `variant` column of a
    /// table shows them.
    pub(crate) fn variant(&self) -> String {
        [self.setup.as_str(), self.comm.as_str()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Whether any of `keys` has a variant: tables show the column then.
    pub(crate) fn any_variant<'a>(keys: impl IntoIterator<Item = &'a ConfigKey>) -> bool {
        keys.into_iter().any(|k| !k.setup.is_empty() || !k.comm.is_empty())
    }

    /// The table columns that name a configuration (report and compare);
    /// `load` adds the serving load's column, `variant` what else was chosen.
    pub(crate) fn columns(load: bool, variant: bool) -> Vec<Column> {
        let mut c = vec![
            Column::text("model", "model"),
            Column::num("image_size", "image"),
            Column::text("precision", "precision"),
            Column::text("strategy", "strategy"),
            Column::num("n_devices", "devices"),
            Column::num("batch_per_device", "batch/dev"),
        ];
        if load {
            c.push(Column::text("load", "load"));
        }
        if variant {
            c.push(Column::text("variant", "variant"));
        }
        c
    }

    /// This configuration's cells under `columns(load, variant)`.
    pub(crate) fn cells(&self, load: bool, variant: bool) -> Vec<Cell> {
        let mut c = vec![
            Cell::text(&self.model),
            int_cell(self.image_size),
            Cell::text(&self.precision),
            Cell::text(&self.strategy),
            int_cell(Some(self.n_devices)),
            int_cell(self.batch_per_device),
        ];
        if load {
            c.push(Cell::text(&self.load));
        }
        if variant {
            c.push(Cell::text(self.variant()));
        }
        c
    }

    /// A serving configuration (`gpubench infer`).
    pub(crate) fn is_infer(&self) -> bool {
        !self.load.is_empty()
    }

    pub(crate) fn of(row: &impl Fields) -> Self {
        ConfigKey {
            model: row.model().to_string(),
            image_size: row.image_size(),
            precision: row.precision().to_string(),
            strategy: row.strategy().to_string(),
            n_devices: row.n_devices(),
            batch_per_device: row.batch_per_device(),
            load: load_of(row),
            setup: setup_of(row),
            comm: if row.strategy() == "ddp" { comm_of(row) } else { String::new() },
        }
    }

    /// The key without strategy, device count and communication: what
    /// scaling is measured across.
    pub(crate) fn workload(&self) -> WorkloadKey {
        (
            self.model.clone(),
            self.image_size,
            self.precision.clone(),
            self.batch_per_device,
            self.load.clone(),
            self.setup.clone(),
        )
    }

    /// Short human form, e.g. `resnet50 224px fp32 ddp x8 b64` (serving:
    /// with its load).
    pub(crate) fn describe(&self) -> String {
        let mut s = format!(
            "{} {} {} {} x{} b{}",
            self.model,
            opt_or(self.image_size, "?").to_string() + "px",
            self.precision,
            self.strategy,
            self.n_devices,
            opt_or(self.batch_per_device, "?")
        );
        if self.is_infer() {
            s += &format!(" {}", self.load);
        }
        let v = self.variant();
        if !v.is_empty() {
            s += &format!(" {v}");
        }
        s
    }
}

impl Ord for ConfigKey {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        let k = |c: &ConfigKey| {
            (
                c.model.clone(),
                c.image_size,
                c.precision.clone(),
                c.batch_per_device,
                load_rank(&c.load),
                c.setup.clone(),
                strategy_rank(&c.strategy),
                c.strategy.clone(),
                c.n_devices,
                c.comm.clone(),
            )
        };
        k(self).cmp(&k(o))
    }
}

impl PartialOrd for ConfigKey {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

pub(crate) fn opt_or<T: ToString>(v: Option<T>, none: &str) -> String {
    v.map_or_else(|| none.to_string(), |x| x.to_string())
}

/// What a group's rows share besides the config. `report` scopes by
/// hardware, label and impl so that different machines or a published figure
/// are never pooled as repeats; `compare` and `check` have already split
/// their inputs into sets and use one scope per set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Scope {
    pub hardware: String,
    pub label: String,
    pub implementation: Implementation,
}

impl Scope {
    pub(crate) fn of(row: &impl Fields) -> Self {
        Scope {
            hardware: if row.device_name().is_empty() { "unknown".into() } else { row.device_name().to_string() },
            label: row.label().to_string(),
            implementation: row.implementation(),
        }
    }
}

/// "a.csv" or "3 files".
pub(crate) fn files_phrase(files: &[PathBuf]) -> String {
    match files {
        [one] => one.display().to_string(),
        _ => format!("{} files", files.len()),
    }
}

/// A file's name without directory and `.csv`, for labels.
pub(crate) fn file_stem(p: &Path) -> String {
    p.file_stem().map_or_else(|| p.display().to_string(), |s| s.to_string_lossy().into_owned())
}
