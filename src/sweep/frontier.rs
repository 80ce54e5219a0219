//! `max-batch --frontier`: the ways out of "my batch does not fit", side by
//! side. Each memory lever (none, `--checkpoint`, fp16, bf16, and each
//! precision with `--checkpoint`) gets its own search for the largest
//! per-device batch. With `--target-global-batch N`, each lever then reaches the
//! global batch N with the largest micro-batch that fits and divides N's
//! per-device share, accumulating gradients (`--grad-accum K`) over as few
//! micro-batches as that needs, and that configuration is measured: the
//! fastest measured one is the answer.
//!
//! Gradient accumulation is not searched on its own: it does not change what
//! one micro-batch needs (the gradients are the same size), only how many
//! micro-batches a step takes. So it appears as the `accum` of each lever's
//! way to the target.
//!
//! This module is the pure part (levers, how a target is reached, the table
//! and the chart's lines); the searches and runs are `commands::max_batch`'s.
use super::search::Search;
use super::vary::Vary;
use crate::report::export::{Cell, Column, Table};
use crate::report::format::{fmt_mib, fmt_rate, row_peak_mem};
use crate::results::csv::Row;
use crate::results::Status;

/// One memory lever: a precision other than the run's, activation
/// checkpointing, or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lever {
    pub precision: Option<&'static str>,
    pub checkpoint: bool,
}

impl Lever {
    /// In the order they are searched: the plain run first, since every other
    /// lever's search starts from its answer.
    /// "none" is strict fp32 (TF32 off); on Ampere and later TF32 is the
    /// fp32 that users run (3.5x strict fp32's speed on an H200), so it is a
    /// lever of its own: without it, the mixed precisions' gain would be
    /// measured against a baseline no one uses there.
    pub(crate) const ALL: [Lever; 8] = [
        Lever { precision: None, checkpoint: false },
        Lever { precision: None, checkpoint: true },
        Lever { precision: Some("fp16"), checkpoint: false },
        Lever { precision: Some("bf16"), checkpoint: false },
        Lever { precision: Some("fp16"), checkpoint: true },
        Lever { precision: Some("bf16"), checkpoint: true },
        Lever { precision: Some("tf32"), checkpoint: false },
        Lever { precision: Some("tf32"), checkpoint: true },
    ];

    pub(crate) fn name(&self) -> String {
        match (self.precision, self.checkpoint) {
            (None, false) => "none".into(),
            (None, true) => "checkpoint".into(),
            (Some(p), false) => p.into(),
            (Some(p), true) => format!("{p} + checkpoint"),
        }
    }

    /// The run options that make this lever, as sweep axes' values.
    pub(crate) fn vary(&self) -> Vec<(Vary, String)> {
        let mut v = vec![];
        if let Some(p) = self.precision {
            v.push((Vary { option: "precision".into(), values: vec![p.into()], flag: false }, p.into()));
        }
        if self.checkpoint {
            v.push((Vary { option: "checkpoint".into(), values: vec!["on".into()], flag: true }, "on".into()));
        }
        v
    }
}

/// `--grad-accum K` as a sweep axis value.
pub(crate) fn grad_accum(k: i64) -> (Vary, String) {
    (Vary { option: "grad-accum".into(), values: vec![k.to_string()], flag: false }, k.to_string())
}

/// How a lever whose largest fitting batch is `best` reaches `per_device`
/// images per device per step: the largest micro-batch that fits and divides
/// `per_device`, and the number of micro-batches K. Every K divides
/// `per_device`, so the global batch is exactly the target.
pub(crate) fn reach(per_device: i64, best: i64) -> Option<(i64, i64)> {
    if best < 1 || per_device < 1 {
        return None;
    }
    (1..=per_device).find(|k| per_device % k == 0 && per_device / k <= best).map(|k| (per_device / k, k))
}

/// What one lever gave.
#[derive(Debug, Clone)]
pub(crate) struct LeverOutcome {
    pub lever: Lever,
    /// Why it was not tried (the run's own refusal, or the device's).
    pub skipped: Option<String>,
    pub search: Option<Search>,
    /// The largest batch that fit: the search's cap (the target's share or
    /// `--max`) rather than a measured limit.
    pub capped: bool,
    /// Every probe that fit, with its row, in probe order.
    pub fits: Vec<(i64, Row)>,
    /// The measured way to the target: micro-batch, K, and its row.
    pub target: Option<(i64, i64, Row)>,
}

impl LeverOutcome {
    pub(crate) fn skipped(lever: Lever, why: String) -> Self {
        LeverOutcome { lever, skipped: Some(why), search: None, capped: false, fits: vec![], target: None }
    }

    pub(crate) fn best(&self) -> Option<i64> {
        self.search.as_ref().and_then(|s| s.best)
    }

    fn best_row(&self) -> Option<&Row> {
        let b = self.best()?;
        self.fits.iter().rev().find(|(x, _)| *x == b).map(|(_, r)| r)
    }

    /// Images per second at the target, when its run trained.
    pub(crate) fn target_rate(&self) -> Option<f64> {
        let (_, _, r) = self.target.as_ref()?;
        matches!(r.status, Status::Ok).then_some(r.throughput_img_s).flatten()
    }
}

/// The index of the fastest measured way to the target.
pub(crate) fn fastest(outcomes: &[LeverOutcome]) -> Option<usize> {
    outcomes
        .iter()
        .enumerate()
        .filter_map(|(i, o)| o.target_rate().map(|t| (i, t)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i)
}

/// The frontier as a table: one row per lever.
pub(crate) fn table(outcomes: &[LeverOutcome], devices: usize, target: Option<i64>) -> Table {
    let mut columns = vec![
        Column::text("lever", "lever"),
        Column::num("largest_batch_per_device", "largest batch/dev"),
        Column::num("throughput_img_s", "img/s there"),
        Column::num("peak_mem_mb", "peak mem"),
    ];
    if let Some(n) = target {
        columns.extend([
            Column::num("target_batch_per_device", &format!("to reach {n}: batch/dev")),
            Column::num("target_grad_accum", "× accum"),
            Column::num("target_throughput_img_s", &format!("img/s at {n}")),
            Column::num("target_of_fastest", "of fastest"),
        ]);
    }
    let win = fastest(outcomes);
    let top = win.and_then(|i| outcomes[i].target_rate());
    let mut rows = vec![];
    let mut notes = vec![];
    let mut skipped: Vec<(String, Vec<String>)> = vec![];
    for o in outcomes {
        let mut row = vec![Cell::text(o.lever.name())];
        if let Some(why) = &o.skipped {
            row.push(Cell::empty("skipped"));
            row.resize(columns.len(), Cell::none());
            // Levers skipped for one reason share its note.
            match skipped.iter_mut().find(|(w, _)| w == why) {
                Some((_, names)) => names.push(o.lever.name()),
                None => skipped.push((why.clone(), vec![o.lever.name()])),
            }
            rows.push(row);
            continue;
        }
        match o.best() {
            Some(b) => row.push(Cell::num(b as f64, if o.capped { format!("≥ {b}") } else { b.to_string() })),
            None => row.push(Cell::empty("none fits")),
        }
        let best_row = o.best_row();
        row.push(match best_row.and_then(|r| r.throughput_img_s) {
            Some(t) => Cell::num(t, fmt_rate(t)),
            None => Cell::none(),
        });
        row.push(match best_row.and_then(row_peak_mem) {
            Some((m, _)) => Cell::num(m, fmt_mib(m)),
            None => Cell::none(),
        });
        if target.is_some() {
            match &o.target {
                Some((micro, k, r)) => {
                    row.push(Cell::num(*micro as f64, micro.to_string()));
                    row.push(Cell::num(*k as f64, k.to_string()));
                    match (o.target_rate(), top) {
                        (Some(t), Some(top)) => {
                            row.push(Cell::num(t, fmt_rate(t)));
                            row.push(Cell::num(t / top, format!("{:.0}%", 100.0 * t / top)));
                        }
                        _ => {
                            row.push(Cell::empty(r.status.to_string()));
                            row.push(Cell::none());
                            notes.push(format!("{}: the run at the target ended {}", o.lever.name(), r.status));
                        }
                    }
                }
                None => row.resize(columns.len(), Cell::none()),
            }
        }
        rows.push(row);
    }
    for (why, names) in skipped {
        notes.push(format!("{}: skipped, {why}", names.join(", ")));
    }
    if outcomes.iter().any(|o| o.capped) {
        notes.push(
            "≥ B: batch B fit and the search stopped there (the target's batch per device, or --max)".to_string(),
        );
    }
    if let (Some(n), Some(i)) = (target, win) {
        let o = &outcomes[i];
        let (micro, k, _) = o.target.as_ref().expect("the fastest has a target run");
        let how = if *k == 1 { "no accumulation".to_string() } else { format!("--grad-accum {k}") };
        notes.push(format!(
            "fastest way to a global batch of {n} on {devices} device(s): {} at batch {micro} per device with {how}, {} img/s",
            o.lever.name(),
            fmt_rate(o.target_rate().unwrap_or_default()),
        ));
    }
    Table { title: String::new(), columns, rows, notes }
}

/// One line per lever for the chart: (effective global batch, img/s) of
/// every probe that fit, then the target's run.
pub(crate) fn lines(outcomes: &[LeverOutcome], devices: usize) -> Vec<(String, Vec<(f64, f64)>)> {
    outcomes
        .iter()
        .filter(|o| o.skipped.is_none())
        .map(|o| {
            let mut pts: Vec<(f64, f64)> = o
                .fits
                .iter()
                .filter(|(_, r)| r.status == Status::Ok)
                .filter_map(|(b, r)| Some(((b * devices as i64) as f64, r.throughput_img_s?)))
                .collect();
            if let (Some((micro, k, _)), Some(t)) = (&o.target, o.target_rate()) {
                pts.push(((micro * k * devices as i64) as f64, t));
            }
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            pts.dedup_by(|a, b| a.0 == b.0);
            (o.lever.name(), pts)
        })
        .filter(|(_, p)| !p.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::search::Fit;

    #[test]
    fn a_target_is_reached_with_the_largest_micro_batch_that_fits_and_divides_it() {
        assert_eq!(reach(64, 100), Some((64, 1)));
        assert_eq!(reach(64, 64), Some((64, 1)));
        assert_eq!(reach(64, 40), Some((32, 2)));
        assert_eq!(reach(64, 31), Some((16, 4)));
        assert_eq!(reach(96, 40), Some((32, 3)));
        assert_eq!(reach(7, 3), Some((1, 7)));
        assert_eq!(reach(64, 0), None);
        for (t, best) in [(256, 37), (100, 9), (12, 5), (1, 1)] {
            let (m, k) = reach(t, best).unwrap();
            assert!(m * k == t && m <= best, "{t} {best}: {m}×{k}");
        }
    }

    #[test]
    fn levers_are_run_options() {
        let names: Vec<String> = Lever::ALL.iter().map(|l| l.name()).collect();
        assert_eq!(
            names,
            [
                "none",
                "checkpoint",
                "fp16",
                "bf16",
                "fp16 + checkpoint",
                "bf16 + checkpoint",
                "tf32",
                "tf32 + checkpoint"
            ]
        );
        let args = |l: &Lever| l.vary().iter().flat_map(|(v, x)| v.args(x)).collect::<Vec<_>>();
        assert!(args(&Lever::ALL[0]).is_empty());
        assert_eq!(args(&Lever::ALL[5]), ["--precision=bf16", "--checkpoint"]);
        let (v, x) = grad_accum(4);
        assert_eq!(v.args(&x), ["--grad-accum=4"]);
    }

    fn row(t: f64, status: Status) -> Row {
        Row { throughput_img_s: Some(t), peak_mem_alloc_mb: Some(100.0), status, ..Default::default() }
    }

    fn outcome(i: usize, best: i64, probes: &[(i64, f64)], target: Option<(i64, i64, f64)>) -> LeverOutcome {
        LeverOutcome {
            lever: Lever::ALL[i],
            skipped: None,
            search: Some(Search { best: Some(best), first_oom: None, probes: vec![(best, Fit::Fits)] }),
            capped: false,
            fits: probes.iter().map(|&(b, t)| (b, row(t, Status::Ok))).collect(),
            target: target.map(|(m, k, t)| (m, k, row(t, Status::Ok))),
        }
    }

    #[test]
    fn the_table_names_the_fastest_way_and_the_skipped_levers() {
        let os = vec![
            outcome(0, 16, &[(8, 100.0), (16, 120.0)], Some((16, 4, 118.0))),
            LeverOutcome::skipped(Lever::ALL[1], "tinycnn has no stages".into()),
            outcome(3, 32, &[(16, 150.0), (32, 170.0)], Some((32, 2, 165.0))),
        ];
        assert_eq!(fastest(&os), Some(2));
        let t = table(&os, 2, Some(128));
        assert_eq!(t.rows.len(), 3);
        assert!(t.rows.iter().all(|r| r.len() == t.columns.len()));
        assert_eq!(t.rows[2][7].display(), "100%");
        assert_eq!(t.rows[0][7].display(), "72%");
        assert_eq!(t.rows[1][1].display(), "skipped");
        assert!(t.notes.iter().any(|n| n == "checkpoint: skipped, tinycnn has no stages"), "{:?}", t.notes);
        let last = t.notes.last().unwrap();
        assert!(last.contains("bf16 at batch 32 per device with --grad-accum 2, 165 img/s"), "{last}");
        // the chart: effective global batch, the target's point last
        let l = lines(&os, 2);
        assert_eq!(l.len(), 2);
        assert_eq!(l[1].1, [(32.0, 150.0), (64.0, 170.0), (128.0, 165.0)]);
    }

    #[test]
    fn a_target_run_that_failed_is_no_answer() {
        let mut o = outcome(0, 16, &[(16, 120.0)], Some((16, 2, 1.0)));
        o.target.as_mut().unwrap().2.status = Status::Failed;
        assert_eq!(fastest(std::slice::from_ref(&o)), None);
        let t = table(&[o], 1, Some(32));
        assert_eq!(t.rows[0][6].display(), "failed");
        assert!(!t.notes.iter().any(|n| n.starts_with("fastest")));
    }
}
