//! A sweep handed to a cluster's scheduler (`sweep --emit`): the manifest,
//! Slurm job arrays or Kubernetes Indexed Jobs (in `fleet`'s formats), their
//! submission, and where a node of a multi-node cell sits. The scheduler
//! does the scheduling; this only writes what it reads and runs `sbatch`,
//! `kubectl` or `scontrol` as a user would.
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::time::Duration;

use super::child;
use super::plan::{Emit, Plan, SweepCell};
use crate::error::usage;
use crate::fleet::{collect, k8s, manifest, slurm};
use crate::results::Status;

/// The array's time limit for a cell, minutes: `--cell-timeout`, else twice
/// a timed cell's warm-up and duration plus five minutes (start-up, model
/// building), else half an hour.
fn time_limit_min(cell: &SweepCell, timeout: Option<Duration>) -> u64 {
    use crate::config::Length;
    let secs = match (timeout, &cell.cfg.schedule.timed, &cell.cfg.schedule.warmup) {
        (Some(t), _, _) => t.as_secs_f64(),
        (None, Length::Time(d), w) => {
            let w = if let Length::Time(w) = w { w.as_secs_f64() } else { 60.0 };
            2.0 * (d.as_secs_f64() + w) + 300.0
        }
        _ => 1800.0,
    };
    ((secs / 60.0).ceil() as u64).max(1)
}

/// `sweep --emit slurm DIR`: the manifest, the array script, and the sbatch
/// commands (run with `--submit`). With `--resume`, only the cells without
/// an ok row in their file are emitted again; the manifest keeps every
/// cell, with the tasks of this emission.
pub(crate) fn emit(plan: &Plan, e: &Emit) -> Result<i32> {
    std::fs::create_dir_all(e.dir.join("logs"))
        .and_then(|_| std::fs::create_dir_all(manifest::cells_dir(&e.dir)))
        .map_err(|x| usage(format!("--emit {}: cannot create it ({x})", e.dir.display())))?;
    let dir = e.dir.canonicalize().with_context(|| format!("resolving {}", e.dir.display()))?;
    let cpu = plan.matrix.pool.is_cpu();
    let mut shapes: Vec<(usize, usize, u64, usize)> = vec![];
    let mut entries = vec![];
    for (index, c) in plan.cells.iter().enumerate() {
        // The CPU cell's replicas or ranks each want a core; GPU cells take the cluster's default CPUs.
        let (gpus, cpus) = if cpu { (0, c.n) } else { (c.n, 0) };
        let time_min = time_limit_min(c, plan.cell_timeout);
        let nodes = c.cfg.ddp.nnodes;
        let key = (gpus, cpus, time_min, nodes);
        // Cells that need the same resources share a shape; `assign_arrays`
        // turns shapes into arrays.
        let shape = match shapes.iter().position(|s| *s == key) {
            Some(i) => i + 1,
            None => {
                shapes.push(key);
                shapes.len()
            }
        };
        // The row keeps this process's provenance (the commit and branch
        // under test, the CI run) and takes the sweep's id: the cell sets
        // them again where it runs (`sweep::cell::job`), and a missing
        // cell's row carries them.
        let mut row = crate::bench::row::base_row(&c.cfg);
        row.run_id.clear();
        row.host.clear();
        row.sweep_id.clone_from(&plan.sweep_id);
        entries.push(manifest::Entry {
            index,
            shape,
            task: 0, // set below, among the cells this emission submits
            args: c.args.clone(),
            gpus,
            cpus,
            time_min,
            what: c.describe(),
            row,
            scheduler: if e.k8s.is_some() { "kubernetes" } else { "slurm" }.into(),
            nodes,
        });
    }
    let mpath = manifest::manifest_path(&dir);
    let mut todo: Vec<usize> = (0..entries.len()).collect();
    if plan.resume && mpath.exists() {
        let old = manifest::read(&dir)?;
        if old.iter().map(|x| &x.args).ne(entries.iter().map(|x| &x.args)) {
            return Err(usage(format!(
                "--emit slurm {} --resume: its manifest holds another sweep's cells; give the same matrix, or another directory",
                dir.display()
            )));
        }
        let ok = |i: usize| {
            let rows = crate::results::csv::read_rows(&manifest::cell_path(&dir, i)).unwrap_or_default();
            rows.iter().any(|r| r.status == Status::Ok)
        };
        todo.retain(|&i| !ok(i));
        if todo.is_empty() {
            println!("every cell of {} has an ok row; nothing to emit", dir.display());
            return Ok(0);
        }
        // The cells done keep the arrays and tasks they ran as.
        for (e, o) in entries.iter_mut().zip(&old) {
            (e.shape, e.task) = (o.shape, o.task);
        }
    }
    // Slurm refuses an array whose task ids reach MaxArraySize; Kubernetes'
    // Indexed Jobs have no such limit.
    let limit = if e.k8s.is_some() { None } else { Some(max_array_size(e.max_array_size)) };
    let split = assign_arrays(&mut entries, &todo, limit.as_ref().map(|l| l.0));
    if let (Some((n, from)), true) = (limit, split) {
        println!("note: arrays of more than {n} tasks split to fit Slurm's MaxArraySize ({from})");
    }
    let text = manifest::render(&entries)?;
    let digest = manifest::digest(&text);
    crate::results::write_whole(&mpath, text.as_bytes())?;
    let refs: Vec<&manifest::Entry> = todo.iter().map(|&i| &entries[i]).collect();
    let arrays = slurm::shapes(&refs);
    if let Some(k) = &e.k8s {
        return emit_k8s(&dir, e, k, &arrays, (entries.len(), todo.len()), &digest);
    }
    let gpubench = child::child_program()?;
    let script_path = dir.join("sweep.sbatch");
    crate::results::write_whole(&script_path, slurm::script(&dir, &gpubench, &arrays, &e.sbatch, &digest).as_bytes())?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script_path, std::fs::Permissions::from_mode(0o755))?;
    }
    println!(
        "wrote {} ({} cells) and {} ({} job array{}{})",
        mpath.display(),
        entries.len(),
        script_path.display(),
        arrays.len(),
        if arrays.len() == 1 { "" } else { "s" },
        if todo.len() < entries.len() { format!(", {} cells re-emitted", todo.len()) } else { String::new() }
    );
    let mut jobs = String::new();
    for a in &arrays {
        let args = slurm::sbatch_args(&dir, a, e.max_parallel);
        if !e.submit {
            println!("{}", slurm::command_line(&args));
            continue;
        }
        let o = std::process::Command::new("sbatch").args(&args).output().map_err(|x| {
            anyhow::anyhow!("cannot run sbatch ({x}): run the sweep on a Slurm login node, or drop --submit and submit the printed commands")
        })?;
        if !o.status.success() {
            anyhow::bail!("sbatch refused array {}: {}", a.id, String::from_utf8_lossy(&o.stderr).trim());
        }
        let out = String::from_utf8_lossy(&o.stdout);
        let job = out.trim().split(';').next().unwrap_or_default().to_string();
        println!("submitted array {} ({} cells): job {job}", a.id, a.cells.len());
        jobs += &format!("{} {job}\n", a.id);
    }
    if e.submit {
        let p = collect::jobs_path(&dir);
        let before = std::fs::read_to_string(&p).unwrap_or_default();
        crate::results::write_whole(&p, (before + &jobs).as_bytes())?;
    }
    println!("when the arrays are done: gpubench collect {} --out FILE.csv", dir.display());
    Ok(0)
}

/// Gives each cell of `todo` its array and its task: arrays restart their
/// task ids at 0, so a cell's task is its place among its array's cells in
/// this emission. A shape's first (often only) array keeps the shape's id,
/// so ids stay those of earlier emissions; where a shape has more than
/// `limit` cells, its further arrays take ids after every shape's. The
/// manifest records both, so that a `missing` row names the task that was
/// submitted. True when some shape was split.
fn assign_arrays(entries: &mut [manifest::Entry], todo: &[usize], limit: Option<usize>) -> bool {
    let limit = limit.unwrap_or(usize::MAX).max(1);
    let shapes = entries.iter().map(|e| e.shape).max().unwrap_or(0);
    let mut placed: HashMap<usize, usize> = HashMap::new();
    let mut extra: HashMap<(usize, usize), usize> = HashMap::new();
    for &i in todo {
        let shape = entries[i].shape;
        let t = placed.entry(shape).or_default();
        let chunk = *t / limit;
        entries[i].task = *t % limit;
        *t += 1;
        if chunk > 0 {
            let next = shapes + extra.len() + 1;
            entries[i].shape = *extra.entry((shape, chunk)).or_insert(next);
        }
    }
    !extra.is_empty()
}

/// The most tasks a Slurm array may hold, and where that figure came from:
/// `--max-array-size`, else the cluster's MaxArraySize (`scontrol show
/// config`), else Slurm's default.
fn max_array_size(given: Option<usize>) -> (usize, String) {
    if let Some(n) = given {
        return (n, "--max-array-size".into());
    }
    let said = std::process::Command::new("scontrol")
        .args(["show", "config"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| parse_max_array_size(&String::from_utf8_lossy(&o.stdout)));
    match said {
        Some(n) => (n, "scontrol show config".into()),
        None => (slurm::DEFAULT_MAX_ARRAY_SIZE, "Slurm's default; scontrol did not answer".into()),
    }
}

/// `MaxArraySize = 1001` in `scontrol show config`'s output.
fn parse_max_array_size(config: &str) -> Option<usize> {
    config.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "MaxArraySize").then(|| v.trim().parse().ok()).flatten().filter(|&n| n > 0)
    })
}

/// `--emit k8s`: an Indexed Job per shape into `DIR/k8s/`, applied with
/// `--submit` (kubectl), else the command printed.
fn emit_k8s(
    dir: &std::path::Path,
    e: &Emit,
    k: &super::plan::K8s,
    arrays: &[crate::fleet::slurm::Shape],
    (cells, emitted): (usize, usize),
    digest: &str,
) -> Result<i32> {
    let jobs_dir = dir.join("k8s");
    std::fs::create_dir_all(&jobs_dir).with_context(|| format!("creating {}", jobs_dir.display()))?;
    let pods = k8s::Pods {
        image: k.image.clone(),
        claim: k.claim.clone(),
        gpubench: "gpubench".into(),
        digest: digest.into(),
    };
    let mut names = String::new();
    for a in arrays.iter().filter(|a| a.nodes > 1) {
        for &cell in &a.cells {
            let job = k8s::pytorch_job(dir, cell, a, &pods);
            let path = jobs_dir.join(format!("cell-{cell}.json"));
            crate::results::write_whole(&path, (serde_json::to_string_pretty(&job)? + "\n").as_bytes())?;
            names += &format!("{} {}\n", a.id, job["metadata"]["name"].as_str().unwrap_or_default());
        }
    }
    for a in arrays.iter().filter(|a| a.nodes == 1) {
        let job = k8s::indexed_job(dir, a, e.max_parallel, &pods);
        let path = jobs_dir.join(format!("job-{}.json", a.id));
        crate::results::write_whole(&path, (serde_json::to_string_pretty(&job)? + "\n").as_bytes())?;
        names += &format!("{} {}\n", a.id, job["metadata"]["name"].as_str().unwrap_or_default());
    }
    println!(
        "wrote {} ({cells} cells) and {} Indexed Job{}{} in {}{}",
        manifest::manifest_path(dir).display(),
        arrays.iter().filter(|a| a.nodes == 1).count(),
        if arrays.iter().filter(|a| a.nodes == 1).count() == 1 { "" } else { "s" },
        match arrays.iter().filter(|a| a.nodes > 1).map(|a| a.cells.len()).sum::<usize>() {
            0 => String::new(),
            n => format!(" and {n} PyTorchJob{}", if n == 1 { "" } else { "s" }),
        },
        jobs_dir.display(),
        if emitted < cells { format!(", {emitted} cells re-emitted") } else { String::new() }
    );
    if e.submit {
        let o = std::process::Command::new("kubectl").arg("apply").arg("-f").arg(&jobs_dir).output().map_err(|x| {
            anyhow::anyhow!("cannot run kubectl ({x}): drop --submit and apply {} yourself", jobs_dir.display())
        })?;
        if !o.status.success() {
            anyhow::bail!("kubectl apply refused the Jobs: {}", String::from_utf8_lossy(&o.stderr).trim());
        }
        print!("{}", String::from_utf8_lossy(&o.stdout));
        let p = collect::jobs_path(dir);
        let before = std::fs::read_to_string(&p).unwrap_or_default();
        crate::results::write_whole(&p, (before + &names).as_bytes())?;
    } else {
        println!("kubectl apply -f {}", jobs_dir.display());
    }
    println!("when the Jobs are done: gpubench collect {} --out FILE.csv", dir.display());
    Ok(0)
}

/// Where this node sits in a multi-node cell: its rank (SLURM_NODEID, one
/// task per node; a PyTorchJob pod's RANK: read by `cell DIR INDEX` before
/// it clears the rank variables), and the rendezvous: MASTER_ADDR, else the job's first
/// node (`scontrol show hostnames`); MASTER_PORT, else one derived from the
/// job id, so that two cells on one node do not collide.
pub(crate) fn node_placement(node_rank: Option<usize>) -> Result<(usize, String, u16)> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let node_rank = node_rank.ok_or_else(|| {
        usage("a multi-node cell runs one task per node: under srun (SLURM_NODEID) or a PyTorchJob (RANK)")
    })?;
    let addr = match var("MASTER_ADDR") {
        Some(a) => a,
        None => {
            let list =
                var("SLURM_JOB_NODELIST").ok_or_else(|| usage("neither MASTER_ADDR nor SLURM_JOB_NODELIST is set"))?;
            let o = std::process::Command::new("scontrol")
                .args(["show", "hostnames", &list])
                .output()
                .context("running scontrol show hostnames")?;
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_string)
                .ok_or_else(|| anyhow::anyhow!("scontrol show hostnames {list} gave no host"))?
        }
    };
    let port = match var("MASTER_PORT") {
        Some(p) => p.parse().map_err(|_| usage(format!("MASTER_PORT={p} is not a port")))?,
        None => 20000 + (var("SLURM_JOB_ID").and_then(|j| j.parse::<u64>().ok()).unwrap_or(0) % 20000) as u16,
    };
    Ok((node_rank, addr, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: usize, shape: usize) -> manifest::Entry {
        manifest::Entry {
            index,
            shape,
            task: 0,
            args: vec![],
            gpus: 0,
            cpus: 1,
            time_min: 5,
            what: String::new(),
            row: Default::default(),
            scheduler: "slurm".into(),
            nodes: 1,
        }
    }

    #[test]
    fn a_shape_larger_than_max_array_size_takes_several_arrays() {
        // Shape 1 has five cells, shape 2 one; at most two tasks per array.
        let mut es: Vec<_> = [1, 1, 2, 1, 1, 1].iter().enumerate().map(|(i, &s)| entry(i, s)).collect();
        let todo: Vec<usize> = (0..es.len()).collect();
        assert!(assign_arrays(&mut es, &todo, Some(2)));
        let placed: Vec<(usize, usize)> = es.iter().map(|e| (e.shape, e.task)).collect();
        assert_eq!(placed, [(1, 0), (1, 1), (2, 0), (3, 0), (3, 1), (4, 0)]);
        let refs: Vec<&manifest::Entry> = es.iter().collect();
        let arrays = slurm::shapes(&refs);
        assert!(arrays.iter().all(|a| a.cells.len() <= 2), "{arrays:?}");
        assert_eq!(arrays.iter().map(|a| a.cells.len()).sum::<usize>(), 6);
        // A shape's first array keeps its id; the rest come after every shape's.
        let mut es: Vec<_> = [1, 2, 2, 2].iter().enumerate().map(|(i, &s)| entry(i, s)).collect();
        assert!(assign_arrays(&mut es, &[0, 1, 2, 3], Some(2)));
        assert_eq!(es.iter().map(|e| (e.shape, e.task)).collect::<Vec<_>>(), [(1, 0), (2, 0), (2, 1), (3, 0)]);
        // Without a limit, one array per shape, as before.
        let mut es: Vec<_> = [1, 1, 2, 1].iter().enumerate().map(|(i, &s)| entry(i, s)).collect();
        assert!(!assign_arrays(&mut es, &[0, 1, 2, 3], None));
        assert_eq!(es.iter().map(|e| (e.shape, e.task)).collect::<Vec<_>>(), [(1, 0), (1, 1), (2, 0), (1, 2)]);
    }

    #[test]
    fn max_array_size_is_read_off_scontrol_show_config() {
        let cfg = "Configuration data as of 2026-12-06T01:00:00\nMailProg                = /bin/mail\nMaxArraySize            = 40001\nMaxJobCount             = 10000\n";
        assert_eq!(parse_max_array_size(cfg), Some(40001));
        assert_eq!(parse_max_array_size("MaxJobCount = 10\n"), None);
        assert_eq!(parse_max_array_size("MaxArraySize = 0\n"), None);
    }
}
