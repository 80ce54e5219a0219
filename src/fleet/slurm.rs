//! The job-array script and its `sbatch` commands. One script serves every
//! array: each `sbatch` names its array's shape (`GPUBENCH_SHAPE`) and its
//! resources on the command line, which override the script's `#SBATCH`
//! lines. Array task ids restart at 0 in every array, so the script maps
//! (shape, task) to the manifest's cell explicitly.
use std::path::Path;

use super::manifest::Entry;
use crate::proc::shell_quote;

/// Slurm's MaxArraySize when slurm.conf does not set it: task ids 0-1000.
pub const DEFAULT_MAX_ARRAY_SIZE: usize = 1001;

/// Cells that need the same resources, in one job array (or several, where
/// MaxArraySize splits them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    pub id: usize,
    pub cells: Vec<usize>,
    pub gpus: usize,
    pub cpus: usize,
    pub time_min: u64,
    /// Nodes per task (a multi-node ddp cell: one task per node, through srun).
    pub nodes: usize,
}

/// The arrays for `entries`, in the order their first cells come.
pub fn shapes(entries: &[&Entry]) -> Vec<Shape> {
    let mut v: Vec<Shape> = vec![];
    for e in entries {
        match v.iter_mut().find(|s| s.id == e.shape) {
            Some(s) => s.cells.push(e.index),
            None => v.push(Shape {
                id: e.shape,
                cells: vec![e.index],
                gpus: e.gpus,
                cpus: e.cpus,
                time_min: e.time_min,
                nodes: e.nodes,
            }),
        }
    }
    v
}

/// `sweep.sbatch`: `dir` absolute, `gpubench` the binary every node runs
/// (`$GPUBENCH` overrides it), `extra` lines passed as `#SBATCH` options,
/// `digest` the manifest's (Slurm keeps the script as submitted, so a task
/// that starts after the manifest changed is told so).
pub fn script(dir: &Path, gpubench: &Path, arrays: &[Shape], extra: &[String], digest: &str) -> String {
    let d = dir.display().to_string();
    let mut s = String::from("#!/bin/bash\n");
    s += "# Written by `gpubench sweep --emit slurm`: one array task runs one cell of manifest.jsonl\n";
    s += "# into cells/<index>.csv; `gpubench collect DIR --out FILE.csv` merges them.\n";
    s += "#SBATCH --job-name=gpubench-sweep\n";
    s += &format!("#SBATCH --output={d}/logs/%A_%a.out\n");
    for x in extra {
        s += &format!("#SBATCH {x}\n");
    }
    s += "set -u\n";
    s += &format!("dir={}\n", shell_quote(&d));
    s += &format!("gpubench=${{GPUBENCH:-{}}}\n", shell_quote(&gpubench.display().to_string()));
    s += &format!("digest={digest}\n");
    s += "case \"${GPUBENCH_SHAPE:-1}\" in\n";
    for a in arrays {
        let cells: Vec<String> = a.cells.iter().map(|c| c.to_string()).collect();
        s += &format!("  {}) cells=({}) ;;\n", a.id, cells.join(" "));
    }
    s += "  *) echo \"gpubench: no array $GPUBENCH_SHAPE in $dir/sweep.sbatch\" >&2; exit 2 ;;\n";
    s += "esac\n";
    s += "task=${SLURM_ARRAY_TASK_ID:?not a Slurm array task: set SLURM_ARRAY_TASK_ID}\n";
    s += "cell=${cells[$task]:-}\n";
    s += "[ -n \"$cell\" ] || { echo \"gpubench: array task $task is beyond this array's ${#cells[@]} cells\" >&2; exit 2; }\n";
    // A multi-node cell: one task per node, each its node's launcher.
    s += "if [ \"${SLURM_JOB_NUM_NODES:-1}\" -gt 1 ]; then\n";
    s += "  exec srun --ntasks-per-node=1 \"$gpubench\" cell \"$dir\" \"$cell\" --manifest-digest \"$digest\"\n";
    s += "fi\n";
    s += "exec \"$gpubench\" cell \"$dir\" \"$cell\" --manifest-digest \"$digest\"\n";
    s
}

/// The `sbatch` arguments that submit one array (the script path last).
pub fn sbatch_args(dir: &Path, a: &Shape, max_parallel: Option<usize>) -> Vec<String> {
    let mut v = vec!["--parsable".to_string()];
    let last = a.cells.len() - 1;
    v.push(match max_parallel {
        Some(p) => format!("--array=0-{last}%{p}"),
        None => format!("--array=0-{last}"),
    });
    if a.nodes > 1 {
        v.extend([format!("--nodes={}", a.nodes), "--ntasks-per-node=1".into()]);
    } else {
        v.extend(["--nodes=1".into(), "--ntasks=1".into()]);
    }
    if a.gpus > 0 {
        v.push(format!("--gres=gpu:{}", a.gpus));
    }
    if a.cpus > 0 {
        v.push(format!("--cpus-per-task={}", a.cpus));
    }
    v.push(format!("--time={}", a.time_min));
    v.push(format!("--export=ALL,GPUBENCH_SHAPE={}", a.id));
    v.push(dir.join("sweep.sbatch").display().to_string());
    v
}

/// One `sbatch …` line, for the user to paste.
pub fn command_line(args: &[String]) -> String {
    let words: Vec<String> = args.iter().map(|a| shell_quote(a)).collect();
    format!("sbatch {}", words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::csv::Row;

    fn entry(i: usize, shape: usize, task: usize, gpus: usize) -> Entry {
        Entry {
            index: i,
            shape,
            task,
            args: vec![],
            gpus,
            cpus: 2,
            time_min: 12,
            what: String::new(),
            row: Row::default(),
            scheduler: "slurm".into(),
            nodes: 1,
        }
    }

    #[test]
    fn each_array_maps_its_tasks_to_manifest_cells() {
        let es = [entry(0, 1, 0, 0), entry(1, 2, 0, 2), entry(2, 1, 1, 0)];
        let refs: Vec<&Entry> = es.iter().collect();
        let a = shapes(&refs);
        assert_eq!(a.len(), 2);
        assert_eq!((a[0].cells.clone(), a[1].cells.clone()), (vec![0, 2], vec![1]));
        let s = script(Path::new("/d"), Path::new("/bin/gpubench"), &a, &["--partition=gpu".into()], "00ff");
        assert!(s.contains("  1) cells=(0 2) ;;\n  2) cells=(1) ;;\n"), "{s}");
        assert!(s.contains("#SBATCH --partition=gpu\n") && s.contains("#SBATCH --output=/d/logs/%A_%a.out\n"));
        assert!(
            s.contains("digest=00ff\n")
                && s.contains("exec \"$gpubench\" cell \"$dir\" \"$cell\" --manifest-digest \"$digest\"")
        );
        let b = sbatch_args(Path::new("/d"), &a[1], Some(4));
        assert_eq!(
            b,
            [
                "--parsable",
                "--array=0-0%4",
                "--nodes=1",
                "--ntasks=1",
                "--gres=gpu:2",
                "--cpus-per-task=2",
                "--time=12",
                "--export=ALL,GPUBENCH_SHAPE=2",
                "/d/sweep.sbatch"
            ]
        );
        assert!(!sbatch_args(Path::new("/d"), &a[0], None).iter().any(|x| x.starts_with("--gres")));
        let two = Shape { nodes: 2, ..a[1].clone() };
        let b = sbatch_args(Path::new("/d"), &two, None);
        assert_eq!(b[2..4], ["--nodes=2", "--ntasks-per-node=1"]);
        assert!(s.contains("exec srun --ntasks-per-node=1 \"$gpubench\" cell"));
    }
}
