//! Two kinds of failure, told apart by exit code: usage errors (2) are the
//! user's to fix on the command line; everything else is a run-time error (1).

use std::fmt;

/// A problem with the command line or its inputs. `main` exits with 2 for it.
#[derive(Debug)]
pub(crate) struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Builds a usage error; the message should name the problem and the fix.
pub(crate) fn usage(msg: impl Into<String>) -> anyhow::Error {
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

/// The message carried by a panic payload. tch's infallible ops panic with
/// "called `Result::unwrap()` on an `Err` value: Torch(\"…\")": libtorch's
/// own message is what a row should say (a CUDA out-of-memory inside a
/// module's forward comes this way).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let s = if let Some(s) = payload.downcast_ref::<String>() {
        s.as_str()
    } else if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else {
        return "unknown panic".to_string();
    };
    let s = s.strip_prefix("called `Result::unwrap()` on an `Err` value: ").unwrap_or(s);
    match s.strip_prefix("Torch(\"") {
        Some(inner) => inner.strip_suffix("\")").unwrap_or(inner).to_string(),
        None => s.to_string(),
    }
}

/// Runs `f`, turning a panic from libtorch (tch panics on C++ errors) into an error.
pub(crate) fn guarded<T>(f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(anyhow::anyhow!(panic_message(&*p))),
    }
}

/// Out-of-memory errors: the CUDA caching allocator's, the CPU allocator's,
/// and cuBLAS's or cuDNN's when a handle or workspace cannot be allocated
/// near the memory limit.
pub(crate) fn is_oom(msg: &str) -> bool {
    let m = msg.to_ascii_lowercase();
    m.contains("out of memory")
        || m.contains("can't allocate memory")
        || m.contains("cannot allocate memory")
        || m.contains("cublas_status_alloc_failed")
        || m.contains("cudnn_status_alloc_failed")
}

/// `msg` with the words `is_oom` reads as the device running out replaced,
/// for a failure that is not that (page-locked host memory, say).
pub(crate) fn without_oom_words(msg: &str) -> String {
    let first = msg.lines().next().unwrap_or("");
    first.replace("out of memory", "no page-locked memory left").replace("Out of memory", "No page-locked memory left")
}

/// A failed run's error for its row: the chain on one line, without the C++
/// backtrace and source location that tch's panic messages carry (escaped).
pub(crate) fn failure_message(err: &anyhow::Error) -> String {
    let mut msg = one_line(err);
    for cut in ["\\nframe #", "\\nException raised from"] {
        if let Some(i) = msg.find(cut) {
            msg.truncate(i);
        }
    }
    msg.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oom_messages_are_recognised() {
        assert!(is_oom("CUDA out of memory. Tried to allocate 2.00 GiB"));
        assert!(is_oom("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes"));
        assert!(is_oom("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"));
        assert!(is_oom("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"));
        assert!(!is_oom("shape mismatch"));
        // A failed pin (G11) says what ran out, and is not read as the GPU's OOM.
        let pin = without_oom_words("CUDA error: out of memory\nmore");
        assert!(!is_oom(&pin) && pin.contains("page-locked"), "{pin}");
    }

    #[test]
    fn failures_are_one_line_without_the_cpp_backtrace() {
        let e = anyhow::anyhow!("shape mismatch\\nframe #0: c10::Error").context("step 3");
        assert_eq!(failure_message(&e), "step 3: shape mismatch");
        let p = guarded(|| -> anyhow::Result<()> { panic!("libtorch said no") }).unwrap_err();
        assert_eq!(p.to_string(), "libtorch said no");
    }

    #[cfg(feature = "torch")]
    #[test]
    fn a_tch_panic_reads_as_libtorchs_own_message() {
        // As the first H200 run wrote it: an OOM inside tch's forward.
        let p = guarded(|| -> anyhow::Result<()> {
            // What Result::unwrap on tch's error panics with.
            let e = tch::TchError::Torch(
                "CUDA out of memory. Tried to allocate 6.12 GiB.\nException raised from malloc at x.cpp:1574".into(),
            );
            panic!("called `Result::unwrap()` on an `Err` value: {e:?}")
        })
        .unwrap_err();
        assert_eq!(failure_message(&p), "CUDA out of memory. Tried to allocate 6.12 GiB.");
    }
}
