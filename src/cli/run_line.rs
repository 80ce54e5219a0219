//! A `gpubench run` command line taken apart by run's own parser: which
//! options it gives, with their values. sweep and max-batch pass every run
//! option to their cells exactly as `run` takes it (the options after `--`),
//! take the matrix's axes out of it, and make an axis of any option
//! (`--vary OPTION=V1,V2`), flags included; none of them keeps a copy of
//! run's options that could drift from `run`.
use anyhow::Result;
use clap::parser::ValueSource;
use clap::{Args, Command};

use super::run::RunArgs;
use crate::error::usage;
use crate::sweep::plan::Vary;

/// run's options, as clap defines them.
fn run_command() -> Command {
    RunArgs::augment_args(Command::new("run").no_binary_name(true))
}

/// A run option given on a command line: its long name and raw values
/// (none for a flag).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Given {
    long: String,
    values: Vec<String>,
}

/// The options of a `run` command line that were given, in run's order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RunLine {
    given: Vec<Given>,
}

impl RunLine {
    /// Parses `tokens` as `gpubench run` would (a bad option or value is
    /// clap's usage error, named as `run` names it).
    pub(crate) fn parse(tokens: &[String]) -> Result<RunLine> {
        let cmd = run_command();
        let m = cmd
            .clone()
            .try_get_matches_from(tokens)
            .map_err(|e| super::clap_usage(&e, "in the run options after --; see gpubench run --help"))?;
        let mut given = vec![];
        for arg in cmd.get_arguments() {
            let id = arg.get_id();
            if m.value_source(id.as_str()) != Some(ValueSource::CommandLine) {
                continue;
            }
            let Some(long) = arg.get_long() else { continue };
            let values = if arg.get_action().takes_values() {
                m.get_raw(id.as_str())
                    .map(|v| v.map(|x| x.to_string_lossy().into_owned()).collect())
                    .unwrap_or_default()
            } else {
                vec![]
            };
            given.push(Given { long: long.to_string(), values });
        }
        Ok(RunLine { given })
    }

    /// Whether `--long` was given.
    pub(crate) fn has(&self, long: &str) -> bool {
        self.given.iter().any(|g| g.long == long)
    }

    /// The value of `--long`, if it was given with one.
    pub(crate) fn value(&self, long: &str) -> Option<&str> {
        self.given.iter().find(|g| g.long == long).and_then(|g| g.values.last()).map(String::as_str)
    }

    /// Removes `--long` and returns its value (`Some("")` for a flag).
    pub(crate) fn take(&mut self, long: &str) -> Option<String> {
        let i = self.given.iter().position(|g| g.long == long)?;
        let g = self.given.remove(i);
        Some(g.values.last().cloned().unwrap_or_default())
    }

    /// Adds `--long value` unless `--long` was given.
    pub(crate) fn default(&mut self, long: &str, value: &str) {
        if !self.has(long) {
            self.given.push(Given { long: long.into(), values: vec![value.into()] });
        }
    }

    /// The long names given.
    pub(crate) fn options(&self) -> impl Iterator<Item = &str> {
        self.given.iter().map(|g| g.long.as_str())
    }

    /// As `run` arguments: `--long=value` (so that a value starting with `-`
    /// stays a value), `--long` for a flag.
    pub(crate) fn to_args(&self) -> Vec<String> {
        let mut v = vec![];
        for g in &self.given {
            if g.values.is_empty() {
                v.push(format!("--{}", g.long));
            }
            for x in &g.values {
                v.push(format!("--{}={x}", g.long));
            }
        }
        v
    }
}

/// `--vary OPTION=V1,V2,…`, parsed against run's options.
pub(crate) fn parse_vary(spec: &str) -> Result<Vary> {
    let bad = || {
        usage(format!(
            "--vary {spec:?} is not OPTION=V1,V2,… (a run option without its dashes, then its values), e.g. \
             --vary comm-hook=none,fp16 or --vary channels-last=on,off"
        ))
    };
    let (option, list) = spec.split_once('=').ok_or_else(bad)?;
    let option = option.trim().trim_start_matches("--").to_string();
    let values: Vec<String> = list.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect();
    if option.is_empty() || values.is_empty() {
        return Err(bad());
    }
    let cmd = run_command();
    let arg = cmd.get_arguments().find(|a| a.get_long() == Some(option.as_str())).ok_or_else(|| {
        usage(format!("--vary {option}: `gpubench run` has no option --{option} (see gpubench run --help)"))
    })?;
    let flag = !arg.get_action().takes_values();
    if flag {
        if let Some(v) = values.iter().find(|v| !matches!(v.as_str(), "on" | "off")) {
            return Err(usage(format!("--vary {option}: --{option} is a flag; vary it as on,off (not {v:?})")));
        }
    }
    let mut seen: Vec<&String> = vec![];
    for v in &values {
        if seen.contains(&v) {
            return Err(usage(format!("--vary {option}: {v} is listed twice")));
        }
        seen.push(v);
    }
    Ok(Vary { option, values, flag })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(s: &str) -> RunLine {
        RunLine::parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn given_options_come_back_as_run_takes_them() {
        let mut l = line("--model tinycnn --channels-last --label -x --cudnn-benchmark --steps 3");
        assert!(l.has("model") && l.has("channels-last") && l.has("cudnn-benchmark") && !l.has("batch-size"));
        assert_eq!(l.value("label"), Some("-x"));
        // An on|off option keeps its value, whichever way it was said.
        assert_eq!(line("--cudnn-benchmark off").to_args(), ["--cudnn-benchmark=off"]);
        assert_eq!(l.take("model").as_deref(), Some("tinycnn"));
        l.default("steps", "9");
        l.default("warmup", "1");
        let args = l.to_args();
        assert!(args.contains(&"--channels-last".to_string()) && args.contains(&"--label=-x".to_string()), "{args:?}");
        assert!(args.contains(&"--steps=3".to_string()) && args.contains(&"--warmup=1".to_string()), "{args:?}");
        // What comes out parses back to the same options.
        let mut back = RunLine::parse(&args).unwrap().to_args();
        let mut args = args;
        back.sort();
        args.sort();
        assert_eq!(back, args);
    }

    #[test]
    fn a_bad_run_option_is_a_usage_error_naming_it() {
        let e = RunLine::parse(&["--steps".into(), "many".into()]).unwrap_err();
        assert_eq!(crate::error::exit_code(&e), 2);
        assert!(e.to_string().contains("--steps"), "{e}");
        let e = RunLine::parse(&["--frobnicate".into()]).unwrap_err();
        assert!(e.to_string().contains("--frobnicate"), "{e}");
    }

    #[test]
    fn vary_takes_any_run_option_and_flags_as_on_off() {
        let v = parse_vary("comm-hook=none,fp16").unwrap();
        assert_eq!((v.flag, v.args("fp16")), (false, vec!["--comm-hook=fp16".to_string()]));
        let f = parse_vary("channels-last=on,off").unwrap();
        assert_eq!((f.args("on"), f.args("off")), (vec!["--channels-last".to_string()], Vec::<String>::new()));
        for bad in ["channels-last=yes", "nope=1,2", "steps", "steps=", "lr=1,1"] {
            assert_eq!(crate::error::exit_code(&parse_vary(bad).unwrap_err()), 2, "{bad}");
        }
    }
}
