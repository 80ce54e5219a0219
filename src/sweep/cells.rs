//! Running cells: each in its own child process (`child`), its row found in
//! the results file afterwards, or written by the sweep when the child died
//! without one; and the lock that keeps one sweep per results file.
use anyhow::{Context, Result};
use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::child;
use super::plan::{CellKey, SweepCell};
use crate::proc::Exit;
use crate::results::csv::{self as results_csv, Row};

/// `.<name>.lock` beside `out` (hidden), held while a sweep and its children run.
pub(crate) fn lock_path(out: &Path) -> PathBuf {
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    out.with_file_name(format!(".{name}.lock"))
}

/// Waits for the exclusive lock on `f` (flock: the children inherit it with
/// the descriptor), polling so that Ctrl-C still works; says once why it waits.
pub(crate) fn wait_lock(f: &File, path: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    let mut said = false;
    loop {
        // SAFETY: flock(2) on a descriptor we own.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::WouldBlock {
            return Err(e).with_context(|| format!("cannot lock {}", path.display()));
        }
        if !said {
            eprintln!(
                "gpubench: waiting for another sweep on this file, or its processes, to finish ({} is locked)",
                path.display()
            );
            said = true;
        }
        if child::interrupted() {
            anyhow::bail!("interrupted while waiting for {}", path.display());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The rows of `out` (none when the file does not exist yet or is empty).
pub(crate) fn read_rows_if_any(out: &Path) -> Result<Vec<Row>> {
    if !out.exists() || std::fs::metadata(out).map(|m| m.len() == 0).unwrap_or(true) {
        return Ok(vec![]);
    }
    results_csv::read_rows(out)
}

/// The rows a finished child appended for `key`: rows of `out` matching the
/// key whose run_id was not there before the child started.
pub(crate) fn new_rows_for(out: &Path, key: &CellKey, before: &std::collections::HashSet<String>) -> Result<Vec<Row>> {
    Ok(read_rows_if_any(out)?
        .into_iter()
        .filter(|r| !before.contains(&r.run_id) && CellKey::of_row(r).as_ref() == Some(key))
        .collect())
}

/// The outcome of one cell or probe: its row (written by the child, or by us).
pub(crate) struct CellOutcome {
    pub row: Row,
    /// The sweep wrote the row because the child did not.
    pub written_by_sweep: bool,
    pub secs: f64,
}

/// A row for a cell whose process ended without one.
pub(crate) fn missing_row(c: &SweepCell, r: &child::ChildResult, mem_limited: bool) -> Row {
    let cfg = &c.cfg;
    let mut row = crate::bench::row::base_row(cfg);
    // The cell's, not this process's.
    row.threads = cfg.host.count().map(|t| t as u32);
    let (status, error) = child::classify_missing_row(r, mem_limited);
    row.status = status;
    row.error = error;
    row.peak_rss_mb = r.peak_rss_mb;
    row.note = "row written by gpubench sweep: the cell's process ended without one; \
                peak_rss_mb sampled by the sweep"
        .into();
    row
}

/// How cells are run: which program, into which file, under which limits.
pub(crate) struct Runner {
    pub program: PathBuf,
    pub out: PathBuf,
    /// RLIMIT_DATA of each cell's processes, bytes.
    pub mem_limit: Option<u64>,
    pub timeout: Option<Duration>,
    /// The sweep's lock, inherited by the cells' processes.
    pub inherit_fd: Option<i32>,
    /// The sweep's id, given to each cell (`fleet::SWEEP_ID_VAR`) and to
    /// the rows written for cells that died; None: the cells inherit this
    /// process's (an emitted sweep's cell, max-batch's probes).
    pub sweep_id: Option<String>,
}

impl Runner {
    /// Runs one cell to its row; Err(Interrupted) on Ctrl-C.
    pub(crate) fn run(&self, c: &SweepCell) -> Result<CellOutcome> {
        let before: std::collections::HashSet<String> =
            read_rows_if_any(&self.out)?.into_iter().map(|r| r.run_id).collect();
        let mut argv: Vec<OsString> = vec!["run".into()];
        argv.extend(c.args.iter().map(OsString::from));
        argv.extend(["--out".into(), self.out.as_os_str().to_owned(), "--quiet".into()]);
        let spec = child::ChildSpec {
            program: &self.program,
            args: argv,
            env: self.sweep_id.iter().map(|id| (crate::fleet::SWEEP_ID_VAR, id.clone())).collect(),
            mem_limit: self.mem_limit,
            inherit_fd: self.inherit_fd,
            timeout: self.timeout,
        };
        let res = child::run(&spec, || {})?;
        if res.ended.exit == Exit::Interrupted {
            return Err(anyhow::Error::new(Interrupted));
        }
        let mut rows = new_rows_for(&self.out, &c.key, &before)?;
        // A scheduler's SIGTERM reaches the cell's processes as well as
        // this one: the run may have died of it before the flag was seen.
        if rows.is_empty() && child::interrupted() {
            return Err(anyhow::Error::new(Interrupted));
        }
        // Prefer the row of our own child (its run id ends in its pid; ddp's
        // rows carry rank 0's pid instead), should someone else append too.
        let mine = format!("-{:x}", res.ended.pid);
        let secs = res.ended.secs;
        if let Some(i) = rows.iter().rposition(|r| r.run_id.ends_with(&mine)) {
            let row = rows.swap_remove(i);
            return Ok(CellOutcome { row, written_by_sweep: false, secs });
        }
        if let Some(row) = rows.pop() {
            return Ok(CellOutcome { row, written_by_sweep: false, secs });
        }
        let mut row = missing_row(c, &res, self.mem_limit.is_some());
        if let Some(id) = &self.sweep_id {
            row.sweep_id.clone_from(id);
        }
        results_csv::append_rows(&self.out, std::slice::from_ref(&row))?;
        Ok(CellOutcome { row, written_by_sweep: true, secs })
    }
}

/// Ctrl-C or SIGTERM stopped the sweep.
#[derive(Debug)]
pub(crate) struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_is_hidden_beside_the_results() {
        assert_eq!(lock_path(Path::new("results/demo.csv")), PathBuf::from("results/.demo.csv.lock"));
        assert_eq!(lock_path(Path::new("r.csv")), PathBuf::from(".r.csv.lock"));
    }
}
