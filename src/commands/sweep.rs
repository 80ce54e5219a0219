//! `gpubench sweep`: runs the plan's cells one by one (each in its own
//! process), a line per finished cell, then the report's table over the
//! matrix's rows and, with `--charts`, its charts.
use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::HashMap;
use std::fs::File;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use crate::config::Format;
use crate::error::usage;
use super::report::{training, training_charts, Training};
use crate::report::pipeline::{charts_for, emit_all, finish};
use crate::results::{long, Status};
use crate::sweep::cell::cell_line;
use crate::sweep::cells::{lock_path, read_rows_if_any, wait_lock, Interrupted, Runner};
use crate::sweep::child;
use crate::sweep::plan::{SweepCell, CellKey, Plan};

/// A cell's line: on stdout above the summary table, on stderr when the
/// summary is CSV, JSON or markdown, so that stdout is that document alone.
fn say(pb: &ProgressBar, line: &str, format: Format) {
    let put = || match format {
        Format::Table => println!("{line}"),
        _ => eprintln!("{line}"),
    };
    if pb.is_hidden() {
        put()
    } else {
        pb.suspend(put)
    }
}

/// The command line that continues this sweep.
fn resume_command() -> String {
    let args: Vec<String> = std::env::args().collect();
    resume_of(&args).iter().map(|a| crate::proc::shell_quote(a)).collect::<Vec<_>>().join(" ")
}

/// `args` with `--resume` among the sweep's own options (before the run
/// options after `--`), unless it is there already.
fn resume_of(args: &[String]) -> Vec<String> {
    let dashes = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let mut v = args.to_vec();
    if !args[..dashes].iter().any(|a| a == "--resume") {
        v.insert(dashes, "--resume".into());
    }
    v
}

/// `gpubench sweep`: the cells here, or (`--emit`) handed to a scheduler.
pub(crate) fn run(plan: Plan) -> Result<i32> {
    if let Some(e) = &plan.emit {
        return crate::sweep::emit::emit(&plan, e);
    }
    if plan.preset_creates_results_dir() {
        std::fs::create_dir_all("results").context("creating results/ for the demo")?;
    }
    crate::results::check_out(&plan.out)?;
    if let Some(dir) = &plan.charts {
        std::fs::create_dir_all(dir)
            .map_err(|e| usage(format!("--charts {}: cannot create directory ({e})", dir.display())))?;
    }
    child::install_interrupt_handler();
    let program = child::child_program()?;
    let lock_file_path = lock_path(&plan.out);
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_file_path)
        .with_context(|| format!("cannot open {}", lock_file_path.display()))?;

    // One sweep per results file at a time; after a kill -9, this also waits
    // for any process of the killed sweep that could still append.
    wait_lock(&lock, &lock_file_path)?;
    // Which cells are done already.
    let mut todo: Vec<&SweepCell> = plan.cells.iter().collect();
    let mut skipped = 0;
    if plan.resume {
        let mut done: HashMap<CellKey, usize> = HashMap::new();
        for r in read_rows_if_any(&plan.out)? {
            if r.status == Status::Ok {
                if let Some(k) = CellKey::of_row(&r) {
                    *done.entry(k).or_default() += 1;
                }
            }
        }
        todo.retain(|c| match done.get_mut(&c.key) {
            Some(k) if *k > 0 => {
                *k -= 1;
                false
            }
            _ => true,
        });
        skipped = plan.cells.len() - todo.len();
    }
    use std::os::fd::AsRawFd;
    let runner = Runner {
        program,
        out: plan.out.clone(),
        mem_limit: plan.mem_limit,
        timeout: plan.cell_timeout,
        inherit_fd: Some(lock.as_raw_fd()),
        sweep_id: Some(plan.sweep_id.clone()),
    };

    eprintln!("gpubench sweep: {}", plan.describe());
    for n in &plan.notes {
        eprintln!("note: {n}");
    }
    if plan.resume {
        eprintln!(
            "resume: {skipped} of {} cells already have an ok row in {}; {} to run",
            plan.cells.len(),
            plan.out.display(),
            todo.len()
        );
    }

    let pb = if std::io::stderr().is_terminal() {
        let pb = ProgressBar::with_draw_target(Some(todo.len() as u64), ProgressDrawTarget::stderr());
        pb.set_style(
            ProgressStyle::with_template(
                "{spinner} sweep [{bar:30}] {pos}/{len} cells · {elapsed_precise} · ETA {eta} · {msg}",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        pb.enable_steady_tick(Duration::from_millis(200));
        pb
    } else {
        ProgressBar::hidden()
    };
    let t0 = Instant::now();
    let mut counts: HashMap<String, usize> = HashMap::new();
    let total = todo.len();
    for (i, c) in todo.iter().enumerate() {
        pb.set_message(c.describe());
        let res = runner.run(c);
        let o = match res {
            Ok(o) => o,
            Err(e) if e.is::<Interrupted>() => {
                pb.finish_and_clear();
                eprintln!(
                    "interrupted: stopped cell {} ({}) and its processes; the rows of finished cells ({i} in this \
                     session) are kept in {}",
                    i + 1,
                    c.describe(),
                    plan.out.display()
                );
                eprintln!("resume with: {}", resume_command());
                return Ok(130);
            }
            Err(e) => {
                pb.finish_and_clear();
                return Err(e.context(format!("cell {}", c.describe())));
            }
        };
        *counts.entry(o.row.status.name().to_string()).or_default() += 1;
        say(&pb, &cell_line(i + 1, total, &c.describe(), &o), plan.format);
        pb.inc(1);
    }
    pb.finish_and_clear();

    let summary = summarize_plan(&plan)?;
    let tables: Vec<crate::report::export::Table> = summary.tables().into_iter().cloned().collect();
    emit_all(&tables, plan.format)?;
    if plan.charts.is_some() || plan.html.is_some() {
        // The rows are safe in --out already: a chart or page that fails costs only itself.
        if let Err(e) = render(&plan, &summary) {
            eprintln!("note: {}", crate::error::one_line(&e));
        }
    }
    let mut parts: Vec<String> =
        ["ok", "oom", "diverged", "failed"].iter().filter_map(|s| counts.get(*s).map(|n| format!("{n} {s}"))).collect();
    if skipped > 0 {
        parts.push(format!("{skipped} skipped (already ok)"));
    }
    let done = format!(
        "sweep done: {total} cell(s) run in {} ({}); rows in {}",
        humantime::format_duration(Duration::from_secs(t0.elapsed().as_secs())),
        parts.join(", "),
        plan.out.display()
    );
    say(&ProgressBar::hidden(), &done, plan.format);
    let bad = counts.get("failed").copied().unwrap_or(0) + counts.get("diverged").copied().unwrap_or(0);
    Ok(if bad > 0 { 1 } else { 0 })
}

/// The summary of a finished sweep: the report's table (medians with the
/// repeats' spread, scaling against the 1-device run of the same config, the
/// strategies ranked `>` or `≈`), over this matrix's rows.
pub(crate) struct Summary {
    pub table: crate::report::export::Table,
    pub runs: Vec<crate::report::summary::Run>,
    pub groups: Vec<crate::report::summary::Group>,
    /// The per-device rows the groups were summarized with, for the charts.
    pub devices: long::DeviceData,
    /// Why each multi-device configuration falls short of ideal scaling,
    /// and its waterfall; empty without multi-device configurations.
    pub verdicts: Vec<crate::report::export::Table>,
    /// The verdicts themselves, for the chart.
    pub why: Vec<crate::report::verdict::Verdict>,
}

impl Summary {
    /// The report's table, then the verdicts' when there are any.
    pub(crate) fn tables(&self) -> Vec<&crate::report::export::Table> {
        std::iter::once(&self.table).chain(&self.verdicts).collect()
    }
}

pub(crate) fn summarize_plan(plan: &Plan) -> Result<Summary> {
    use crate::report::summary::{self as rs, Scope};
    let keys: std::collections::HashSet<&CellKey> = plan.cells.iter().map(|c| &c.key).collect();
    let all = if plan.out.exists() { rs::load_files(std::slice::from_ref(&plan.out))? } else { vec![] };
    let runs: Vec<rs::Run> =
        all.into_iter().filter(|r| CellKey::of_row(&r.row).is_some_and(|k| keys.contains(&k))).collect();
    let (devices, _) = long::load_devices(std::slice::from_ref(&plan.out));
    let idx: Vec<usize> = (0..runs.len()).collect();
    let groups = rs::summarize(&runs, &idx, Scope::of, &devices);
    // A sweep's file holds its cells only: no all-reduce curve to look for.
    let Training { mut table, why, verdicts } = training(&runs, &groups, std::slice::from_ref(&plan.out), false);
    table.title = format!("sweep summary ({} row(s) of this matrix in {})", runs.len(), plan.out.display());
    Ok(Summary { table, runs, groups, devices, verdicts, why })
}

/// The report's charts for the sweep's rows into `--charts`, and the page
/// into `--html`, as `report` writes them.
fn render(plan: &Plan, s: &Summary) -> Result<()> {
    use crate::report::html::Page;
    let (dir, html) = (plan.charts.as_deref(), plan.html.as_deref());
    let Some(mut w) = charts_for(dir, html)? else { return Ok(()) };
    let notes = training_charts(&mut w, &s.runs, &s.groups, &s.devices, &s.why).context("charts not written")?;
    let page =
        |sections| Page { title: "gpubench sweep".into(), inputs: vec![plan.out.clone()], outcome: None, sections };
    let tables: Vec<crate::report::export::Table> = s.tables().into_iter().cloned().collect();
    finish(Some(w), dir, html, notes, page, &tables)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_goes_before_the_run_options() {
        let a = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            resume_of(&a("gpubench sweep --out r.csv -- --steps 2")),
            a("gpubench sweep --out r.csv --resume -- --steps 2")
        );
        assert_eq!(resume_of(&a("gpubench sweep --out r.csv")), a("gpubench sweep --out r.csv --resume"));
        assert_eq!(resume_of(&a("gpubench sweep --resume -- --label x")), a("gpubench sweep --resume -- --label x"));
    }
}
