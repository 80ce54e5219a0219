//! `gpubench collect DIR --out FILE.csv`: an emitted sweep's cells as one
//! results file (`fleet::collect`), written whole.
use anyhow::Result;
use std::path::Path;

use crate::fleet::collect;
use crate::results::{long, Status};

pub(crate) fn run(dir: &Path, out: &Path) -> Result<i32> {
    let c = collect::collect(dir)?;
    let (rows, devices) = collect::render(&c);
    let kept = crate::results::keep_beside(out)?;
    // The per-device file first: a results file present means both are.
    crate::results::write_whole(&long::devices_path(out), devices.as_bytes())?;
    crate::results::write_whole(out, rows.as_bytes())?;
    for n in &c.notes {
        eprintln!("note: {n}");
    }
    for r in c.rows.iter().filter(|r| r.status != Status::Ok) {
        println!("{}: {}", r.status, r.error);
    }
    let counts: Vec<String> = Status::ALL
        .into_iter()
        .map(|s| (s, c.count(s)))
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| format!("{n} {s}"))
        .collect();
    println!(
        "collected {} rows from {} into {}{}: {}",
        c.rows.len(),
        dir.display(),
        out.display(),
        kept.map(|k| format!(" (replacing the previous file, kept as {})", k.display())).unwrap_or_default(),
        counts.join(", ")
    );
    Ok(if c.rows.iter().all(|r| r.status == Status::Ok) { 0 } else { 1 })
}
