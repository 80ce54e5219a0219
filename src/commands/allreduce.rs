//! `gpubench allreduce`: the launcher starts one rank per local device
//! (`bench::ddp::launcher`, as ddp's workers start); each rank measures
//! (`comm::allreduce`); rank 0 prints nccl-tests' table or JSON and appends
//! a row per size and placement.
use anyhow::{anyhow, Result};

use crate::bench::ddp::env::DistEnv;
use crate::bench::ddp::launcher::{rank_failure, spawn_ranks, wait_all, GRACE};
use crate::bench::row::identity_row;
use crate::comm::allreduce::{run_rank, table_foot, table_head, table_line, to_json, SizeResult, Timing};
use crate::config::AllreduceConfig;
use crate::device::{self, DeviceKind};
use crate::report::export::Format;
use crate::results::csv::{self as results_csv, Row};
use crate::results::Status;

pub(crate) fn run(env: Option<DistEnv>, cfg: AllreduceConfig) -> Result<i32> {
    match env {
        None => launch(&cfg),
        Some(env) => rank(&cfg, &env),
    }
}

fn launch(cfg: &AllreduceConfig) -> Result<i32> {
    if let (Some(out), 0) = (&cfg.output.out, cfg.node_rank) {
        results_csv::check_writable(out)?;
    }
    let local = cfg.node_devices.len();
    let world = local * cfg.nnodes;
    let addr = cfg.master_addr.clone().unwrap_or_else(|| "127.0.0.1".into());
    let port = match cfg.master_port {
        Some(p) => p,
        None => crate::dist::free_port()?,
    };
    if !cfg.output.quiet && cfg.output.format == Format::Table {
        eprintln!(
            "gpubench allreduce: {} on {}: {local} rank(s) on this node, world size {world}, {} to {} bytes ×{}",
            cfg.backend.name(),
            cfg.node_devices.describe(),
            cfg.min_bytes,
            cfg.max_bytes,
            cfg.factor
        );
    }
    let ranks = spawn_ranks(local, cfg.node_rank, world, (&addr, port), cfg.output.quiet)?;
    let ended = wait_all(ranks, GRACE);
    match ended.first().filter(|(_, e)| !e.exit.success()) {
        None => Ok(0),
        Some((r, e)) => Err(anyhow!(rank_failure("allreduce", *r, e))),
    }
}

fn rank(cfg: &AllreduceConfig, env: &DistEnv) -> Result<i32> {
    if env.ours {
        // Killing the launcher must not leave a rank waiting in a collective.
        crate::bench::ddp::worker::watch_parent();
    }
    if cfg.node_devices.kind == DeviceKind::Cpu {
        // CPU ranks share the cores, as ddp's do: oversubscribed OpenMP teams
        // spin against each other and would time the contention, not the copy.
        tch::set_num_threads((device::cpu_cores() / cfg.node_devices.len()).max(1) as i32);
    }
    let lead = env.rank == 0;
    let talks = lead && cfg.output.talks();
    if talks {
        print!("{}", table_head());
    }
    let mut results = vec![];
    // Rank 0 appends and prints each size as it is measured: when a rank
    // dies at a later size, the ones before it are in the file and on screen.
    let measured = run_rank(cfg, env, &mut |r: &SizeResult| {
        if !lead {
            return Ok(());
        }
        if let Some(out) = &cfg.output.out {
            results_csv::append_rows(out, &rows(cfg, env.world_size, std::slice::from_ref(r)))?;
        }
        if talks {
            print!("{}", table_line(r, cfg.dtype));
            std::io::Write::flush(&mut std::io::stdout())?;
        }
        results.push(*r);
        Ok(())
    });
    if !lead {
        return measured.map(|_| 0);
    }
    match cfg.output.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&to_json(cfg, env.world_size, &results))?),
        Format::Csv => print!("{}", results_csv::rows_text(&rows(cfg, env.world_size, &results))),
        _ => {}
    }
    if let Err(e) = measured {
        let of = cfg.sizes().len();
        return Err(e.context(format!("the all-reduce stopped after {} of {of} sizes (those are kept)", results.len())));
    }
    if talks {
        print!("{}", table_foot(&results));
    }
    Ok(if crate::comm::allreduce::wrong(&results) == 0 { 0 } else { 1 })
}

/// A row per size and placement, in the results file's schema.
pub(crate) fn rows(cfg: &AllreduceConfig, world: usize, results: &[SizeResult]) -> Vec<Row> {
    let base = Row {
        mode: crate::results::Mode::Allreduce,
        strategy: "allreduce".into(),
        backend: cfg.backend.name().into(),
        devices: if cfg.nnodes > 1 {
            format!("{} ×{} nodes", cfg.node_devices.describe(), cfg.nnodes)
        } else {
            cfg.node_devices.describe()
        },
        n_devices: world as u32,
        precision: cfg.dtype.name().into(),
        steps: Some(cfg.iters as u32),
        warmup: Some(cfg.warmup as u32),
        status: Status::Ok,
        note: "op sum; out-of-place = a copy into the output buffer + c10d's in-place all_reduce".into(),
        ..identity_row(&cfg.node_devices, &cfg.output.label, crate::results::Implementation::Gpubench)
    };
    let mut v = vec![];
    for r in results {
        for (in_place, t) in [(false, &r.out_of_place), (true, &r.in_place)] {
            v.push(fill(&base, r.size, in_place, t));
        }
    }
    v
}

fn fill(base: &Row, bytes: u64, in_place: bool, t: &Timing) -> Row {
    Row {
        bytes: Some(bytes),
        in_place: Some(in_place),
        step_ms_mean: Some(t.time / 1e3),
        step_ms_p50: Some(t.p50_us / 1e3),
        step_ms_p99: Some(t.p99_us / 1e3),
        algbw_gbs: Some(t.alg_bw),
        busbw_gbs: Some(t.bus_bw),
        nwrong: Some(t.nwrong),
        status: if t.nwrong == 0 { Status::Ok } else { Status::Failed },
        error: if t.nwrong == 0 { String::new() } else { format!("{} wrong elements", t.nwrong) },
        ..base.clone()
    }
}
