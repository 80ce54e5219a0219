//! `gpubench trace-summary DIR`: where the traced steps went, per rank.
use anyhow::Result;
use std::path::Path;

use crate::report::export::Format;
use crate::report::envelope::Envelope;
use crate::report::pipeline::print;

/// `gpubench trace-summary DIR`: the table, or (`--format json`) the rows
/// under the document's own key `traces`.
pub(crate) fn run(dir: &Path, format: Format) -> Result<i32> {
    let rows = crate::report::trace::summarize_dir(dir)?;
    if format == Format::Json {
        Envelope::new().own("traces", &rows)?.print()?;
    } else {
        print(crate::report::trace::table(&rows).as_bytes())?;
    }
    Ok(0)
}
