//! Which rank, host and node went away, and when, told within seconds.
//!
//! A collective that lost its peer ends one of two ways: Gloo's "Connection reset by peer" naming an address
//! and a port (the peer's process died), or nothing at all until `--dist-timeout` (300 s by default) when the
//! peer's host is cut off or hangs. Neither names the node. So every rank beats a counter in the rendezvous
//! store once a second through a client of its own (its operations give up after [`lost_after`]); rank 0,
//! which hosts the store, watches the other ranks' counters on its own clock (so clocks across hosts need
//! not agree), and every other rank watches its own beats reach the store. A rank silent for [`lost_after`]
//! is lost: the verdict names its host, node and rank and the time of its last beat.
//!
//! What the verdict does: a failure that already looks like a lost peer waits for it (at most
//! [`lost_after`] and a beat) and takes its words (`Liveness::explain`); a run still blocked
//! [`END_GRACE`] after the verdict is ended by the watcher, which says the verdict as the process's last
//! line and, where no launcher of ours will, appends the `failed` row first.
use anyhow::{anyhow, Result};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use super::env::DistEnv;
use super::keys;
use crate::dist::Store;

/// How often every rank beats.
const BEAT: Duration = Duration::from_secs(1);
/// How long a run still blocked after the verdict is left to end by itself.
pub(crate) const END_GRACE: Duration = Duration::from_secs(5);

/// Silence after which a rank counts as lost: 10 s, or `--dist-timeout` when that is shorter.
pub(crate) fn lost_after(dist_timeout: Duration) -> Duration {
    dist_timeout.min(Duration::from_secs(10)).max(BEAT * 2)
}

/// Where a rank runs, as it says at the rendezvous.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct Place {
    pub rank: usize,
    pub host: String,
    /// The node's index, where the launcher says (GROUP_RANK, SLURM_NODEID).
    pub node: Option<usize>,
}

impl Place {
    pub(crate) fn here(rank: usize) -> Place {
        let node = ["GROUP_RANK", "SLURM_NODEID"].iter().find_map(|k| std::env::var(k).ok()?.trim().parse().ok());
        Place { rank, host: crate::device::hostname(), node }
    }
}

/// Every rank's place, in rank order: each rank publishes its own and reads the others'.
pub(crate) fn exchange(store: &Store, env: &DistEnv) -> Result<Vec<Place>> {
    let me = Place::here(env.rank);
    store.set(&keys::place(env.rank), &serde_json::to_vec(&me)?)?;
    (0..env.world_size)
        .map(|r| {
            let b = store.get(&keys::place(r))?;
            serde_json::from_slice(&b).map_err(|e| anyhow!("rank {r}'s place: {e}"))
        })
        .collect()
}

/// The hosts of `places` in order of first appearance, comma-separated: the row's node list outside Slurm.
pub(crate) fn node_list(places: &[Place]) -> String {
    let mut hosts: Vec<&str> = vec![];
    for p in places {
        if !hosts.contains(&p.host.as_str()) {
            hosts.push(&p.host);
        }
    }
    hosts.join(",")
}

/// The loss, host by host: "lost host n1 (node 1, ranks 2, 3): no heartbeat since ..." when every rank of
/// a host is silent, "lost rank 1 on host n0 (node 0)" when only some are (a process, not the host). Rank 0 is
/// named as the rendezvous store's host: the ranks elsewhere cannot go on without it.
pub(crate) fn describe(places: &[Place], lost: &[usize], since: SystemTime, silent: Duration) -> String {
    let mut hosts: Vec<(&str, Option<usize>, Vec<usize>)> = vec![];
    for &r in lost {
        let (host, node) = places.get(r).map_or(("?", None), |p| (p.host.as_str(), p.node));
        match hosts.iter_mut().find(|h| h.0 == host) {
            Some(h) => h.2.push(r),
            None => hosts.push((host, node, vec![r])),
        }
    }
    let parts: Vec<String> = hosts
        .iter()
        .map(|(host, node, ranks)| {
            let whole = places.iter().filter(|p| p.host == *host).all(|p| ranks.contains(&p.rank));
            let list: Vec<String> = ranks.iter().map(usize::to_string).collect();
            let noun = if ranks.len() == 1 { "rank" } else { "ranks" };
            let store = if ranks.contains(&0) { ", the rendezvous store's host" } else { "" };
            match (whole, node) {
                (true, Some(n)) => format!("host {host} (node {n}, {noun} {}{store})", list.join(", ")),
                (true, None) => format!("host {host} ({noun} {}{store})", list.join(", ")),
                (false, Some(n)) => format!("{noun} {} on host {host} (node {n}{store})", list.join(", ")),
                (false, None) => format!("{noun} {} on host {host}{store}", list.join(", ")),
            }
        })
        .collect();
    format!(
        "lost {}: no heartbeat since {} ({} s)",
        parts.join(" and "),
        humantime::format_rfc3339_seconds(since),
        silent.as_secs()
    )
}

/// Whether a line is a loss verdict (`describe`'s).
pub(crate) fn is_verdict(line: &str) -> bool {
    line.starts_with("lost ") && line.contains(": no heartbeat since ")
}

/// Whether an error reads like a collective or the store losing its peer (rather than failing on its own).
pub(crate) fn looks_lost(msg: &str) -> bool {
    [
        "Connection reset by peer",
        "Connection closed by peer",
        "Connection refused",
        "Broken pipe",
        "Read error",
        "Write error",
        "Timed out",
        "timed out",
        "Socket Timeout",
        "remote process exited",
        "ncclRemoteError",
    ]
    .iter()
    .any(|p| msg.contains(p))
}

/// When beats last went through (this rank's, on this clock and the wall's) and, on rank 0, each rank's
/// last count and when it last changed, and whether it has left its result (done: it may end and fall silent).
struct Beats {
    mine: (Instant, SystemTime),
    seen: Vec<(i64, Instant, SystemTime)>,
    done: Vec<bool>,
}

struct Shared {
    beats: Mutex<Beats>,
    verdict: Mutex<Option<String>>,
    stop: AtomicBool,
}

/// The heartbeat and the watch of one rank, on threads of their own until dropped.
pub(crate) struct Liveness {
    shared: Arc<Shared>,
    lost_after: Duration,
}

impl Liveness {
    /// Starts beating and watching. `on_lost` runs on the watcher's thread when the run is still going
    /// [`END_GRACE`] after a verdict, with the verdict; it should end the process.
    pub(crate) fn start(
        env: &DistEnv,
        places: Vec<Place>,
        dist_timeout: Duration,
        on_lost: Box<dyn FnOnce(&str) + Send>,
    ) -> Result<Liveness> {
        let lost_after = lost_after(dist_timeout);
        let client = Store::client(&env.master_addr, env.master_port, env.rank, env.world_size, lost_after)?;
        let now = (Instant::now(), SystemTime::now());
        let shared = Arc::new(Shared {
            beats: Mutex::new(Beats {
                mine: now,
                seen: vec![(-1, now.0, now.1); env.world_size],
                done: vec![false; env.world_size],
            }),
            verdict: Mutex::new(None),
            stop: AtomicBool::new(false),
        });
        let (sh, rank) = (Arc::clone(&shared), env.rank);
        // The beat's store operations can block far past their timeout on a cut link (a reply that never
        // comes): they get a thread of their own, and the watch never waits on them.
        std::thread::Builder::new().name("gpubench-beat".into()).spawn(move || beat(&client, &sh, rank))?;
        let sh = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("gpubench-watch".into())
            .spawn(move || watch(&sh, rank, &places, lost_after, on_lost))?;
        Ok(Liveness { shared, lost_after })
    }

    /// The verdict, if there is one by now.
    pub(crate) fn verdict(&self) -> Option<String> {
        self.shared.verdict.lock().expect("liveness lock").clone()
    }

    /// `msg`, or when it reads like a lost peer, the verdict (waited for, at most [`lost_after`] and a beat)
    /// followed by what the collective said.
    pub(crate) fn explain(&self, msg: &str) -> String {
        if !looks_lost(msg) && self.verdict().is_none() {
            return msg.to_string();
        }
        let deadline = Instant::now() + self.lost_after + BEAT * 2;
        loop {
            if let Some(v) = self.verdict() {
                return if msg.is_empty() { v } else { format!("{v}; the collective said: {msg}") };
            }
            if Instant::now() >= deadline {
                return msg.to_string();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Liveness {
    fn drop(&mut self) {
        // Both threads see it within a beat; one blocked in the store is left to the process's end.
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}

/// Sleeps `d` in short slices; false once stopped.
fn nap(sh: &Shared, d: Duration) -> bool {
    let until = Instant::now() + d;
    while Instant::now() < until {
        if sh.stop.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    !sh.stop.load(Ordering::Relaxed)
}

fn beat(client: &Store, sh: &Shared, rank: usize) {
    let mine = keys::alive(rank);
    loop {
        if client.add(&mine, 1).is_ok() {
            sh.beats.lock().expect("liveness lock").mine = (Instant::now(), SystemTime::now());
        }
        if rank == 0 {
            // Rank 0 hosts the store: reading the others' counters never crosses the network.
            let world = sh.beats.lock().expect("liveness lock").seen.len();
            for r in 1..world {
                if client.contains(&keys::result(r)).unwrap_or(false) {
                    sh.beats.lock().expect("liveness lock").done[r] = true;
                }
                if let Ok(n) = client.add(&keys::alive(r), 0) {
                    let s = &mut sh.beats.lock().expect("liveness lock").seen[r];
                    if n != s.0 {
                        *s = (n, Instant::now(), SystemTime::now());
                    }
                }
            }
        }
        if !nap(sh, BEAT) {
            return;
        }
    }
}

fn watch(sh: &Shared, rank: usize, places: &[Place], lost_after: Duration, on_lost: Box<dyn FnOnce(&str) + Send>) {
    let mut verdict_at: Option<Instant> = None;
    let mut on_lost = Some(on_lost);
    while nap(sh, Duration::from_millis(200)) {
        if verdict_at.is_none() {
            let b = sh.beats.lock().expect("liveness lock");
            let lost: Vec<(usize, Instant, SystemTime)> = if rank == 0 {
                (1..b.seen.len())
                    .filter(|&r| !b.done[r] && b.seen[r].1.elapsed() >= lost_after)
                    .map(|r| (r, b.seen[r].1, b.seen[r].2))
                    .collect()
            } else if b.mine.0.elapsed() >= lost_after {
                // This rank's beats no longer reach the store: its host, rank 0's, is lost to it.
                vec![(0, b.mine.0, b.mine.1)]
            } else {
                vec![]
            };
            drop(b);
            if let Some(&(_, since_i, since)) = lost.iter().min_by_key(|l| l.1) {
                let ranks: Vec<usize> = lost.iter().map(|l| l.0).collect();
                *sh.verdict.lock().expect("liveness lock") = Some(describe(places, &ranks, since, since_i.elapsed()));
                verdict_at = Some(Instant::now());
            }
        }
        if verdict_at.is_some_and(|t| t.elapsed() >= END_GRACE) {
            let v = sh.verdict.lock().expect("liveness lock").clone();
            if let (Some(f), Some(v)) = (on_lost.take(), v) {
                f(&v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn places() -> Vec<Place> {
        vec![
            Place { rank: 0, host: "n0".into(), node: Some(0) },
            Place { rank: 1, host: "n0".into(), node: Some(0) },
            Place { rank: 2, host: "n1".into(), node: Some(1) },
            Place { rank: 3, host: "n1".into(), node: Some(1) },
        ]
    }

    #[test]
    fn the_verdict_names_host_node_ranks_and_the_last_beat() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let v = describe(&places(), &[2, 3], at, Duration::from_secs(11));
        assert_eq!(v, "lost host n1 (node 1, ranks 2, 3): no heartbeat since 2027-01-15T08:00:00Z (11 s)");
        let v = describe(&places(), &[0], at, Duration::from_secs(10));
        assert!(v.starts_with("lost rank 0 on host n0 (node 0, the rendezvous store's host)"), "{v}");
        let v = describe(&places(), &[0, 1], at, Duration::from_secs(10));
        assert!(v.starts_with("lost host n0 (node 0, ranks 0, 1, the rendezvous store's host)"), "{v}");
        assert!(is_verdict(&v));
        let v = describe(&places(), &[3], at, Duration::from_secs(10));
        assert!(v.starts_with("lost rank 3 on host n1 (node 1):"), "{v}");
    }

    #[test]
    fn the_node_list_is_each_host_once_in_rank_order() {
        assert_eq!(node_list(&places()), "n0,n1");
    }

    #[test]
    fn only_a_lost_peer_waits_for_a_verdict() {
        assert!(looks_lost("Read error [172.19.0.3]:8868: Connection reset by peer"));
        assert!(looks_lost("Timed out waiting 300000ms for recv operation to complete"));
        assert!(!looks_lost("CUDA out of memory. Tried to allocate 2.00 GiB"));
    }

    #[test]
    fn the_silence_allowed_follows_a_short_dist_timeout() {
        assert_eq!(lost_after(Duration::from_secs(300)), Duration::from_secs(10));
        assert_eq!(lost_after(Duration::from_secs(4)), Duration::from_secs(4));
        assert_eq!(lost_after(Duration::from_millis(100)), Duration::from_secs(2));
    }
}
