//! The entry: parse the command line, turn each subcommand's arguments into
//! its configuration (`configure`: every check that needs no work, once),
//! and hand it to its command (`execute`). gpubench's own child processes
//! (`internal::Role`) come through here too, as hidden subcommands, so a
//! child builds its configuration exactly as its parent did.
//!
//! `run_from` is the whole program on an argument list; the tests call it
//! in-process to check parsing and validation without starting a process.
use anyhow::Result;
use std::ffi::OsString;
use std::path::PathBuf;

#[cfg(feature = "torch")]
use crate::bench::{ddp::env::DistEnv, Role};
use crate::cli::{Cli, Command};
use crate::commands;
use crate::commands::report::Outputs;
#[cfg(feature = "torch")]
use crate::config::{AllreduceConfig, InferConfig, PredictConfig, RunConfig};
use crate::error::usage;

/// A subcommand ready to run: its configuration, built and checked.
pub enum Job {
    /// `--help` or `--version`: clap prints it.
    Print(clap::Error),
    Info {
        json: bool,
    },
    #[cfg(feature = "torch")]
    /// `run`, or one rank of a ddp job, in the role this process has.
    Run(Role, Box<RunConfig>),
    #[cfg(feature = "torch")]
    /// `validate`: the line's configuration was built; nothing runs.
    Validated(String),
    #[cfg(feature = "torch")]
    /// The `write-init` child: the run's initial weights to a file.
    WriteInit(Box<RunConfig>, PathBuf),
    #[cfg(feature = "torch")]
    Infer(Box<InferConfig>),
    #[cfg(feature = "torch")]
    /// The `infer-worker` child: worker `k` of `p`, its load in `dir`.
    InferWorker {
        cfg: Box<InferConfig>,
        k: u32,
        p: u32,
        dir: PathBuf,
    },
    #[cfg(feature = "torch")]
    Allreduce(Option<DistEnv>, Box<AllreduceConfig>),
    #[cfg(feature = "torch")]
    Predict(Box<PredictConfig>),
    Collect(std::path::PathBuf, std::path::PathBuf),
    #[cfg(feature = "torch")]
    Peak(Box<crate::bench::peak::PeakPlan>),
    Report(crate::cli::report::ReportArgs),
    Compare(crate::cli::report::CompareArgs),
    Check(crate::cli::report::CheckArgs),
    Diagnose(crate::cli::report::DiagnoseArgs),
    #[cfg(feature = "torch")]
    Sweep(Box<crate::sweep::plan::Plan>),
    #[cfg(feature = "torch")]
    /// An emitted sweep's cell: its directory, (index, cells in all), the cell.
    SweepCell(std::path::PathBuf, (usize, usize), Box<crate::sweep::plan::Cell>),
    #[cfg(feature = "torch")]
    MaxBatch(Box<crate::sweep::plan::MaxBatchPlan>),
    #[cfg(feature = "torch")]
    DataBench(Box<crate::data::bench::DataBenchSpec>, bool),
    Schema(crate::report::export::Format),
    Upgrade(PathBuf),
    TraceSummary {
        dir: PathBuf,
        json: bool,
    },
}

/// The whole program on this process's command line; returns the exit code.
pub fn run() -> Result<i32> {
    run_from(std::env::args_os())
}

/// The whole program on `argv` (the program name first): configure, then execute.
pub fn run_from<I, S>(argv: I) -> Result<i32>
where
    I: IntoIterator<Item = S>,
    S: Into<OsString> + Clone,
{
    execute(configure_from(argv)?)
}

/// Parses `argv` (the program name first) and builds its job.
pub fn configure_from<I, S>(argv: I) -> Result<Job>
where
    I: IntoIterator<Item = S>,
    S: Into<OsString> + Clone,
{
    match Cli::parse_args(argv) {
        Ok(cli) => configure(cli.command),
        Err(e) => clap_outcome(e),
    }
}

/// A wrapped command line (`rank run …`) parsed as gpubench's own.
#[cfg(feature = "torch")]
fn parse_wrapped(line: &[OsString]) -> Result<Command> {
    let argv = std::iter::once(OsString::from("gpubench")).chain(line.iter().cloned());
    match Cli::parse_args(argv) {
        Ok(cli) => Ok(cli.command),
        Err(e) => match clap_outcome(e) {
            Err(e) => Err(e),
            Ok(_) => Err(usage("a hidden subcommand wraps a whole gpubench command line, not --help")),
        },
    }
}

/// Every check that needs no device work, once per process.
pub(crate) fn configure(command: Command) -> Result<Job> {
    Ok(match command {
        Command::Info(a) => Job::Info { json: a.json },
        #[cfg(feature = "torch")]
        Command::Run(a) => {
            let (role, cfg) = crate::cli::run::job(*a, false)?;
            Job::Run(role, Box::new(cfg))
        }
        #[cfg(feature = "torch")]
        Command::Infer(a) => Job::Infer(Box::new(a.into_config(false)?)),
        #[cfg(feature = "torch")]
        Command::Allreduce(a) => {
            let (env, cfg) = a.job(false)?;
            Job::Allreduce(env, Box::new(cfg))
        }
        #[cfg(feature = "torch")]
        Command::Predict(a) => Job::Predict(Box::new(a.into_config()?)),
        Command::Report(a) => Job::Report(a),
        Command::Compare(a) => Job::Compare(a),
        Command::Check(a) => Job::Check(a),
        Command::Diagnose(a) => {
            if let Some(p) = &a.html {
                crate::report::html::check_html_path(p)?;
            }
            Job::Diagnose(a)
        }
        #[cfg(feature = "torch")]
        Command::Sweep(a) if !a.cell.is_empty() => {
            let (dir, index, cell) = crate::cli::sweep::cell_job(&a.cell)?;
            Job::SweepCell(dir, index, Box::new(cell))
        }
        #[cfg(feature = "torch")]
        Command::Sweep(a) => Job::Sweep(Box::new(crate::cli::sweep::plan(*a)?)),
        #[cfg(feature = "torch")]
        Command::MaxBatch(a) => Job::MaxBatch(Box::new(crate::cli::sweep::max_batch_plan(*a)?)),
        #[cfg(feature = "torch")]
        Command::DataBench(a) => {
            let (spec, json) = a.into_spec()?;
            Job::DataBench(Box::new(spec), json)
        }
        #[cfg(feature = "torch")]
        Command::Peak(a) => Job::Peak(Box::new(crate::cli::peak::plan(a)?)),
        Command::Collect(a) => {
            crate::results::csv::existing_parent(&a.out, "--out")?;
            Job::Collect(a.dir, a.out)
        }
        Command::Schema(a) => Job::Schema(a.format),
        Command::Upgrade(a) => Job::Upgrade(a.file),
        Command::TraceSummary(a) => Job::TraceSummary { dir: a.dir, json: a.json },
        #[cfg(not(feature = "torch"))]
        Command::Run(_)
        | Command::Infer(_)
        | Command::Allreduce(_)
        | Command::Predict(_)
        | Command::Sweep(_)
        | Command::MaxBatch(_)
        | Command::DataBench(_)
        | Command::Peak(_) => return Err(without_torch(&command)),
        #[cfg(feature = "torch")]
        Command::Rank(w) => match parse_wrapped(&w.line)? {
            Command::Run(a) => {
                let (role, cfg) = crate::cli::run::job(*a, true)?;
                Job::Run(role, Box::new(cfg))
            }
            Command::Allreduce(a) => {
                let (env, cfg) = a.job(true)?;
                Job::Allreduce(env, Box::new(cfg))
            }
            _ => return Err(usage("`gpubench rank` serves `run` or `allreduce` (it is started by gpubench itself)")),
        },
        #[cfg(feature = "torch")]
        Command::WriteInit(w) => match parse_wrapped(&w.line)? {
            Command::Run(a) => {
                let (_, cfg) = crate::cli::run::job(*a, false)?;
                Job::WriteInit(Box::new(cfg), w.path)
            }
            _ => return Err(usage("`gpubench write-init` serves `run` (it is started by gpubench itself)")),
        },
        #[cfg(feature = "torch")]
        Command::Validate(v) => {
            if let Some(n) = v.assume_gpus {
                crate::device::assume_gpus(n);
            }
            let line: Vec<String> = v.line.iter().map(|a| a.to_string_lossy().into_owned()).collect();
            match configure(parse_wrapped(&v.line)?)? {
                Job::Print(_) => return Err(usage("`gpubench validate` checks a command line, not --help")),
                _ => Job::Validated(line.join(" ")),
            }
        }
        #[cfg(feature = "torch")]
        Command::InferWorker(w) => match parse_wrapped(&w.line)? {
            Command::Infer(a) =>
            {
                #[cfg(feature = "torch")]
                Job::InferWorker { cfg: Box::new(a.into_config(true)?), k: w.index, p: w.of, dir: w.dir }
            }
            _ => return Err(usage("`gpubench infer-worker` serves `infer` (it is started by gpubench itself)")),
        },
    })
}

/// Runs a configured job; returns the exit code.
pub(crate) fn execute(job: Job) -> Result<i32> {
    match job {
        Job::Print(e) => {
            let _ = e.print();
            let missing = e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand;
            Ok(if missing { 2 } else { 0 })
        }
        Job::Info { json } => commands::info::run(json),
        #[cfg(feature = "torch")]
        Job::Validated(line) => {
            println!("ok: gpubench {line}");
            Ok(0)
        }
        #[cfg(feature = "torch")]
        Job::Run(role, cfg) => commands::run::run(role, *cfg),
        #[cfg(feature = "torch")]
        Job::WriteInit(cfg, path) => commands::run::write_init_only(&cfg, &path),
        #[cfg(feature = "torch")]
        Job::Infer(cfg) => commands::infer::run(*cfg),
        #[cfg(feature = "torch")]
        Job::InferWorker { cfg, k, p, dir } => commands::infer::worker(*cfg, k, p, &dir),
        #[cfg(feature = "torch")]
        Job::Allreduce(env, cfg) => commands::allreduce::run(env, *cfg),
        #[cfg(feature = "torch")]
        Job::Predict(cfg) => commands::predict::run(*cfg),
        Job::Report(a) => {
            let out = Outputs { format: a.format, charts: a.charts.as_deref(), html: a.html.as_deref() };
            commands::report::run_report(&a.files, &out)
        }
        Job::Compare(a) => {
            let out = Outputs { format: a.format, charts: a.charts.as_deref(), html: a.html.as_deref() };
            commands::report::run_compare(&a.files, &out)
        }
        Job::Check(a) => {
            let (opts, format) = a.options();
            commands::report::run_check(&a.baseline, &a.current, &opts, format, a.html.as_deref())
        }
        #[cfg(feature = "torch")]
        Job::Sweep(plan) => commands::sweep::run(*plan),
        #[cfg(feature = "torch")]
        Job::SweepCell(dir, index, cell) => commands::sweep::run_cell(&dir, index, &cell),
        #[cfg(feature = "torch")]
        Job::MaxBatch(plan) => commands::max_batch::run(*plan),
        #[cfg(feature = "torch")]
        Job::DataBench(spec, json) => commands::data_bench::run(&spec, json),
        Job::Diagnose(a) => {
            commands::report::run_diagnose(&a.files, a.baseline.as_deref(), a.max_drop, a.format, a.html.as_deref())
        }
        #[cfg(feature = "torch")]
        Job::Peak(plan) => commands::peak::run(&plan),
        Job::Collect(dir, out) => commands::collect::run(&dir, &out),
        Job::Schema(format) => commands::schema::run(format),
        Job::Upgrade(file) => commands::upgrade::run(&file),
        Job::TraceSummary { dir, json } => commands::report::run_trace_summary(&dir, json),
    }
}

/// The one line a torch-only subcommand gives in the torch-free build.
#[cfg(not(feature = "torch"))]
fn without_torch(command: &Command) -> anyhow::Error {
    let name = match command {
        Command::Run(_) => "run",
        Command::Infer(_) => "infer",
        Command::Allreduce(_) => "allreduce",
        Command::Predict(_) => "predict",
        Command::Peak(_) => "peak",
        Command::Sweep(_) => "sweep",
        Command::MaxBatch(_) => "max-batch",
        Command::DataBench(_) => "data-bench",
        _ => "this command",
    };
    usage(format!(
        "`gpubench {name}` needs libtorch, and this gpubench was built without it (--no-default-features: \
         report, compare, check, schema, upgrade and trace-summary only); for the full build run scripts/setup, \
         then cargo build --release"
    ))
}

/// Clap's help and version become a job that prints them (exit 0, or 2
/// when a subcommand was missing); its errors become one usage line: the
/// problem, then the valid choices.
fn clap_outcome(e: clap::Error) -> Result<Job> {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            Ok(Job::Print(e))
        }
        _ => Err(crate::cli::clap_usage(&e, "see gpubench --help")),
    }
}
