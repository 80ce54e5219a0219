//! ddp's processes. `gpubench run --strategy ddp` either
//! - is a launcher: it starts one worker process per local device (the same
//!   binary, same arguments) with torchrun's variables set, forwards their
//!   output with a rank prefix, and stops them all if one fails; or
//! - is a worker: RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT (set by
//!   our launcher, by torchrun, or Slurm's SLURM_PROCID/SLURM_NTASKS/
//!   SLURM_LOCALID) say which rank it is, and it runs `strategy::ddp::worker`.
use anyhow::{anyhow, Context, Result};
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::cli::RunArgs;
use crate::config;
use crate::device;
use crate::error::usage;
use crate::report::results_csv;

/// Set by our launcher so a worker knows its device is `--gpus`[LOCAL_RANK].
pub const LAUNCHED_ENV: &str = "GPUBENCH_DDP_WORKER";
pub const DEFAULT_PORT: u16 = 29500;

/// Where this process sits in the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistEnv {
    pub rank: usize,
    pub world_size: usize,
    pub local_rank: usize,
    pub master_addr: String,
    pub master_port: u16,
    /// Started by gpubench's own launcher (which also writes the failure row).
    pub ours: bool,
}

fn var(get: &dyn Fn(&str) -> Option<String>, name: &str) -> Result<Option<usize>> {
    match get(name) {
        None => Ok(None),
        Some(v) => v.trim().parse().map(Some).map_err(|_| {
            usage(format!("environment variable {name}={v:?} is not a whole number; unset it or fix the launcher"))
        }),
    }
}

impl DistEnv {
    /// Reads torchrun's or Slurm's variables; None when neither is set, i.e.
    /// when this process should launch the workers itself.
    pub fn detect(a: &RunArgs, get: &dyn Fn(&str) -> Option<String>) -> Result<Option<DistEnv>> {
        let (rank, world, local) = if let (Some(r), Some(w)) = (var(get, "RANK")?, var(get, "WORLD_SIZE")?) {
            (r, w, var(get, "LOCAL_RANK")?.unwrap_or(r))
        } else if let (Some(r), Some(w)) = (var(get, "SLURM_PROCID")?, var(get, "SLURM_NTASKS")?) {
            (r, w, var(get, "SLURM_LOCALID")?.unwrap_or(r))
        } else {
            return Ok(None);
        };
        if world == 0 || rank >= world {
            return Err(usage(format!("rank {rank} is not below world size {world}; check the launcher's variables")));
        }
        let master_addr = get("MASTER_ADDR")
            .or_else(|| a.ddp.master_addr.clone())
            .ok_or_else(|| usage("MASTER_ADDR is not set: export MASTER_ADDR=<rank 0's host> or pass --master-addr"))?;
        let master_port = match get("MASTER_PORT") {
            Some(p) => p.trim().parse().map_err(|_| usage(format!("MASTER_PORT={p:?} is not a port number")))?,
            None => a.ddp.master_port.unwrap_or(DEFAULT_PORT),
        };
        Ok(Some(DistEnv {
            rank,
            world_size: world,
            local_rank: local,
            master_addr,
            master_port,
            ours: get(LAUNCHED_ENV).is_some(),
        }))
    }
}

/// A port that was free a moment ago on 127.0.0.1 (single-node runs only).
pub fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("finding a free port for the rendezvous store")?;
    Ok(l.local_addr()?.port())
}

/// `gpubench run --strategy ddp`: a worker if the environment says so, else
/// the launcher of this node's workers.
pub fn run(a: RunArgs) -> Result<i32> {
    let get = |k: &str| std::env::var(k).ok();
    match DistEnv::detect(&a, &get)? {
        Some(env) => crate::strategy::ddp::worker(a, env),
        None => launch(a),
    }
}

fn launch(a: RunArgs) -> Result<i32> {
    let devices = device::resolve(a.gpus.as_deref(), a.cpu, a.quiet || a.json)?;
    let cfg = config::validate(&a, devices)?;
    if a.ddp.nnodes == 0 || a.ddp.node_rank >= a.ddp.nnodes {
        return Err(usage(format!("--node-rank {} must be below --nnodes {}", a.ddp.node_rank, a.ddp.nnodes)));
    }
    if a.ddp.nnodes > 1 && (a.ddp.master_addr.is_none() || a.ddp.master_port.is_none()) {
        return Err(usage("a multi-node run needs --master-addr HOST and --master-port PORT, the same on every node"));
    }
    config::parse_duration("--dist-timeout", &a.ddp.dist_timeout)?;
    if a.ddp.node_rank == 0 {
        crate::runner::check_outputs(&cfg)?;
    }
    let local = cfg.devices.len();
    let world = local * a.ddp.nnodes;
    let addr = a.ddp.master_addr.clone().unwrap_or_else(|| "127.0.0.1".into());
    let port = match a.ddp.master_port {
        Some(p) => p,
        None => free_port()?,
    };
    if !a.quiet && !a.json {
        eprintln!(
            "gpubench: ddp on {}: {} worker(s) on this node, world size {world}, rendezvous {addr}:{port}; batch {} per device × {world} = {} global",
            cfg.devices.describe(),
            local,
            cfg.batch_per_device,
            cfg.batch_per_device * world as i64
        );
    }
    let exe = std::env::current_exe().context("locating the gpubench binary to start workers")?;
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let mut children: Vec<(usize, Child)> = vec![];
    let last_lines: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(vec![String::new(); local]));
    let mut forwarders = vec![];
    for lr in 0..local {
        let rank = a.ddp.node_rank * local + lr;
        let mut child = Command::new(&exe)
            .args(&args)
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", lr.to_string())
            .env("WORLD_SIZE", world.to_string())
            .env("LOCAL_WORLD_SIZE", local.to_string())
            .env("MASTER_ADDR", &addr)
            .env("MASTER_PORT", port.to_string())
            .env(LAUNCHED_ENV, "1")
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting worker rank {rank}"))?;
        // Forward each worker's stderr with its rank, keeping its last line for
        // the error message if it fails.
        let err = child.stderr.take().expect("piped stderr");
        let keep = Arc::clone(&last_lines);
        forwarders.push(std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if !line.trim().is_empty() {
                    keep.lock().expect("lock")[lr] = line.clone();
                }
                eprintln!("[rank {rank}] {line}");
            }
        }));
        children.push((rank, child));
    }
    let rows_before = rows_in(cfg.out.as_deref());
    let outcome = wait_all(&mut children, Duration::from_secs(10));
    for f in forwarders {
        let _ = f.join();
    }
    let failed = match outcome {
        Outcome::AllExited { code: 0, .. } => return Ok(0),
        // Rank 0 ended the run itself and wrote its row (e.g. diverged).
        Outcome::AllExited { code, .. } if rows_in(cfg.out.as_deref()) > rows_before => return Ok(code),
        Outcome::AllExited { first_failure: Some(f), .. } | Outcome::Killed(f) => f,
        Outcome::AllExited { code, first_failure: None } => return Ok(code),
    };
    let (rank, local, code) = failed;
    let last = last_lines.lock().expect("lock")[local].clone();
    let last = last.trim_start_matches("error: ").to_string();
    let how = if code > 128 {
        format!(
            "killed by signal {}{}",
            code - 128,
            if code == 137 { ", possibly the kernel's OOM killer" } else { "" }
        )
    } else {
        format!("exit {code}")
    };
    let msg = format!("ddp worker rank {rank} failed ({how}): {last}");
    // Rank 0 wrote no row (it was stopped in a collective, or failed before
    // the measurement): record the failure, naming the rank, rather than lose it.
    if let (Some(out), 0) = (&cfg.out, a.ddp.node_rank) {
        let backend = crate::strategy::ddp::backend_for(a.ddp.backend, &cfg.devices);
        let mut row = crate::runner::base_row(&cfg, cfg.strategy, backend.name());
        row.n_devices = world as u32;
        row.global_batch = Some((cfg.batch_per_device * world as i64) as u32);
        row.status = if crate::runner::is_oom(&last) { "oom" } else { "failed" }.into();
        row.error = msg.clone();
        results_csv::append_rows(out, &[row])?;
    }
    Err(anyhow!(msg))
}

/// Rows in the results file now (0 when there is none or it cannot be read).
fn rows_in(out: Option<&std::path::Path>) -> usize {
    out.and_then(|p| results_csv::read_rows(p).ok()).map_or(0, |r| r.len())
}

enum Outcome {
    /// Every worker exited by itself: rank 0's exit code, and the first
    /// worker that failed as (rank, local index, exit code).
    AllExited { code: i32, first_failure: Option<(usize, usize, i32)> },
    /// A worker failed and the others, still running after the grace period,
    /// were stopped (they would otherwise wait in a collective until timeout).
    Killed((usize, usize, i32)),
}

fn wait_all(children: &mut [(usize, Child)], grace: Duration) -> Outcome {
    let mut codes: Vec<Option<i32>> = vec![None; children.len()];
    let mut first_failure: Option<(usize, usize, i32, std::time::Instant)> = None;
    loop {
        for (i, (rank, c)) in children.iter_mut().enumerate() {
            if codes[i].is_none() {
                if let Ok(Some(st)) = c.try_wait() {
                    use std::os::unix::process::ExitStatusExt;
                    let code = st.code().or_else(|| st.signal().map(|sig| 128 + sig)).unwrap_or(1);
                    codes[i] = Some(code);
                    if code != 0 && first_failure.is_none() {
                        first_failure = Some((*rank, i, code, std::time::Instant::now()));
                    }
                }
            }
        }
        if codes.iter().all(Option::is_some) {
            let rank0 = children.iter().position(|(r, _)| *r == 0);
            let code = match rank0 {
                Some(i) => codes[i].unwrap_or(1),
                None => codes.iter().map(|c| c.unwrap_or(1)).max().unwrap_or(0),
            };
            return Outcome::AllExited { code, first_failure: first_failure.map(|(r, l, c, _)| (r, l, c)) };
        }
        if let Some((rank, local, code, at)) = first_failure {
            if at.elapsed() >= grace {
                for (i, (_, c)) in children.iter_mut().enumerate() {
                    if codes[i].is_none() {
                        let _ = c.kill();
                        let _ = c.wait();
                    }
                }
                return Outcome::Killed((rank, local, code));
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::collections::HashMap;

    fn args(extra: &[&str]) -> RunArgs {
        let mut v = vec!["gpubench", "run", "--strategy", "ddp"];
        v.extend(extra);
        match crate::cli::Cli::try_parse_from(v).unwrap().command {
            crate::cli::Command::Run(a) => *a,
            _ => unreachable!(),
        }
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn no_variables_means_launch() {
        assert_eq!(DistEnv::detect(&args(&[]), &env(&[])).unwrap(), None);
    }

    #[test]
    fn torchrun_variables() {
        let e = env(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_RANK", "1"),
            ("MASTER_ADDR", "node0"),
            ("MASTER_PORT", "1234"),
        ]);
        let d = DistEnv::detect(&args(&[]), &e).unwrap().unwrap();
        assert_eq!((d.rank, d.world_size, d.local_rank, d.master_port), (3, 8, 1, 1234));
        assert_eq!(d.master_addr, "node0");
        assert!(!d.ours);
    }

    #[test]
    fn slurm_variables_with_flags_for_the_master() {
        let e = env(&[("SLURM_PROCID", "5"), ("SLURM_NTASKS", "8"), ("SLURM_LOCALID", "1")]);
        let d = DistEnv::detect(&args(&["--master-addr", "n0", "--master-port", "4000"]), &e).unwrap().unwrap();
        assert_eq!((d.rank, d.world_size, d.local_rank, d.master_port), (5, 8, 1, 4000));
        let err = DistEnv::detect(&args(&[]), &e).unwrap_err();
        assert!(err.to_string().contains("MASTER_ADDR"));
    }

    #[test]
    fn bad_variables_are_usage_errors() {
        let e = env(&[("RANK", "x"), ("WORLD_SIZE", "2")]);
        assert_eq!(crate::error::exit_code(&DistEnv::detect(&args(&[]), &e).unwrap_err()), 2);
        let e = env(&[("RANK", "2"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "a")]);
        assert!(DistEnv::detect(&args(&[]), &e).is_err());
    }
}
