//! `gpubench peak`: each device's matmul peak per precision, printed and kept
//! (`results::peak`), beside the datasheet figure where one is known.
use anyhow::Result;

use crate::bench::peak::{measure, PeakPlan};
use crate::device::DeviceKind;
use crate::report::export::{Cell, Column, Table};
use crate::results::csv::Row;
use crate::results::peak::{self, Peak};

pub(crate) fn run(plan: &PeakPlan) -> Result<i32> {
    let mut rows = vec![];
    let mut kept = None;
    let mut store_failed: Option<anyhow::Error> = None;
    let mut rows_out = vec![];
    let targets: Vec<(tch::Device, String)> = match plan.devices.kind {
        DeviceKind::Cpu => vec![(tch::Device::Cpu, crate::device::cpu_model())],
        DeviceKind::Cuda => {
            plan.devices.ordinals.iter().map(|&o| (tch::Device::Cuda(o), crate::device::device_name(o))).collect()
        }
    };
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let mut notes: Vec<String> =
        plan.skipped.iter().map(|(p, why)| format!("{} skipped: {why}; --precisions {} measures it anyway, cut to fit the time budget", p.name(), p.name())).collect();
    for (device, name) in &targets {
        for &p in &plan.precisions {
            if let tch::Device::Cuda(o) = device {
                let _ = crate::ffi::cuda_set_device(*o);
            }
            let r = measure(*device, p, plan.size, plan.rounds, plan.round_time, plan.budget)?;
            if r.size < plan.size {
                notes.push(format!(
                    "{name} {}: measured at {n}×{n}, not {m}×{m}: one matmul at {m} would not fit the {} budget",
                    p.name(),
                    humantime::format_duration(plan.budget),
                    n = r.size,
                    m = plan.size
                ));
            }
            let sheet = peak::datasheet(name, p.name());
            let entry = Peak { tflops: r.median, lo: r.lo, hi: r.hi, size: r.size, measured_at: now.clone() };
            // A cache that cannot be written loses no measurement: the rows
            // and the table come first, the failure is said after them.
            match peak::store(name, p.name(), entry) {
                Ok(path) => kept = Some(path),
                Err(e) => store_failed = Some(e),
            }
            let of_sheet = sheet.map(|s| r.median / s);
            rows_out.push(peak_row(plan, *device, name, p, &r, sheet));
            rows.push(vec![
                Cell::text(name),
                Cell::text(p.name()),
                Cell::num(r.median, format!("{:.3}", r.median)),
                Cell::text(format!("{:.3}–{:.3}", r.lo, r.hi)),
                Cell::num(r.lo, ""),
                Cell::num(r.hi, ""),
                Cell::num(r.size as f64, ""),
                sheet.map_or(Cell::none(), |s| Cell::num(s, format!("{s}"))),
                of_sheet.map_or(Cell::none(), |f| Cell::num(f, format!("{:.0}%", 100.0 * f))),
            ]);
        }
    }
    let table = Table {
        title: format!("matmul peak: {n}×{n}×{n}, median of {} rounds", plan.rounds, n = plan.size),
        columns: vec![
            Column::text("device", "device"),
            Column::text("precision", "precision"),
            Column::num("tflops", "TFLOP/s"),
            Column::text("range", "rounds' range"),
            Column::raw("lo"),
            Column::raw("hi"),
            Column::raw("size"),
            Column::num("datasheet_tflops", "datasheet"),
            Column::num("of_datasheet", "of datasheet"),
        ],
        rows,
        notes,
    };
    crate::report::pipeline::emit(&table, plan.format)?;
    if let Some(out) = &plan.out {
        crate::results::csv::append_rows(out, &rows_out)?;
        eprintln!("appended {} peak row(s) to {}", rows_out.len(), out.display());
    }
    if let Some(p) = kept {
        eprintln!("kept in {}: runs on this device report their MFU against it (mfu_pct)", p.display());
    }
    if let Some(e) = store_failed {
        eprintln!("error: the peaks were measured but not kept ({e:#}); set GPUBENCH_PEAKS to a writable file");
        return Ok(1);
    }
    Ok(0)
}

/// A measured peak as a results row (mode `peak`): the device, precision and
/// library versions of a run's row, the median TFLOP/s in `achieved_tflops`,
/// the rounds' range and the matrices in the note.
fn peak_row(
    plan: &PeakPlan,
    device: tch::Device,
    name: &str,
    p: crate::config::Precision,
    r: &crate::bench::peak::PeakRounds,
    sheet: Option<f64>,
) -> Row {
    let devices = match device {
        tch::Device::Cuda(o) => crate::device::Devices { kind: DeviceKind::Cuda, ordinals: vec![o] },
        _ => crate::device::Devices { kind: DeviceKind::Cpu, ordinals: vec![0] },
    };
    let mut row = crate::bench::row::identity_row(&devices, &plan.label, crate::results::Implementation::Gpubench);
    row.mode = crate::results::Mode::Peak;
    row.status = crate::results::Status::Ok;
    row.device_name = name.to_string();
    row.devices = devices.ordinals.iter().map(|o| o.to_string()).collect::<Vec<_>>().join(",");
    row.n_devices = 1;
    row.precision = p.name().into();
    row.achieved_tflops = Some(r.median);
    row.mfu_datasheet_pct = sheet.map(|s| 100.0 * r.median / s);
    row.note = format!(
        "matmul peak: {n}x{n}x{n}, median of {} rounds of at least {}, rounds from {:.3} to {:.3} TFLOP/s",
        plan.rounds,
        humantime::format_duration(plan.round_time),
        r.lo,
        r.hi,
        n = r.size
    );
    row
}
