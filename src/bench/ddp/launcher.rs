//! ddp's launcher: one worker process per local device (this same binary,
//! same arguments) with torchrun's variables set; their stderr forwarded with
//! a rank prefix; all of them stopped if one fails, so that none is left
//! waiting in a collective; and the row written, naming the rank, when rank 0
//! could not write it.
use anyhow::{anyhow, Context, Result};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::bench::row::base_row;
use crate::config::RunConfig;
use crate::internal::Child;
use crate::proc::{self, Ended, Exit, Watched};
use crate::results::{csv as results_csv, Status};

/// How long the other workers may run on after one failed before they are
/// stopped (they are usually blocked in a collective by then).
pub(crate) const GRACE: Duration = Duration::from_secs(10);

/// The grace after a worker died by a signal: long enough for the others to
/// print why they failed (a reset connection, within milliseconds).
const SIGNALLED_GRACE: Duration = Duration::from_secs(1);

/// "<what> rank R failed (how): its last line", for a rank that ended badly.
pub(crate) fn rank_failure(what: &str, rank: usize, e: &Ended) -> String {
    let last = e.tail.last().cloned().unwrap_or_default();
    let last = last.trim_start_matches("error: ");
    let mut msg = format!("{what} rank {rank} failed ({})", e.how());
    if !last.is_empty() {
        msg += &format!(": {last}");
    }
    msg
}

/// Starts this node's workers for `cfg` and waits for them; returns rank 0's
/// exit code, or an error naming the first rank that failed.
pub(crate) fn launch(cfg: &RunConfig) -> Result<i32> {
    let d = &cfg.ddp;
    let local = cfg.placement.devices.len();
    let world = cfg.placement.world;
    let addr = d.master_addr.clone().unwrap_or_else(|| "127.0.0.1".into());
    let port = match d.master_port {
        Some(p) => p,
        None => crate::dist::free_port()?,
    };
    if cfg.output.talks() {
        eprintln!(
            "gpubench: ddp on {}: {local} worker(s) on this node, world size {world}, rendezvous {addr}:{port}; {}",
            cfg.placement.devices.describe(),
            cfg.batch_phrase()
        );
    }
    let workers = spawn_ranks(local, d.node_rank, world, (&addr, port), cfg.output.quiet)?;
    let rows_before = rows_in(cfg);
    let ended = wait_all(workers, GRACE);
    let all_exited = ended.iter().all(|(_, e)| e.exit != Exit::TimedOut);
    let code = match ended.iter().find(|(r, _)| *r == 0) {
        Some((_, e)) => e.exit.code(),
        None => ended.iter().map(|(_, e)| e.exit.code()).max().unwrap_or(0),
    };
    // Rank 0 ended the run itself and wrote its row (ok, diverged, or a
    // failure it could trace to its rank), even if others had to be stopped.
    if (all_exited && code == 0) || rows_in(cfg) > rows_before {
        // Quiet, rank 0's own account of a failed run was not forwarded: it
        // is the one line to say.
        let said = ended.iter().find(|(r, _)| *r == 0).and_then(|(_, e)| e.tail.last());
        if cfg.output.quiet && code != 0 {
            if let Some(last) = said {
                return Err(anyhow!("{}", last.trim_start_matches("error: ")));
            }
        }
        return Ok(code);
    }
    let Some((rank, e)) = ended.first().filter(|(_, e)| !e.exit.success()) else {
        return Ok(code);
    };
    // A rank that lost its peer's host says so in its last line (`liveness`):
    // that is the failure, not the rank that said it.
    let lost = e.tail.last().map(|l| l.trim_start_matches("error: ")).filter(|l| super::liveness::is_verdict(l));
    let msg = match lost {
        Some(l) => l.to_string(),
        None => rank_failure("ddp worker", *rank, e),
    };
    // Rank 0 wrote no row (it was stopped in a collective, or failed before
    // the measurement): record the failure, naming the rank, rather than lose
    // it. Node 0's launcher writes it, or, when node 0 itself is what was
    // lost, the launcher that saw it go.
    let store_host_lost = lost.is_some_and(|l| l.contains("the rendezvous store's host"));
    if let (Some(out), true) = (&cfg.output.out, d.node_rank == 0 || store_host_lost) {
        let mut row = base_row(cfg);
        row.status = if e.looks_oom() { Status::Oom } else { Status::Failed };
        row.error = msg.clone();
        results_csv::append_rows(out, &[row])?;
    }
    Err(anyhow!(msg))
}

/// Starts this node's `local` ranks (this same binary, as the hidden `rank`
/// subcommand around this command line) with torchrun's variables set and
/// stderr forwarded behind `[rank r]` unless `quiet` (then only the
/// launcher's one line says what failed, from the ranks' last lines); ddp's
/// workers and `allreduce`'s ranks both start here.
pub(crate) fn spawn_ranks(
    local: usize,
    node_rank: usize,
    world: usize,
    (addr, port): (&str, u16),
    quiet: bool,
) -> Result<Vec<(usize, Watched)>> {
    let exe = std::env::current_exe().context("locating the gpubench binary to start workers")?;
    let args = Child::Rank.args(&[], crate::internal::served_line());
    let mut workers: Vec<(usize, Watched)> = vec![];
    for lr in 0..local {
        let rank = node_rank * local + lr;
        let mut cmd = Command::new(&exe);
        cmd.args(&args)
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", lr.to_string())
            .env("WORLD_SIZE", world.to_string())
            .env("LOCAL_WORLD_SIZE", local.to_string())
            .env("MASTER_ADDR", addr)
            .env("MASTER_PORT", port.to_string())
            .env("GROUP_RANK", node_rank.to_string())
            .env(crate::internal::PARENT_PID, std::process::id().to_string());
        match proc::spawn(&mut cmd, (!quiet).then(|| format!("[rank {rank}] ")), 1) {
            Ok(w) => workers.push((rank, w)),
            Err(e) => {
                for (_, w) in workers.iter_mut() {
                    w.kill();
                }
                return Err(anyhow!("starting worker rank {rank}: {e}"));
            }
        }
    }
    Ok(workers)
}

/// Rows in the results file now (0 when there is none or it cannot be read).
fn rows_in(cfg: &RunConfig) -> usize {
    cfg.output.out.as_deref().and_then(|p| results_csv::read_rows(p).ok()).map_or(0, |r| r.len())
}

/// Waits for every worker. Once one has failed, the others get `grace` to
/// end by themselves and are then killed (their exit: `TimedOut`); when it
/// died by a signal they get at most `SIGNALLED_GRACE`, since it can never
/// send the result they would wait for, and the row is ours to write. Returns
/// (rank, how it ended) for each, in start order except that the first
/// worker to fail comes first.
pub(crate) fn wait_all(mut workers: Vec<(usize, Watched)>, mut grace: Duration) -> Vec<(usize, Ended)> {
    let mut exits: Vec<Option<Exit>> = vec![None; workers.len()];
    let mut first_failure: Option<(usize, Instant)> = None;
    loop {
        for (i, (_, w)) in workers.iter_mut().enumerate() {
            if exits[i].is_none() {
                if let Ok(Some(x)) = w.try_wait() {
                    exits[i] = Some(x);
                    if !x.success() && first_failure.is_none() {
                        first_failure = Some((i, Instant::now()));
                        if matches!(x, Exit::Signal(_)) {
                            grace = grace.min(SIGNALLED_GRACE);
                        }
                    }
                }
            }
        }
        if exits.iter().all(Option::is_some) {
            break;
        }
        if let Some((_, at)) = first_failure {
            if at.elapsed() >= grace {
                for (i, (_, w)) in workers.iter_mut().enumerate() {
                    if exits[i].is_none() {
                        w.kill();
                        exits[i] = Some(Exit::TimedOut);
                    }
                }
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut ended: Vec<(usize, Ended)> =
        workers.into_iter().zip(exits).map(|((rank, w), x)| (rank, w.finish(x))).collect();
    // The first failure leads, so that the message names the rank that failed
    // rather than one that was stopped, or failed because of it. Ranks that
    // fail together are told apart by what they said: one that lost its peer
    // failed because of another.
    if let Some((i, _)) = first_failure {
        let cause = (!lost_a_peer(&ended[i].1))
            .then_some(i)
            .or_else(|| {
                ended.iter().position(|(_, e)| !e.exit.success() && e.exit != Exit::TimedOut && !lost_a_peer(e))
            })
            .unwrap_or(i);
        let f = ended.remove(cause);
        ended.insert(0, f);
    }
    ended
}

/// Whether a rank's last line says its collective lost a peer (Gloo's reset
/// or closed connection, NCCL's remote error: `liveness::looks_lost`) rather
/// than why it failed; a liveness verdict names the loss itself.
fn lost_a_peer(e: &Ended) -> bool {
    let last = e.tail.last().map(|l| l.trim_start_matches("error: ")).unwrap_or_default();
    super::liveness::looks_lost(last) && !super::liveness::is_verdict(last)
}
