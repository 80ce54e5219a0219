//! An emitted sweep's cell where it runs (`gpubench cell DIR INDEX`, what a
//! Slurm array task or a Kubernetes pod starts): its manifest entry made
//! ready for this node (the scheduler's variables read and cleared, the
//! sweep's place in history set), then run into its own file, renamed into
//! place whole, with a row of its own when the scheduler stops it.
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

use super::cells::{CellOutcome, Runner};
use super::child;
use super::plan::SweepCell;
use crate::config::RunConfig;
use crate::error::usage;
use crate::report::format::{fmt_mib, fmt_rate, row_peak_mem, short_error};
use crate::results::{long, Status};

/// The manifest's cell `index` of the sweep in `dir`, with this node's rank
/// in a multi-node cell (SLURM_NODEID under srun, a PyTorchJob pod's RANK on
/// Kubernetes); `validate` makes its configuration from its arguments as
/// `gpubench run` would (the command line's conversion, passed in).
pub(crate) fn job(
    dir: &Path,
    index: &str,
    digest: Option<&str>,
    validate: &dyn Fn(usize, &[String]) -> Result<RunConfig>,
) -> Result<CellJob> {
    let entries = crate::fleet::manifest::read_checked(dir, digest)?;
    let e = index.parse::<usize>().ok().and_then(|i| entries.get(i)).ok_or_else(|| {
        usage(format!(
            "cell {} {index}: the manifest has cells 0 to {}",
            dir.display(),
            entries.len().saturating_sub(1)
        ))
    })?;
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let kubernetes = var("SLURM_NODEID").is_none() && var("KUBERNETES_PORT").is_some();
    let node = if kubernetes { var("RANK") } else { var("SLURM_NODEID") };
    let node_rank = node
        .map(|r| r.parse::<usize>().map_err(|_| usage(format!("cell {index}: node rank {r} is not a number"))))
        .transpose()?;
    // Inside a batch step, Slurm's SLURM_PROCID/SLURM_NTASKS describe the
    // step's one task, not ranks of this cell, and a PyTorchJob pod's RANK
    // is its node's: the cell launches its own ranks and must not take
    // itself for rank 0 of a world of 1. Removed here, before anything of
    // this process can start a thread.
    for v in ["SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_LOCALID", "RANK", "WORLD_SIZE", "LOCAL_RANK"] {
        std::env::remove_var(v);
    }
    // The sweep's place in history, as it was where the sweep was emitted
    // (the manifest's row): the commit under test, not whatever checkout
    // this node runs in, and the sweep's one id. Set here, as above, for
    // this process's rows and its ranks'.
    use crate::fleet::{BRANCH_VAR, CI_URL_VAR, COMMIT_VAR, SWEEP_ID_VAR};
    let r = &e.row;
    for (var, value) in
        [(COMMIT_VAR, &r.commit), (BRANCH_VAR, &r.branch), (SWEEP_ID_VAR, &r.sweep_id), (CI_URL_VAR, &r.ci_url)]
    {
        if !value.is_empty() {
            std::env::set_var(var, value);
        }
    }
    let cfg = validate(e.index, &e.args)?;
    Ok(CellJob {
        dir: dir.to_path_buf(),
        index: e.index,
        total: entries.len(),
        cell: SweepCell::of_config(e.args.clone(), cfg),
        node_rank,
    })
}

/// One line per finished cell.
pub(crate) fn cell_line(i: usize, total: usize, what: &str, o: &CellOutcome) -> String {
    let r = &o.row;
    let w = total.to_string().len();
    let mut s = format!("[{i:>w$}/{total}] {what:<30} {:<8}", r.status);
    if let Some(t) = r.throughput_img_s {
        s += &format!(" {:>9} img/s", fmt_rate(t));
        if let Some(p) = r.throughput_per_device_img_s {
            s += &format!(" ({}/dev)", fmt_rate(p));
        }
    }
    if let Some((m, kind)) = row_peak_mem(r) {
        s += &format!(" · peak {} {kind}", fmt_mib(m));
    }
    s += &format!(" · {:.1}s", o.secs);
    if !r.error.is_empty() {
        s += &format!(" · {}", short_error(&r.error, 160));
    }
    if o.written_by_sweep {
        s += " (row written by the sweep)";
    }
    s
}

/// Cell `index` of the `total` an emitted sweep in `dir` holds, ready to
/// run on this node (`node_rank` in a multi-node cell).
pub(crate) struct CellJob {
    pub dir: PathBuf,
    pub index: usize,
    pub total: usize,
    pub cell: SweepCell,
    pub node_rank: Option<usize>,
}

/// `cell DIR INDEX`: one cell into `DIR/cells/INDEX.csv`, written beside
/// and renamed into place, so that a node never appends to a shared file
/// and a reader never sees half of one. A cell run again replaces its file
/// and keeps the previous one beside it, saying so.
pub(crate) fn run(job: &CellJob) -> Result<i32> {
    use crate::fleet::manifest::cell_path;
    let (dir, index, total) = (job.dir.as_path(), job.index, job.total);
    let nodes = job.cell.cfg.ddp.nnodes;
    let mut cell = job.cell.clone();
    if nodes > 1 {
        let (node_rank, addr, port) = crate::sweep::emit::node_placement(job.node_rank)?;
        cell.args.extend([
            "--node-rank".into(),
            node_rank.to_string(),
            "--master-addr".into(),
            addr,
            "--master-port".into(),
            port.to_string(),
        ]);
        if node_rank > 0 {
            // Node 0's launcher writes the row; the others only run their ranks.
            child::install_interrupt_handler();
            let mut argv: Vec<std::ffi::OsString> = vec!["run".into()];
            argv.extend(cell.args.iter().map(std::ffi::OsString::from));
            argv.push("--quiet".into());
            let program = child::child_program()?;
            let spec = child::ChildSpec {
                program: &program,
                args: argv,
                env: vec![],
                mem_limit: None,
                inherit_fd: None,
                timeout: None,
            };
            let res = child::run(&spec, || {})?;
            println!("cell {index}: node {node_rank} of {nodes} ended ({:?})", res.ended.exit);
            return Ok(if res.ended.exit == crate::proc::Exit::Code(0) { 0 } else { 1 });
        }
    }
    let cell = &cell;
    let final_path = cell_path(dir, index);
    let tmp = final_path.with_file_name(format!(".{index}.{}.csv", std::process::id()));
    child::install_interrupt_handler();
    // The sweep's id came with the manifest, into this process's environment (`job`).
    let runner = Runner {
        program: child::child_program()?,
        out: tmp.clone(),
        mem_limit: None,
        timeout: None,
        inherit_fd: None,
        sweep_id: None,
    };
    let t0 = std::time::Instant::now();
    let o = runner.run(cell);
    let tmp_devs = long::devices_path(&tmp);
    let o = match o {
        Ok(o) => o,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            let _ = std::fs::remove_file(&tmp_devs);
            if !e.is::<crate::sweep::cells::Interrupted>() {
                return Err(e);
            }
            // Cancelled or preempted: the scheduler sent SIGTERM (SIGKILL
            // follows after its KillWait). The cell's processes are stopped
            // already; its row says so, so that collect shows why and
            // --resume emits it again.
            let sig = child::interrupt_signal().unwrap_or(libc::SIGTERM);
            let row = interrupted_row(cell, sig, t0.elapsed());
            keep_previous_cell(&final_path, index)?;
            crate::results::write_whole(
                &final_path,
                crate::results::csv::rows_text(std::slice::from_ref(&row)).as_bytes(),
            )?;
            eprintln!("gpubench: cell {index}: {}", row.error);
            return Ok(128 + sig);
        }
    };
    keep_previous_cell(&final_path, index)?;
    if tmp_devs.exists() {
        std::fs::rename(&tmp_devs, long::devices_path(&final_path))?;
    }
    std::fs::rename(&tmp, &final_path).with_context(|| format!("writing {}", final_path.display()))?;
    println!("{}", cell_line(index + 1, total, &cell.describe(), &o));
    Ok(if o.row.status == Status::Ok { 0 } else { 1 })
}

/// A cell run again keeps its previous files beside the new ones.
fn keep_previous_cell(final_path: &Path, index: usize) -> Result<()> {
    if let Some(kept) = crate::results::keep_beside(final_path)? {
        eprintln!("gpubench: cell {index} ran again; its previous file is kept as {}", kept.display());
    }
    Ok(())
}

/// The row of a cell whose task was stopped by a signal: the scheduler's
/// cancellation, preemption or time limit (Slurm sends SIGTERM for each).
fn interrupted_row(cell: &SweepCell, sig: libc::c_int, ran: std::time::Duration) -> crate::results::csv::Row {
    let mut row = crate::bench::row::base_row(&cell.cfg);
    row.threads = cell.cfg.host.count().map(|t| t as u32);
    row.status = Status::Failed;
    let name = crate::proc::signal_name(sig);
    row.error = format!(
        "stopped by {name} after {:.1} s: the scheduler cancelled or preempted the task, or its time limit passed \
         (`sweep --emit … --resume` emits it again)",
        ran.as_secs_f64()
    );
    row.note = "row written by gpubench cell: the run was stopped before it wrote one".into();
    row
}
