//! How many CPU workers this host can hold: one rule for every command that
//! starts replicas, ranks or serving processes on the CPU (`run`, `infer`,
//! `allreduce`, `sweep`, `max-batch`), checked before any of them starts.
use anyhow::Result;

use crate::error::usage;

/// What a command starts for each of its `--cpu N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Workers {
    /// Threads in one process (dp's replicas, infer's replicas): only the
    /// cores count.
    Threads,
    /// One libtorch process each (ddp ranks, all-reduce ranks, infer's
    /// processes, PyTorch's reference): the cores and the memory count.
    Processes,
}

/// libtorch's own resident memory per process, about (measured here: 0.4 to
/// 0.6 GiB per rank of a small model).
const PROCESS_MB: f64 = 512.0;
/// More workers per core than this measure the scheduler, not a strategy.
const PER_CORE: usize = 8;

/// The rule itself, on given cores and available memory (MiB): refused when
/// the workers far outnumber the cores or would not fit in memory; a
/// warning (returned) when they outnumber the cores.
pub(crate) fn judge(n: usize, workers: Workers, cores: usize, mem_mb: Option<f64>) -> Result<Option<String>> {
    if n > PER_CORE * cores {
        return Err(usage(format!(
            "--cpu {n}: {n} replicas or ranks on {cores} cores would measure contention, not a strategy; use at most \
             {} (8 per core), ideally no more than {cores}",
            PER_CORE * cores
        )));
    }
    if let (Workers::Processes, Some(mem)) = (workers, mem_mb) {
        let fit = (mem / PROCESS_MB).floor() as usize;
        if n > fit {
            return Err(usage(format!(
                "--cpu {n} starts {n} libtorch processes of about {:.1} GiB each, but {:.1} GiB are available; use at \
                 most {fit}",
                PROCESS_MB / 1024.0,
                mem / 1024.0
            )));
        }
    }
    Ok((n > cores).then(|| {
        format!("gpubench: warning: --cpu {n} runs more replicas or ranks than the {cores} cores; they will contend for them")
    }))
}

/// `judge` on this host: its cores and the memory available now. A warning
/// is printed unless `quiet`.
pub(crate) fn check_cpu_workers(n: usize, workers: Workers, quiet: bool) -> Result<()> {
    if n <= 1 {
        return Ok(());
    }
    if let Some(w) = judge(n, workers, super::cpu_cores(), available_mb())? {
        if !quiet {
            eprintln!("{w}");
        }
    }
    Ok(())
}

/// MemAvailable from /proc/meminfo, MiB.
fn available_mb() -> Option<f64> {
    let t = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: f64 =
        t.lines().find_map(|l| l.strip_prefix("MemAvailable:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_must_fit_the_machine() {
        assert_eq!(judge(2, Workers::Processes, 2, Some(20_000.0)).unwrap(), None);
        assert!(judge(4, Workers::Processes, 2, Some(20_000.0)).unwrap().unwrap().contains("warning"));
        let e = judge(1000, Workers::Processes, 2, Some(20_000.0)).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 2);
        assert!(e.to_string().contains("8 per core"), "{e}");
        let e = judge(12, Workers::Processes, 16, Some(4096.0)).unwrap_err();
        assert!(e.to_string().contains("use at most 8"), "{e}");
        // Replicas share one process: only the cores count.
        assert!(judge(12, Workers::Threads, 16, Some(4096.0)).unwrap().is_none());
        // Unknown memory: the cores alone decide.
        assert!(judge(12, Workers::Processes, 16, None).unwrap().is_none());
    }
}
