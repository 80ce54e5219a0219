//! `gpubench run`: dispatch on the process's role, once its configuration
//! is built (`cli::run::job`).
use anyhow::Result;

use crate::bench::ddp::{launcher, worker};
use crate::bench::session::{self, LocalRun};
use crate::bench::sinks::Sinks;
use crate::bench::Role;
use crate::config::RunConfig;
use crate::error::guarded;
use crate::init::{default_data_seed, save_init, write_start, Start, WRITE_INIT_ENV};

pub fn run(role: Role, cfg: RunConfig) -> Result<i32> {
    session::set_process_env(&cfg);
    if let Some(path) = std::env::var_os(WRITE_INIT_ENV) {
        // The child `init::write_start` starts: the weights, nothing else.
        guarded(|| save_init(&cfg, std::path::Path::new(&path), default_data_seed(cfg.seed)))?;
        return Ok(0);
    }
    match role {
        // The reference writes (or copies) --save-init itself.
        Role::Pytorch => crate::reference::run(&cfg),
        Role::Local => {
            write_init(&cfg)?;
            local(&cfg)
        }
        Role::Launcher => {
            write_init(&cfg)?;
            launcher::launch(&cfg)
        }
        Role::Rank(env) => {
            // One process of the job writes --save-init: our launcher, or
            // rank 0 of a job torchrun or Slurm started.
            if !env.ours && env.rank == 0 {
                write_init(&cfg)?;
            }
            worker::run(&cfg, &env)
        }
    }
}

/// `--save-init`: the initial weights gpubench builds for the run's seed.
fn write_init(cfg: &RunConfig) -> Result<()> {
    if let Some(path) = &cfg.init.save {
        write_start(cfg, path)?;
    }
    Ok(())
}

/// single and dp: the whole run in this process.
fn local(cfg: &RunConfig) -> Result<i32> {
    let sinks = Sinks::new(cfg, None);
    sinks.check()?;
    if let Some(t) = cfg.threads {
        tch::set_num_threads(t as i32);
    }
    if cfg.talks() {
        eprintln!(
            "gpubench: {} on {}: batch {} per device × {} = {} global",
            cfg.strategy.name(),
            cfg.devices.describe(),
            cfg.batch_per_device,
            cfg.devices.len(),
            cfg.global_batch()
        );
    }
    let start = Start::load(cfg)?;
    session::run(cfg, &mut LocalRun, &start, &sinks)
}
