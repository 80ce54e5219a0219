//! One self-contained HTML page: the tables and charts the CLI prints and
//! draws, for people who would rather open a file than run a command.
//!
//! Self-contained means offline: styles are inline, charts are the same SVG
//! `--charts` writes, embedded in the page, and a Content-Security-Policy
//! forbids every script and every fetch, so the page cannot reach anywhere
//! even if some text slipped through unescaped. Nothing does: every piece of
//! user or run text (labels, hosts, errors, notes, sources, file names) goes
//! through [`escape`]; the SVG's own text is escaped by plotters.
//!
//! The page is a pure function of its parts ([`render`]); `results::write_whole`
//! puts it on disk in one rename, so a reader never sees half a page.
use anyhow::Result;
use std::path::{Path, PathBuf};

use super::export::{Cell, Table};
use crate::error::usage;

/// The parts of a page, in order.
pub(crate) enum Section {
    Table(Table),
    /// `(stem, svg)` pairs as `ChartWriter` kept them, and notes about charts
    /// that were skipped.
    Charts {
        charts: Vec<(String, String)>,
        notes: Vec<String>,
    },
}

/// Whether a gate passed, for the banner at the top of a `check` page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Pass,
    Fail,
}

pub(crate) struct Page {
    pub title: String,
    /// The files the page was made from.
    pub inputs: Vec<PathBuf>,
    /// `check`'s verdict and its one-line summary.
    pub outcome: Option<(Outcome, String)>,
    pub sections: Vec<Section>,
}

/// Text made safe for HTML element content and quoted attribute values.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// No script, no fetch of any kind: styles come inline, charts are inline SVG.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'";

const STYLE: &str = "
body { font: 14px/1.45 system-ui, 'DejaVu Sans', sans-serif; color: #222; margin: 0; background: #fff; }
header, main { max-width: 1500px; margin: 0 auto; padding: 0 20px; }
header { border-bottom: 1px solid #ddd; padding-bottom: 8px; }
h1 { font-size: 22px; margin: 18px 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; }
.meta { color: #666; margin: 2px 0; }
code { font: 12px ui-monospace, 'DejaVu Sans Mono', monospace; background: #f4f4f4; padding: 1px 4px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 4px 8px; border-bottom: 1px solid #e4e4e4; text-align: left; white-space: nowrap; }
th { background: #f6f6f6; font-weight: 600; border-bottom: 2px solid #ccc; }
td.num, th.num { text-align: right; }
td.empty { color: #999; }
td.bar { font-family: monospace; white-space: pre; color: #555; }
tr.published td { font-style: italic; color: #555; background: #fbf8ee; }
th.published { background: #f3ecd2; }
td.published { font-style: italic; color: #555; background: #fbf8ee; }
.tag { font-size: 11px; font-style: normal; border: 1px solid #c9b97a; border-radius: 3px; padding: 0 3px; margin-left: 4px; }
td.v-regressed, td.v-missing { color: #b00020; font-weight: 600; }
td.v-improved { color: #1b7a1b; font-weight: 600; }
ul.notes { color: #444; padding-left: 20px; }
ul.notes li.disturbed { color: #8a5a00; }
.banner { margin: 16px 0; padding: 10px 14px; border-radius: 4px; font-weight: 600; }
.banner.pass { background: #e6f4e6; border: 1px solid #8cc48c; }
.banner.fail { background: #fbe4e6; border: 1px solid #e08a94; }
figure { margin: 16px 0; }
figure svg { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #666; font-size: 12px; }
footer { max-width: 1500px; margin: 30px auto; padding: 0 20px; color: #888; font-size: 12px; }
";

/// The whole page as bytes.
pub(crate) fn render(page: &Page) -> Vec<u8> {
    let mut h = String::new();
    let title = escape(&page.title);
    h.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    h.push_str(&format!("<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n"));
    h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    h.push_str(&format!("<meta name=\"generator\" content=\"gpubench {}\">\n", env!("CARGO_PKG_VERSION")));
    h.push_str(&format!("<title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<header>\n"));
    h.push_str(&format!("<h1>{title}</h1>\n"));
    if !page.inputs.is_empty() {
        let files: Vec<String> =
            page.inputs.iter().map(|p| format!("<code>{}</code>", escape(&p.display().to_string()))).collect();
        h.push_str(&format!("<p class=\"meta\">from {}</p>\n", files.join(", ")));
    }
    h.push_str("</header>\n<main>\n");
    if let Some((outcome, summary)) = &page.outcome {
        let class = match outcome {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
        };
        h.push_str(&format!("<div class=\"banner {class}\" id=\"outcome\">{}</div>\n", escape(summary)));
    }
    for (i, s) in page.sections.iter().enumerate() {
        match s {
            Section::Table(t) => h.push_str(&table_html(t, &format!("table-{}", i + 1))),
            Section::Charts { charts, notes } => h.push_str(&charts_html(charts, notes)),
        }
    }
    h.push_str("</main>\n<footer>Written by gpubench ");
    h.push_str(env!("CARGO_PKG_VERSION"));
    h.push_str(". Numbers are the same as the command line prints; CSV and JSON (--format) carry the raw values.");
    h.push_str("</footer>\n</body>\n</html>\n");
    h.into_bytes()
}

/// A verdict cell's class from its first word ("regressed: …" → v-regressed).
fn verdict_class(text: &str) -> String {
    let word: String = text.chars().take_while(|c| c.is_ascii_alphabetic()).collect::<String>().to_ascii_lowercase();
    format!("v-{word}")
}

/// One table: the human columns, as the text formats show them.
fn table_html(t: &Table, id: &str) -> String {
    let t = t.human();
    let mut h = format!("<section class=\"table\" id=\"{id}\">\n");
    if !t.title.is_empty() {
        h.push_str(&format!("<h2>{}</h2>\n", escape(&t.title)));
    }
    h.push_str("<div class=\"scroll\"><table>\n<thead><tr>");
    for c in &t.columns {
        let mut class = vec![];
        if c.align == super::export::Align::Right {
            class.push("num");
        }
        // compare names a published set's columns by the set: "… [published]:throughput_img_s".
        let published = c.title.contains("[published]") || c.key.contains("[published]");
        if published {
            class.push("published");
        }
        h.push_str(&format!("<th{} data-key=\"{}\">{}</th>", class_attr(&class), escape(&c.key), escape(&c.title)));
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    let impl_col = t.columns.iter().position(|c| c.key == "impl");
    for row in &t.rows {
        let published =
            impl_col.is_some_and(|i| row.get(i).map(Cell::display) == Some(super::summary::PUBLISHED.name()));
        h.push_str(if published { "<tr class=\"published\">" } else { "<tr>" });
        for (cell, col) in row.iter().zip(&t.columns) {
            let mut class: Vec<String> = vec![];
            match cell {
                Cell::Num { .. } => class.push("num".into()),
                Cell::Empty(_) => {
                    class.push("empty".into());
                    if col.align == super::export::Align::Right {
                        class.push("num".into());
                    }
                }
                Cell::Text(_) => {}
            }
            if col.key == "verdict" {
                class.push(verdict_class(cell.display()));
            }
            if col.key.contains("[published]") {
                class.push("published".into());
            }
            if col.key == "bar" {
                // A text bar (the verdict's waterfall) lines up only in a fixed-width font.
                class.push("bar".into());
            }
            let class: Vec<&str> = class.iter().map(String::as_str).collect();
            let mut text = escape(cell.display());
            if published && col.key == "impl" {
                text = format!("{text}<span class=\"tag\" title=\"other people's figure, cited in its source; not measured here\">cited</span>");
            }
            h.push_str(&format!("<td{}>{text}</td>", class_attr(&class)));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table></div>\n");
    h.push_str(&notes_html(&t.notes));
    h.push_str("</section>\n");
    h
}

fn class_attr(class: &[&str]) -> String {
    if class.is_empty() {
        String::new()
    } else {
        format!(" class=\"{}\"", escape(&class.join(" ")))
    }
}

fn notes_html(notes: &[String]) -> String {
    if notes.is_empty() {
        return String::new();
    }
    let mut h = String::from("<ul class=\"notes\">\n");
    for n in notes {
        // Interference is the note a reader must not miss.
        let class = if n.starts_with("disturbed") { " class=\"disturbed\"" } else { "" };
        h.push_str(&format!("<li{class}>{}</li>\n", escape(n)));
    }
    h.push_str("</ul>\n");
    h
}

fn charts_html(charts: &[(String, String)], notes: &[String]) -> String {
    if charts.is_empty() && notes.is_empty() {
        return String::new();
    }
    let mut h = String::from("<section class=\"charts\" id=\"charts\">\n<h2>Charts</h2>\n");
    for (stem, svg) in charts {
        let stem = escape(stem);
        // plotters writes a bare <svg> element, escaped, with no XML prolog.
        h.push_str(&format!(
            "<figure id=\"chart-{stem}\">\n{}\n<figcaption>{stem}.svg</figcaption>\n</figure>\n",
            svg.trim()
        ));
    }
    h.push_str(&notes_html(notes));
    h.push_str("</section>\n");
    h
}

/// Refuses, before any work, an `--html` path whose directory is missing or
/// that names a directory.
pub(crate) fn check_html_path(path: &Path) -> Result<()> {
    if path.as_os_str().is_empty() {
        return Err(usage("--html needs a file name, e.g. --html report.html"));
    }
    if path.is_dir() {
        return Err(usage(format!("--html {}: is a directory; give a file name, e.g. report.html", path.display())));
    }
    let dir = crate::results::csv::existing_parent(path, "--html")?;
    // An existing page is replaced through a file beside it: the directory
    // must take new files either way (`/proc/r.html` failed after the report).
    crate::results::csv::writable_dir(dir, "--html", path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::export::Column;

    fn table() -> Table {
        Table {
            title: "Demo <b>".into(),
            columns: vec![
                Column::text("label", "label"),
                Column::text("impl", "impl"),
                Column::num("throughput_img_s", "img/s"),
                Column::raw("throughput_ci95_lo"),
            ],
            rows: vec![
                vec![
                    Cell::text("<script>alert(1)</script>"),
                    Cell::text("gpubench"),
                    Cell::num(1234.5, "1234 ±2%"),
                    Cell::num(1200.0, "x"),
                ],
                vec![Cell::text("dgx-1 & co"), Cell::text("published"), Cell::none(), Cell::none()],
            ],
            notes: vec!["disturbed a.csv:2 (x): host busy".into(), "a \"quoted\" note".into()],
        }
    }

    fn page_text(sections: Vec<Section>, outcome: Option<(Outcome, String)>) -> String {
        let page = Page { title: "t".into(), inputs: vec![PathBuf::from("<a>.csv")], outcome, sections };
        String::from_utf8(render(&page)).unwrap()
    }

    #[test]
    fn user_text_is_escaped_everywhere() {
        let h = page_text(vec![Section::Table(table())], None);
        assert!(h.contains("<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>"), "{h}");
        assert!(!h.contains("<script"), "no script element may appear");
        assert!(h.contains("<h2>Demo &lt;b&gt;</h2>"));
        assert!(h.contains("<code>&lt;a&gt;.csv</code>"));
        assert!(h.contains("dgx-1 &amp; co"));
        assert!(h.contains("a &quot;quoted&quot; note"));
    }

    #[test]
    fn page_is_offline_and_self_contained() {
        let svg = "<svg width=\"10\" height=\"10\" viewBox=\"0 0 10 10\" xmlns=\"http://www.w3.org/2000/svg\">\
                   <text>&lt;script&gt;</text></svg>";
        let h =
            page_text(vec![Section::Charts { charts: vec![("throughput".into(), svg.into())], notes: vec![] }], None);
        assert!(h.contains("Content-Security-Policy\" content=\"default-src 'none'"), "{h}");
        for fetch in ["src=", "href=", "@import", "url(", "<link", "<script"] {
            assert!(!h.contains(fetch), "{fetch} would fetch or run something");
        }
        assert!(h.contains("<figure id=\"chart-throughput\">\n<svg"));
        // The only URL is SVG's namespace, which nothing fetches.
        assert_eq!(h.matches("http://").count() + h.matches("https://").count(), 1, "{h}");
    }

    #[test]
    fn published_rows_verdicts_and_interference_are_marked() {
        let h = page_text(vec![Section::Table(table())], None);
        assert!(h.contains("<tr class=\"published\"><td>dgx-1 &amp; co</td><td>published<span class=\"tag\""), "{h}");
        assert!(h.contains("<li class=\"disturbed\">disturbed a.csv:2"), "{h}");
        // Raw-only columns stay out, as in the text table.
        assert!(!h.contains("throughput_ci95_lo"));
        assert!(h.contains("<td class=\"num\">1234 ±2%</td>"));
        assert!(h.contains("<td class=\"empty num\">-</td>"));

        let check = Table {
            title: String::new(),
            columns: vec![Column::text("verdict", "verdict")],
            rows: vec![vec![Cell::text("regressed: -12%")], vec![Cell::text("improved")]],
            notes: vec![],
        };
        let h = page_text(vec![Section::Table(check)], Some((Outcome::Fail, "1 regressed: FAIL".into())));
        assert!(h.contains("<div class=\"banner fail\" id=\"outcome\">1 regressed: FAIL</div>"));
        assert!(h.contains("<td class=\"v-regressed\">regressed: -12%</td>"));
        assert!(h.contains("<td class=\"v-improved\">improved</td>"));
        // A waterfall's text bar keeps its blanks, in a fixed-width font.
        let bars = Table {
            columns: vec![Column::text("bar", "bar")],
            rows: vec![vec![Cell::text("   ==")]],
            ..Table::default()
        };
        let h = page_text(vec![Section::Table(bars)], None);
        assert!(h.contains("<td class=\"bar\">   ==</td>"), "{h}");
    }

    #[test]
    fn a_published_sets_columns_are_marked_in_compare() {
        let t = Table {
            title: String::new(),
            columns: vec![Column::num("K80 [published]:throughput_img_s", "B img/s")],
            rows: vec![vec![Cell::num(51.9, "51.9")]],
            notes: vec![],
        };
        let h = page_text(vec![Section::Table(t)], None);
        assert!(h.contains("<th class=\"num published\""), "{h}");
        assert!(h.contains("<td class=\"num published\">51.9</td>"), "{h}");
    }

    #[test]
    fn render_gives_a_whole_page() {
        let page =
            Page { title: "Demo <b>".into(), inputs: vec![], outcome: None, sections: vec![Section::Table(table())] };
        let h = String::from_utf8(render(&page)).unwrap();
        assert!(h.starts_with("<!DOCTYPE html>") && h.ends_with("</html>\n"));
        assert!(h.contains("<title>Demo &lt;b&gt;</title>"));
    }

    #[test]
    fn html_paths_are_checked_before_work() {
        let dir = tempfile::tempdir().unwrap();
        assert!(check_html_path(&dir.path().join("r.html")).is_ok());
        let e = check_html_path(&dir.path().join("missing/r.html")).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 2);
        assert!(format!("{e}").contains("does not exist"), "{e}");
        let e = check_html_path(dir.path()).unwrap_err();
        assert!(format!("{e}").contains("is a directory"), "{e}");
        assert!(check_html_path(Path::new("r.html")).is_ok(), "a bare name is in the current directory");
    }

    #[test]
    fn pages_are_written_whole_and_overwrites_are_said() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.html");
        assert!(!crate::results::write_whole(&p, b"one").unwrap());
        assert!(crate::results::write_whole(&p, b"two").unwrap());
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file left behind");
    }
}
