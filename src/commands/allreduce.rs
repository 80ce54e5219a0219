//! `gpubench allreduce`: the launcher starts one rank per local device
//! (`comm::allreduce::launch`, as ddp's workers start); each rank measures
//! (`comm::allreduce::run_rank`); rank 0 prints nccl-tests' table or JSON and
//! appends a row per size and placement.
use anyhow::Result;

use crate::bench::ddp::env::DistEnv;
use crate::comm::allreduce::{launch, rows, run_rank, table_foot, table_head, table_line, to_json, SizeResult};
use crate::config::AllreduceConfig;
use crate::device::{self, DeviceKind};
use crate::report::export::Format;
use crate::results::csv as results_csv;

pub(crate) fn run(env: Option<DistEnv>, cfg: AllreduceConfig) -> Result<i32> {
    match env {
        None => launch(&cfg),
        Some(env) => rank(&cfg, &env),
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

