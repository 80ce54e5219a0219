//! What could have distorted a run, said out loud: over the timed window,
//! the host's load, CPU steal and the CPU other processes used (everything
//! but this run's own process tree: its launcher, ranks, workers and their
//! children), and on GPUs, through NVML samples, clock throttling and
//! compute processes that are not this run's. Each finding is one short
//! phrase for the row's `interference` column and a warning line; a clean
//! run has none.
use std::time::Instant;

use super::sampler::DeviceSample;

/// Other processes using this many cores on average disturb a run.
pub(crate) const BUSY_CORES: f64 = 0.5;
/// CPU steal above this share of the window disturbs a run.
pub(crate) const STEAL_SHARE: f64 = 0.05;
/// Throttled in at least this share of a GPU's samples disturbs a run.
pub(crate) const THROTTLED_SHARE: f64 = 0.10;
/// Another process holding this much GPU memory is worth saying.
pub(crate) const OTHER_GPU_MB: f64 = 256.0;

/// The host's CPU counters at one moment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostSnapshot {
    at: Instant,
    /// Jiffies from the first line of /proc/stat: all, busy, steal.
    total: u64,
    busy: u64,
    steal: u64,
    /// CPU seconds of this run's own process tree (`group_cpu_seconds`).
    group_cpu: f64,
}

impl HostSnapshot {
    /// None where /proc cannot be read (not Linux).
    pub(crate) fn take() -> Option<HostSnapshot> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let (total, busy, steal) = parse_cpu_line(stat.lines().next()?)?;
        Some(HostSnapshot { at: Instant::now(), total, busy, steal, group_cpu: group_cpu_seconds() })
    }
}

/// (total, busy, steal) jiffies from /proc/stat's `cpu` line. Busy is the
/// time this VM's processes ran (user, nice, system, irq, softirq), so steal,
/// the time the hypervisor gave to another guest, is counted once, as steal,
/// and never again as other processes' work.
fn parse_cpu_line(line: &str) -> Option<(u64, u64, u64)> {
    let mut f = line.split_whitespace();
    if f.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
    if v.len() < 8 {
        return None;
    }
    // user nice system idle iowait irq softirq steal [guest guest_nice]:
    // guest time is already counted in user.
    let total: u64 = v[..8].iter().sum();
    let busy = v[0] + v[1] + v[2] + v[5] + v[6];
    Some((total, busy, v[7]))
}

/// Where this run's own process tree starts: the launcher that started this
/// rank or serving worker (`GPUBENCH_PARENT_PID`), else, for a rank another
/// launcher started (torchrun, srun: RANK is set), that launcher, else this
/// process. Everything outside the tree is another job's, a background job
/// of the same shell script included (it shares the run's process group, so
/// leaving out the group missed it).
fn tree_root() -> i64 {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    if let Some(p) = var(crate::internal::PARENT_PID).and_then(|p| p.parse().ok()) {
        return p;
    }
    if var("RANK").is_some() {
        // SAFETY: getppid has no preconditions.
        return unsafe { libc::getppid() } as i64;
    }
    std::process::id() as i64
}

/// CPU seconds (user + system) of this run's process tree (`tree_root` and
/// its descendants), and the children this process has reaped.
fn group_cpu_seconds() -> f64 {
    let own = std::process::id() as i64;
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0.0 };
    // pid → (ppid, ticks of its own, ticks of its reaped children)
    let mut procs: Vec<(i64, i64, u64, u64)> = vec![];
    for e in dir.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().and_then(|s| s.parse::<i64>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        if let Some((ppid, mine, reaped)) = parse_stat_ticks(&stat) {
            procs.push((pid, ppid, mine, reaped));
        }
    }
    let tree = descendants(tree_root(), &procs.iter().map(|p| (p.0, p.1)).collect::<Vec<_>>());
    let mut ticks = 0u64;
    for &(pid, _, mine, reaped) in &procs {
        if tree.contains(&pid) {
            ticks += mine;
        }
        if pid == own {
            // Children that ended and were reaped (serving workers) were ours too.
            ticks += reaped;
        }
    }
    ticks as f64 / 100.0
}

/// (ppid, utime + stime, cutime + cstime) from a /proc/PID/stat line; the
/// name may hold spaces and parentheses, so fields are counted after the last ')'.
fn parse_stat_ticks(stat: &str) -> Option<(i64, u64, u64)> {
    let f: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // After the name: state (3), ppid (4), pgrp (5), …, utime (14), stime (15), cutime (16), cstime (17).
    let field = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    Some((f.get(1)?.parse().ok()?, field(11) + field(12), field(13) + field(14)))
}

/// `root` and every process below it, from (pid, ppid) pairs.
fn descendants(root: i64, procs: &[(i64, i64)]) -> std::collections::HashSet<i64> {
    let mut tree = std::collections::HashSet::from([root]);
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(child, _) in procs.iter().filter(|(c, pp)| *pp == p && *c != p) {
            if tree.insert(child) {
                frontier.push(child);
            }
        }
    }
    tree
}

/// The intra-op thread count of `--threads`: `auto` is the cores other
/// processes leave free, measured over 300 ms (this process sleeps); a
/// count above this machine's hardware threads is capped to them, with one
/// line (once per process): more intra-op threads than the node has only
/// oversubscribe it, and a typo's 100000 would stall the run starting them.
pub(crate) fn resolve_threads(t: crate::config::Threads) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    match t {
        crate::config::Threads::Count(n) => capped_threads(n, cores),
        crate::config::Threads::Auto => {
            let Some(a) = HostSnapshot::take() else { return cores };
            std::thread::sleep(std::time::Duration::from_millis(300));
            HostSnapshot::take().and_then(|b| host_window(&a, &b, cores)).map_or(cores, |w| w.free_cores())
        }
    }
}

/// `n` threads on a machine of `cores` hardware threads: at most `cores`,
/// saying so once.
fn capped_threads(n: usize, cores: usize) -> usize {
    if n <= cores {
        return n;
    }
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        eprintln!("gpubench: --threads {n} is more than this machine's {cores} hardware threads; using {cores}")
    });
    cores
}

/// The host between two snapshots.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct HostWindow {
    /// Cores other processes kept busy, on average.
    pub others_cores: f64,
    /// Share of the CPU time the hypervisor took (steal).
    pub steal_share: f64,
    /// The 1-minute load average at the end, and the cores.
    pub load1: f64,
    pub cores: usize,
}

pub(crate) fn host_window(a: &HostSnapshot, b: &HostSnapshot, cores: usize) -> Option<HostWindow> {
    let wall = (b.at - a.at).as_secs_f64();
    let total = b.total.checked_sub(a.total)? as f64;
    if wall <= 0.0 || total <= 0.0 {
        return None;
    }
    // Jiffies are USER_HZ (100) per second per core.
    let busy_secs = b.busy.checked_sub(a.busy)? as f64 / 100.0;
    let ours = (b.group_cpu - a.group_cpu).max(0.0);
    let load1 = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN);
    Some(HostWindow {
        others_cores: ((busy_secs - ours) / wall).max(0.0),
        steal_share: b.steal.checked_sub(a.steal)? as f64 / total,
        load1,
        cores,
    })
}

impl HostWindow {
    /// The cores the other processes left, at least one.
    pub(crate) fn free_cores(&self) -> usize {
        (self.cores as f64 - self.others_cores).round().max(1.0) as usize
    }

    /// What disturbed the run, one phrase each; empty when the host was quiet.
    /// `threads`: the run's intra-op threads on this host (CPU runs), so that
    /// a count above the cores the others left free is named as the cause:
    /// libtorch's OpenMP team then waits for a thread that shares its core,
    /// and one busy core of two made a run 20 times slower, not 2.
    pub(crate) fn notes(&self, threads: Option<usize>) -> Vec<String> {
        let mut v = vec![];
        if self.others_cores >= BUSY_CORES {
            v.push(format!(
                "host busy: other processes used {:.1} of {} cores (load {:.1})",
                self.others_cores, self.cores, self.load1
            ));
            let free = self.free_cores();
            if let Some(t) = threads.filter(|&t| t > free) {
                v.push(format!(
                    "{t} intra-op threads on {free} free core{}: rerun with --threads {free}",
                    if free == 1 { "" } else { "s" }
                ));
            }
        }
        if self.steal_share >= STEAL_SHARE {
            v.push(format!("CPU steal {:.0}% of the window", self.steal_share * 100.0));
        }
        v
    }
}

/// What the GPU samples of the timed window (sampler seconds `t0`..`t1`)
/// show: throttling, and other processes' memory on a device.
pub(crate) fn gpu_notes(samples: &[DeviceSample], t0: f64, t1: f64) -> Vec<String> {
    let mut devices: Vec<&str> = samples.iter().map(|s| s.device.as_str()).collect();
    devices.sort();
    devices.dedup();
    let mut v = vec![];
    for d in devices {
        let w: Vec<&DeviceSample> =
            samples.iter().filter(|s| s.device == d && s.t >= t0 && s.t <= t1 && s.throttle.is_some()).collect();
        if w.is_empty() {
            continue;
        }
        for why in ["thermal", "power"] {
            let n = w.iter().filter(|s| s.throttle.as_deref().is_some_and(|t| t.contains(why))).count();
            let share = n as f64 / w.len() as f64;
            if share >= THROTTLED_SHARE {
                v.push(format!("{d} {why} throttled {:.0}% of the window", share * 100.0));
            }
        }
        let other = w.iter().filter_map(|s| s.other_procs_mb).fold(0.0, f64::max);
        if other >= OTHER_GPU_MB {
            v.push(format!("{d}: another process holds {:.1} GiB", other / 1024.0));
        }
    }
    v
}

/// CPU-bound processes for tests that need a disturbance they made
/// themselves (this module's and the integration tests'): `yes` into
/// nothing, each in a session of its own and outside the caller's process
/// tree (its parent shell exits at once), as another job's processes are,
/// ended by `timeout` after `secs` at the latest and killed on drop.
#[doc(hidden)]
pub struct Hogs(Vec<i32>);

impl Hogs {
    pub fn start(n: usize, secs: u32) -> Hogs {
        let spawn = || {
            // A background job of a non-interactive shell is no group leader,
            // so setsid makes it a session leader without forking: $! is its pid.
            let o = std::process::Command::new("sh")
                .args(["-c", &format!("setsid timeout {secs} yes >/dev/null 2>&1 </dev/null & echo $!")])
                .output()
                .expect("starting a busy process (setsid timeout yes)");
            String::from_utf8_lossy(&o.stdout).trim().parse::<i32>().expect("the busy process's pid")
        };
        Hogs((0..n).map(|_| spawn()).collect())
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        for &pid in &self.0 {
            // The whole group: killing `timeout` alone (SIGKILL is not
            // forwarded) would leave its `yes` running on, orphaned.
            // SAFETY: kill(2) on the session this struct started (pgid = pid).
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_count_above_the_machine_is_capped_to_it() {
        assert_eq!(capped_threads(3, 8), 3);
        assert_eq!(capped_threads(8, 8), 8);
        assert_eq!(capped_threads(100_000, 8), 8);
    }

    #[test]
    fn proc_stat_cpu_line() {
        let l = "cpu  100 5 50 800 20 1 2 30 7 0";
        assert_eq!(parse_cpu_line(l), Some((1008, 158, 30)));
        assert_eq!(parse_cpu_line("cpu0 1 2 3 4 5 6 7 8"), None);
    }

    /// Two /proc/stat readings one second apart on 2 cores, the run's own
    /// process group using `ours` CPU seconds in between.
    fn window(first: &str, second: &str, ours: f64) -> HostWindow {
        let snap = |line: &str, at: Instant, group_cpu: f64| {
            let (total, busy, steal) = parse_cpu_line(line).unwrap();
            HostSnapshot { at, total, busy, steal, group_cpu }
        };
        let t0 = Instant::now();
        let a = snap(first, t0, 10.0);
        let b = snap(second, t0 + std::time::Duration::from_secs(1), 10.0 + ours);
        host_window(&a, &b, 2).unwrap()
    }

    #[test]
    fn the_run_s_tree_is_its_root_and_everything_below() {
        // 1 → 10 → 11 → 12, 10 → 13; 20 beside them, 21 below 20.
        let procs = [(1, 0), (10, 1), (11, 10), (12, 11), (13, 10), (20, 1), (21, 20)];
        let t = descendants(10, &procs);
        let mut got: Vec<i64> = t.into_iter().collect();
        got.sort();
        assert_eq!(got, [10, 11, 12, 13]);
        let stat = "4242 (a (b) c) R 17 4242 4242 0 -1 4194304 100 0 0 0 250 50 7 3 20 0";
        assert_eq!(parse_stat_ticks(stat), Some((17, 300, 10)));
    }

    #[test]
    fn steal_is_named_once_and_never_counted_as_other_processes() {
        // The run used 1.28 cores' worth; the hypervisor stole 72 of 200
        // jiffies; nothing else ran (seen on this kind of VM: a dp run alone
        // was once called "host busy" because busy included steal).
        let w = window("cpu 1000 0 500 8000 0 0 0 100", "cpu 1100 0 528 8000 0 0 0 172", 1.28);
        assert!(w.others_cores < 0.01, "{w:?}");
        assert!((w.steal_share - 0.36).abs() < 1e-9, "{w:?}");
        assert_eq!(w.notes(Some(2)), ["CPU steal 36% of the window"]);
    }

    #[test]
    fn other_processes_are_what_ran_beside_the_run() {
        // 1.8 cores busy, the run's group used 0.6 of them: 1.2 cores were others'.
        let w = window("cpu 1000 0 500 8000 0 0 0 0", "cpu 1160 0 520 8020 0 0 0 0", 0.6);
        assert!((w.others_cores - 1.2).abs() < 1e-9, "{w:?}");
        assert_eq!(w.steal_share, 0.0);
        assert!(w.notes(None)[0].starts_with("host busy: other processes used 1.2 of 2 cores"), "{:?}", w.notes(None));
    }

    #[test]
    fn notes_only_for_a_disturbed_host() {
        let quiet = HostWindow { others_cores: 0.1, steal_share: 0.0, load1: 2.1, cores: 2 };
        assert!(quiet.notes(Some(2)).is_empty());
        let busy = HostWindow { others_cores: 1.4, steal_share: 0.08, load1: 4.2, cores: 2 };
        assert_eq!(
            busy.notes(None),
            ["host busy: other processes used 1.4 of 2 cores (load 4.2)", "CPU steal 8% of the window"]
        );
    }

    /// The thread count that did not fit the free cores is named, with the
    /// count that would have; a count that fits is not.
    #[test]
    fn threads_above_the_free_cores_are_named_with_the_count_that_fits() {
        let one_taken = HostWindow { others_cores: 1.0, steal_share: 0.0, load1: 3.0, cores: 2 };
        assert_eq!(one_taken.free_cores(), 1);
        assert_eq!(one_taken.notes(Some(2))[1], "2 intra-op threads on 1 free core: rerun with --threads 1");
        assert_eq!(one_taken.notes(Some(1)).len(), 1, "1 thread fits");
        let eight = HostWindow { others_cores: 2.6, steal_share: 0.0, load1: 9.0, cores: 8 };
        assert_eq!(eight.notes(Some(8))[1], "8 intra-op threads on 5 free cores: rerun with --threads 5");
        let all = HostWindow { others_cores: 2.0, steal_share: 0.0, load1: 9.0, cores: 2 };
        assert_eq!(all.free_cores(), 1, "never fewer than one");
    }

    #[test]
    fn gpu_throttling_and_other_processes_in_the_window() {
        let s = |t: f64, throttle: &str, other: Option<f64>| DeviceSample {
            t,
            device: "cuda:0".into(),
            throttle: Some(throttle.into()),
            other_procs_mb: other,
            ..Default::default()
        };
        let samples = [
            s(0.5, "thermal", None),
            s(1.0, "", None),
            s(1.5, "thermal", Some(12288.0)),
            s(2.0, "", None),
            s(9.0, "thermal", None),
        ];
        assert_eq!(
            gpu_notes(&samples, 1.0, 2.0),
            ["cuda:0 thermal throttled 33% of the window", "cuda:0: another process holds 12.0 GiB"]
        );
        assert!(gpu_notes(&samples[1..2], 0.0, 5.0).is_empty());
    }

    /// The detector's reading of a one-second window in which this process sleeps.
    fn others_over_a_second() -> f64 {
        let a = HostSnapshot::take().unwrap();
        std::thread::sleep(std::time::Duration::from_secs(1));
        host_window(&a, &HostSnapshot::take().unwrap(), crate::device::cpu_cores()).unwrap().others_cores
    }

    #[test]
    fn a_cpu_hog_this_test_starts_is_seen_against_the_baseline_it_measured() {
        if HostSnapshot::take().is_none() {
            eprintln!("skipped: no /proc/stat here");
            return;
        }
        // Whatever else the host runs is in the baseline; the hogs, one more
        // than the cores, add at least a core's worth to it on any host short
        // of one whose hypervisor takes most of the time (the margin is wide).
        let baseline = others_over_a_second();
        let hogs = super::Hogs::start(crate::device::cpu_cores() + 1, 20);
        std::thread::sleep(std::time::Duration::from_millis(200));
        let disturbed = others_over_a_second();
        drop(hogs);
        assert!(disturbed >= baseline + 0.4, "baseline {baseline:.2} cores, with hogs {disturbed:.2}");
    }

    #[test]
    fn a_snapshot_pair_of_this_machine() {
        let Some(a) = HostSnapshot::take() else { return };
        std::thread::sleep(std::time::Duration::from_millis(50));
        let b = HostSnapshot::take().unwrap();
        let w = host_window(&a, &b, 2).unwrap();
        assert!(w.others_cores >= 0.0 && (0.0..=1.0).contains(&w.steal_share), "{w:?}");
    }
}
