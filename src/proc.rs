//! Child processes, watched: the ddp launcher's workers, the PyTorch
//! reference and each sweep cell all start through [`spawn`], which pipes the
//! child's stderr, forwards it line by line (with a prefix, or not at all) and
//! keeps its last lines; and they all say how a child ended the same way,
//! through [`Ended::how`].
//!
//! Lines are split on bytes and read lossily, so a child that writes invalid
//! UTF-8 is still drained (a reader that stopped would leave the child
//! blocked on a full pipe).
use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    Code(i32),
    Signal(i32),
    /// Ctrl-C or SIGTERM: the parent stopped it.
    Interrupted,
    /// Ran past its time limit and was stopped.
    TimedOut,
}

impl Exit {
    pub(crate) fn of(st: ExitStatus) -> Exit {
        use std::os::unix::process::ExitStatusExt;
        match (st.code(), st.signal()) {
            (Some(c), _) => Exit::Code(c),
            (None, Some(s)) => Exit::Signal(s),
            _ => Exit::Code(1),
        }
    }

    /// A shell's view of the exit: the code, or 128 + the signal.
    pub(crate) fn code(self) -> i32 {
        match self {
            Exit::Code(c) => c,
            Exit::Signal(s) => 128 + s,
            Exit::Interrupted => 130,
            Exit::TimedOut => 124,
        }
    }

    pub(crate) fn success(self) -> bool {
        self == Exit::Code(0)
    }
}

/// Lines longer than this are cut in the kept tail (a child can print a
/// whole tensor on one line).
const MAX_LINE: usize = 2000;

/// A running child whose stderr is being read.
pub(crate) struct Watched {
    child: Child,
    tail: Arc<Mutex<VecDeque<String>>>,
    reader: Option<JoinHandle<()>>,
    oom_kills_before: Option<u64>,
    started: Instant,
}

/// What is known once a child has ended.
#[derive(Debug, Clone)]
pub(crate) struct Ended {
    pub pid: u32,
    pub exit: Exit,
    /// Its last non-empty stderr lines, oldest first.
    pub tail: Vec<String>,
    /// Whether the kernel's OOM killer fired while it ran (None: the kernel
    /// does not say).
    pub oom_killer_fired: Option<bool>,
    pub secs: f64,
}

/// Starts `cmd` with stdin closed and stderr piped (stdout is the caller's
/// choice). Each stderr line is printed to our stderr behind `forward`'s
/// prefix when it is Some; the last `keep` non-empty lines are kept.
pub(crate) fn spawn(cmd: &mut Command, forward: Option<String>, keep: usize) -> std::io::Result<Watched> {
    let oom_kills_before = oom_kill_count();
    let started = Instant::now();
    let mut child = cmd.stdin(Stdio::null()).stderr(Stdio::piped()).spawn()?;
    let err = child.stderr.take().expect("piped stderr");
    let tail: Arc<Mutex<VecDeque<String>>> = Arc::new(Mutex::new(VecDeque::new()));
    let kept = Arc::clone(&tail);
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(err).split(b'\n').map_while(Result::ok) {
            let mut s = String::from_utf8_lossy(&line).into_owned();
            if let Some(p) = &forward {
                eprintln!("{p}{s}");
            }
            if s.trim().is_empty() || keep == 0 {
                continue;
            }
            if s.len() > MAX_LINE {
                let mut cut = MAX_LINE;
                while !s.is_char_boundary(cut) {
                    cut -= 1;
                }
                s.truncate(cut);
            }
            let mut t = kept.lock().expect("lock");
            if t.len() == keep {
                t.pop_front();
            }
            t.push_back(s);
        }
    });
    Ok(Watched { child, tail, reader: Some(reader), oom_kills_before, started })
}

impl Watched {
    pub(crate) fn id(&self) -> u32 {
        self.child.id()
    }

    /// The child's exit, if it has exited.
    pub(crate) fn try_wait(&mut self) -> std::io::Result<Option<Exit>> {
        Ok(self.child.try_wait()?.map(Exit::of))
    }

    /// SIGKILL, then reap.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Reaps the child (a no-op if that was done), waits for the rest of its
    /// stderr and says how it ended; `exit` overrides what the child itself
    /// reported (a parent that stopped it knows why).
    pub(crate) fn finish(mut self, exit: Option<Exit>) -> Ended {
        let own = self.child.wait().map(Exit::of).unwrap_or(Exit::Code(1));
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        let after = oom_kill_count();
        Ended {
            pid: self.child.id(),
            exit: exit.unwrap_or(own),
            tail: self.tail.lock().expect("lock").iter().cloned().collect(),
            oom_killer_fired: self.oom_kills_before.zip(after).map(|(a, b)| b > a),
            secs: self.started.elapsed().as_secs_f64(),
        }
    }

    /// Waits for the child to end.
    pub(crate) fn wait(self) -> Ended {
        self.finish(None)
    }

    /// The child itself, for what the caller does beyond this (signals to its
    /// process group).
    pub(crate) fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Ended {
    /// How it ended, in words: "exited with code 1", "killed by signal 6
    /// (SIGABRT)", "killed by the kernel's out-of-memory killer (SIGKILL)".
    pub(crate) fn how(&self) -> String {
        match self.exit {
            Exit::Code(c) => format!("exited with code {c}"),
            Exit::Signal(libc::SIGKILL) => match self.oom_killer_fired {
                Some(true) => "killed by the kernel's out-of-memory killer (SIGKILL)".into(),
                Some(false) => "killed by SIGKILL".into(),
                None => "killed by SIGKILL (perhaps the kernel's out-of-memory killer)".into(),
            },
            Exit::Signal(s) => format!("killed by signal {s} ({})", signal_name(s)),
            Exit::TimedOut => "stopped after the time limit".into(),
            Exit::Interrupted => "interrupted".into(),
        }
    }

    /// Its stderr tail, as one text.
    pub(crate) fn tail_text(&self) -> String {
        self.tail.join("\n")
    }

    /// Whether it ran out of memory, as far as can be told: the OOM killer
    /// took it, or it said so (libtorch's allocators, Rust's allocator, C++'s
    /// bad_alloc).
    pub(crate) fn looks_oom(&self) -> bool {
        let text = self.tail_text();
        (self.exit == Exit::Signal(libc::SIGKILL) && self.oom_killer_fired == Some(true))
            || crate::error::is_oom(&text)
            || text.contains("memory allocation of")
            || text.contains("std::bad_alloc")
    }
}

pub(crate) fn signal_name(sig: i32) -> &'static str {
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

/// The kernel's count of OOM kills since boot (/proc/vmstat, Linux ≥ 4.13).
pub(crate) fn oom_kill_count() -> Option<u64> {
    let t = std::fs::read_to_string("/proc/vmstat").ok()?;
    t.lines().find_map(|l| l.strip_prefix("oom_kill ")).and_then(|v| v.trim().parse().ok())
}

/// Quotes an argument for a shell command line shown to the user.
pub(crate) fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_./,:=@%+-".contains(&b)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("--gpus"), "--gpus");
        assert_eq!(shell_quote("0,1"), "0,1");
        assert_eq!(shell_quote("V100 box"), "'V100 box'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]).stdout(Stdio::null());
        c
    }

    #[test]
    fn keeps_the_last_non_empty_lines_and_the_exit() {
        let w = spawn(&mut sh("for i in 1 2 3 4; do echo line$i >&2; echo >&2; done; exit 3"), None, 2).unwrap();
        let e = w.wait();
        assert_eq!(e.exit, Exit::Code(3));
        assert_eq!(e.tail, ["line3", "line4"]);
        assert_eq!(e.how(), "exited with code 3");
    }

    #[test]
    fn signals_and_invalid_utf8_are_described_and_drained() {
        let w = spawn(&mut sh("printf 'bad \\377 byte\\n' >&2; kill -ABRT $$"), None, 5).unwrap();
        let e = w.wait();
        assert_eq!(e.exit, Exit::Signal(libc::SIGABRT));
        assert_eq!(e.exit.code(), 134);
        assert_eq!(e.how(), "killed by signal 6 (SIGABRT)");
        assert_eq!(e.tail, ["bad \u{fffd} byte"]);
    }

    #[test]
    fn sigkill_names_the_oom_killer_only_when_the_kernel_says_so() {
        let mut e = Ended {
            pid: 1,
            exit: Exit::Signal(libc::SIGKILL),
            tail: vec!["std::bad_alloc".into()],
            oom_killer_fired: Some(true),
            secs: 0.0,
        };
        assert_eq!(e.how(), "killed by the kernel's out-of-memory killer (SIGKILL)");
        assert!(e.looks_oom());
        e.oom_killer_fired = None;
        assert!(e.how().contains("perhaps"));
        e.tail = vec!["step 3".into()];
        assert!(!e.looks_oom());
    }
}
