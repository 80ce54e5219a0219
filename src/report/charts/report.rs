//! The report's charts: which charts a set of runs gets (one set per
//! scenario: a machine set-up and workload), their titles, labels and file
//! names, and compare's grouped bars.
use anyhow::Result;
use plotters::style::RGBColor;
use std::collections::{BTreeMap, HashMap};

use super::bars::{Bars, StackedBars};
use super::draw::*;
use super::line::{Line, LineChart};
use super::step::{StepChart, StepDist};
use super::ChartWriter;
use crate::report::format::fmt_rate;
use crate::report::summary::{strategy_rank, ConfigKey, Group, Run, Scope};
use crate::results::long::{DeviceData, DeviceValues};
use crate::results::Fields;

// ---- the report's charts ----------------------------------------------------

/// What scaling is measured across: one machine set-up and workload (with
/// its set-up words, `summary::setup_of`).
pub(super) type ScenarioKey = (Scope, String, Option<u32>, String, Option<u32>, String);

pub(super) fn scenario_of(g: &Group) -> ScenarioKey {
    let (model, img, prec, batch, _, setup) = g.key.workload();
    (g.scope.clone(), model, img, prec, batch, setup)
}

pub(super) fn scenario_title(s: &ScenarioKey) -> String {
    let (scope, model, img, prec, batch, setup) = s;
    let mut parts = vec![scope.hardware.clone()];
    if !scope.label.is_empty() && scope.label != scope.hardware {
        parts.push(scope.label.clone());
    }
    if scope.implementation == crate::report::summary::PUBLISHED {
        parts.push("published figures".into());
    } else if scope.implementation != crate::results::Implementation::Gpubench {
        parts.push(format!("impl {}", scope.implementation));
    }
    parts.push(format!(
        "{model} {}px {prec}, batch {}/device",
        img.map_or("?".into(), |v| v.to_string()),
        batch.map_or("?".into(), |v| v.to_string())
    ));
    if !setup.is_empty() {
        parts.push(setup.clone());
    }
    parts.join("  |  ")
}

/// The parts of a scenario, for file names.
pub(super) fn scenario_parts(s: &ScenarioKey) -> [String; 8] {
    let (scope, model, img, prec, batch, setup) = s;
    [
        scope.hardware.clone(),
        scope.label.clone(),
        scope.implementation.name().to_string(),
        model.clone(),
        img.map_or("x".into(), |v| format!("{v}px")),
        prec.clone(),
        batch.map_or("bx".into(), |v| format!("b{v}")),
        setup.clone(),
    ]
}

/// File-name suffix for scenario `s`: only the parts that differ among all
/// the scenarios charted, so names stay short (`throughput-fp16`).
pub(super) fn slug(s: &ScenarioKey, all: &[&ScenarioKey]) -> String {
    let parts = scenario_parts(s);
    let varying: Vec<String> = (0..parts.len())
        .filter(|&i| all.iter().any(|o| scenario_parts(o)[i] != parts[i]))
        .map(|i| parts[i].clone())
        .filter(|p| !p.is_empty())
        .collect();
    let raw = varying.join("-");
    let mut out = String::new();
    for c in raw.to_lowercase().chars() {
        let c = if c.is_ascii_alphanumeric() { c } else { '-' };
        if !(c == '-' && (out.ends_with('-') || out.is_empty())) {
            out.push(c);
        }
    }
    out.trim_end_matches('-').to_string()
}

/// Short per-run labels: strategy and devices, plus whatever else varies
/// among the runs shown, plus `#k` for repeats.
pub(super) fn run_labels(runs: &[Run], idx: &[usize]) -> Vec<String> {
    let varies = |f: &dyn Fn(&Run) -> String| {
        let first = idx.first().map(|&i| f(&runs[i]));
        idx.iter().any(|&i| Some(f(&runs[i])) != first)
    };
    let hw = varies(&|r| r.row.device_name().to_string() + r.row.label());
    let model = varies(&|r| r.row.model().to_string());
    let img = varies(&|r| format!("{:?}", r.row.image_size()));
    let prec = varies(&|r| r.row.precision().to_string());
    let batch = varies(&|r| format!("{:?}", r.row.batch_per_device()));
    let base: Vec<String> = idx
        .iter()
        .map(|&i| {
            let r = &runs[i].row;
            let mut s = format!("{} x{}", r.strategy(), r.n_devices());
            if model {
                s += &format!(" {}", r.model());
            }
            if img {
                s += &format!(" {}px", r.image_size().map_or("?".into(), |v| v.to_string()));
            }
            if prec {
                s += &format!(" {}", r.precision());
            }
            if batch {
                s += &format!(" b{}", r.batch_per_device().map_or("?".into(), |v| v.to_string()));
            }
            if hw {
                let h = if r.label().is_empty() { r.device_name() } else { r.label() };
                s += &format!(" [{h}]");
            }
            s
        })
        .collect();
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for b in &base {
        *count.entry(b).or_default() += 1;
    }
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    base.iter()
        .map(|b| {
            if count[b.as_str()] > 1 {
                let k = seen.entry(b).or_default();
                *k += 1;
                format!("{b} #{k}")
            } else {
                b.clone()
            }
        })
        .collect()
}

/// Draws every report chart that the data allows into `w`; returns notes on
/// those left out and why.
pub(crate) fn report_charts(
    w: &mut ChartWriter,
    runs: &[Run],
    groups: &[Group],
    devices: &DeviceData,
) -> Result<Vec<String>> {
    let mut notes = vec![];
    let mut scenarios: BTreeMap<ScenarioKey, Vec<&Group>> = BTreeMap::new();
    for g in groups.iter().filter(|g| g.throughput.is_some()) {
        scenarios.entry(scenario_of(g)).or_default().push(g);
    }
    let keys: Vec<&ScenarioKey> = scenarios.keys().collect();
    let mut used: HashMap<String, usize> = HashMap::new();
    for (s, gs) in &scenarios {
        let mut suffix = if keys.len() > 1 { format!("-{}", slug(s, &keys)) } else { String::new() };
        // Two scenarios whose parts fold to the same file name (case,
        // punctuation) get -2, -3, …, so no chart overwrites another.
        let n = used.entry(suffix.clone()).or_default();
        *n += 1;
        if *n > 1 {
            suffix = format!("{suffix}-{n}");
        }
        scenario_charts(w, s, gs, &suffix, &mut notes)?;
    }
    // Runs in table order, for the per-run charts.
    let ordered: Vec<usize> = groups.iter().flat_map(|g| g.ok.iter().copied()).collect();
    memory_chart(w, runs, &ordered, devices, &mut notes)?;
    step_chart(w, runs, &ordered)?;
    Ok(notes)
}

/// Charts 1, 2 and 5 for one scenario: throughput and scaling against device
/// count, and the strategies side by side at one device count.
pub(super) fn scenario_charts(
    w: &mut ChartWriter,
    s: &ScenarioKey,
    gs: &[&Group],
    suffix: &str,
    notes: &mut Vec<String>,
) -> Result<()> {
    let subtitle = scenario_title(s);
    // A line per strategy, and per communication variant of ddp (dashed).
    let mut by_strategy: BTreeMap<(u8, String), Vec<&Group>> = BTreeMap::new();
    for g in gs {
        let name = [g.key.strategy.as_str(), g.key.comm.as_str()].join(" ").trim().to_string();
        by_strategy.entry((strategy_rank(&g.key.strategy), name)).or_default().push(g);
    }
    let mut ns: Vec<u32> = gs.iter().map(|g| g.key.n_devices).collect();
    ns.sort();
    ns.dedup();
    let max_n = *ns.last().unwrap_or(&1);

    if ns.len() < 2 {
        notes.push(format!("throughput and scaling charts for {subtitle} skipped: runs at one device count only"));
    } else {
        // 1. throughput against devices, with the ideal line
        let mut lines: Vec<Line> = by_strategy
            .iter()
            .map(|((_, name), gs)| Line {
                name: name.clone(),
                color: strategy_color(&gs[0].key.strategy),
                dashed: !gs[0].key.comm.is_empty(),
                points: gs.iter().map(|g| (g.key.n_devices as f64, g.throughput.unwrap())).collect(),
                errors: gs.iter().map(|g| g.throughput_ci.map(|s| (s.ci.lo, s.ci.hi))).collect(),
            })
            .collect();
        let any_errors = lines.iter().any(|l| l.errors.iter().any(Option::is_some));
        let subtitle = if any_errors { format!("{subtitle}  |  bars: 95 % intervals") } else { subtitle.clone() };
        let base = gs.iter().find_map(|g| g.base_throughput);
        if let Some(b) = base {
            lines.push(Line {
                name: format!("ideal: devices x {} img/s", fmt_rate(b)),
                color: GRAY,
                dashed: true,
                points: vec![(1.0, b), (max_n as f64, b * max_n as f64)],
                errors: vec![],
            });
        }
        w.write(
            &format!("throughput{suffix}"),
            &LineChart {
                title: "Training throughput by device count".into(),
                subtitle: subtitle.clone(),
                x_desc: "devices".into(),
                y_desc: "throughput (images/s)".into(),
                lines,
                x_max: max_n as f64,
                y_min_top: 0.0,
                y_fmt: axis_num,
            },
        )?;

        // 2. scaling efficiency
        let mut lines: Vec<Line> = by_strategy
            .iter()
            .filter_map(|((_, name), gs)| {
                let with: Vec<&&Group> = gs.iter().filter(|g| g.efficiency.is_some()).collect();
                let points: Vec<(f64, f64)> =
                    with.iter().map(|g| (g.key.n_devices as f64, g.efficiency.unwrap() * 100.0)).collect();
                let errors = with.iter().map(|g| g.efficiency_ci.map(|s| (s.ci.lo * 100.0, s.ci.hi * 100.0))).collect();
                (!points.is_empty()).then(|| Line {
                    name: name.clone(),
                    color: strategy_color(&gs[0].key.strategy),
                    dashed: !gs[0].key.comm.is_empty(),
                    points,
                    errors,
                })
            })
            .collect();
        if lines.is_empty() {
            notes.push(format!("scaling chart for {subtitle} skipped: no 1-device run to scale from"));
        } else {
            lines.push(Line {
                name: "ideal (100%)".into(),
                color: GRAY,
                dashed: true,
                points: vec![(0.5, 100.0), (max_n as f64 + 0.5, 100.0)],
                errors: vec![],
            });
            w.write(
                &format!("scaling{suffix}"),
                &LineChart {
                    title: "Scaling efficiency by device count".into(),
                    subtitle: subtitle.clone(),
                    x_desc: "devices".into(),
                    y_desc: "scaling efficiency (% of linear)".into(),
                    lines,
                    x_max: max_n as f64,
                    y_min_top: 110.0,
                    y_fmt: |v| format!("{v:.0}%"),
                },
            )?;
        }
    }

    // 5. the seed's chart: one bar per strategy at one device count,
    // the count with the most strategies (the larger on ties).
    let fixed =
        ns.iter().copied().max_by_key(|&n| (gs.iter().filter(|g| g.key.n_devices == n).count(), n)).unwrap_or(1);
    let at: Vec<&&Group> = gs.iter().filter(|g| g.key.n_devices == fixed).collect();
    if at.len() >= 2 {
        let best = at.iter().filter_map(|g| g.throughput).fold(0.0, f64::max);
        let mut at = at;
        at.sort_by_key(|g| (strategy_rank(&g.key.strategy), g.key.strategy.clone()));
        let labels = at
            .iter()
            .map(|g| {
                let t = g.throughput.unwrap();
                let rel = if t >= best { "fastest".to_string() } else { format!("{:.2}x slower", best / t) };
                vec![Some(format!("{} img/s, {rel}", fmt_rate(t)))]
            })
            .collect();
        w.write(
            &format!("strategies{suffix}"),
            &Bars {
                title: format!("Strategies on {fixed} device{}", if fixed == 1 { "" } else { "s" }),
                subtitle: subtitle.clone(),
                value_desc: "throughput (images/s)".into(),
                category_desc: "strategy".into(),
                categories: at.iter().map(|g| g.key.strategy.clone()).collect(),
                series: vec![("throughput".into(), TAB10[0])],
                category_colors: at.iter().map(|g| strategy_color(&g.key.strategy)).collect(),
                values: at.iter().map(|g| vec![g.throughput]).collect(),
                labels,
                value_fmt: axis_num,
                horizontal: false,
                show_legend: false,
                min_top: 0.0,
            },
        )?;
    }
    Ok(())
}

/// Chart 3: per-device peak memory and mean utilization of every run with
/// device figures (GPUs); CPU runs, which have none, get one bar per process
/// instead: its peak resident set and CPU use. An empty chart is never written.
pub(super) fn memory_chart(
    w: &mut ChartWriter,
    runs: &[Run],
    ordered: &[usize],
    devices: &DeviceData,
    notes: &mut Vec<String>,
) -> Result<()> {
    let has = |i: usize, f: &dyn Fn(&DeviceValues) -> bool| devices.get(runs[i].row.run_id()).iter().any(f);
    let gpu: Vec<usize> = ordered
        .iter()
        .copied()
        .filter(|&i| has(i, &|d| d.peak_mem_bytes.is_some() || d.util_mean_pct.is_some()))
        .collect();
    let cpu: Vec<usize> = ordered
        .iter()
        .copied()
        .filter(|&i| !gpu.contains(&i) && has(i, &|d| d.peak_rss_mb.is_some() || d.cpu_util_pct.is_some()))
        .collect();
    if gpu.is_empty() && cpu.is_empty() {
        notes.push(
            "memory/utilization chart skipped: no per-device file (e.g. results.devices.csv) with figures next to \
             the inputs"
                .into(),
        );
        return Ok(());
    }
    if !gpu.is_empty() {
        w.write(
            "memory_util",
            &per_run_panels(
                runs,
                &gpu,
                devices,
                "Per-device peak memory and utilization",
                "one bar per device; DataParallel's master (device 0) gathers outputs and holds more",
                ("device 0 (dp's master)", "device"),
                [
                    ("peak memory (GiB)", &|d: &DeviceValues| d.peak_mem_bytes.map(|b| b / 1073741824.0), 0.0),
                    ("mean utilization (%)", &|d: &DeviceValues| d.util_mean_pct, 100.0),
                ],
            ),
        )?;
    }
    if !cpu.is_empty() {
        w.write(
            "processes",
            &per_run_panels(
                runs,
                &cpu,
                devices,
                "Per-process peak memory and CPU use",
                "CPU runs: one bar per process; dp's replicas are threads of one process",
                ("process 0 (single, dp: the only one; ddp: rank 0)", "rank"),
                [
                    ("peak resident set (GiB)", &|d: &DeviceValues| d.peak_rss_mb.map(|m| m / 1024.0), 0.0),
                    ("CPU use (% of one core)", &|d: &DeviceValues| d.cpu_util_pct, 100.0),
                ],
            ),
        )?;
    }
    Ok(())
}

type Pick<'a> = &'a dyn Fn(&DeviceValues) -> Option<f64>;

/// Two stacked panels of grouped bars: one group per run, one bar per
/// device (or process) of that run. The first device, dp's master or rank 0,
/// is red (`names.0`); the others, `names.1` and their index, in steady blues
/// so that it stands out.
fn per_run_panels(
    runs: &[Run],
    idx: &[usize],
    devices: &DeviceData,
    title: &str,
    subtitle: &str,
    names: (&str, &str),
    panels: [(&str, Pick, f64); 2],
) -> StackedBars {
    let labels = run_labels(runs, idx);
    let n = idx.iter().map(|&i| devices.get(runs[i].row.run_id()).len()).max().unwrap_or(1);
    let blues = [TAB10[0], RGBColor(82, 150, 200), RGBColor(120, 175, 215)];
    let series: Vec<(String, RGBColor)> = (0..n)
        .map(
            |d| if d == 0 { (names.0.to_string(), TAB10[3]) } else { (format!("{} {d}", names.1), blues[(d - 1) % 3]) },
        )
        .collect();
    StackedBars {
        title: title.into(),
        subtitle: subtitle.into(),
        panels: panels
            .into_iter()
            .map(|(desc, f, min_top)| {
                let values: Vec<Vec<Option<f64>>> = idx
                    .iter()
                    .map(|&i| {
                        let d = devices.get(runs[i].row.run_id());
                        (0..n).map(|j| d.get(j).and_then(f)).collect()
                    })
                    .collect();
                Bars {
                    title: String::new(),
                    subtitle: String::new(),
                    value_desc: desc.into(),
                    category_desc: "run".into(),
                    categories: labels.clone(),
                    series: series.clone(),
                    category_colors: vec![],
                    labels: vec![vec![None; n]; values.len()],
                    values,
                    value_fmt: axis_num,
                    horizontal: false,
                    show_legend: true,
                    min_top,
                }
            })
            // A panel with nothing in it (no NVML, so no utilization) is left out.
            .filter(|b| b.values.iter().flatten().any(Option::is_some))
            .collect(),
    }
}

/// Chart 4: the step-time distribution of every run.
pub(super) fn step_chart(w: &mut ChartWriter, runs: &[Run], ordered: &[usize]) -> Result<()> {
    let with_steps: Vec<usize> = ordered.iter().copied().filter(|&i| runs[i].row.step_ms_p50().is_some()).collect();
    if !with_steps.is_empty() {
        let labels = run_labels(runs, &with_steps);
        let dists = with_steps
            .iter()
            .zip(labels)
            .map(|(&i, label)| {
                let r = &runs[i].row;
                StepDist {
                    label,
                    color: strategy_color(r.strategy()),
                    p50: r.step_ms_p50().unwrap(),
                    p90: r.step_ms_p90(),
                    p99: r.step_ms_p99(),
                    mean: r.step_ms_mean(),
                }
            })
            .collect();
        w.write(
            "step_time",
            &StepChart {
                title: "Step time per run".into(),
                subtitle: "timed steps after warm-up; lower is better".into(),
                runs: dists,
            },
        )?;
    }
    Ok(())
}

/// `compare`'s grouped bars: throughput of each set for every joined config.
pub(crate) fn compare_chart(
    w: &mut ChartWriter,
    set_names: &[String],
    configs: &[ConfigKey],
    values: Vec<Vec<Option<f64>>>,
) -> Result<()> {
    let labels = values.iter().map(|row| row.iter().map(|v| v.map(fmt_rate)).collect()).collect();
    w.write(
        "compare",
        &Bars {
            title: "Throughput by result set".into(),
            subtitle: "medians over repeated runs; a missing bar means that set has no run of the config".into(),
            value_desc: "throughput (images/s)".into(),
            category_desc: "config".into(),
            categories: configs.iter().map(ConfigKey::describe).collect(),
            series: set_names.iter().enumerate().map(|(i, n)| (n.clone(), TAB10[i % 10])).collect(),
            category_colors: vec![],
            values,
            labels,
            value_fmt: axis_num,
            horizontal: true,
            show_legend: true,
            min_top: 0.0,
        },
    )
}
