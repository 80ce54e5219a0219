//! One cell, one child process: `gpubench run … --out FILE --quiet` of this
//! same binary, watched from the outside.
//!
//! - The child leads its own process group (ddp's workers join it), so
//!   Ctrl-C reaches the sweep only, and the sweep stops the whole cell with
//!   one `kill(-pgid)`.
//! - It gets SIGKILL if the sweep dies (`PR_SET_PDEATHSIG`; ddp's workers
//!   already exit when their launcher goes), so a `kill -9` of the sweep
//!   leaves no cell behind that could append a row after a `--resume`.
//! - `--mem-limit` caps its data memory (RLIMIT_DATA, inherited by ddp's
//!   workers): an allocation beyond it fails like a full device, which is how
//!   the tests force an out-of-memory error on the CPU.
//! - The sweep samples the resident memory of the cell's processes, so a row
//!   it has to write itself (the child died without one) still says how much
//!   memory was in use.
use anyhow::{Context, Result};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::proc::{self, Ended, Exit};
use crate::results::Status;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    SIGNAL.store(sig, Ordering::SeqCst);
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Ctrl-C and SIGTERM set a flag that the sweep polls: it then stops the
/// current cell and its processes, and exits after saying how to resume.
pub(crate) fn install_interrupt_handler() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
    }
}

pub(crate) fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// The signal that interrupted this process (SIGINT or SIGTERM), once one has.
pub(crate) fn interrupt_signal() -> Option<libc::c_int> {
    Some(SIGNAL.load(Ordering::SeqCst)).filter(|&s| s != 0)
}

/// The program each cell runs: this binary, unless the test hook
/// `crate::internal::Hook::SweepChild` names another.
pub(crate) fn child_program() -> Result<PathBuf> {
    match crate::internal::Hook::SweepChild.get() {
        Some(p) => Ok(PathBuf::from(p)),
        None => std::env::current_exe().context("locating the gpubench binary to run the cells"),
    }
}

pub(crate) struct ChildSpec<'a> {
    pub program: &'a Path,
    pub args: Vec<OsString>,
    /// Variables set for the child, on top of this process's environment.
    pub env: Vec<(&'static str, String)>,
    /// RLIMIT_DATA for the child, in bytes.
    pub mem_limit: Option<u64>,
    /// A descriptor the child (and its workers) inherit: the sweep's lock.
    pub inherit_fd: Option<i32>,
    pub timeout: Option<Duration>,
}

/// How a cell's process ended, and what the sweep saw of it.
#[derive(Debug, Clone)]
pub(crate) struct ChildResult {
    pub ended: Ended,
    /// Largest resident set of any one process of the cell, MiB (sampled).
    pub peak_rss_mb: Option<f64>,
}

const TAIL_LINES: usize = 30;

/// Runs the child to the end; `tick` is called every poll (progress bar).
pub(crate) fn run(spec: &ChildSpec, mut tick: impl FnMut()) -> Result<ChildResult> {
    let mut cmd = Command::new(spec.program);
    cmd.args(&spec.args).envs(spec.env.iter().map(|(k, v)| (k, v))).stdout(Stdio::null()).process_group(0);
    let parent = std::process::id() as libc::pid_t;
    let limit = spec.mem_limit;
    let fd = spec.inherit_fd;
    // SAFETY: only async-signal-safe calls (prctl, getppid, setrlimit, fcntl,
    // _exit) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1); // the sweep died before prctl took effect
            }
            if let Some(bytes) = limit {
                let r = libc::rlimit { rlim_cur: bytes as libc::rlim_t, rlim_max: bytes as libc::rlim_t };
                if libc::setrlimit(libc::RLIMIT_DATA, &r) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(fd) = fd {
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let t0 = Instant::now();
    let mut child =
        proc::spawn(&mut cmd, None, TAIL_LINES).with_context(|| format!("starting {}", spec.program.display()))?;
    let pgid = child.id() as libc::pid_t;
    let mut peak: Option<f64> = None;
    let mut last_sample = Instant::now() - Duration::from_secs(1);
    let stopped = loop {
        if child.try_wait().context("waiting for the cell's process")?.is_some() {
            break None;
        }
        let stop = if interrupted() {
            Some(Exit::Interrupted)
        } else if spec.timeout.is_some_and(|d| t0.elapsed() >= d) {
            Some(Exit::TimedOut)
        } else {
            None
        };
        if let Some(why) = stop {
            stop_group(pgid, child.child_mut());
            break Some(why);
        }
        if last_sample.elapsed() >= Duration::from_millis(250) {
            if let Some(mb) = group_max_rss_mb(pgid) {
                peak = Some(peak.map_or(mb, |p: f64| p.max(mb)));
            }
            last_sample = Instant::now();
        }
        tick();
        std::thread::sleep(Duration::from_millis(50));
    };
    // Leftover workers of the cell (there should be none) go with it.
    // SAFETY: plain kill(2) on the cell's own process group.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    Ok(ChildResult { ended: child.finish(stopped), peak_rss_mb: peak })
}

/// SIGTERM to the cell's process group, SIGKILL after two seconds.
fn stop_group(pgid: libc::pid_t, child: &mut std::process::Child) {
    // SAFETY: kill(2) on the cell's own process group.
    unsafe {
        libc::kill(-pgid, libc::SIGTERM);
    }
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(2) {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: as above.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
    let _ = child.wait();
}

/// Largest resident set among the processes of group `pgid`, in MiB.
fn group_max_rss_mb(pgid: libc::pid_t) -> Option<f64> {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as f64;
    let mut best: Option<f64> = None;
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = e.file_name();
        let Some(pid) = name.to_str().filter(|s| s.bytes().all(|b| b.is_ascii_digit())) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        if let Some((pgrp, rss_pages)) = parse_stat(&stat) {
            if pgrp == pgid as i64 {
                let mb = rss_pages as f64 * page / 1048576.0;
                best = Some(best.map_or(mb, |b| b.max(mb)));
            }
        }
    }
    best
}

/// (pgrp, rss in pages) from a /proc/PID/stat line; the command name may
/// contain spaces and parentheses, so fields are counted after the last ')'.
fn parse_stat(s: &str) -> Option<(i64, i64)> {
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // fields 3.. of proc(5): state=3, ppid=4, pgrp=5, …, rss=24
    Some((f.get(2)?.parse().ok()?, f.get(21)?.parse().ok()?))
}

/// Why a cell's process ended without writing a row, as a row's status and
/// error. Out of memory when the kernel's OOM killer fired or the process
/// said so (`Ended::looks_oom`), or when it could not start a thread under
/// `--mem-limit`.
pub(crate) fn classify_missing_row(r: &ChildResult, mem_limited: bool) -> (Status, String) {
    let e = &r.ended;
    let text = e.tail_text();
    let last = e.tail.iter().rev().map(|l| l.trim()).find(|l| !l.is_empty()).map(tidy_last_line).unwrap_or_default();
    let said_oom = e.looks_oom()
        || (mem_limited
            && (text.contains("failed to spawn thread") || text.contains("Resource temporarily unavailable")));
    let with_last = |s: String| if last.is_empty() { s } else { format!("{s}: {last}") };
    match e.exit {
        Exit::Signal(libc::SIGKILL) if e.oom_killer_fired == Some(true) => {
            (Status::Oom, format!("{} before writing a row", e.how()))
        }
        Exit::Code(_) => {
            let s = if said_oom { Status::Oom } else { Status::Failed };
            (s, with_last(format!("{} without writing a row", e.how())))
        }
        Exit::TimedOut => (Status::Failed, with_last("stopped after the time limit (--cell-timeout)".into())),
        Exit::Interrupted => (Status::Failed, "interrupted".into()),
        Exit::Signal(_) => {
            let s = if said_oom { Status::Oom } else { Status::Failed };
            (s, with_last(format!("{} before writing a row", e.how())))
        }
    }
}

/// `error: X` → `X`; ddp's forwarded `[rank 1] error: X` → `rank 1: X`.
fn tidy_last_line(l: &str) -> String {
    if let Some(rest) = l.strip_prefix("[rank ") {
        if let Some((n, msg)) = rest.split_once("] ") {
            return format!("rank {n}: {}", msg.trim_start_matches("error: "));
        }
    }
    l.trim_start_matches("error: ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(exit: Exit, tail: &[&str], oom: Option<bool>) -> ChildResult {
        let ended = Ended {
            pid: 1,
            exit,
            tail: tail.iter().map(|s| s.to_string()).collect(),
            oom_killer_fired: oom,
            secs: 1.0,
        };
        ChildResult { ended, peak_rss_mb: Some(700.0) }
    }

    #[test]
    fn proc_stat_fields_after_the_name() {
        let s = "1234 (gpu bench (x)) S 1 1230 1230 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 3 0 99 123456 789 18446744073709551615";
        assert_eq!(parse_stat(s), Some((1230, 789)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn rows_for_children_that_wrote_none() {
        let (s, e) = classify_missing_row(&result(Exit::Signal(9), &[], Some(true)), false);
        assert_eq!(s, Status::Oom);
        assert!(e.contains("out-of-memory killer"), "{e}");
        let (s, e) = classify_missing_row(&result(Exit::Signal(9), &["step 3"], Some(false)), false);
        assert_eq!((s, e.as_str()), (Status::Failed, "killed by SIGKILL before writing a row: step 3"));
        let (s, _) = classify_missing_row(&result(Exit::Signal(9), &[], None), false);
        assert_eq!(s, Status::Failed);
        let (s, e) =
            classify_missing_row(&result(Exit::Signal(6), &["memory allocation of 80 bytes failed"], None), false);
        assert_eq!(s, Status::Oom);
        assert!(e.starts_with("killed by signal 6 (SIGABRT)"), "{e}");
        let spawn = "error: internal error: failed to spawn thread: Os { code: 11 }";
        assert_eq!(classify_missing_row(&result(Exit::Code(1), &[spawn], None), true).0, Status::Oom);
        let (s, e) = classify_missing_row(&result(Exit::Code(1), &[spawn], None), false);
        assert_eq!(s, Status::Failed);
        assert_eq!(
            e,
            "exited with code 1 without writing a row: internal error: failed to spawn thread: Os { code: 11 }"
        );
        let ddp = "[rank 1] error: DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 bytes";
        let (s, e) = classify_missing_row(&result(Exit::Code(1), &["[rank 0] gpubench: ddp", ddp], None), false);
        assert_eq!(s, Status::Oom);
        assert!(
            e.ends_with("row: rank 1: DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 bytes"),
            "{e}"
        );
    }
}
