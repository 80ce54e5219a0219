//! `gpubench collect DIR --out FILE.csv`: the emitted sweep's cells, merged
//! in manifest order into one results file and its per-device file. A cell
//! that failed keeps its row; a cell that left no file becomes a `missing`
//! row naming its array task (and job, when `--submit` recorded it), so a
//! lost task is never a silently shorter table; a cell whose file cannot be
//! read (corrupt, truncated, another tool's) becomes a `failed` row naming
//! the file and what is wrong, and the other cells still merge.
use anyhow::Result;
use std::collections::BTreeMap;
use std::path::Path;

use super::manifest::{self, Entry};
use crate::results::csv::{self as results_csv, Row};
use crate::results::{long, Status};

/// `DIR/jobs.txt`, written by `--submit`: one `array job-id` line per array.
pub fn jobs_path(dir: &Path) -> std::path::PathBuf {
    dir.join("jobs.txt")
}

fn jobs(dir: &Path) -> BTreeMap<usize, String> {
    let text = std::fs::read_to_string(jobs_path(dir)).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (a, j) = l.split_once(' ')?;
            Some((a.trim().parse().ok()?, j.trim().to_string()))
        })
        .collect()
}

/// The row of a cell that left no results file.
pub fn missing_row(dir: &Path, e: &Entry, job: Option<&str>) -> Row {
    let file = manifest::cell_path(dir, e.index);
    let what = format!("left no {}", file.display());
    stand_in(dir, e, job, Status::Missing, &what)
}

/// The row of a cell whose results file is there but cannot be read.
pub fn unreadable_row(dir: &Path, e: &Entry, job: Option<&str>, why: &anyhow::Error) -> Row {
    let file = manifest::cell_path(dir, e.index);
    let what = format!("left {} that cannot be read ({why:#})", file.display());
    stand_in(dir, e, job, Status::Failed, &what)
}

/// A row standing in for a cell's own: the manifest's description of the
/// cell, the task and job it ran as, and what went wrong.
fn stand_in(dir: &Path, e: &Entry, job: Option<&str>, status: Status, what: &str) -> Row {
    let job_text = job.map(|j| format!(", job {j}")).unwrap_or_default();
    let flat: String = what.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    Row {
        run_id: format!("{}-cell-{}", if status == Status::Missing { "missing" } else { "unreadable" }, e.index),
        timestamp: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        host: String::new(),
        status,
        error: format!(
            "cell {} ({}) {flat}: task {} of array {}{job_text}; its log is under {}",
            e.index,
            e.what,
            e.task,
            e.shape,
            dir.join("logs").display()
        ),
        scheduler: e.scheduler.clone(),
        job_id: job.unwrap_or_default().into(),
        array_task: Some(e.task as u32),
        ..e.row.clone()
    }
}

/// What a merge goes through, cell by cell in manifest order: each row
/// (stand-ins included), each per-device line, each note.
pub trait Merge {
    fn row(&mut self, r: Row) -> Result<()>;
    fn device_line(&mut self, line: &str) -> Result<()>;
    fn note(&mut self, note: String);
}

/// Hands every cell of the emitted sweep in `dir` to `to`, one cell's rows
/// at a time: a fleet's results are never held whole (1,000 cells of 200
/// rows each: `scripts/bench-scale`).
pub fn merge(dir: &Path, to: &mut dyn Merge) -> Result<()> {
    let entries = manifest::read(dir)?;
    let jobs = jobs(dir);
    let header = long::devices_header();
    for e in &entries {
        let path = manifest::cell_path(dir, e.index);
        let job = jobs.get(&e.shape).map(|s| s.as_str());
        let rows = match path.exists().then(|| results_csv::read_rows(&path)).transpose() {
            Ok(rows) => rows.unwrap_or_default(),
            Err(why) => {
                to.row(unreadable_row(dir, e, job, &why))?;
                continue;
            }
        };
        if rows.is_empty() {
            to.row(missing_row(dir, e, job))?;
            continue;
        }
        for r in rows {
            to.row(r)?;
        }
        let devices = long::devices_path(&path);
        if let Ok(text) = std::fs::read_to_string(&devices) {
            let mut lines = text.lines();
            if lines.next() == Some(header.as_str()) {
                for l in lines {
                    to.device_line(l)?;
                }
            } else {
                to.note(format!("{}: another gpubench's per-device columns, left out", devices.display()));
            }
        }
    }
    Ok(())
}

/// A row as `collect` writes it: in this gpubench's schema.
pub fn record(r: Row) -> String {
    Row { schema_version: results_csv::SCHEMA_VERSION, ..r }.to_record()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the tests merge into: every row in manifest order, the
    /// per-device lines and the notes, in memory.
    #[derive(Debug, Default)]
    struct Collected {
        rows: Vec<Row>,
        device_lines: Vec<String>,
        notes: Vec<String>,
    }

    /// Every cell of the emitted sweep in `dir`, in memory.
    fn collect(dir: &Path) -> Result<Collected> {
        let mut c = Collected::default();
        merge(dir, &mut c)?;
        Ok(c)
    }

    impl Merge for Collected {
        fn row(&mut self, r: Row) -> Result<()> {
            self.rows.push(r);
            Ok(())
        }
        fn device_line(&mut self, line: &str) -> Result<()> {
            self.device_lines.push(line.to_string());
            Ok(())
        }
        fn note(&mut self, note: String) {
            self.notes.push(note);
        }
    }

    /// The results file's text and its per-device file's, as `collect` writes them.
    fn render(c: &Collected) -> (String, String) {
        let mut rows = Row::header() + "\n";
        for r in &c.rows {
            rows += &record(r.clone());
        }
        let mut devs = long::devices_header() + "\n";
        for l in &c.device_lines {
            devs += l;
            devs.push('\n');
        }
        (rows, devs)
    }

    #[test]
    fn a_cell_without_a_file_is_a_missing_row_naming_its_task_and_job() {
        let dir = tempfile::tempdir().unwrap();
        let e = Entry {
            index: 0,
            shape: 2,
            task: 1,
            args: vec![],
            gpus: 0,
            cpus: 1,
            time_min: 5,
            what: "ddp ×2 tinycnn".into(),
            row: Row { strategy: "ddp".into(), n_devices: 2, host: "emitter".into(), ..Default::default() },
            scheduler: "slurm".into(),
            nodes: 1,
        };
        std::fs::write(manifest::manifest_path(dir.path()), manifest::render(std::slice::from_ref(&e)).unwrap())
            .unwrap();
        std::fs::write(jobs_path(dir.path()), "2 4711\n").unwrap();
        let c = collect(dir.path()).unwrap();
        let r = &c.rows[0];
        assert_eq!((r.status, r.strategy.as_str(), r.n_devices, r.host.as_str()), (Status::Missing, "ddp", 2, ""));
        assert_eq!((r.scheduler.as_str(), r.job_id.as_str(), r.array_task), ("slurm", "4711", Some(1)));
        assert!(r.error.contains("cell 0 (ddp ×2 tinycnn) left no") && r.error.contains("task 1 of array 2, job 4711"));
        let (rows, _) = render(&c);
        assert!(rows.lines().nth(1).unwrap().contains(",missing,\"cell 0"), "{rows}");
    }

    #[test]
    fn a_corrupt_cell_is_a_failed_row_and_the_others_still_merge() {
        let dir = tempfile::tempdir().unwrap();
        let entry = |index: usize| Entry {
            index,
            shape: 1,
            task: index,
            args: vec![],
            gpus: 0,
            cpus: 1,
            time_min: 5,
            what: format!("cell number {index}"),
            row: Row { strategy: "single".into(), ..Default::default() },
            scheduler: "slurm".into(),
            nodes: 1,
        };
        let es = [entry(0), entry(1)];
        std::fs::write(manifest::manifest_path(dir.path()), manifest::render(&es).unwrap()).unwrap();
        std::fs::create_dir_all(manifest::cells_dir(dir.path())).unwrap();
        let good = Row {
            run_id: "r0".into(),
            status: Status::Ok,
            strategy: "single".into(),
            schema_version: results_csv::SCHEMA_VERSION,
            ..Default::default()
        };
        std::fs::write(manifest::cell_path(dir.path(), 0), format!("{}\n{}", Row::header(), good.to_record())).unwrap();
        std::fs::write(manifest::cell_path(dir.path(), 1), "someone,else's\n\u{0}\u{1}garbage\n").unwrap();
        let c = collect(dir.path()).unwrap();
        assert_eq!(c.rows.len(), 2);
        assert_eq!((c.rows[0].status, c.rows[0].run_id.as_str()), (Status::Ok, "r0"));
        let bad = &c.rows[1];
        assert_eq!(bad.status, Status::Failed);
        assert!(bad.error.contains("cell 1 (cell number 1) left") && bad.error.contains("1.csv"), "{}", bad.error);
        assert!(bad.error.contains("cannot be read") && !bad.error.contains('\n'), "{}", bad.error);
    }
}
