//! Helpers shared by the integration tests: argument lists written as one
//! string, a command builder for the real binary (cwd, env), and readers.
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use gpubench::bench::placement::Seat;
use gpubench::cli::run::parse_run_args;
use gpubench::config::RunConfig;

/// The small model every quick run uses.
pub const TINY: &str = "--model tinycnn --image-size 16 --num-classes 10";

/// An argument list written as one string, split on whitespace.
pub fn args(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// The gpubench binary with its arguments; ddp and Slurm variables of the
/// test's own environment are removed, so that no test becomes a rank.
pub struct Gpubench {
    cmd: Command,
}

/// The gpubench binary under test: `$GPUBENCH_BIN` when set; else the one
/// beside this test binary's folder (target/release/deps/it-HASH ->
/// target/release/gpubench), so a copy of the tree carried to another
/// machine (scripts/gpu-smoke) finds its own; else the path cargo built.
pub fn bin() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("GPUBENCH_BIN").filter(|p| !p.is_empty()) {
        return p.into();
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent()?.parent().map(|d| d.join(format!("gpubench{}", std::env::consts::EXE_SUFFIX))));
    match beside {
        Some(p) if p.is_file() => p,
        _ => env!("CARGO_BIN_EXE_gpubench").into(),
    }
}

pub fn gpubench(a: &str) -> Gpubench {
    let mut cmd = Command::new(bin());
    cmd.args(args(a));
    for k in ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"] {
        cmd.env_remove(k);
    }
    Gpubench { cmd }
}

impl Gpubench {
    pub fn arg(mut self, a: impl AsRef<OsStr>) -> Self {
        self.cmd.arg(a);
        self
    }

    pub fn args(mut self, a: &str) -> Self {
        self.cmd.args(args(a));
        self
    }

    pub fn cwd(mut self, dir: impl AsRef<Path>) -> Self {
        self.cmd.current_dir(dir);
        self
    }

    pub fn env(mut self, k: &str, v: impl AsRef<OsStr>) -> Self {
        self.cmd.env(k, v);
        self
    }

    pub fn env_remove(mut self, k: &str) -> Self {
        self.cmd.env_remove(k);
        self
    }

    /// Without the variables that say which commit, branch, sweep and CI
    /// run a row belongs to (gpubench's own and the CIs'), so that a test
    /// sees only what it sets, wherever it runs.
    pub fn without_provenance(mut self) -> Self {
        for k in PROVENANCE_VARS {
            self.cmd.env_remove(k);
        }
        self
    }

    /// Runs it to the end.
    pub fn output(mut self) -> Output {
        self.cmd.output().expect("running gpubench")
    }

    /// Runs it to the end; the outcome as text.
    pub fn run(self) -> Out {
        let o = self.output();
        Out { code: o.status.code().unwrap_or(-1), stdout: stdout(&o), stderr: stderr(&o) }
    }

    /// Starts it with stdout and stderr piped.
    pub fn spawn(self) -> Child {
        self.spawn_with(Stdio::piped(), Stdio::piped())
    }

    /// Starts it with the given stdout and stderr.
    pub fn spawn_with(mut self, out: Stdio, err: Stdio) -> Child {
        self.cmd.stdout(out).stderr(err).spawn().expect("starting gpubench")
    }
}

/// Every variable `fleet::provenance` reads.
pub const PROVENANCE_VARS: [&str; 19] = [
    "GPUBENCH_COMMIT",
    "GPUBENCH_BRANCH",
    "GPUBENCH_SWEEP_ID",
    "GPUBENCH_CI_URL",
    "GITHUB_SHA",
    "CI_COMMIT_SHA",
    "BUILDKITE_COMMIT",
    "GIT_COMMIT",
    "GITHUB_HEAD_REF",
    "GITHUB_REF_NAME",
    "CI_COMMIT_REF_NAME",
    "BUILDKITE_BRANCH",
    "GIT_BRANCH",
    "GITHUB_SERVER_URL",
    "GITHUB_REPOSITORY",
    "GITHUB_RUN_ID",
    "CI_JOB_URL",
    "BUILDKITE_BUILD_URL",
    // A repository named by the environment would stand in for the working directory's.
    "GIT_DIR",
];

/// A finished run's exit code and output, as text.
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Asserts a usage error, in this process: `gpubench ARGS` fails with exit
/// code 2 and a one-line message mentioning `needle`, before any work (the
/// program stops at the first check; see `gpubench::app::run_from`). What
/// `main` makes of such an error (the line on stderr, the exit code) is
/// checked through the real binary in `run::main_prints_one_line_and_exits_by_kind`.
pub fn assert_usage_error(a: &str, needle: &str) {
    assert_usage_error_argv(&args(a), needle);
}

/// `assert_usage_error` for arguments that have spaces.
pub fn assert_usage_error_argv(argv: &[String], needle: &str) {
    let (what, line) = (argv.join(" "), usage_line_argv(argv));
    assert!(line.contains(needle), "{what}: expected {needle:?} in {line:?}");
}

/// The one line `gpubench ARGS` is refused with, from the library; fails
/// the test when it runs, panics, is no usage error (exit 2) or says more
/// than one line.
pub fn usage_line(a: &str) -> String {
    usage_line_argv(&args(a))
}

fn usage_line_argv(argv: &[String]) -> String {
    let what = argv.join(" ");
    let full = std::iter::once("gpubench".to_string()).chain(argv.iter().cloned());
    let e = match std::panic::catch_unwind(|| gpubench::app::run_from(full)) {
        Ok(Err(e)) => e,
        Ok(Ok(code)) => panic!("{what}: ran and exited {code}, expected a usage error"),
        Err(_) => panic!("{what}: panicked"),
    };
    let line = gpubench::error::one_line(&e);
    assert_eq!(gpubench::error::exit_code(&e), 2, "{what}: not a usage error: {line}");
    assert!(!line.contains('\n'), "{what}: not one line: {line:?}");
    line
}

/// A usage error through the real binary, for what only a process shows:
/// exit 2, one line on stderr mentioning `needle`, no panic.
pub fn assert_usage_error_of(g: Gpubench, what: &str, needle: &str) {
    let o = g.output();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{what}: stderr {err}");
    assert!(err.contains(needle), "{what}: expected {needle:?} in {err:?}");
    assert_eq!(err.trim_end().lines().count(), 1, "{what}: not one line: {err:?}");
    assert!(!err.contains("panicked") && !err.contains("RUST_BACKTRACE"), "{err}");
}

pub use gpubench::metrics::interference::Hogs;

/// Reads a results CSV as header→value maps.
pub fn read_csv(path: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let mut r = csv::Reader::from_path(path).expect("reading results csv");
    let headers = r.headers().unwrap().clone();
    r.records()
        .map(|rec| {
            let rec = rec.unwrap();
            headers.iter().zip(rec.iter()).map(|(h, v)| (h.to_string(), v.to_string())).collect()
        })
        .collect()
}

pub fn num(row: &std::collections::HashMap<String, String>, col: &str) -> f64 {
    row[col].parse().unwrap_or_else(|_| panic!("column {col} = {:?} is not a number", row[col]))
}

/// `gpubench run ARGS` as the configuration for `placement`.
pub fn run_config(a: &str, placement: Seat) -> RunConfig {
    parse_run_args(&args(a)).unwrap().into_config(placement).unwrap()
}

/// Asserts that `doc` is the one `--format json` document: valid against
/// docs/json.schema.json. The schema is checked with the keywords it uses
/// (type, required, properties, additionalProperties, items, $ref,
/// maxProperties); a keyword this checker does not know fails the test, so
/// the schema cannot say more than is checked.
pub fn assert_envelope(doc: &serde_json::Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/json.schema.json");
    let schema: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut problems = vec![];
    check_schema(&schema, &schema, doc, "$", &mut problems);
    assert!(problems.is_empty(), "not the JSON envelope: {problems:?}\n{doc}");
}

fn check_schema(
    root: &serde_json::Value,
    s: &serde_json::Value,
    v: &serde_json::Value,
    at: &str,
    out: &mut Vec<String>,
) {
    use serde_json::Value;
    let Value::Object(s) = s else { panic!("schema at {at} is not an object") };
    for (k, rule) in s {
        match k.as_str() {
            "$schema" | "title" | "description" | "$defs" => {}
            "$ref" => {
                let name = rule.as_str().unwrap().strip_prefix("#/$defs/").expect("a local $ref");
                check_schema(root, &root["$defs"][name], v, at, out);
            }
            "type" => {
                let types: Vec<&str> = match rule {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(ts) => ts.iter().map(|t| t.as_str().unwrap()).collect(),
                    _ => panic!("type at {at}"),
                };
                let is = |t: &str| match t {
                    "object" => v.is_object(),
                    "array" => v.is_array(),
                    "string" => v.is_string(),
                    "number" => v.is_number(),
                    "null" => v.is_null(),
                    "boolean" => v.is_boolean(),
                    other => panic!("type {other} at {at}"),
                };
                if !types.iter().any(|t| is(t)) {
                    out.push(format!("{at}: not {types:?}"));
                }
            }
            "required" => {
                for key in rule.as_array().unwrap() {
                    if v.get(key.as_str().unwrap()).is_none() {
                        out.push(format!("{at}: no {key}"));
                    }
                }
            }
            "maxProperties" => {
                if v.as_object().is_some_and(|o| o.len() as u64 > rule.as_u64().unwrap()) {
                    out.push(format!("{at}: more than {rule} keys"));
                }
            }
            "properties" => {
                for (key, sub) in rule.as_object().unwrap() {
                    if let Some(x) = v.get(key) {
                        check_schema(root, sub, x, &format!("{at}.{key}"), out);
                    }
                }
            }
            "additionalProperties" => {
                assert_eq!(rule, &Value::Bool(false), "additionalProperties at {at}");
                let known = s.get("properties").and_then(|p| p.as_object());
                for key in v.as_object().map(|o| o.keys().collect::<Vec<_>>()).unwrap_or_default() {
                    if !known.is_some_and(|p| p.contains_key(key)) {
                        out.push(format!("{at}: unexpected key {key}"));
                    }
                }
            }
            "items" => {
                for (i, x) in v.as_array().into_iter().flatten().enumerate() {
                    check_schema(root, rule, x, &format!("{at}[{i}]"), out);
                }
            }
            other => panic!("docs/json.schema.json uses {other} at {at}, which assert_envelope does not check"),
        }
    }
}
