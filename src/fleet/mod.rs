//! Sweeps beyond one machine, through the cluster's own scheduler: `sweep
//! --emit slurm DIR` writes the cells to `DIR/manifest.jsonl` and a job-array
//! script (`slurm`), each array task runs one cell into its own file under
//! `DIR/cells/` (`cell DIR I`), and `collect` merges those files in
//! manifest order into one results file, with a `missing` row for each cell
//! that produced nothing. Slurm queues, places and retries; gpubench only
//! says what to run and gathers what came back.
//!
//! Torch-free, so that `collect` runs wherever the results land. The
//! emission itself, which builds the cells, is the sweep's (`sweep::emit`).
pub mod collect;
pub mod k8s;
pub mod manifest;
pub mod slurm;

/// Where a run ran, from the scheduler's environment: `scheduler` (slurm,
/// kubernetes or none), the job id, the array task (Slurm's array task, or
/// a Kubernetes Indexed Job's completion index) and the node list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scheduled {
    pub scheduler: String,
    pub job_id: String,
    pub array_task: Option<u32>,
    pub node_list: String,
}

/// Reads where the scheduler placed this run through `get` (the environment, or a test's map).
/// An array task's `SLURM_JOB_ID` may equal the array's own id for one of
/// its tasks, so arrays are named by `SLURM_ARRAY_JOB_ID` and told apart by
/// the task.
pub fn placement(get: &dyn Fn(&str) -> Option<String>) -> Scheduled {
    let task = |k: &str| get(k).and_then(|v| v.trim().parse().ok());
    if let Some(job) = get("SLURM_ARRAY_JOB_ID").or_else(|| get("SLURM_JOB_ID")) {
        return Scheduled {
            scheduler: "slurm".into(),
            job_id: job,
            array_task: task("SLURM_ARRAY_TASK_ID"),
            node_list: get("SLURM_JOB_NODELIST").or_else(|| get("SLURM_NODELIST")).unwrap_or_default(),
        };
    }
    if get("KUBERNETES_SERVICE_HOST").is_some() {
        return Scheduled {
            scheduler: "kubernetes".into(),
            job_id: get("GPUBENCH_JOB_ID").unwrap_or_default(),
            array_task: task("JOB_COMPLETION_INDEX"),
            node_list: get("GPUBENCH_NODE_NAME").unwrap_or_default(),
        };
    }
    Scheduled { scheduler: "none".into(), ..Default::default() }
}

/// This process's placement.
pub fn this_placement() -> Scheduled {
    placement(&|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
}

/// Where a run sits in history: the commit and branch of the code under
/// test, the sweep it belongs to and the CI run that made it (the rows'
/// `commit`, `branch`, `sweep_id` and `ci_url`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Provenance {
    pub commit: String,
    pub branch: String,
    pub sweep_id: String,
    pub ci_url: String,
}

/// The commit under test: `--commit`, which the command line puts into
/// this variable so that every child process (ddp ranks, sweep cells, the
/// PyTorch reference) inherits it; an emitted sweep's cell sets it from its
/// manifest.
pub const COMMIT_VAR: &str = "GPUBENCH_COMMIT";
/// The branch under test: `--branch`, carried as `COMMIT_VAR` is.
pub const BRANCH_VAR: &str = "GPUBENCH_BRANCH";
/// The id of the sweep a run belongs to: set by `gpubench sweep` for its
/// cells, and by an emitted sweep's cell from its manifest.
pub const SWEEP_ID_VAR: &str = "GPUBENCH_SWEEP_ID";
/// The CI run that emitted a sweep, set by its cells from the manifest:
/// the CI's own variables are not there where the cells run.
pub const CI_URL_VAR: &str = "GPUBENCH_CI_URL";

/// Reads the provenance through `get` (the environment, or a test's map),
/// asking `git` (arguments of `git`, its trimmed output when it succeeded)
/// only for what no variable says. The commit: `COMMIT_VAR`, then the CI's
/// own (GitHub Actions, GitLab, Buildkite, Jenkins), then the working
/// directory's HEAD; the branch likewise, where a detached HEAD gives none.
/// Empty values count as unset: GitHub sets GITHUB_HEAD_REF empty outside
/// pull requests.
pub fn provenance(get: &dyn Fn(&str) -> Option<String>, git: &dyn Fn(&[&str]) -> Option<String>) -> Provenance {
    let var = |k: &str| get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let first = |keys: &[&str]| keys.iter().find_map(|k| var(k));
    let commit = first(&[COMMIT_VAR, "GITHUB_SHA", "CI_COMMIT_SHA", "BUILDKITE_COMMIT", "GIT_COMMIT"])
        .or_else(|| git(&["rev-parse", "HEAD"]))
        .unwrap_or_default();
    let branch = first(&[
        BRANCH_VAR,
        "GITHUB_HEAD_REF",
        "GITHUB_REF_NAME",
        "CI_COMMIT_REF_NAME",
        "BUILDKITE_BRANCH",
        "GIT_BRANCH",
    ])
    .or_else(|| git(&["rev-parse", "--abbrev-ref", "HEAD"]).filter(|b| b != "HEAD"))
    .unwrap_or_default();
    let github = match (var("GITHUB_SERVER_URL"), var("GITHUB_REPOSITORY"), var("GITHUB_RUN_ID")) {
        (Some(server), Some(repo), Some(run)) => {
            Some(format!("{}/{repo}/actions/runs/{run}", server.trim_end_matches('/')))
        }
        _ => None,
    };
    let ci_url = var(CI_URL_VAR)
        .or(github)
        .or_else(|| var("CI_JOB_URL"))
        .or_else(|| var("BUILDKITE_BUILD_URL"))
        .unwrap_or_default();
    Provenance { commit, branch, sweep_id: var(SWEEP_ID_VAR).unwrap_or_default(), ci_url }
}

/// This process's provenance, resolved once (git costs milliseconds, and
/// every row of the process must say the same). The command line sets
/// `COMMIT_VAR` and `BRANCH_VAR` before any row is made.
pub fn this_provenance() -> &'static Provenance {
    static IT: std::sync::OnceLock<Provenance> = std::sync::OnceLock::new();
    IT.get_or_init(|| provenance(&|k| std::env::var(k).ok(), &git_here))
}

/// `git ARGS` in the working directory, its output trimmed when it
/// succeeded and said something. Quiet (stderr dropped, no prompt, no
/// index refresh) and bounded: a git that does not answer within two
/// seconds (a hung network filesystem) is killed, and the row's column
/// stays empty rather than the run waiting.
fn git_here(args: &[&str]) -> Option<String> {
    use std::io::Read;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let mut child = Command::new("git")
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_TERMINAL_PROMPT", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + Duration::from_secs(2);
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    };
    // The output is a line: it fits the pipe, so reading after the exit cannot block.
    let mut out = String::new();
    child.stdout.take()?.read_to_string(&mut out).ok()?;
    let out = out.trim();
    (status.success() && !out.is_empty()).then(|| out.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(kv: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| kv.iter().find(|(x, _)| *x == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn the_scheduler_is_read_from_its_variables() {
        let p = placement(&env(&[
            ("SLURM_JOB_ID", "1"),
            ("SLURM_ARRAY_JOB_ID", "7"),
            ("SLURM_ARRAY_TASK_ID", "3"),
            ("SLURM_JOB_NODELIST", "node[01-02]"),
        ]));
        assert_eq!(
            p,
            Scheduled {
                scheduler: "slurm".into(),
                job_id: "7".into(),
                array_task: Some(3),
                node_list: "node[01-02]".into()
            }
        );
        let p = placement(&env(&[("SLURM_JOB_ID", "12"), ("SLURM_NODELIST", "n1")]));
        assert_eq!((p.job_id.as_str(), p.array_task, p.node_list.as_str()), ("12", None, "n1"));
        let p = placement(&env(&[
            ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
            ("JOB_COMPLETION_INDEX", "4"),
            ("GPUBENCH_JOB_ID", "sweep-x"),
        ]));
        assert_eq!((p.scheduler.as_str(), p.job_id.as_str(), p.array_task), ("kubernetes", "sweep-x", Some(4)));
        assert_eq!(placement(&env(&[])).scheduler, "none");
    }

    /// A git that answers `rev-parse HEAD` with `head` and `--abbrev-ref`
    /// with `branch`; None: not a repository.
    fn git(head: Option<&'static str>, branch: &'static str) -> impl Fn(&[&str]) -> Option<String> {
        move |args: &[&str]| match (head, args) {
            (None, _) => None,
            (Some(_), [.., "--abbrev-ref", "HEAD"]) => Some(branch.to_string()),
            (Some(h), ["rev-parse", "HEAD"]) => Some(h.to_string()),
            _ => panic!("unexpected git {args:?}"),
        }
    }

    #[test]
    fn the_commit_is_the_flag_then_the_ci_then_the_checkout() {
        let repo = git(Some("c0ffee"), "main");
        let commit = |kv: &[(&str, &str)]| provenance(&env(kv), &repo).commit;
        let all = [
            ("GPUBENCH_COMMIT", "f1a9"),
            ("GITHUB_SHA", "9b1"),
            ("CI_COMMIT_SHA", "9l1"),
            ("BUILDKITE_COMMIT", "bk1"),
            ("GIT_COMMIT", "jk1"),
        ];
        for i in 0..all.len() {
            assert_eq!(commit(&all[i..]), all[i].1, "{:?}", &all[i..]);
        }
        assert_eq!(commit(&[]), "c0ffee");
        // An empty variable is unset.
        assert_eq!(commit(&[("GPUBENCH_COMMIT", ""), ("GITHUB_SHA", " ")]), "c0ffee");
        assert_eq!(provenance(&env(&[]), &git(None, "")), Provenance::default());
    }

    #[test]
    fn the_branch_is_the_flag_then_the_ci_then_the_checkout_unless_detached() {
        let repo = git(Some("c0ffee"), "feature/x");
        let branch = |kv: &[(&str, &str)]| provenance(&env(kv), &repo).branch;
        let all = [
            ("GPUBENCH_BRANCH", "mine"),
            ("GITHUB_HEAD_REF", "pr-head"),
            ("GITHUB_REF_NAME", "42/merge"),
            ("CI_COMMIT_REF_NAME", "gl"),
            ("BUILDKITE_BRANCH", "bk"),
            ("GIT_BRANCH", "origin/jk"),
        ];
        for i in 0..all.len() {
            assert_eq!(branch(&all[i..]), all[i].1, "{:?}", &all[i..]);
        }
        // GitHub sets GITHUB_HEAD_REF empty outside pull requests.
        assert_eq!(branch(&[("GITHUB_HEAD_REF", ""), ("GITHUB_REF_NAME", "main")]), "main");
        assert_eq!(branch(&[]), "feature/x");
        assert_eq!(provenance(&env(&[]), &git(Some("c0ffee"), "HEAD")).branch, "", "a detached HEAD has no branch");
    }

    #[test]
    fn git_is_asked_only_for_what_no_variable_says() {
        let p = provenance(&env(&[("GITHUB_SHA", "abc1"), ("GITHUB_REF_NAME", "main")]), &|a| {
            panic!("git {a:?} asked although the CI said")
        });
        assert_eq!((p.commit.as_str(), p.branch.as_str()), ("abc1", "main"));
    }

    #[test]
    fn the_ci_link_and_the_sweep_id_come_from_their_variables() {
        let none = git(None, "");
        let url = |kv: &[(&str, &str)]| provenance(&env(kv), &none).ci_url;
        let gh = [("GITHUB_SERVER_URL", "https://github.com"), ("GITHUB_REPOSITORY", "o/r"), ("GITHUB_RUN_ID", "77")];
        assert_eq!(url(&gh), "https://github.com/o/r/actions/runs/77");
        assert_eq!(url(&gh[..2]), "", "GitHub without a run id gives no link");
        assert_eq!(url(&[("CI_JOB_URL", "https://gl/j/1")]), "https://gl/j/1");
        assert_eq!(url(&[("BUILDKITE_BUILD_URL", "https://bk/b/2")]), "https://bk/b/2");
        assert_eq!(
            url(&[("GPUBENCH_CI_URL", "https://emitter/3"), ("CI_JOB_URL", "https://gl/j/1")]),
            "https://emitter/3"
        );
        assert_eq!(url(&[]), "");
        let p = provenance(&env(&[("GPUBENCH_SWEEP_ID", "s18f-2a")]), &none);
        assert_eq!((p.sweep_id.as_str(), p.commit.as_str()), ("s18f-2a", ""));
    }

    /// The real git, bounded: in a directory that is no repository the
    /// answer is None, not an error and not a hang.
    #[test]
    fn git_outside_a_repository_says_nothing() {
        let dir = tempfile::tempdir().unwrap();
        // Through `-C`, not by changing this process's directory under the other tests.
        let d = dir.path().to_str().unwrap();
        assert_eq!(git_here(&["-C", d, "rev-parse", "HEAD"]), None);
    }
}
