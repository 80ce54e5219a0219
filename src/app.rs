//! The entry: parse the command line into a subcommand's job (`cli`: every
//! check that needs no work, once), then run it. gpubench's own child
//! processes (`internal::Child`) come through here too, as hidden
//! subcommands, so a child builds its configuration exactly as its parent did.
//!
//! `run_from` is the whole program on an argument list; the tests call it
//! in-process to check parsing and validation without starting a process.
use anyhow::Result;
use std::ffi::OsString;

/// The whole program on this process's command line; returns the exit code.
pub fn run() -> Result<i32> {
    run_from(std::env::args_os())
}

/// The whole program on `argv` (the program name first): configure, then run.
pub fn run_from<I, S>(argv: I) -> Result<i32>
where
    I: IntoIterator<Item = S>,
    S: Into<OsString> + Clone,
{
    let job = crate::cli::job_of(argv)?;
    job()
}
