//! What `history` decided, as bytes: its two tables, one JSON document, and
//! the files two regression trackers read (Bencher's BMF JSON and
//! github-action-benchmark's custom tool files). Pure: a `History` in,
//! tables or bytes out.
use anyhow::Result;
use serde_json::{json, Map, Value};

use super::{higher_is_better, History};
use crate::report::check::Metric;
use crate::report::export::{Cell, Column, Table};

fn signed_pct(v: f64) -> String {
    format!("{:+.1}%", v * 100.0)
}

/// One row per series: its newest level, its changes, its drift.
pub(crate) fn series_table(h: &History) -> Table {
    let columns = vec![
        Column::text("series", "series"),
        Column::text("metric", "metric"),
        Column::num("points", "points"),
        Column::text("span", "from .. to"),
        Column::num("level", "level now"),
        Column::num("level_sd", "±sd"),
        Column::num("changes", "changes"),
        Column::num("drift_per_week", "drift/week"),
        Column::text("status", "status"),
    ];
    let rows = h
        .series
        .iter()
        .enumerate()
        .map(|(si, s)| {
            let now = super::level_of(&s.points[h.current_level(si)]);
            let changes = h.findings.iter().filter(|f| f.series == si).count();
            let gating = h.findings.iter().any(|f| f.series == si && f.gates());
            let drift = h.drifts.iter().find(|d| d.series == si);
            let status = match (gating, drift.is_some_and(|d| d.gates())) {
                (true, _) => "REGRESSED",
                (false, true) => "DRIFTING",
                _ if h.findings.iter().any(|f| f.series == si && f.worse && f.recent) => "regressed (acknowledged)",
                _ => "ok",
            };
            let (first, last) = (&s.points[0], &s.points[s.points.len() - 1]);
            vec![
                Cell::text(s.name()),
                Cell::text(s.metric.title()),
                Cell::num(s.points.len() as f64, s.points.len().to_string()),
                Cell::text(format!("{} .. {}", first.date(), last.date())),
                Cell::num(now.mean, s.metric.fmt(now.mean)),
                Cell::num(now.sd, crate::report::format::fmt_pct(now.sd / now.mean)),
                Cell::num(changes as f64, changes.to_string()),
                drift.map_or_else(Cell::none, |d| {
                    Cell::num(
                        d.per_week.slope,
                        format!(
                            "{} ({}..{})",
                            signed_pct(d.per_week.slope),
                            signed_pct(d.per_week.lo),
                            signed_pct(d.per_week.hi)
                        ),
                    )
                }),
                Cell::text(status),
            ]
        })
        .collect();
    Table { title: format!("gpubench history: {}", h.summary()), columns, rows, notes: vec![] }
}

/// One row per change: where it began, the range to bisect, before and
/// after, what else changed that night, and whether it gates.
pub(crate) fn changes_table(h: &History) -> Table {
    let columns = vec![
        Column::text("id", "id"),
        Column::text("series", "series"),
        Column::text("metric", "metric"),
        Column::text("first", "first point of new level"),
        Column::text("range", "range"),
        Column::num("before", "before"),
        Column::num("after", "after"),
        Column::num("change", "change"),
        Column::num("p_value", "p"),
        Column::text("what_changed", "what changed"),
        Column::text("verdict", "verdict"),
        Column::text("bisect", "bisect"),
    ];
    let mut rows = vec![];
    for f in &h.findings {
        let s = &h.series[f.series];
        let (a, b) = (&s.points[f.change.at - 1], &s.points[f.change.at]);
        let c = &f.change;
        let verdict = match (&f.ack, c.fixed, f.worse) {
            (Some(ack), _, _) => format!("{}: {}", ack.kind.word(), ack.reason),
            (None, true, _) => "expected".to_string(),
            (None, false, true) if f.recent => "REGRESSION".to_string(),
            (None, false, true) => format!("regression (older than the last {} points)", h.options.last),
            (None, false, false) => "improvement".to_string(),
        };
        let range = if !a.commit.is_empty() && !b.commit.is_empty() {
            format!("{}..{}", super::series::short(&a.commit, 12), super::series::short(&b.commit, 12))
        } else {
            format!("{} .. {}", a.date(), b.date())
        };
        let bisect = if !a.commit.is_empty() && !b.commit.is_empty() {
            format!("git log --oneline {}..{}", a.commit, b.commit)
        } else {
            String::new()
        };
        let what = f.what_changed();
        rows.push(vec![
            Cell::text(&f.id),
            Cell::text(s.name()),
            Cell::text(s.metric.title()),
            Cell::text(b.name()),
            Cell::text(range),
            Cell::num(c.before.mean, format!("{} ±{}", s.metric.fmt(c.before.mean), s.metric.fmt(c.before.sd))),
            Cell::num(c.after.mean, format!("{} ±{}", s.metric.fmt(c.after.mean), s.metric.fmt(c.after.sd))),
            Cell::num(c.relative(), signed_pct(c.relative())),
            if c.test.p.is_finite() {
                Cell::num(
                    c.test.p,
                    match c.test.p {
                        p if p < 1e-12 => "<1e-12".to_string(),
                        p if p < 1e-4 => format!("{p:.0e}"),
                        p => format!("{p:.4}"),
                    },
                )
            } else {
                Cell::none()
            },
            if what.is_empty() { Cell::empty("-") } else { Cell::text(format!("{what} on {}", b.date())) },
            Cell::text(verdict),
            Cell::text(bisect),
        ]);
    }
    for d in &h.drifts {
        if !d.beyond {
            continue;
        }
        let s = &h.series[d.series];
        rows.push(vec![
            Cell::text(&d.id),
            Cell::text(s.name()),
            Cell::text(s.metric.title()),
            Cell::text(format!("drift over the last {} points", d.points)),
            Cell::text(""),
            Cell::none(),
            Cell::none(),
            Cell::num(d.per_week.slope, format!("{}/week", signed_pct(d.per_week.slope))),
            Cell::none(),
            Cell::empty("-"),
            Cell::text(match (&d.ack, d.worse) {
                (Some(a), _) => format!("accepted: {}", a.reason),
                (None, true) => "DRIFT".to_string(),
                (None, false) => "improving".to_string(),
            }),
            Cell::text(""),
        ]);
    }
    let mut notes = h.notes.clone();
    if rows.is_empty() {
        notes.insert(0, "no change found in any series".into());
    }
    Table { title: "changes (ids for --ack)".into(), columns, rows, notes }
}

pub(crate) fn tables(h: &History) -> Vec<Table> {
    vec![series_table(h), changes_table(h)]
}

/// The JSON document's own key `history`: the gate, and every series with
/// its points, every repeat and every environment column kept, and its
/// changes.
pub(crate) fn json(h: &History) -> Value {
    let series: Vec<Value> = h
        .series
        .iter()
        .enumerate()
        .map(|(si, s)| {
            let points: Vec<Value> = s
                .points
                .iter()
                .map(|p| {
                    let env: Map<String, Value> =
                        super::ENV.iter().zip(p.env.iter()).map(|((col, _), v)| (col.to_string(), json!(v))).collect();
                    json!({"id": &*p.id, "commit": &*p.commit, "branch": &*p.branch, "date": p.date(), "time": p.time,
                           "value": p.value, "repeats": p.repeats, "env": env, "ci_url": &*p.ci_url, "row": p.place()})
                })
                .collect();
            let changes: Vec<Value> = h
                .findings
                .iter()
                .filter(|f| f.series == si)
                .map(|f| {
                    let c = &f.change;
                    json!({"id": f.id, "first_point": &*s.points[c.at].id, "last_point_before": &*s.points[c.at - 1].id,
                           "before": {"n": c.before.n, "mean": c.before.mean, "sd": c.before.sd, "median": c.before.median},
                           "after": {"n": c.after.n, "mean": c.after.mean, "sd": c.after.sd, "median": c.after.median},
                           "change": c.relative(), "t": finite(c.test.t), "df": finite(c.test.df), "p": finite(c.test.p),
                           "regression": f.worse, "recent": f.recent, "expected": c.fixed, "gates": f.gates(),
                           "acknowledged": f.ack.as_ref().map(|a| json!({"kind": a.kind.word(), "reason": a.reason})),
                           "what_changed": f.env.iter().map(|(w, a, b)| json!({"what": w, "before": a, "after": b})).collect::<Vec<_>>()})
                })
                .collect();
            let drift = h.drifts.iter().find(|d| d.series == si).map(|d| {
                json!({"id": d.id, "per_week": d.per_week.slope, "per_week_lo": d.per_week.lo, "per_week_hi": d.per_week.hi,
                       "points": d.points, "beyond_bound": d.beyond, "gates": d.gates()})
            });
            json!({"name": s.name(), "config": s.key.describe(), "machine": s.machine, "label": s.label,
                   "metric": s.metric.name(), "higher_is_better": higher_is_better(s.metric),
                   "points": points, "changes": changes, "drift": drift})
        })
        .collect();
    json!({"gate": if h.gate_code() == 0 { "pass" } else { "fail" }, "summary": h.summary(), "series": series})
}

fn finite(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else {
        Value::Null
    }
}

fn unit(m: Metric) -> &'static str {
    match m {
        Metric::Throughput => "img/s",
        Metric::Scaling => "ratio",
        Metric::StepP50 | Metric::StepP90 | Metric::LatencyP99 => "ms",
    }
}

/// Bencher's metric format: `{benchmark: {measure: {value, lower_value,
/// upper_value}}}`, the newest point of each series (Bencher keeps the
/// history); the bounds are the point's lowest and highest repeat.
pub(crate) fn bmf(h: &History) -> Result<Vec<u8>> {
    let mut doc: Map<String, Value> = Map::new();
    for s in &h.series {
        let p = s.points.last().expect("a series has points");
        let mut m = Map::new();
        m.insert("value".into(), json!(p.value));
        if p.repeats.len() > 1 {
            let lo = p.repeats.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = p.repeats.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            m.insert("lower_value".into(), json!(lo));
            m.insert("upper_value".into(), json!(hi));
        }
        let bench = doc.entry(s.name()).or_insert_with(|| Value::Object(Map::new()));
        bench.as_object_mut().expect("an object").insert(s.metric.name().into(), Value::Object(m));
    }
    let mut bytes = serde_json::to_vec_pretty(&Value::Object(doc))?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// github-action-benchmark's `customBiggerIsBetter` (`bigger`) or
/// `customSmallerIsBetter` file: the tool fixes one direction per file, so
/// throughput and scaling go in one, step times and latency in the other.
pub(crate) fn gab(h: &History, bigger: bool) -> Result<Vec<u8>> {
    let entries: Vec<Value> = h
        .series
        .iter()
        .filter(|s| higher_is_better(s.metric) == bigger)
        .map(|s| {
            let p = s.points.last().expect("a series has points");
            let spread = if p.repeats.len() > 1 {
                let lo = p.repeats.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = p.repeats.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                format!("±{:.1}%", (hi - lo) / 2.0 / p.value * 100.0)
            } else {
                String::new()
            };
            let env: Vec<String> = super::ENV
                .iter()
                .zip(p.env.iter())
                .filter(|(_, v)| !v.is_empty())
                .map(|((_, what), v)| format!("{what} {v}"))
                .collect();
            let mut e = json!({"name": format!("{} {}", s.name(), s.metric.name()), "unit": unit(s.metric),
                               "value": p.value, "extra": format!("{}\ncommit {}", env.join("\n"), p.commit)});
            if !spread.is_empty() {
                e["range"] = json!(spread);
            }
            e
        })
        .collect();
    let mut bytes = serde_json::to_vec_pretty(&Value::Array(entries))?;
    bytes.push(b'\n');
    Ok(bytes)
}
