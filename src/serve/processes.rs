//! `--serving processes`: one serving process per device, started by this
//! one (the parent), each running `serve::server` with its one device and its
//! share of the arrivals (camera s to process s mod P; a Poisson request to
//! a random one), as a deployment that routes cameras to server processes
//! would. There is no central queue, so no frame crosses a process boundary.
//!
//! The parent writes the load to a temporary directory, starts the workers
//! (this binary as the hidden `infer-worker K P DIR` subcommand around the
//! same `infer` command line: `crate::internal::Child::InferWorker`), waits until each has
//! built and warmed up its model (`ready.k`), then writes one start time
//! (`go`) that all of them use; each writes its records (`records.k.csv`).
//! A worker that dies ends the run within moments: the others are killed
//! and the error names the worker, its device and how it ended.
use anyhow::{anyhow, Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::records;
use super::schedule;
use super::server::{grace, host_notes, serve, Frames, ServeOutcome, StartSignal};
use crate::config::{InferConfig, Scenario};
use crate::device::Devices;
use crate::internal::{Child, Hook};
use crate::metrics::collect::Window;
use crate::metrics::interference::HostSnapshot;
use crate::proc::{self, Watched};

/// The load as one line: the scenario, its parameters and the duration.
fn load_line(cfg: &InferConfig) -> String {
    let d = cfg.duration.as_secs_f64();
    match cfg.scenario {
        Scenario::Offline => format!("offline {d}"),
        Scenario::SingleStream => format!("single-stream {d}"),
        Scenario::Server { rate } => format!("server {d} {rate}"),
        Scenario::Streams { streams, fps } => format!("streams {d} {streams} {fps}"),
    }
}

fn parse_load(line: &str) -> Option<(Scenario, Duration)> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let d = Duration::from_secs_f64(f.get(1)?.parse().ok()?);
    let s = match *f.first()? {
        "offline" => Scenario::Offline,
        "single-stream" => Scenario::SingleStream,
        "server" => Scenario::Server { rate: f.get(2)?.parse().ok()? },
        "streams" => Scenario::Streams { streams: f.get(2)?.parse().ok()?, fps: f.get(3)?.parse().ok()? },
        _ => return None,
    };
    Some((s, d))
}

/// How many worker processes serve `cfg`: one per device; single-stream has one.
fn process_count(cfg: &InferConfig) -> u32 {
    if cfg.scenario == Scenario::SingleStream {
        1
    } else {
        cfg.devices.len() as u32
    }
}

/// A worker process: serve this process's share of the load in `dir`, write
/// the records; exit code 0, or 1 after saying why on stderr.
pub(crate) fn run_worker(cfg: &InferConfig, k: u32, p: u32, dir: &Path) -> Result<i32> {
    let text = std::fs::read_to_string(dir.join("load")).with_context(|| format!("reading {}/load", dir.display()))?;
    let (scenario, duration) =
        parse_load(&text).ok_or_else(|| anyhow!("{}/load: cannot parse {text:?}", dir.display()))?;
    let mut mine = cfg.clone();
    mine.threads = Some(cfg.threads_per_worker());
    mine.devices = Devices { kind: cfg.devices.kind, ordinals: vec![cfg.devices.ordinals[k as usize]] };
    mine.scenario = scenario;
    mine.duration = duration;
    let arrivals =
        schedule::schedule(&scenario, duration.as_secs_f64(), p, cfg.workload.seed).filter(|a| a.worker == k);
    let frames = Frames::load(&mine)?;
    let start = StartSignal::Files { ready: dir.join(format!("ready.{k}")), go: dir.join("go") };
    if Hook::InferCrash.get().is_some_and(|v| v == k.to_string()) {
        // For the tests: worker k says it is ready, then dies.
        std::fs::write(dir.join(format!("ready.{k}")), b"ready\n")?;
        std::thread::sleep(Duration::from_millis(300));
        std::process::exit(3);
    }
    let mut out = serve(&mine, &frames, arrivals, &start);
    if matches!(scenario, Scenario::Offline | Scenario::SingleStream) {
        // Ids of an endless backlog are per process: make them unique.
        for r in &mut out.records {
            r.id = r.id * p as u64 + k as u64;
        }
    }
    for r in &mut out.records {
        r.worker = k;
    }
    let path = dir.join(format!("records.{k}.csv"));
    let tmp = dir.join(format!("records.{k}.tmp"));
    std::fs::write(&tmp, records::to_csv(&out.records)).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
    std::fs::write(dir.join(format!("late.{k}")), out.late.to_string())?;
    match out.error {
        Some(e) => {
            eprintln!("error: {}", crate::error::failure_message(&e));
            Ok(1)
        }
        None => Ok(0),
    }
}

/// The parent: start one worker per device, start them together, gather
/// their records.
pub(crate) fn run_parent(cfg: &InferConfig) -> ServeOutcome {
    let mut out = ServeOutcome { records: vec![], late: 0, error: None, window: None, interference: vec![] };
    let res = parent(cfg, &mut out);
    if let Err(e) = res {
        out.error = Some(e);
    }
    out
}

fn parent(cfg: &InferConfig, out: &mut ServeOutcome) -> Result<()> {
    let program = std::env::current_exe().context("locating the gpubench binary to start serving workers")?;
    let line = crate::internal::served_line();
    let dir = crate::reference::python::TempDir::new()?;
    std::fs::write(dir.0.join("load"), load_line(cfg) + "\n")?;
    let p = process_count(cfg);
    let mut kids: Vec<Option<Watched>> = vec![];
    for k in 0..p {
        let mut cmd = Command::new(&program);
        let params = [k.to_string().into(), p.to_string().into(), dir.0.clone().into_os_string()];
        cmd.args(Child::InferWorker.args(&params, line.iter().cloned()))
            .env(crate::internal::PARENT_PID, std::process::id().to_string())
            .stdout(Stdio::null());
        let prefix = cfg.output.talks().then(|| format!("[worker {k}] "));
        match proc::spawn(&mut cmd, prefix, 20) {
            Ok(w) => kids.push(Some(w)),
            Err(e) => {
                stop_all(&mut kids);
                return Err(anyhow!("cannot start worker {k}: {e}"));
            }
        }
    }
    let device = |k: usize| match cfg.devices.kind {
        crate::device::DeviceKind::Cuda => format!("cuda:{}", cfg.devices.ordinals[k]),
        crate::device::DeviceKind::Cpu => format!("cpu:{k}"),
    };
    // Ready: every worker has said so; a worker that ends first has failed.
    let mut t0 = None;
    let mut host0 = None;
    let limit = Instant::now() + Duration::from_secs(600);
    let finish_by = |t0: Instant| t0 + cfg.duration + grace(cfg) + Duration::from_secs(120);
    loop {
        for k in 0..kids.len() {
            let exited = match kids[k].as_mut().map(|w| w.try_wait()) {
                Some(Ok(Some(e))) => Some(e),
                _ => None,
            };
            if let Some(e) = exited {
                let ended = kids[k].take().expect("present").finish(None);
                if !(e.success() && t0.is_some()) {
                    stop_all(&mut kids);
                    let tail = ended.tail.last().map(|t| format!(": {t}")).unwrap_or_default();
                    return Err(anyhow!("worker {k} ({}) {}{tail}", device(k), ended.how()));
                }
            }
        }
        if kids.iter().all(Option::is_none) {
            // The workers are this process's group: only others' load counts.
            out.interference = host_notes(host0.zip(HostSnapshot::take()));
            break;
        }
        if t0.is_none() && (0..p).all(|k| dir.0.join(format!("ready.{k}")).exists()) {
            let now = SystemTime::now().duration_since(UNIX_EPOCH)?;
            let at = now + Duration::from_millis(50);
            let tmp = dir.0.join("go.tmp");
            std::fs::write(&tmp, format!("{}\n", at.as_nanos()))?;
            std::fs::rename(&tmp, dir.0.join("go"))?;
            let start = Instant::now() + Duration::from_millis(50);
            t0 = Some(start);
            // The parent's CPU time says nothing of the workers'.
            out.window = Some(Window { start, end: start + cfg.duration, cpu_secs: None });
            host0 = HostSnapshot::take();
        }
        let late = match t0 {
            None => Instant::now() > limit,
            Some(t) => Instant::now() > finish_by(t),
        };
        if late {
            stop_all(&mut kids);
            return Err(anyhow!("the worker processes did not finish in time; they were stopped"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    for k in 0..p {
        out.records.extend(records::read(&dir.0.join(format!("records.{k}.csv")))?);
        out.late += std::fs::read_to_string(dir.0.join(format!("late.{k}")))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    Ok(())
}

fn stop_all(kids: &mut [Option<Watched>]) {
    for w in kids.iter_mut().filter_map(Option::as_mut) {
        w.kill();
    }
}
