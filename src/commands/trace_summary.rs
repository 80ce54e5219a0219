//! `gpubench trace-summary DIR`: where the traced steps went, per rank.
use anyhow::Result;
use std::path::Path;

use crate::report::export::Format;
use crate::report::pipeline::print;

/// `gpubench trace-summary DIR`: the table, or (`--format json`) the rows
/// as one JSON array.
pub(crate) fn run(dir: &Path, format: Format) -> Result<i32> {
    let rows = crate::report::trace::summarize_dir(dir)?;
    if format == Format::Json {
        print(serde_json::to_string(&rows)?.as_bytes())?;
        print(b"\n")?;
    } else {
        print(crate::report::trace::table(&rows).as_bytes())?;
    }
    Ok(0)
}
