//! Where a ddp process sits in the job, from the environment: our own
//! launcher's, torchrun's (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
//! MASTER_ADDR, MASTER_PORT) or Slurm's (SLURM_PROCID, SLURM_NTASKS,
//! SLURM_LOCALID). None of them set means this process is the launcher.
//! Whether gpubench's own launcher started this rank is not read from the
//! environment: such a rank runs as the hidden `rank` subcommand
//! (`crate::internal::Child::Rank`).
use anyhow::Result;

use crate::error::usage;

/// The rendezvous port when neither MASTER_PORT nor --master-port says.
pub(crate) const DEFAULT_PORT: u16 = 29500;
/// The variables that make a process a rank; a child that must not be one
/// (the PyTorch reference) has them removed.
pub(crate) const RANK_VARS: [&str; 4] = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"];

/// Where this process sits in the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistEnv {
    pub rank: usize,
    pub world_size: usize,
    pub local_rank: usize,
    /// Ranks on this node (LOCAL_WORLD_SIZE), when the launcher says.
    pub local_world: Option<usize>,
    pub master_addr: String,
    pub master_port: u16,
    /// Started by gpubench's own launcher (which also writes the failure row).
    pub ours: bool,
}

fn var(get: &dyn Fn(&str) -> Option<String>, name: &str) -> Result<Option<usize>> {
    match get(name) {
        None => Ok(None),
        Some(v) => v.trim().parse().map(Some).map_err(|_| {
            usage(format!("environment variable {name}={v:?} is not a whole number; unset it or fix the launcher"))
        }),
    }
}

/// Started as a Kubeflow PyTorchJob's pod: the operator sets RANK,
/// WORLD_SIZE, MASTER_ADDR and MASTER_PORT in a Kubernetes pod
/// (KUBERNETES_PORT), and none of the per-node variables torchrun would
/// (LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK): the test Lightning's
/// KubeflowEnvironment makes.
pub(crate) fn is_kubeflow(get: &dyn Fn(&str) -> Option<String>) -> bool {
    ["KUBERNETES_PORT", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"].iter().all(|k| get(k).is_some())
        && ["LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"].iter().all(|k| get(k).is_none())
}

impl DistEnv {
    /// Reads torchrun's or Slurm's variables through `get`; None when neither
    /// is set, i.e. when this process should launch the workers itself.
    /// `master_addr` and `master_port` (the flags) stand in for
    /// MASTER_ADDR/MASTER_PORT when those are unset; `ours`: our launcher
    /// started this process (as the `rank` subcommand).
    pub(crate) fn detect(
        master_addr: Option<&str>,
        master_port: Option<u16>,
        get: &dyn Fn(&str) -> Option<String>,
        ours: bool,
    ) -> Result<Option<DistEnv>> {
        let kubeflow = is_kubeflow(get);
        let (rank, world, local) = if let (Some(r), Some(w)) = (var(get, "RANK")?, var(get, "WORLD_SIZE")?) {
            // A PyTorchJob's pod is one rank on its own node: its GPU 0. By
            // hand on one multi-GPU node, a missing LOCAL_RANK is the rank.
            (r, w, if kubeflow { 0 } else { var(get, "LOCAL_RANK")?.unwrap_or(r) })
        } else if let (Some(r), Some(w)) = (var(get, "SLURM_PROCID")?, var(get, "SLURM_NTASKS")?) {
            (r, w, var(get, "SLURM_LOCALID")?.unwrap_or(r))
        } else {
            return Ok(None);
        };
        if world == 0 || rank >= world {
            return Err(usage(format!("rank {rank} is not below world size {world}; check the launcher's variables")));
        }
        let master_addr = get("MASTER_ADDR")
            .or_else(|| master_addr.map(str::to_string))
            .ok_or_else(|| usage("MASTER_ADDR is not set: export MASTER_ADDR=<rank 0's host> or pass --master-addr"))?;
        let master_port = match get("MASTER_PORT") {
            Some(p) => p.trim().parse().map_err(|_| usage(format!("MASTER_PORT={p:?} is not a port number")))?,
            None => master_port.unwrap_or(DEFAULT_PORT),
        };
        // torchrun says how many ranks share a node; Slurm does not, but its
        // tasks spread evenly over SLURM_NNODES nodes tell the same (G17:
        // without it a Slurm job's rows listed cuda:0..world-1 on one node).
        let slurm_local = || -> Result<Option<usize>> {
            let nodes = match var(get, "SLURM_NNODES")? {
                Some(n) => Some(n),
                None => var(get, "SLURM_JOB_NUM_NODES")?,
            };
            Ok(nodes.filter(|&n| n > 0 && world % n == 0 && get("SLURM_PROCID").is_some()).map(|n| world / n))
        };
        let local_world = match var(get, "LOCAL_WORLD_SIZE")?.filter(|&n| n > 0) {
            Some(n) => Some(n),
            None if kubeflow => Some(1),
            None => slurm_local()?,
        };
        Ok(Some(DistEnv { rank, world_size: world, local_rank: local, local_world, master_addr, master_port, ours }))
    }

    /// This process's environment; `ours` as in `detect`.
    pub(crate) fn from_process(
        master_addr: Option<&str>,
        master_port: Option<u16>,
        ours: bool,
    ) -> Result<Option<DistEnv>> {
        let env = DistEnv::detect(master_addr, master_port, &|k| std::env::var(k).ok(), ours)?;
        if ours && env.is_none() {
            return Err(usage("`gpubench rank` is started by gpubench's launcher, with RANK and WORLD_SIZE set"));
        }
        Ok(env)
    }

    /// Nodes in the job, as far as the variables tell (one when they do not
    /// say how many ranks share a node).
    pub(crate) fn nnodes(&self) -> usize {
        (self.world_size / self.local_world.unwrap_or(self.world_size)).max(1)
    }

    /// The ranks that share this node's cores (one when unknown).
    pub(crate) fn ranks_on_node(&self) -> usize {
        self.local_world.unwrap_or(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn no_variables_means_launch() {
        assert_eq!(DistEnv::detect(None, None, &env(&[]), false).unwrap(), None);
    }

    /// The four ways a rank starts, told apart: a PyTorchJob pod is local
    /// rank 0 of one; torchrun says its local rank; Slurm's tasks spread over
    /// its nodes; by hand on one node, a missing LOCAL_RANK is the rank.
    #[test]
    fn a_pytorchjob_pod_is_local_rank_0_of_its_own_node() {
        let kf = [("RANK", "3"), ("WORLD_SIZE", "4"), ("MASTER_ADDR", "job-master-0"), ("MASTER_PORT", "23456")];
        let pod = |extra: &[(&str, &str)]| {
            let mut v = kf.to_vec();
            v.extend_from_slice(extra);
            DistEnv::detect(None, None, &env(&v), false).unwrap().unwrap()
        };
        let d = pod(&[("KUBERNETES_PORT", "tcp://10.96.0.1:443")]);
        assert_eq!((d.rank, d.world_size, d.local_rank, d.local_world, d.nnodes()), (3, 4, 0, Some(1), 4));
        // torchrun inside a pod sets LOCAL_RANK: it is not a PyTorchJob rank.
        let d = pod(&[("KUBERNETES_PORT", "tcp://10.96.0.1:443"), ("LOCAL_RANK", "1"), ("LOCAL_WORLD_SIZE", "2")]);
        assert_eq!((d.local_rank, d.local_world), (1, Some(2)));
        // by hand, outside Kubernetes
        let d = pod(&[]);
        assert_eq!((d.local_rank, d.local_world), (3, None));
        // Slurm
        let s = env(&[
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_NNODES", "2"),
            ("MASTER_ADDR", "n0"),
        ]);
        let d = DistEnv::detect(None, None, &s, false).unwrap().unwrap();
        assert_eq!((d.local_rank, d.local_world), (1, Some(2)));
        assert!(!is_kubeflow(&s));
    }

    #[test]
    fn torchrun_variables() {
        let e = env(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_RANK", "1"),
            ("LOCAL_WORLD_SIZE", "4"),
            ("MASTER_ADDR", "node0"),
            ("MASTER_PORT", "1234"),
        ]);
        let d = DistEnv::detect(None, None, &e, false).unwrap().unwrap();
        assert_eq!((d.rank, d.world_size, d.local_rank, d.master_port), (3, 8, 1, 1234));
        assert_eq!(d.master_addr, "node0");
        assert_eq!((d.nnodes(), d.ranks_on_node()), (2, 4));
        assert!(!d.ours);
    }

    #[test]
    fn slurm_variables_with_flags_for_the_master() {
        let e = env(&[("SLURM_PROCID", "5"), ("SLURM_NTASKS", "8"), ("SLURM_LOCALID", "1")]);
        let d = DistEnv::detect(Some("n0"), Some(4000), &e, false).unwrap().unwrap();
        assert_eq!((d.rank, d.world_size, d.local_rank, d.master_port), (5, 8, 1, 4000));
        assert_eq!((d.nnodes(), d.ranks_on_node()), (1, 1));
        let err = DistEnv::detect(None, None, &e, false).unwrap_err();
        assert!(err.to_string().contains("MASTER_ADDR"));
        // Eight tasks on two nodes: four share each node (G17).
        let e = env(&[("SLURM_PROCID", "5"), ("SLURM_NTASKS", "8"), ("SLURM_NNODES", "2"), ("MASTER_ADDR", "n0")]);
        let d = DistEnv::detect(None, None, &e, false).unwrap().unwrap();
        assert_eq!((d.nnodes(), d.ranks_on_node()), (2, 4));
        // Tasks that do not spread evenly: unknown, as before.
        let e = env(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "3"), ("SLURM_NNODES", "2"), ("MASTER_ADDR", "n0")]);
        assert_eq!(DistEnv::detect(None, None, &e, false).unwrap().unwrap().ranks_on_node(), 1);
    }

    #[test]
    fn bad_variables_are_usage_errors() {
        let e = env(&[("RANK", "x"), ("WORLD_SIZE", "2")]);
        assert_eq!(crate::error::exit_code(&DistEnv::detect(None, None, &e, false).unwrap_err()), 2);
        let e = env(&[("RANK", "2"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "a")]);
        assert!(DistEnv::detect(None, None, &e, false).is_err());
    }
}
