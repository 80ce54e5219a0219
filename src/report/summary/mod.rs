//! From result rows to the figures people read: rows grouped by config,
//! repeats reduced to medians, scaling efficiency against the 1-device run,
//! each with its 95 % interval. `report`, `compare`, `check` and the charts
//! all start here.
//!
//! A group's throughput interval is the spread of its repeats when it has
//! two or more (from the lowest to the highest of their own 95 % intervals,
//! so run-to-run drift is inside it), else the one run's own interval
//! (`metrics::interval`, which does not cover drift), and tables mark the
//! latter with `*`. Scaling efficiency's interval propagates both
//! throughputs' relative half-widths in quadrature (independent measurements).
//!
//! Only rows with status `ok` contribute numbers. Others are kept, so that
//! they can be reported, but never count as zero throughput.

mod cells;
mod group;
mod notes;
mod runs;
mod table;

pub(crate) use cells::*;
pub(crate) use group::*;
pub(crate) use notes::*;
pub(crate) use runs::*;
pub(crate) use table::*;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::metrics::interval::Interval;
    use crate::report::export::{Cell, Exporter};
    use crate::report::format::{fmt_ms, fmt_pct, fmt_rate, fmt_ratio};
    use crate::results::csv::Row;
    use crate::results::long::DeviceData;
    use crate::results::Implementation;

    /// A measured ok row; tests adjust what they need.
    pub(crate) fn row(strategy: &str, n: u32, thr: f64) -> Row {
        Row {
            schema_version: 1,
            run_id: format!("{strategy}-{n}-{thr}"),
            implementation: Implementation::Gpubench,
            strategy: strategy.into(),
            n_devices: n,
            device_name: "Tesla V100".into(),
            model: "resnet50".into(),
            image_size: Some(224),
            precision: "fp32".into(),
            batch_per_device: Some(64),
            throughput_img_s: Some(thr),
            throughput_per_device_img_s: Some(thr / n as f64),
            step_ms_p50: Some(100.0),
            step_ms_p90: Some(110.0),
            status: crate::results::Status::Ok,
            ..Default::default()
        }
    }

    pub(crate) fn runs_of(rows: Vec<Row>) -> Vec<Run> {
        rows.into_iter()
            .enumerate()
            .map(|(i, row)| Run { file: std::path::Path::new("t.csv").into(), line: i as u64 + 2, row: row.pack() })
            .collect()
    }

    fn groups(runs: &[Run]) -> Vec<Group> {
        let all: Vec<usize> = (0..runs.len()).collect();
        summarize(runs, &all, Scope::of, &DeviceData::default())
    }

    #[test]
    fn all_reduce_rows_never_form_a_configuration() {
        // compare and check summarize whatever the files hold; a curve's sizes must not pool into a "config".
        let mut points = vec![row("single", 1, 100.0)];
        for bytes in [1024, 1 << 20] {
            let mut r = row("allreduce", 2, 5.0);
            r.mode = crate::results::Mode::Allreduce;
            r.bytes = Some(bytes);
            points.push(r);
        }
        let g = groups(&runs_of(points));
        assert_eq!(g.len(), 1, "{:?}", g.iter().map(|g| g.key.describe()).collect::<Vec<_>>());
        assert_eq!(g[0].key.describe(), "resnet50 224px fp32 single x1 b64");
    }

    #[test]
    fn repeats_reduce_to_the_median_and_scale_from_single() {
        let runs = runs_of(vec![
            row("single", 1, 100.0),
            row("single", 1, 110.0),
            row("single", 1, 90.0),
            row("ddp", 4, 360.0),
            row("dp", 4, 200.0),
        ]);
        let g = groups(&runs);
        let keys: Vec<String> = g.iter().map(|g| g.key.describe()).collect();
        assert_eq!(
            keys,
            ["resnet50 224px fp32 single x1 b64", "resnet50 224px fp32 dp x4 b64", "resnet50 224px fp32 ddp x4 b64"]
        );
        assert_eq!(g[0].throughput, Some(100.0));
        assert_eq!(g[0].ok.len(), 3);
        assert_eq!(g[0].efficiency, Some(1.0));
        assert_eq!(g[2].efficiency, Some(0.9));
        assert_eq!(g[1].efficiency, Some(0.5));
    }

    #[test]
    fn scaling_uses_any_one_device_run_when_single_is_absent() {
        let runs = runs_of(vec![row("ddp", 1, 100.0), row("ddp", 2, 150.0)]);
        let g = groups(&runs);
        assert_eq!(g[1].efficiency, Some(0.75));
    }

    #[test]
    fn no_scaling_across_hardware_precision_or_batch() {
        let mut other_hw = row("single", 1, 100.0);
        other_hw.device_name = "Tesla K80".into();
        let mut fp16 = row("single", 1, 100.0);
        fp16.precision = "fp16".into();
        let mut b32 = row("single", 1, 100.0);
        b32.batch_per_device = Some(32);
        let runs = runs_of(vec![other_hw, fp16, b32, row("ddp", 2, 150.0)]);
        let g = groups(&runs);
        let ddp = g.iter().find(|g| g.key.strategy == "ddp").unwrap();
        assert_eq!(ddp.efficiency, None);
    }

    #[test]
    fn failed_rows_are_kept_apart_and_never_count_as_zero() {
        let mut oom = row("dp", 4, 0.0);
        oom.status = crate::results::Status::Oom;
        oom.throughput_img_s = None;
        oom.error = "CUDA out of memory\nmore".into();
        let runs = runs_of(vec![row("dp", 4, 200.0), oom]);
        let g = groups(&runs);
        assert_eq!(g.len(), 1);
        assert_eq!((g[0].ok.len(), g[0].excluded.len()), (1, 1));
        assert_eq!(g[0].throughput, Some(200.0));
        assert_eq!(
            excluded_notes(&runs, g[0].excluded.clone()),
            ["excluded t.csv:3 (resnet50 224px fp32 dp x4 b64): status oom: CUDA out of memory"]
        );
    }

    #[test]
    fn repeats_give_their_range_and_one_run_its_own_interval() {
        let mut one = row("single", 1, 100.0);
        (one.throughput_ci95_lo, one.throughput_ci95_hi) = (Some(98.0), Some(102.0));
        let runs = runs_of(vec![one, row("ddp", 2, 180.0), row("ddp", 2, 190.0), row("ddp", 2, 200.0)]);
        let g = groups(&runs);
        let s = g[0].throughput_ci.unwrap();
        assert!(s.within_run);
        assert_eq!((s.ci.lo, s.ci.hi), (98.0, 102.0));
        // Repeats without their own intervals: the range of their figures.
        let d = g[1].throughput_ci.unwrap();
        assert!(!d.within_run);
        assert_eq!((d.ci.lo, d.ci.hi), (180.0, 200.0));
        // Scaling 0.95 with relative half-widths 0.02 and 10/190.
        let e = g[1].efficiency_ci.unwrap();
        let rel = (0.02f64.powi(2) + (10.0f64 / 190.0).powi(2)).sqrt();
        assert!(((e.ci.hi - e.ci.lo) / 2.0 - 0.95 * rel).abs() < 1e-9, "{e:?}");
        assert!(e.within_run, "a within-run side makes the propagated interval within-run");
        assert_eq!(g[0].efficiency_ci, None, "the baseline's own scaling is 1 by definition");
    }

    #[test]
    fn repeats_spread_over_their_own_intervals() {
        let with_ci = |thr: f64, lo: f64, hi: f64| {
            let mut r = row("single", 1, thr);
            (r.throughput_ci95_lo, r.throughput_ci95_hi) = (Some(lo), Some(hi));
            r
        };
        let g = groups(&runs_of(vec![with_ci(100.0, 97.0, 103.0), with_ci(110.0, 108.0, 112.0)]));
        let s = g[0].throughput_ci.unwrap();
        assert_eq!((s.ci.lo, s.ci.hi, s.within_run), (97.0, 112.0, false));
    }

    #[test]
    fn a_single_run_without_an_interval_has_none() {
        let g = groups(&runs_of(vec![row("single", 1, 100.0), row("ddp", 2, 150.0)]));
        assert_eq!((g[0].throughput_ci, g[1].efficiency_ci), (None, None));
        assert_eq!(cell_spread(Some(100.0), None, fmt_rate).display(), "100");
    }

    #[test]
    fn cells_show_plus_minus_and_mark_within_run() {
        let s = Spread { ci: Interval { lo: 1210.0, hi: 1260.0 }, within_run: true };
        assert_eq!(cell_spread(Some(1234.0), Some(s), fmt_rate).display(), "1234 ±25*");
        let s = Spread { within_run: false, ..s };
        assert_eq!(cell_spread(Some(1234.0), Some(s), fmt_rate), Cell::num(1234.0, "1234 ±25"));
    }

    #[test]
    fn rankings_do_not_rank_noise() {
        let mut rows = vec![];
        for (s, n, t) in [("single", 1, 100.0), ("dp", 1, 101.0), ("dp", 2, 150.0), ("ddp", 2, 190.0)] {
            for d in [-2.0, 0.0, 2.0] {
                rows.push(row(s, n, t + d));
            }
        }
        let g = groups(&runs_of(rows));
        assert_eq!(
            ranking_notes(&g),
            [
                "fastest on 1 device (Tesla V100 resnet50 224px fp32 b64): dp 101 ≈ single 100",
                "fastest on 2 devices (Tesla V100 resnet50 224px fp32 b64): ddp 190 > dp 150"
            ]
        );
    }

    #[test]
    fn disturbed_rows_are_counted_and_named() {
        let mut busy = row("single", 1, 90.0);
        busy.interference = "host busy: load 4.2 on 2 cores".into();
        let runs = runs_of(vec![row("single", 1, 100.0), busy]);
        let g = groups(&runs);
        assert_eq!(g[0].disturbed, [1]);
        let t = report_table(&runs, &g, &["t.csv".into()]);
        let text = String::from_utf8(crate::report::export::TextExporter.export(&t).unwrap()).unwrap();
        assert!(text.contains("disturbed t.csv:3 (resnet50 224px fp32 single x1 b64): host busy: load 4.2"), "{text}");
        assert!(text.contains(" 1/2 "), "{text}");
        // Its slowed throughput is left out of the group's figure, and the note says so.
        assert_eq!(g[0].throughput, Some(100.0));
        assert!(text.contains("left out of the pooled figures"), "{text}");
        // When every run was disturbed, they are all the figures there are.
        let mut busy2 = row("single", 1, 80.0);
        busy2.interference = "CPU steal 30 %".into();
        let mut busy = row("single", 1, 90.0);
        busy.interference = "host busy".into();
        let runs = runs_of(vec![busy, busy2]);
        let g = groups(&runs);
        assert_eq!(g[0].throughput, Some(85.0));
        let notes = disturbed_notes(&runs, g.iter());
        assert!(notes.iter().all(|n| n.contains("every run of this configuration was disturbed")), "{notes:?}");
    }

    #[test]
    fn per_device_falls_back_to_throughput_over_devices() {
        let mut r = row("ddp", 4, 400.0);
        r.throughput_per_device_img_s = None;
        let g = groups(&runs_of(vec![r]));
        assert_eq!(g[0].per_device, Some(100.0));
    }

    #[test]
    fn number_formats() {
        assert_eq!(fmt_rate(2855.4), "2855");
        assert_eq!(fmt_rate(51.94), "51.9");
        assert_eq!(fmt_rate(5.123), "5.12");
        assert_eq!(fmt_pct(0.9537), "95.4%");
        assert_eq!(fmt_ratio(3.4817), "3.48x");
        assert_eq!(fmt_ms(12.34), "12.3");
    }
}
