//! `gpubench collect DIR --out FILE.csv`: an emitted sweep's cells as one
//! results file (`fleet::collect`), streamed cell by cell into files beside
//! FILE.csv and its per-device file, then renamed into place: a reader sees
//! the old file or the whole new one, and memory holds one cell at a time.
use anyhow::Result;
use std::path::Path;

use crate::fleet::collect::{self, Merge};
use crate::results::csv::Row;
use crate::results::{long, Status, Whole};

/// The two files being written, and what the summary needs of the rows.
struct Out {
    rows: Whole,
    devices: Whole,
    count: usize,
    by_status: std::collections::BTreeMap<Status, usize>,
    /// Each row that is not ok: its status and error, for the summary.
    problems: Vec<(Status, String)>,
    notes: Vec<String>,
}

impl Merge for Out {
    fn row(&mut self, r: Row) -> Result<()> {
        self.count += 1;
        *self.by_status.entry(r.status).or_default() += 1;
        if r.status != Status::Ok {
            self.problems.push((r.status, r.error.clone()));
        }
        self.rows.write(collect::record(r).as_bytes())
    }
    fn device_line(&mut self, line: &str) -> Result<()> {
        self.devices.write(line.as_bytes())?;
        self.devices.write(b"\n")
    }
    fn note(&mut self, note: String) {
        self.notes.push(note);
    }
}

pub(crate) fn run(dir: &Path, out: &Path) -> Result<i32> {
    let mut o = Out {
        rows: Whole::create(out)?,
        devices: Whole::create(&long::devices_path(out))?,
        count: 0,
        by_status: Default::default(),
        problems: vec![],
        notes: vec![],
    };
    o.rows.write((Row::header() + "\n").as_bytes())?;
    o.devices.write((long::devices_header() + "\n").as_bytes())?;
    collect::merge(dir, &mut o)?;
    let kept = crate::results::keep_beside(out)?;
    // The per-device file first: a results file present means both are.
    let Out { rows, devices, count, by_status, problems, notes } = o;
    devices.finish()?;
    rows.finish()?;
    for n in &notes {
        eprintln!("note: {n}");
    }
    for (status, error) in &problems {
        println!("{status}: {error}");
    }
    let counts: Vec<String> = Status::ALL
        .into_iter()
        .filter_map(|s| by_status.get(&s).map(|n| format!("{n} {s}")))
        .collect();
    println!(
        "collected {count} rows from {} into {}{}: {}",
        dir.display(),
        out.display(),
        kept.map(|k| format!(" (replacing the previous file, kept as {})", k.display())).unwrap_or_default(),
        counts.join(", ")
    );
    Ok(if problems.is_empty() { 0 } else { 1 })
}
