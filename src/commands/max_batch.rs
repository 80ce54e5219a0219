//! `gpubench max-batch`: the largest per-device batch that trains without
//! running out of memory, for one strategy on given devices. Doubling from
//! `--start` until a batch does not fit, then binary search between the last
//! that fit and the first that did not (`sweep::search`). Every probe is a
//! short `gpubench run` in its own process (a failed allocation can leave an
//! allocator or a CUDA context in a state no later probe should inherit).
use anyhow::{Context, Result};
use std::path::Path;

use crate::config::StrategyKind;
use crate::report::charts;
use crate::report::export::{exporter, Format};
use crate::report::format::{fmt_mib, fmt_rate, row_peak_mem, short_error};
use crate::report::html::Page;
use crate::report::pipeline::{charts_for, emit, finish};
use crate::results::csv::Row;
use crate::results::{long, Status};
use crate::sweep::cells::{CellOutcome, Interrupted, Runner};
use crate::sweep::child;
use crate::sweep::frontier::{self, Lever, LeverOutcome};
use crate::sweep::plan::{FrontierPlan, MaxBatchPlan, Vary};
use crate::sweep::search::{search, Fit, Search};

/// A probe's or lever's line: on stdout above a table, on stderr when
/// `--frontier`'s table prints as CSV, JSON or markdown.
fn say(format: Format, line: &str) {
    match format {
        Format::Table => println!("{line}"),
        _ => eprintln!("{line}"),
    }
}

fn probe_line(i: usize, b: i64, global: i64, o: &CellOutcome) -> String {
    let r = &o.row;
    let what = match r.status {
        Status::Ok => "fits".to_string(),
        Status::Diverged => "fits (loss diverged)".to_string(),
        Status::Oom => "out of memory".to_string(),
        // Overloaded is a serving status; a training probe never has it.
        Status::Failed | Status::Overloaded | Status::Missing => r.status.to_string(),
    };
    let mut s = format!("probe {i:>2}: batch {b:>6} per device ({global} global) {what}");
    if let Some(t) = r.throughput_img_s {
        s += &format!(" · {} img/s", fmt_rate(t));
    }
    if let Some((m, k)) = row_peak_mem(r) {
        s += &format!(" · peak {} {k}", fmt_mib(m));
    }
    s += &format!(" · {:.1}s", o.secs);
    if r.status == Status::Oom && !r.error.is_empty() {
        s += &format!(" · {}", short_error(&r.error, 140));
    }
    s
}

/// Runs probes: each a cell in its own process, its line printed.
struct Prober<'a> {
    plan: &'a MaxBatchPlan,
    runner: Runner,
    /// Probes finished so far, for the line after an interrupt.
    done: usize,
}

impl Prober<'_> {
    fn run(&mut self, b: i64, vary: &[(Vary, String)]) -> Result<CellOutcome> {
        let cell = (self.plan.cell)(b, vary)?;
        let o = self.runner.run(&cell)?;
        self.done += 1;
        Ok(o)
    }

    /// The search for the largest batch with `vary`'s run options, from
    /// `start` up to `max`; every probe's line starts with `prefix`.
    fn search(
        &mut self,
        vary: &[(Vary, String)],
        start: i64,
        max: i64,
        prefix: &str,
    ) -> Result<(Search, Vec<(i64, CellOutcome)>)> {
        let n = self.plan.pool.len() as i64;
        let granularity = self.plan.granularity;
        let mut outcomes: Vec<(i64, CellOutcome)> = vec![];
        let mut probe = |b: i64| -> Result<Fit> {
            let o = self.run(b, vary)?;
            say(self.plan.format, &format!("{prefix}{}", probe_line(outcomes.len() + 1, b, b * n, &o)));
            let fit = match o.row.status {
                Status::Ok | Status::Diverged => Fit::Fits,
                Status::Oom => Fit::Oom,
                Status::Failed | Status::Overloaded | Status::Missing => {
                    let s = &o.row.status;
                    return Err(anyhow::anyhow!(
                        "the probe at batch {b} ended with status {s}, not out of memory: {}",
                        short_error(&o.row.error, 300)
                    ));
                }
            };
            outcomes.push((b, o));
            Ok(fit)
        };
        let s = search(&mut probe, start, max, granularity)?;
        Ok((s, outcomes))
    }
}

/// `gpubench max-batch`.
pub(crate) fn run(a: MaxBatchPlan) -> Result<i32> {
    let (first, mem_limit, timeout) = (&a.first, a.mem_limit, a.timeout);
    let (out, temporary) = match &a.out {
        Some(p) => {
            crate::results::check_out(p)?;
            (p.clone(), false)
        }
        None => {
            let nanos =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
            (std::env::temp_dir().join(format!("gpubench-max-batch-{}-{nanos:x}.csv", std::process::id())), true)
        }
    };
    child::install_interrupt_handler();
    let runner =
        Runner { program: child::child_program()?, out: out.clone(), mem_limit, timeout, inherit_fd: None, sweep_id: None };
    eprintln!(
        "gpubench max-batch{}: {} on {}, {} {}px; doubling from batch {} per device, then binary search{}",
        if a.frontier.is_some() { " --frontier" } else { "" },
        a.strategy.name(),
        first.cfg.placement.devices.describe(),
        a.model.name(),
        first.cfg.workload.image_size,
        a.start,
        mem_limit
            .map(|m| format!(", memory capped at {} per process", fmt_mib(m as f64 / 1048576.0)))
            .unwrap_or_default()
    );
    let mut prober = Prober { plan: &a, runner, done: 0 };
    let result = match &a.frontier {
        None => one_search(&a, &mut prober, &out, temporary),
        Some(f) => frontier(&a, f, &mut prober, &out, temporary),
    };
    let done = prober.done;
    if temporary {
        let _ = std::fs::remove_file(&out);
        let _ = std::fs::remove_file(long::devices_path(&out));
    }
    match result {
        Ok(code) => Ok(code),
        Err(e) if e.is::<Interrupted>() => {
            eprintln!("interrupted: the probe was stopped with its processes; {done} probe(s) had finished");
            Ok(130)
        }
        Err(e) => Err(e.context("max-batch stopped")),
    }
}

/// max-batch without `--frontier`: one search, its answer.
fn one_search(a: &MaxBatchPlan, prober: &mut Prober, out: &Path, temporary: bool) -> Result<i32> {
    let (s, outcomes) = prober.search(&[], a.start, a.max, "")?;
    let n = a.pool.len();
    let text = final_report(a, &a.first.cfg.placement.devices.describe(), n, &s, &outcomes, out, temporary);
    print!("{text}");
    Ok(if s.best.is_some() { 0 } else { 1 })
}

/// `--frontier`: a search per lever (the plain run's answer is where the
/// others start), then each lever's way to the target, measured; the table,
/// and with `--out`, `--charts` and `--html` its CSV, chart and page.
fn frontier(a: &MaxBatchPlan, f: &FrontierPlan, prober: &mut Prober, out: &Path, temporary: bool) -> Result<i32> {
    let n = a.pool.len();
    // Past the target's share no lever needs a larger batch.
    let cap = f.target.map_or(a.max, |t| (t / n as i64).clamp(1, a.max));
    let mut start = a.start.min(cap);
    let mut outcomes: Vec<LeverOutcome> = vec![];
    let mut failed = false;
    for (lever, skip) in &f.levers {
        let name = lever.name();
        if let Some(why) = skip {
            say(a.format, &format!("{name}: skipped, {why}"));
            outcomes.push(LeverOutcome::skipped(*lever, why.clone()));
            continue;
        }
        let vary = lever.vary();
        let prefix = format!("{name:<17} ");
        let (s, probes) = match prober.search(&vary, start, cap, &prefix) {
            Ok(x) => x,
            Err(e) if e.is::<Interrupted>() => return Err(e),
            Err(e) => {
                // One lever failing (a crash, not memory) leaves the others' answers standing.
                say(a.format, &format!("{name}: {e:#}"));
                outcomes
                    .push(LeverOutcome::skipped(*lever, format!("failed: {}", short_error(&format!("{e:#}"), 200))));
                failed = true;
                continue;
            }
        };
        if *lever == Lever::ALL[0] {
            if let Some(b) = s.best {
                start = b.clamp(1, cap);
            }
        }
        let fits: Vec<(i64, Row)> = probes
            .into_iter()
            .filter(|(_, o)| matches!(o.row.status, Status::Ok | Status::Diverged))
            .map(|(b, o)| (b, o.row))
            .collect();
        let mut target = None;
        if let (Some(t), Some(best)) = (f.target, s.best) {
            let (micro, k) = frontier::reach(t / n as i64, best).expect("best ≥ 1 and a positive target");
            let reused =
                (k == 1).then(|| fits.iter().rev().find(|(b, _)| *b == micro).map(|(_, r)| r.clone())).flatten();
            let row = match reused {
                Some(r) => r,
                None => {
                    let mut v = vary.clone();
                    v.push(frontier::grad_accum(k));
                    let o = prober.run(micro, &v)?;
                    say(a.format, &format!("{prefix}{}", target_line(t, micro, k, &o)));
                    o.row
                }
            };
            target = Some((micro, k, row));
        }
        let capped = s.best.is_some() && s.first_oom.is_none();
        outcomes.push(LeverOutcome { lever: *lever, skipped: None, search: Some(s), capped, fits, target });
    }

    let mut table = frontier::table(&outcomes, n, f.target);
    let what = format!(
        "{} on {}, {} {}px{}",
        a.strategy.name(),
        a.first.cfg.placement.devices.describe(),
        a.model.name(),
        a.first.cfg.workload.image_size,
        f.target.map(|t| format!(", target global batch {t}")).unwrap_or_default()
    );
    table.title = format!("frontier: {what}");
    say(a.format, "");
    emit(&table, a.format)?;
    if !temporary {
        let csv_path = long::beside(out, "frontier");
        let replaced = crate::results::write_whole(&csv_path, &exporter(Format::Csv).export(&table)?)?;
        eprintln!("wrote {}{}", csv_path.display(), if replaced { " (replacing the previous one)" } else { "" });
    }
    let (dir, html) = (f.charts.as_deref(), f.html.as_deref());
    if let Some(mut w) = charts_for(dir, html)? {
        let lines = frontier::lines(&outcomes, n);
        let mut notes = vec![];
        if lines.is_empty() {
            notes.push("no lever trained at any batch: nothing to draw".to_string());
        } else {
            charts::frontier_chart(&mut w, what.clone(), lines).context("chart not written")?;
        }
        let inputs = if temporary { vec![] } else { vec![out.to_path_buf()] };
        let page = |sections| Page {
            title: format!("gpubench max-batch --frontier: {what}"),
            inputs,
            outcome: None,
            sections,
        };
        finish(Some(w), dir, html, notes, page, std::slice::from_ref(&table))?;
    }
    let answered = match f.target {
        Some(_) => frontier::fastest(&outcomes).is_some(),
        None => outcomes.iter().any(|o| o.best().is_some()),
    };
    Ok(if answered && !failed { 0 } else { 1 })
}

fn target_line(t: i64, micro: i64, k: i64, o: &CellOutcome) -> String {
    let r = &o.row;
    let mut s = format!("to reach {t}: batch {micro} per device × --grad-accum {k} {}", r.status);
    if let Some(x) = r.throughput_img_s {
        s += &format!(" · {} img/s", fmt_rate(x));
    }
    if let Some((m, k)) = row_peak_mem(r) {
        s += &format!(" · peak {} {k}", fmt_mib(m));
    }
    s + &format!(" · {:.1}s", o.secs)
}

fn final_report(
    a: &MaxBatchPlan,
    devices: &str,
    n: usize,
    s: &Search,
    outcomes: &[(i64, CellOutcome)],
    out: &Path,
    temporary: bool,
) -> String {
    let mut t = format!("\nmax-batch: {} on {devices}, {}\n", a.strategy.name(), a.model.name());
    let row_of = |b: i64| -> Option<&Row> { outcomes.iter().rev().find(|(x, _)| *x == b).map(|(_, o)| &o.row) };
    match s.best {
        None => {
            let err = row_of(1).map(|r| short_error(&r.error, 300)).unwrap_or_default();
            t += &format!("even batch 1 per device does not fit: {err}\n");
        }
        Some(best) => {
            t += &format!("largest batch that fits: {best} per device ({} global)", best * n as i64);
            match s.first_oom {
                Some(f) => t += &format!("; {f} does not\n"),
                None => t += "; that is --max, the limit may be higher (raise --max)\n",
            }
            if let Some(r) = row_of(best) {
                if let (Some(thr), Some(per)) = (r.throughput_img_s, r.throughput_per_device_img_s) {
                    t += &format!("throughput at {best}: {} img/s ({} per device)\n", fmt_rate(thr), fmt_rate(per));
                }
                if r.status == Status::Diverged {
                    t += "(its loss diverged, but it trained without running out of memory)\n";
                }
                let (devices, _) = long::load_devices(&[out.to_path_buf()]);
                let peaks = devices.get(&r.run_id);
                if peaks.iter().any(|d| d.peak_mb().is_some()) {
                    t += "peak memory per device:\n";
                    for d in peaks {
                        if let Some((m, k)) = d.peak_mb() {
                            t += &format!("  {:<12} {:<8} {} ({k})\n", d.device, d.role, fmt_mib(m));
                        }
                    }
                } else if let Some((m, k)) = row_peak_mem(r) {
                    t += &format!("peak memory: {} ({k}, largest device)\n", fmt_mib(m));
                }
                if a.strategy == StrategyKind::Dp {
                    t += &dp_note(r);
                }
            }
        }
    }
    let n_oom = s.probes.iter().filter(|(_, f)| *f == Fit::Oom).count();
    t += &format!("{} probe(s), {} out of memory", s.probes.len(), n_oom);
    if temporary {
        t += " (--out FILE.csv keeps a row per probe)\n";
    } else {
        t += &format!("; a row per probe in {}\n", out.display());
    }
    t
}

/// dp keeps the model, the gathered outputs and the reduced gradients on the
/// master, so the master fills up first and sets dp's limit.
fn dp_note(r: &Row) -> String {
    match r.master_mem_excess_pct {
        Some(x) => format!(
            "dp: the master device used {x:+.0}% memory over the replicas' mean; the master's extra memory \
             (the model, gathered outputs and loss, reduced gradients) is what limits dp's batch, and the \
             replicas still have room at it (ddp's ranks are even)\n"
        ),
        None => "dp: the master device holds extra memory (the model, gathered outputs and loss, reduced \
                 gradients), so on GPUs it fills up first and limits dp's batch, leaving the replicas room; on \
                 the CPU all replicas share one process, so the cap covers them together\n"
            .to_string(),
    }
}
