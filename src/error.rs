//! Two kinds of failure, told apart by exit code: usage errors (2) are the
//! user's to fix on the command line; everything else is a run-time error (1).

use std::fmt;

/// A problem with the command line or its inputs. `main` exits with 2 for it.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Builds a usage error; the message should name the problem and the fix.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(msg.into()))
}

/// Exit code for an error chain: 2 if any link is a usage error, else 1.
pub fn exit_code(err: &anyhow::Error) -> i32 {
    if err.chain().any(|e| e.downcast_ref::<UsageError>().is_some()) {
        2
    } else {
        1
    }
}

/// Returns early with a usage error.
#[macro_export]
macro_rules! bail_usage {
    ($($arg:tt)*) => { return Err($crate::error::usage(format!($($arg)*))) };
}

/// The error chain on one line: "outer: inner: root cause", each link once,
/// with libtorch's multi-line messages folded to their first line.
pub fn one_line(err: &anyhow::Error) -> String {
    let mut parts: Vec<String> = vec![];
    for e in err.chain() {
        let s = e.to_string();
        let first = s.lines().next().unwrap_or("").trim().to_string();
        if !first.is_empty() && !parts.iter().any(|p| p.contains(&first)) {
            parts.push(first);
        }
    }
    parts.join(": ")
}

/// The message carried by a panic payload (tch panics with libtorch's error).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else {
        "unknown panic".to_string()
    }
}
