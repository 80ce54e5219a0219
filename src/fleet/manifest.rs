//! `DIR/manifest.jsonl`: one line per cell of an emitted sweep. A cell is
//! known by its index here, never by the host it ran on; its result goes to
//! `DIR/cells/<index>.csv`.
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

use crate::error::usage;
use crate::results::csv::Row;

/// One cell: what to run, where it sits in the job arrays, and the row a
/// missing result becomes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    pub index: usize,
    /// Its job array (cells that need the same resources share one).
    pub shape: usize,
    /// Its task within that array (arrays count from 0 each).
    pub task: usize,
    /// `gpubench run` arguments, without --out and --quiet.
    pub args: Vec<String>,
    /// GPUs (0 on the CPU) and CPUs the cell's one task needs.
    pub gpus: usize,
    pub cpus: usize,
    /// The array's time limit, minutes.
    pub time_min: u64,
    /// e.g. `ddp ×2 tinycnn 16px b8`, for lines and errors.
    pub what: String,
    /// The cell's configuration as a row, for a `missing` one.
    pub row: Row,
    /// slurm or kubernetes: who runs it.
    #[serde(default = "slurm")]
    pub scheduler: String,
    /// Nodes the cell spans (ddp over --nnodes; one task per node).
    #[serde(default = "one")]
    pub nodes: usize,
}

fn one() -> usize {
    1
}

fn slurm() -> String {
    "slurm".into()
}

pub fn manifest_path(dir: &Path) -> PathBuf {
    dir.join("manifest.jsonl")
}

pub fn cells_dir(dir: &Path) -> PathBuf {
    dir.join("cells")
}

/// Where cell `i`'s results file goes.
pub fn cell_path(dir: &Path, i: usize) -> PathBuf {
    cells_dir(dir).join(format!("{i}.csv"))
}

/// A digest of the manifest's text, recorded in the scripts and Jobs that
/// run its cells: a task that starts after the manifest was rewritten
/// (emitted again, edited by hand) would run another cell than the one it
/// was submitted for, so `cell` refuses it. FNV-1a, 64 bits: this detects
/// change, it does not guard against forgery.
pub fn digest(text: &str) -> String {
    let h = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3));
    format!("{h:016x}")
}

/// Reads the manifest and checks it against the digest its task was given.
pub fn read_checked(dir: &Path, expected: Option<&str>) -> Result<Vec<Entry>> {
    let (p, text) = read_text(dir)?;
    if let Some(want) = expected {
        let now = digest(&text);
        if now != want {
            return Err(usage(format!(
                "{} changed since this task was emitted (digest {want}, now {now}): emit the sweep again \
                 (--resume keeps its ok cells) and submit what it prints",
                p.display()
            )));
        }
    }
    parse(&p, &text)
}

/// The manifest's text.
pub fn render(entries: &[Entry]) -> Result<String> {
    let mut s = String::new();
    for e in entries {
        s += &serde_json::to_string(e)?;
        s.push('\n');
    }
    Ok(s)
}

/// Reads `DIR/manifest.jsonl`; a usage error naming the line when it is not one.
pub fn read(dir: &Path) -> Result<Vec<Entry>> {
    let (p, text) = read_text(dir)?;
    parse(&p, &text)
}

fn read_text(dir: &Path) -> Result<(PathBuf, String)> {
    let p = manifest_path(dir);
    let text = std::fs::read_to_string(&p).map_err(|e| {
        usage(format!("{}: {e}; a directory written by `gpubench sweep --emit slurm DIR` has it", p.display()))
    })?;
    Ok((p, text))
}

fn parse(p: &Path, text: &str) -> Result<Vec<Entry>> {
    let mut v = vec![];
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let e: Entry = serde_json::from_str(line)
            .map_err(|e| usage(format!("{}:{}: not a manifest line ({e})", p.display(), n + 1)))?;
        if e.index != v.len() {
            return Err(usage(format!(
                "{}:{}: cell {} out of order (expected {})",
                p.display(),
                n + 1,
                e.index,
                v.len()
            )));
        }
        v.push(e);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(i: usize) -> Entry {
        Entry {
            index: i,
            shape: 1,
            task: i,
            args: vec!["--strategy".into(), "single".into()],
            gpus: 0,
            cpus: 1,
            time_min: 30,
            what: "single ×1".into(),
            row: Row { strategy: "single".into(), n_devices: 1, ..Default::default() },
            scheduler: "slurm".into(),
            nodes: 1,
        }
    }

    #[test]
    fn a_manifest_reads_back_and_refuses_disorder() {
        let dir = tempfile::tempdir().unwrap();
        let es = vec![entry(0), entry(1)];
        std::fs::write(manifest_path(dir.path()), render(&es).unwrap()).unwrap();
        assert_eq!(read(dir.path()).unwrap(), es);
        std::fs::write(manifest_path(dir.path()), render(&[entry(1)]).unwrap()).unwrap();
        let e = read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("manifest.jsonl:1: cell 1 out of order"), "{e}");
        let text = render(&es).unwrap();
        std::fs::write(manifest_path(dir.path()), &text).unwrap();
        assert_eq!(read_checked(dir.path(), Some(&digest(&text))).unwrap(), es);
        std::fs::write(manifest_path(dir.path()), text.replace("single", "dp")).unwrap();
        let e = read_checked(dir.path(), Some(&digest(&text))).unwrap_err().to_string();
        assert!(e.contains("manifest.jsonl changed since this task was emitted") && e.contains("emit the sweep again"));
        let e = read(&dir.path().join("nope")).unwrap_err().to_string();
        assert!(e.contains("--emit slurm"), "{e}");
    }

    /// A manifest emitted by a gpubench of an earlier schema still reads:
    /// its rows lack the columns added since, which are then empty.
    #[test]
    fn a_manifest_of_an_earlier_schema_reads_with_the_new_columns_empty() {
        let dir = tempfile::tempdir().unwrap();
        let mut line: serde_json::Value = serde_json::to_value(entry(0)).unwrap();
        let row = line["row"].as_object_mut().unwrap();
        for c in crate::results::columns::added_after(5) {
            assert!(row.remove(c).is_some(), "{c}");
        }
        std::fs::write(manifest_path(dir.path()), format!("{line}\n")).unwrap();
        let es = read(dir.path()).unwrap();
        assert_eq!(
            (es[0].row.strategy.as_str(), es[0].row.commit.as_str(), es[0].row.sweep_id.as_str()),
            ("single", "", "")
        );
    }
}
