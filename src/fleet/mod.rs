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
pub struct Placement {
    pub scheduler: String,
    pub job_id: String,
    pub array_task: Option<u32>,
    pub node_list: String,
}

/// Reads the placement through `get` (the environment, or a test's map).
/// An array task's `SLURM_JOB_ID` may equal the array's own id for one of
/// its tasks, so arrays are named by `SLURM_ARRAY_JOB_ID` and told apart by
/// the task.
pub fn placement(get: &dyn Fn(&str) -> Option<String>) -> Placement {
    let task = |k: &str| get(k).and_then(|v| v.trim().parse().ok());
    if let Some(job) = get("SLURM_ARRAY_JOB_ID").or_else(|| get("SLURM_JOB_ID")) {
        return Placement {
            scheduler: "slurm".into(),
            job_id: job,
            array_task: task("SLURM_ARRAY_TASK_ID"),
            node_list: get("SLURM_JOB_NODELIST").or_else(|| get("SLURM_NODELIST")).unwrap_or_default(),
        };
    }
    if get("KUBERNETES_SERVICE_HOST").is_some() {
        return Placement {
            scheduler: "kubernetes".into(),
            job_id: get("GPUBENCH_JOB_ID").unwrap_or_default(),
            array_task: task("JOB_COMPLETION_INDEX"),
            node_list: get("GPUBENCH_NODE_NAME").unwrap_or_default(),
        };
    }
    Placement { scheduler: "none".into(), ..Default::default() }
}

/// This process's placement.
pub fn this_placement() -> Placement {
    placement(&|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
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
            Placement {
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
}
