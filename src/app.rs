//! The entry: parse the command line, turn each subcommand's arguments into
//! its configuration (`cli`), and hand it to its command (`commands`).
use anyhow::Result;
use clap::Parser;

use crate::cli::{Cli, Command};
use crate::commands;
use crate::commands::report::Outputs;

/// Parses the command line and runs the subcommand; returns the exit code.
pub fn run() -> Result<i32> {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return Ok(print_clap_error(e)),
    };
    match cli.command {
        Command::Info(a) => commands::info::run(a.json),
        Command::Run(a) => {
            let (role, cfg) = crate::cli::run::job(*a)?;
            commands::run::run(role, cfg)
        }
        Command::Infer(a) => {
            let relaunch =
                crate::serve::Relaunch { program: std::env::current_exe()?, args: std::env::args().skip(1).collect() };
            commands::infer::run(a.into_config()?, relaunch)
        }
        Command::Allreduce(a) => {
            let (env, cfg) = a.job()?;
            commands::allreduce::run(env, cfg)
        }
        Command::Predict(a) => commands::predict::run(a.into_config()?),
        Command::Report(a) => {
            let out = Outputs { format: a.format, charts: a.charts.as_deref(), html: a.html.as_deref() };
            commands::report::run_report(&a.files, &out)
        }
        Command::Compare(a) => {
            let out = Outputs { format: a.format, charts: a.charts.as_deref(), html: a.html.as_deref() };
            commands::report::run_compare(&a.files, &out)
        }
        Command::Check(a) => {
            let (opts, format) = a.options();
            commands::report::run_check(&a.baseline, &a.current, &opts, format, a.html.as_deref())
        }
        Command::Sweep(a) => commands::sweep::run(crate::cli::sweep::plan(*a)?),
        Command::MaxBatch(a) => commands::max_batch::run(crate::cli::sweep::max_batch_plan(*a)?),
        Command::DataBench(a) => {
            let (spec, json) = a.into_spec()?;
            commands::data_bench::run(&spec, json)
        }
        Command::Schema(a) => commands::schema::run(a.format),
        Command::TraceSummary(a) => commands::report::run_trace_summary(&a.dir, a.json),
    }
}

/// Clap's help and version go to stdout as usual; its errors are folded onto
/// one line (problem, then the valid choices) and exit with 2.
fn print_clap_error(e: clap::Error) -> i32 {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                2
            } else {
                0
            }
        }
        _ => {
            let text = e.render().to_string();
            let parts: Vec<&str> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("For more information") && !l.starts_with("Usage:"))
                .collect();
            let line = parts.join(" ");
            let line = line.strip_prefix("error: ").unwrap_or(&line);
            eprintln!("error: {line} (see gpubench --help)");
            2
        }
    }
}
