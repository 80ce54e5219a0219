//! `gpubench predict`: profile one device, simulate DDP's all-reduces for
//! each world size (`comm::predict`), print the table and append a row per
//! world size with `impl=predicted`, so that `report` and `compare` put
//! prediction beside measurement.
use anyhow::Result;

use crate::report::envelope::Envelope;
use crate::bench::row::base_row;
use crate::comm::predict::{predict, Prediction, Profile};
use crate::config::{Format, PredictConfig};
use crate::report::format::{fmt_ms, fmt_pct, fmt_rate};
use crate::results::csv::{self as results_csv, Row};
use crate::results::Status;

pub(crate) fn run(cfg: PredictConfig) -> Result<i32> {
    if let Some(out) = &cfg.output.out {
        results_csv::check_writable(out)?;
    }
    if !cfg.output.quiet && cfg.output.format == Format::Table {
        eprintln!(
            "gpubench predict: profiling {} {}px batch {} on {}, then DDP on {} device(s) × {} node(s)",
            cfg.workload.model.name(),
            cfg.workload.image_size,
            cfg.batch_per_device,
            cfg.device.describe(),
            cfg.devices.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(","),
            cfg.nodes
        );
    }
    let (preds, notes) = predict(&cfg)?;
    let rows: Vec<Row> = preds.iter().map(|(p, x, c)| row(&cfg, p, x, c)).collect();
    if let Some(out) = &cfg.output.out {
        results_csv::append_rows(out, &rows)?;
    }
    match cfg.output.format {
        Format::Json => {
            let v: Vec<_> =
                preds.iter().map(|(p, x, c)| serde_json::json!({"profile": p, "prediction": x, "curve": c})).collect();
            Envelope::new().rows(&rows)?.notes(notes).own("predictions", v)?.print()?;
            return Ok(0);
        }
        Format::Csv => {
            print!("{}", results_csv::rows_text(&rows));
            for n in notes {
                eprintln!("note: {n}");
            }
            return Ok(0);
        }
        _ => {}
    }
    if cfg.output.quiet {
        return Ok(0);
    }
    println!(
        "{:>7} {:>10} {:>10} {:>10} {:>9} {:>11} {:>11} {:>9}",
        "devices", "fwd+bwd+opt", "step ms", "img/s", "scaling", "comm ms", "exposed ms", "wait ms"
    );
    for (p, x, _) in &preds {
        println!(
            "{:>7} {:>11} {:>10} {:>10} {:>9} {:>11} {:>11} {:>9}",
            x.n,
            fmt_ms(p.step() * 1e3),
            fmt_ms(x.step * 1e3),
            fmt_rate(x.throughput),
            fmt_pct(x.efficiency),
            fmt_ms(x.comm * 1e3),
            fmt_ms(x.exposed * 1e3),
            fmt_ms(x.wait * 1e3)
        );
    }
    for (p, x, c) in &preds {
        println!(
            "world {}: profile forward {} + backward {} + optimizer {} ms{}, {} buckets; all-reduce: {c}",
            x.n,
            fmt_ms(p.forward * 1e3),
            fmt_ms(p.backward * 1e3),
            fmt_ms(p.optimizer * 1e3),
            p.threads.map(|t| format!(" ({t} thread{})", if t == 1 { "" } else { "s" })).unwrap_or_default(),
            p.buckets.len()
        );
    }
    for n in notes {
        println!("note: {n}");
    }
    Ok(0)
}

fn row(cfg: &PredictConfig, p: &Profile, x: &Prediction, curve: &str) -> Row {
    let mut rc = cfg.run_config(p.threads);
    rc.placement.world = x.n;
    (rc.batch_per_device, rc.workload.image_size) = cfg.target();
    let mut r = base_row(&rc);
    if let Some(s) = cfg.scale_to {
        r.device_name = format!("scaled to {} img/s/device", s.throughput);
    }
    r.implementation = crate::results::Implementation::Predicted;
    r.devices = format!("predicted ×{}", x.n);
    // The profile's threads (a CPU rank's share), not whatever the process last set.
    if let Some(t) = p.threads {
        r.threads = Some(t as u32);
    }
    r.throughput_img_s = Some(x.throughput);
    r.throughput_per_device_img_s = Some(x.throughput / x.n as f64);
    r.step_ms_mean = Some(x.step * 1e3);
    r.step_ms_p50 = Some(x.step * 1e3);
    r.forward_ms = Some(p.forward * 1e3);
    r.backward_ms = Some(p.backward * 1e3);
    r.optimizer_ms = Some(p.optimizer * 1e3);
    r.ddp_backward_comm_ms = Some(x.comm * 1e3);
    r.ddp_overlap_ms = Some((x.comm - x.exposed).max(0.0) * 1e3);
    r.ddp_buckets = Some(p.buckets.len() as u32);
    r.steps = Some(p.samples.len() as u32);
    r.warmup = Some(cfg.warmup as u32);
    r.status = Status::Ok;
    r.note = format!(
        "predicted from a 1-device profile and an all-reduce curve; exposed communication {} ms; waiting for the \
         slowest rank {} ms; buffer broadcast {} ms; scaling {}",
        fmt_ms(x.exposed * 1e3),
        fmt_ms(x.wait * 1e3),
        fmt_ms(x.broadcast * 1e3),
        fmt_pct(x.efficiency)
    );
    r.source = curve.to_string();
    r
}
