//! `gpubench run`: dispatch on the process's role, once its configuration
//! is built (`cli::run::job`).
use anyhow::Result;

use crate::bench::ddp::{launcher, worker};
use crate::bench::session::{self, LocalRun};
use crate::bench::sinks::Sinks;
use crate::bench::Role;
use crate::config::{InitWriter, RunConfig, Threads};
use crate::error::guarded;
use crate::init::{default_data_seed, save_init, write_start, Start};

pub(crate) fn run(role: Role, mut cfg: RunConfig) -> Result<i32> {
    // `--threads auto` is measured here, where the run starts, and a count
    // the machine cannot use is capped here: once, whichever command line,
    // sweep cell or rank this process is.
    cfg.host.threads = cfg.host.threads.map(|t| Threads::Count(crate::metrics::interference::resolve_threads(t)));
    if role != Role::Pytorch {
        // `--save-init`, written by the one process of the job that
        // `cli::run::job` chose (the reference writes its own file).
        if let (Some(path), true) = (&cfg.init.save, cfg.init.writer != InitWriter::Nobody) {
            write_start(&cfg, path)?;
        }
    }
    match role {
        Role::Pytorch => crate::reference::run(&cfg),
        Role::Local => local(&cfg),
        Role::Launcher => launcher::launch(&cfg),
        Role::Rank(env) => worker::run(&cfg, &env),
    }
}

/// The `write-init` child `init::write_start` starts: the weights, nothing else.
pub(crate) fn write_init_only(cfg: &RunConfig, path: &std::path::Path) -> Result<i32> {
    guarded(|| save_init(cfg, path, default_data_seed(cfg.workload.seed)))?;
    Ok(0)
}

/// single and dp: the whole run in this process.
fn local(cfg: &RunConfig) -> Result<i32> {
    let sinks = Sinks::new(cfg, None);
    if let Some(t) = cfg.host.count() {
        tch::set_num_threads(t as i32);
    } else if cfg.placement.devices.kind == crate::device::DeviceKind::Cuda {
        // The host threads of a GPU run stage its batches: a few, not every
        // core (`device::default_threads`, the rule serving follows too).
        tch::set_num_threads(crate::device::default_threads(cfg.placement.devices.kind, crate::device::cpu_cores(), 1) as i32);
    }
    if cfg.output.talks() {
        eprintln!("gpubench: {} on {}: {}", cfg.strategy.name(), cfg.placement.devices.describe(), cfg.batch_phrase());
    }
    let start = Start::load(cfg)?;
    session::run(cfg, &mut LocalRun, &start, &sinks)
}
