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
use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::runner::Status;

/// Test hook, off unless set: run this program instead of this gpubench for
/// each cell or probe (with the same arguments). The tests point it at a
/// script that kills itself or aborts for some cells, to check that the sweep
/// still writes their rows.
pub const CHILD_ENV: &str = "GPUBENCH_SWEEP_CHILD";

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Ctrl-C and SIGTERM set a flag that the sweep polls: it then stops the
/// current cell and its processes, and exits after saying how to resume.
pub fn install_interrupt_handler() {
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

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// The program each cell runs: this binary, unless the test hook says otherwise.
pub fn child_program() -> Result<PathBuf> {
    match std::env::var_os(CHILD_ENV).filter(|v| !v.is_empty()) {
        Some(p) => Ok(PathBuf::from(p)),
        None => std::env::current_exe().context("locating the gpubench binary to run the cells"),
    }
}

pub struct ChildSpec<'a> {
    pub program: &'a Path,
    pub args: Vec<OsString>,
    /// RLIMIT_DATA for the child, in bytes.
    pub mem_limit: Option<u64>,
    /// A descriptor the child (and its workers) inherit: the sweep's lock.
    pub inherit_fd: Option<i32>,
    pub timeout: Option<Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// Ctrl-C or SIGTERM: the sweep stopped the cell.
    Interrupted,
    /// Ran past the timeout and was stopped.
    TimedOut,
}

#[derive(Debug, Clone)]
pub struct ChildResult {
    pub pid: u32,
    pub exit: Exit,
    /// The last lines the child wrote to stderr.
    pub stderr_tail: Vec<String>,
    /// Largest resident set of any one process of the cell, MiB (sampled).
    pub peak_rss_mb: Option<f64>,
    /// Whether the kernel's OOM killer fired while the cell ran (None: the
    /// kernel does not say).
    pub oom_killer_fired: Option<bool>,
    pub secs: f64,
}

const TAIL_LINES: usize = 30;
const MAX_LINE: usize = 2000;

/// Runs the child to the end; `tick` is called every poll (progress bar).
pub fn run(spec: &ChildSpec, mut tick: impl FnMut()) -> Result<ChildResult> {
    let mut cmd = Command::new(spec.program);
    cmd.args(&spec.args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped()).process_group(0);
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
    let oom_before = oom_kill_count();
    let t0 = Instant::now();
    let mut child = cmd.spawn().with_context(|| format!("starting {}", spec.program.display()))?;
    let pgid = child.id() as libc::pid_t;
    let tail: Arc<Mutex<VecDeque<String>>> = Arc::new(Mutex::new(VecDeque::new()));
    let reader = {
        let err = child.stderr.take().expect("piped stderr");
        let tail = Arc::clone(&tail);
        std::thread::spawn(move || {
            for line in BufReader::new(err).split(b'\n').map_while(Result::ok) {
                let mut s = String::from_utf8_lossy(&line).into_owned();
                if s.trim().is_empty() {
                    continue;
                }
                if s.len() > MAX_LINE {
                    let mut cut = MAX_LINE;
                    while !s.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    s.truncate(cut);
                }
                let mut t = tail.lock().expect("lock");
                if t.len() == TAIL_LINES {
                    t.pop_front();
                }
                t.push_back(s);
            }
        })
    };
    let mut peak: Option<f64> = None;
    let mut last_sample = Instant::now() - Duration::from_secs(1);
    let exit = loop {
        if let Some(st) = child.try_wait().context("waiting for the cell's process")? {
            break match (st.code(), st.signal()) {
                (Some(c), _) => Exit::Code(c),
                (None, Some(s)) => Exit::Signal(s),
                _ => Exit::Code(1),
            };
        }
        let stop = if interrupted() {
            Some(Exit::Interrupted)
        } else if spec.timeout.is_some_and(|d| t0.elapsed() >= d) {
            Some(Exit::TimedOut)
        } else {
            None
        };
        if let Some(why) = stop {
            stop_group(pgid, &mut child);
            break why;
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
    let _ = reader.join();
    let oom_after = oom_kill_count();
    let stderr_tail = tail.lock().expect("lock").iter().cloned().collect();
    Ok(ChildResult {
        pid: pgid as u32,
        exit,
        stderr_tail,
        peak_rss_mb: peak,
        oom_killer_fired: oom_before.zip(oom_after).map(|(a, b)| b > a),
        secs: t0.elapsed().as_secs_f64(),
    })
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

/// The kernel's count of OOM kills since boot (/proc/vmstat, Linux ≥ 4.13).
fn oom_kill_count() -> Option<u64> {
    let t = std::fs::read_to_string("/proc/vmstat").ok()?;
    t.lines().find_map(|l| l.strip_prefix("oom_kill ")).and_then(|v| v.trim().parse().ok())
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
/// error. Out of memory when the kernel's OOM killer fired, when the process
/// said so (libtorch, Rust's allocator, C++'s bad_alloc), or when it could not
/// start a thread under `--mem-limit`.
pub fn classify_missing_row(r: &ChildResult, mem_limited: bool) -> (Status, String) {
    let text = r.stderr_tail.join("\n");
    let last =
        r.stderr_tail.iter().rev().map(|l| l.trim()).find(|l| !l.is_empty()).map(tidy_last_line).unwrap_or_default();
    let said_oom = crate::runner::is_oom(&text)
        || text.contains("memory allocation of")
        || text.contains("std::bad_alloc")
        || (mem_limited
            && (text.contains("failed to spawn thread") || text.contains("Resource temporarily unavailable")));
    let with_last = |s: String| if last.is_empty() { s } else { format!("{s}: {last}") };
    match r.exit {
        Exit::Signal(libc::SIGKILL) if r.oom_killer_fired == Some(true) => {
            (Status::Oom, "killed by the kernel's out-of-memory killer (SIGKILL) before writing a row".into())
        }
        Exit::Signal(libc::SIGKILL) => {
            let maybe = if r.oom_killer_fired.is_none() { " (perhaps the kernel's out-of-memory killer)" } else { "" };
            let s = if said_oom { Status::Oom } else { Status::Failed };
            (s, with_last(format!("killed by SIGKILL{maybe} before writing a row")))
        }
        Exit::Signal(sig) => {
            let s = if said_oom { Status::Oom } else { Status::Failed };
            (s, with_last(format!("killed by signal {sig} ({}) before writing a row", signal_name(sig))))
        }
        Exit::Code(c) => {
            let s = if said_oom { Status::Oom } else { Status::Failed };
            (s, with_last(format!("exited with code {c} without writing a row")))
        }
        Exit::TimedOut => (Status::Failed, with_last("stopped after the time limit (--cell-timeout)".into())),
        Exit::Interrupted => (Status::Failed, "interrupted".into()),
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

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGABRT => "SIGABRT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        _ => "signal",
    }
}

/// `2G`, `1.5GiB`, `512M`, `800MB`, `1048576`: bytes (binary units).
pub fn parse_size(flag: &str, s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1048576.0,
        "g" | "gb" | "gib" => 1073741824.0,
        "t" | "tb" | "tib" => 1099511627776.0,
        _ => f64::NAN,
    };
    let v: f64 = num.parse().unwrap_or(f64::NAN);
    let bytes = v * mult;
    if !bytes.is_finite() || bytes < 1.0 {
        return Err(crate::error::usage(format!("{flag} {s:?} is not a size; write it like 800M, 2G or 1.5GiB")));
    }
    Ok(bytes as u64)
}

/// Quotes an argument for a shell command line shown to the user.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_./,:=@%+-".contains(&b)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(exit: Exit, tail: &[&str], oom: Option<bool>) -> ChildResult {
        ChildResult {
            pid: 1,
            exit,
            stderr_tail: tail.iter().map(|s| s.to_string()).collect(),
            peak_rss_mb: Some(700.0),
            oom_killer_fired: oom,
            secs: 1.0,
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("--mem-limit", "2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("--mem-limit", "1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("--mem-limit", "800m").unwrap(), 800 << 20);
        assert_eq!(parse_size("--mem-limit", "4096").unwrap(), 4096);
        for bad in ["", "x", "2X", "-1G", "0"] {
            assert_eq!(crate::error::exit_code(&parse_size("--mem-limit", bad).unwrap_err()), 2, "{bad}");
        }
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

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("--gpus"), "--gpus");
        assert_eq!(shell_quote("0,1"), "0,1");
        assert_eq!(shell_quote("V100 box"), "'V100 box'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }
}
