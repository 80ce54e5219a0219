//! The report pipeline every command that prints tables shares (report,
//! compare, check, diagnose, sweep, max-batch, schema): tables to stdout in
//! the chosen format, notes to stderr so that `--format csv|json` stays
//! machine-readable, charts into a directory, and one HTML page with the
//! same tables and the very SVGs `--charts` writes. The report decides;
//! this only writes.
use anyhow::Result;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::charts::{self, ChartWriter};
use super::envelope::Envelope;
use super::export::{exporter, Format, Table};
use super::html::{self, Page, Section};
use super::verdict::{self, Verdict};

/// Writes to stdout; a closed pipe (`| head`) is not an error.
pub(crate) fn print(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

/// One table, as `emit_all` prints tables.
pub(crate) fn emit(table: &Table, format: Format) -> Result<()> {
    emit_all(std::slice::from_ref(table), format)
}

/// Several tables as one output: one after another in the text formats and
/// CSV, and as **one** JSON document (`envelope`), which a JSON parser reads
/// whole. Handed to `sink` a table at a time where the format allows it: a
/// report of 200,000 rows never holds its whole text twice.
fn export_each(tables: &[Table], format: Format, mut sink: impl FnMut(&[u8]) -> Result<()>) -> Result<()> {
    if format == Format::Json {
        return sink(&Envelope::new().tables(tables)?.bytes()?);
    }
    let e = exporter(format);
    tables.iter().try_for_each(|t| sink(&e.export(t)?))
}

/// Prints `export_each`'s output; CSV has no place for notes, so they go to
/// stderr, visible without breaking parsers.
pub(crate) fn emit_all(tables: &[Table], format: Format) -> Result<()> {
    export_each(tables, format, print)?;
    if format == Format::Csv {
        for n in tables.iter().flat_map(|t| &t.notes) {
            eprintln!("note: {n}");
        }
    }
    Ok(())
}

/// Opens the chart directory with a font if one is usable; otherwise says in
/// one line why only SVGs are written.
pub(crate) fn chart_writer(dir: &Path) -> Result<ChartWriter> {
    if let Some(f) = std::env::var_os("GPUBENCH_FONT").filter(|f| !f.is_empty()) {
        if !Path::new(&f).is_file() {
            eprintln!("note: GPUBENCH_FONT={} is not a file; looking for a font elsewhere", Path::new(&f).display());
        }
    }
    let font = match charts::find_font() {
        Ok(p) => Some(p),
        Err(msg) => {
            eprintln!("note: {msg}");
            None
        }
    };
    match ChartWriter::new(dir, font.as_deref()) {
        Err(e) if font.is_some() && crate::error::exit_code(&e) != 2 => {
            eprintln!("note: {}; PNG charts skipped, only SVG written", crate::error::one_line(&e));
            ChartWriter::new(dir, None)
        }
        r => r,
    }
}

fn say_written(w: &ChartWriter, dir: &Path, notes: &[String]) {
    for n in notes {
        eprintln!("note: {n}");
    }
    eprintln!(
        "wrote {} chart file{} to {}",
        w.written.len(),
        if w.written.len() == 1 { "" } else { "s" },
        dir.display()
    );
}

/// The chart writer `--charts` and `--html` need: files in DIR, SVGs kept for
/// the page, both, or none.
pub(crate) fn charts_for(dir: Option<&Path>, html: Option<&Path>) -> Result<Option<ChartWriter>> {
    Ok(match (dir, html) {
        (Some(d), h) => Some(chart_writer(d).map(|w| if h.is_some() { w.keeping_svgs() } else { w })?),
        (None, Some(_)) => Some(ChartWriter::in_memory()),
        (None, None) => None,
    })
}

/// Says what was drawn, and writes the page when one was asked for.
pub(crate) fn finish(
    w: Option<ChartWriter>,
    dir: Option<&Path>,
    html_path: Option<&Path>,
    notes: Vec<String>,
    page: impl FnOnce(Vec<Section>) -> Page,
    tables: &[Table],
) -> Result<()> {
    if let (Some(w), Some(d)) = (&w, dir) {
        say_written(w, d, &notes);
    } else {
        for n in &notes {
            eprintln!("note: {n}");
        }
    }
    if let Some(path) = html_path {
        let mut sections: Vec<Section> = tables.iter().cloned().map(Section::Table).collect();
        let charts = w.map(|w| w.svgs).unwrap_or_default();
        sections.push(Section::Charts { charts, notes });
        write_html(path, &page(sections))?;
    }
    Ok(())
}

/// Writes the page and says where, and whether it replaced one.
pub(crate) fn write_html(path: &Path, page: &Page) -> Result<()> {
    let replaced = crate::results::write_whole(path, &html::render(page))?;
    eprintln!("wrote {}{}", path.display(), if replaced { " (replacing the previous page)" } else { "" });
    Ok(())
}

/// Where `report` and `compare` put their output: the table's format,
/// `--charts DIR` and `--html FILE`.
pub(crate) struct Outputs {
    pub format: Format,
    pub charts: Option<PathBuf>,
    pub html: Option<PathBuf>,
}

/// The verdicts' tables: the parts, then their waterfall; none without verdicts.
/// `curves_read`: all-reduce rows were looked for among the files read, so a
/// ddp verdict without a curve says where (sweep reads its own rows only).
pub(crate) fn verdict_tables(v: &[Verdict], curves_read: bool) -> Vec<Table> {
    if v.is_empty() {
        return vec![];
    }
    let mut t = verdict::table(v);
    if curves_read && v.iter().any(|v| v.wants_curve) {
        t.notes.push(
            "no all-reduce curve for some ddp configuration's world size and backend among the files read: add \
             `gpubench allreduce --out FILE` output, of the same ranks and backend, to the files for what the \
             all-reduce alone should cost"
                .into(),
        );
    }
    vec![t, verdict::waterfall_table(v)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::export::{Cell, Column};

    #[test]
    fn several_tables_are_one_json_document() {
        let t = |title: &str| Table {
            title: title.into(),
            columns: vec![Column::num("n", "n")],
            rows: vec![vec![Cell::num(1.0, "1")]],
            notes: vec![],
        };
        let export_all = |format| {
            let mut out = vec![];
            export_each(&[t("a"), t("b")], format, |bytes| {
                out.extend_from_slice(bytes);
                Ok(())
            })
            .unwrap();
            out
        };
        let bytes = export_all(Format::Json);
        let back: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back["tables"][1]["title"], "b");
        assert_eq!(back["tables"][0]["rows"][0]["n"], 1);
        let text = String::from_utf8(export_all(Format::Table)).unwrap();
        assert!(text.find('a').unwrap() < text.rfind('b').unwrap());
    }
}
