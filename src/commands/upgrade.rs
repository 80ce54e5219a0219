//! `gpubench upgrade FILE`: a results file of an earlier schema rewritten
//! for this one (`results::csv::upgrade`), so that new rows can be appended.
use anyhow::Result;
use std::path::Path;

use crate::results::csv::{upgrade, Upgrade, SCHEMA_VERSION};

pub(crate) fn run(file: &Path) -> Result<i32> {
    match upgrade(file)? {
        Upgrade::Current => println!("{}: already CSV schema v{SCHEMA_VERSION}; nothing to do", file.display()),
        Upgrade::Done { rows, kept } => println!(
            "{}: {rows} row(s) rewritten for CSV schema v{SCHEMA_VERSION}; the old file is kept as {}",
            file.display(),
            kept.display()
        ),
    }
    Ok(0)
}
