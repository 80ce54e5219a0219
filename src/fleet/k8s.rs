//! Kubernetes: one Indexed Job per resource shape (`completionMode:
//! Indexed`; a pod's `JOB_COMPLETION_INDEX` picks its cell, as an array
//! task's id does under Slurm). Written as JSON, which kubectl takes as it
//! takes YAML, so that what is written is what a test parses back.
use serde_json::{json, Value};
use std::path::Path;

use super::slurm::Shape;

/// What every pod needs: the image with gpubench in it, and the volume
/// claim that holds the sweep's directory on every node.
#[derive(Debug, Clone)]
pub struct Pods {
    pub image: String,
    pub claim: String,
    /// `gpubench` inside the image.
    pub gpubench: String,
    /// The manifest's digest (`manifest::digest`), checked by each pod's `cell`.
    pub digest: String,
}

/// The Job for one shape.
pub fn indexed_job(dir: &Path, a: &Shape, max_parallel: Option<usize>, p: &Pods) -> Value {
    let d = dir.display().to_string();
    let cells: Vec<String> = a.cells.iter().map(|c| c.to_string()).collect();
    // The pod's cell: the JOB_COMPLETION_INDEX-th of this Job's list.
    let pick = format!(
        "set -- {}; shift \"$JOB_COMPLETION_INDEX\"; exec {} cell '{d}' \"$1\" --manifest-digest {}",
        cells.join(" "),
        p.gpubench,
        p.digest
    );
    let limits = if a.gpus > 0 { json!({ "nvidia.com/gpu": a.gpus }) } else { json!({ "cpu": a.cpus.max(1) }) };
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": { "name": format!("gpubench-sweep-{}", a.id), "labels": { "app": "gpubench" } },
        "spec": {
            "completionMode": "Indexed",
            "completions": a.cells.len(),
            "parallelism": max_parallel.unwrap_or(a.cells.len()).min(a.cells.len()),
            // A failed cell keeps its row; retrying is `--resume`'s choice, not the Job's.
            "backoffLimitPerIndex": 0,
            "maxFailedIndexes": a.cells.len(),
            "activeDeadlineSeconds": a.time_min * 60 * a.cells.len() as u64,
            "template": {
                "metadata": { "labels": { "app": "gpubench" } },
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "gpubench",
                        "image": p.image,
                        "command": ["/bin/sh", "-c", pick],
                        "env": [
                            { "name": "GPUBENCH_JOB_ID",
                              "valueFrom": { "fieldRef": { "fieldPath": "metadata.labels['job-name']" } } },
                            { "name": "GPUBENCH_NODE_NAME",
                              "valueFrom": { "fieldRef": { "fieldPath": "spec.nodeName" } } }
                        ],
                        "resources": { "limits": limits },
                        "volumeMounts": [{ "name": "sweep", "mountPath": d }]
                    }],
                    "volumes": [{ "name": "sweep", "persistentVolumeClaim": { "claimName": p.claim } }]
                }
            }
        }
    })
}

/// A multi-node cell as a Kubeflow PyTorchJob: a Master pod and M−1
/// Workers, each with the cell's GPUs. The operator sets RANK (the pod's
/// index), WORLD_SIZE, MASTER_ADDR and MASTER_PORT; `cell` takes RANK
/// as its node's rank and runs that node's launcher, so each pod drives all
/// its GPUs. Restarts are off: a failed cell keeps its row.
pub fn pytorch_job(dir: &Path, cell: usize, a: &Shape, p: &Pods) -> Value {
    let d = dir.display().to_string();
    let limits = if a.gpus > 0 { json!({ "nvidia.com/gpu": a.gpus }) } else { json!({ "cpu": a.cpus.max(1) }) };
    let pod = json!({
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "pytorch",
                "image": p.image,
                "command": [p.gpubench, "cell", d, cell.to_string(), "--manifest-digest", p.digest],
                "env": [
                    { "name": "GPUBENCH_JOB_ID",
                      "valueFrom": { "fieldRef": { "fieldPath": "metadata.labels['training.kubeflow.org/job-name']" } } },
                    { "name": "GPUBENCH_NODE_NAME", "valueFrom": { "fieldRef": { "fieldPath": "spec.nodeName" } } }
                ],
                "resources": { "limits": limits },
                "volumeMounts": [{ "name": "sweep", "mountPath": d }]
            }],
            "volumes": [{ "name": "sweep", "persistentVolumeClaim": { "claimName": p.claim } }]
        }
    });
    let replicas = |n: usize| json!({ "replicas": n, "restartPolicy": "Never", "template": pod.clone() });
    json!({
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": { "name": format!("gpubench-sweep-cell-{cell}"), "labels": { "app": "gpubench" } },
        "spec": {
            "runPolicy": { "backoffLimit": 0, "activeDeadlineSeconds": a.time_min * 60 },
            "pytorchReplicaSpecs": { "Master": replicas(1), "Worker": replicas(a.nodes - 1) }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_indexed_job_holds_what_a_cluster_needs() {
        let a = Shape { id: 2, cells: vec![1, 4, 5], gpus: 4, cpus: 0, time_min: 10, nodes: 1 };
        let p = Pods {
            image: "reg/gpubench:1".into(),
            claim: "results".into(),
            gpubench: "gpubench".into(),
            digest: "ab12".into(),
        };
        // Written, then parsed back as kubectl would read it.
        let text = serde_json::to_string_pretty(&indexed_job(Path::new("/shared/sw"), &a, Some(2), &p)).unwrap();
        let j: Value = serde_json::from_str(&text).unwrap();
        assert_eq!((j["apiVersion"].as_str(), j["kind"].as_str()), (Some("batch/v1"), Some("Job")));
        let s = &j["spec"];
        assert_eq!(
            (s["completionMode"].as_str(), s["completions"].as_u64(), s["parallelism"].as_u64()),
            (Some("Indexed"), Some(3), Some(2))
        );
        let pod = &s["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Never");
        let c = &pod["containers"][0];
        assert_eq!(c["image"], "reg/gpubench:1");
        assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], 4);
        let cmd = c["command"][2].as_str().unwrap();
        assert!(
            cmd.starts_with("set -- 1 4 5; shift \"$JOB_COMPLETION_INDEX\"; exec gpubench cell '/shared/sw' \"$1\" --manifest-digest ab12"),
            "{cmd}"
        );
        assert_eq!(c["volumeMounts"][0]["mountPath"], "/shared/sw");
        assert_eq!(pod["volumes"][0]["persistentVolumeClaim"]["claimName"], "results");
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"], "metadata.labels['job-name']");
        // the shell picks the index-th cell
        let o = std::process::Command::new("sh")
            .args(["-c", &cmd.replace("exec gpubench cell '/shared/sw'", "echo")])
            .env("JOB_COMPLETION_INDEX", "1")
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "4 --manifest-digest ab12");
        // A 3-node cell: a PyTorchJob of a Master and two Workers, each pod with the cell's GPUs.
        let three = Shape { nodes: 3, ..a.clone() };
        let text = serde_json::to_string_pretty(&pytorch_job(Path::new("/shared/sw"), 4, &three, &p)).unwrap();
        let j: Value = serde_json::from_str(&text).unwrap();
        assert_eq!((j["apiVersion"].as_str(), j["kind"].as_str()), (Some("kubeflow.org/v1"), Some("PyTorchJob")));
        let r = &j["spec"]["pytorchReplicaSpecs"];
        assert_eq!((r["Master"]["replicas"].as_u64(), r["Worker"]["replicas"].as_u64()), (Some(1), Some(2)));
        let c = &r["Worker"]["template"]["spec"]["containers"][0];
        assert_eq!(c["command"], json!(["gpubench", "cell", "/shared/sw", "4", "--manifest-digest", "ab12"]));
        assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], 4);
        let cpu = Shape { gpus: 0, cpus: 2, ..a };
        assert_eq!(
            indexed_job(Path::new("/d"), &cpu, None, &p)["spec"]["template"]["spec"]["containers"][0]["resources"]
                ["limits"]["cpu"],
            2
        );
    }
}
