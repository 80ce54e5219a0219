//! `gpubench sweep`: runs the plan's cells one by one (each in its own
//! process), a line per finished cell, then the report's table over the
//! matrix's rows and, with `--charts`, its charts.
use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::HashMap;
use std::fs::File;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use crate::error::usage;
use crate::report::charts;
use crate::report::format::{fmt_mib, fmt_rate, row_peak_mem, short_error};
use crate::results::{long, Status};
use crate::sweep::cells::{lock_path, read_rows_if_any, wait_lock, CellOutcome, Interrupted, Runner};
use crate::sweep::child;
use crate::sweep::plan::{Cell, CellKey, Emit, Plan};

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

fn say(pb: &ProgressBar, line: &str) {
    if pb.is_hidden() {
        println!("{line}");
    } else {
        pb.suspend(|| println!("{line}"));
    }
}

/// The command line that continues this sweep.
fn resume_command() -> String {
    let args: Vec<String> = std::env::args().collect();
    resume_of(&args).iter().map(|a| crate::proc::shell_quote(a)).collect::<Vec<_>>().join(" ")
}

/// `args` with `--resume` among the sweep's own options (before the run
/// options after `--`), unless it is there already.
fn resume_of(args: &[String]) -> Vec<String> {
    let dashes = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let mut v = args.to_vec();
    if !args[..dashes].iter().any(|a| a == "--resume") {
        v.insert(dashes, "--resume".into());
    }
    v
}

/// `gpubench sweep`.
pub(crate) fn run(plan: Plan) -> Result<i32> {
    if let Some(e) = &plan.emit {
        return emit(&plan, e);
    }
    if plan.preset_creates_results_dir() {
        std::fs::create_dir_all("results").context("creating results/ for the demo")?;
    }
    crate::results::check_out(&plan.out)?;
    if let Some(dir) = &plan.charts {
        std::fs::create_dir_all(dir)
            .map_err(|e| usage(format!("--charts {}: cannot create directory ({e})", dir.display())))?;
    }
    child::install_interrupt_handler();
    let program = child::child_program()?;
    let lock_file_path = lock_path(&plan.out);
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_file_path)
        .with_context(|| format!("cannot open {}", lock_file_path.display()))?;

    // One sweep per results file at a time; after a kill -9, this also waits
    // for any process of the killed sweep that could still append.
    wait_lock(&lock, &lock_file_path)?;
    // Which cells are done already.
    let mut todo: Vec<&Cell> = plan.cells.iter().collect();
    let mut skipped = 0;
    if plan.resume {
        let mut done: HashMap<CellKey, usize> = HashMap::new();
        for r in read_rows_if_any(&plan.out)? {
            if r.status == Status::Ok {
                if let Some(k) = CellKey::of_row(&r) {
                    *done.entry(k).or_default() += 1;
                }
            }
        }
        todo.retain(|c| match done.get_mut(&c.key) {
            Some(k) if *k > 0 => {
                *k -= 1;
                false
            }
            _ => true,
        });
        skipped = plan.cells.len() - todo.len();
    }
    use std::os::fd::AsRawFd;
    let runner = Runner {
        program,
        out: plan.out.clone(),
        mem_limit: plan.mem_limit,
        timeout: plan.cell_timeout,
        inherit_fd: Some(lock.as_raw_fd()),
    };

    eprintln!("gpubench sweep: {}", plan.describe());
    for n in &plan.notes {
        eprintln!("note: {n}");
    }
    if plan.resume {
        eprintln!(
            "resume: {skipped} of {} cells already have an ok row in {}; {} to run",
            plan.cells.len(),
            plan.out.display(),
            todo.len()
        );
    }

    let pb = if std::io::stderr().is_terminal() {
        let pb = ProgressBar::with_draw_target(Some(todo.len() as u64), ProgressDrawTarget::stderr());
        pb.set_style(
            ProgressStyle::with_template(
                "{spinner} sweep [{bar:30}] {pos}/{len} cells · {elapsed_precise} · ETA {eta} · {msg}",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        pb.enable_steady_tick(Duration::from_millis(200));
        pb
    } else {
        ProgressBar::hidden()
    };
    let t0 = Instant::now();
    let mut counts: HashMap<String, usize> = HashMap::new();
    let total = todo.len();
    for (i, c) in todo.iter().enumerate() {
        pb.set_message(c.describe());
        let res = runner.run(c);
        let o = match res {
            Ok(o) => o,
            Err(e) if e.is::<Interrupted>() => {
                pb.finish_and_clear();
                eprintln!(
                    "interrupted: stopped cell {} ({}) and its processes; the rows of finished cells ({i} in this \
                     session) are kept in {}",
                    i + 1,
                    c.describe(),
                    plan.out.display()
                );
                eprintln!("resume with: {}", resume_command());
                return Ok(130);
            }
            Err(e) => {
                pb.finish_and_clear();
                return Err(e.context(format!("cell {}", c.describe())));
            }
        };
        *counts.entry(o.row.status.name().to_string()).or_default() += 1;
        say(&pb, &cell_line(i + 1, total, &c.describe(), &o));
        pb.inc(1);
    }
    pb.finish_and_clear();

    let summary = summarize_plan(&plan)?;
    for t in summary.tables() {
        super::report::print(&crate::report::export::exporter(crate::report::export::Format::Table).export(t)?)?;
    }
    if plan.charts.is_some() || plan.html.is_some() {
        // The rows are safe in --out already: a chart or page that fails costs only itself.
        if let Err(e) = render(&plan, &summary) {
            eprintln!("note: {}", crate::error::one_line(&e));
        }
    }
    let mut parts: Vec<String> =
        ["ok", "oom", "diverged", "failed"].iter().filter_map(|s| counts.get(*s).map(|n| format!("{n} {s}"))).collect();
    if skipped > 0 {
        parts.push(format!("{skipped} skipped (already ok)"));
    }
    println!(
        "sweep done: {total} cell(s) run in {} ({}); rows in {}",
        humantime::format_duration(Duration::from_secs(t0.elapsed().as_secs())),
        parts.join(", "),
        plan.out.display()
    );
    let bad = counts.get("failed").copied().unwrap_or(0) + counts.get("diverged").copied().unwrap_or(0);
    Ok(if bad > 0 { 1 } else { 0 })
}

/// The summary of a finished sweep: the report's table (medians with the
/// repeats' spread, scaling against the 1-device run of the same config, the
/// strategies ranked `>` or `≈`), over this matrix's rows.
pub(crate) struct Summary {
    pub table: crate::report::export::Table,
    pub runs: Vec<crate::report::summary::Run>,
    pub groups: Vec<crate::report::summary::Group>,
    /// The per-device rows the groups were summarized with, for the charts.
    pub devices: long::DeviceData,
    /// Why each multi-device configuration falls short of ideal scaling,
    /// and its waterfall; empty without multi-device configurations.
    pub verdicts: Vec<crate::report::export::Table>,
    /// The verdicts themselves, for the chart.
    pub why: Vec<crate::report::verdict::Verdict>,
}

impl Summary {
    /// The report's table, then the verdicts' when there are any.
    pub(crate) fn tables(&self) -> Vec<&crate::report::export::Table> {
        std::iter::once(&self.table).chain(&self.verdicts).collect()
    }
}

pub(crate) fn summarize_plan(plan: &Plan) -> Result<Summary> {
    use crate::report::summary::{self as rs, Scope};
    let keys: std::collections::HashSet<&CellKey> = plan.cells.iter().map(|c| &c.key).collect();
    let all = if plan.out.exists() { rs::load_files(std::slice::from_ref(&plan.out))? } else { vec![] };
    let runs: Vec<rs::Run> =
        all.into_iter().filter(|r| CellKey::of_row(&r.row).is_some_and(|k| keys.contains(&k))).collect();
    let (devices, _) = long::load_devices(std::slice::from_ref(&plan.out));
    let idx: Vec<usize> = (0..runs.len()).collect();
    let groups = rs::summarize(&runs, &idx, Scope::of, &devices);
    let mut table = rs::report_table(&runs, &groups, std::slice::from_ref(&plan.out));
    table.title = format!("sweep summary ({} row(s) of this matrix in {})", runs.len(), plan.out.display());
    let v = crate::report::verdict::verdicts(&runs, &groups, &super::report::expected_allreduce(&runs));
    // A sweep's file holds its cells only: no all-reduce curve to look for.
    let verdicts = super::report::verdict_tables(&v, false);
    Ok(Summary { table, runs, groups, devices, verdicts, why: v })
}

/// The report's charts for the sweep's rows into `--charts`, and the page
/// into `--html`, as `report` writes them.
fn render(plan: &Plan, s: &Summary) -> Result<()> {
    use crate::report::html::Page;
    let (dir, html) = (plan.charts.as_deref(), plan.html.as_deref());
    let Some(mut w) = super::report::charts_for(dir, html)? else { return Ok(()) };
    let mut notes = charts::report_charts(&mut w, &s.runs, &s.groups, &s.devices).context("charts not written")?;
    notes.extend(charts::verdict_chart(&mut w, &s.why)?);
    let page =
        |sections| Page { title: "gpubench sweep".into(), inputs: vec![plan.out.clone()], outcome: None, sections };
    let tables: Vec<crate::report::export::Table> = s.tables().into_iter().cloned().collect();
    super::report::finish(Some(w), dir, html, notes, page, &tables)
}

/// The array's time limit for a cell, minutes: `--cell-timeout`, else twice
/// a timed cell's warm-up and duration plus five minutes (start-up, model
/// building), else half an hour.
fn time_limit_min(cell: &Cell, timeout: Option<Duration>) -> u64 {
    use crate::config::Length;
    let secs = match (timeout, &cell.cfg.timed, &cell.cfg.warmup) {
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
fn emit(plan: &Plan, e: &Emit) -> Result<i32> {
    use crate::fleet::{collect, manifest, slurm};
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
        let shape = match shapes.iter().position(|s| *s == key) {
            Some(i) => i + 1,
            None => {
                shapes.push(key);
                shapes.len()
            }
        };
        let mut row = crate::bench::row::base_row(&c.cfg);
        row.run_id.clear();
        row.host.clear();
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
        // The cells done keep the tasks they ran as.
        for (e, o) in entries.iter_mut().zip(&old) {
            e.task = o.task;
        }
    }
    // Arrays restart their task ids at 0: a cell's task is its place among
    // its shape's cells in this emission. The manifest says so, so that a
    // `missing` row names the task that was submitted.
    let mut seen: HashMap<usize, usize> = HashMap::new();
    for &i in &todo {
        let t = seen.entry(entries[i].shape).or_default();
        entries[i].task = *t;
        *t += 1;
    }
    crate::results::write_whole(&mpath, manifest::render(&entries)?.as_bytes())?;
    let refs: Vec<&manifest::Entry> = todo.iter().map(|&i| &entries[i]).collect();
    let arrays = slurm::shapes(&refs);
    if let Some(k) = &e.k8s {
        return emit_k8s(&dir, e, k, &arrays, entries.len(), todo.len());
    }
    let gpubench = child::child_program()?;
    let script_path = dir.join("sweep.sbatch");
    crate::results::write_whole(&script_path, slurm::script(&dir, &gpubench, &arrays, &e.sbatch).as_bytes())?;
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

/// `--emit k8s`: an Indexed Job per shape into `DIR/k8s/`, applied with
/// `--submit` (kubectl), else the command printed.
fn emit_k8s(
    dir: &std::path::Path,
    e: &Emit,
    k: &crate::sweep::plan::K8s,
    arrays: &[crate::fleet::slurm::Shape],
    cells: usize,
    emitted: usize,
) -> Result<i32> {
    use crate::fleet::{collect, k8s, manifest};
    let jobs_dir = dir.join("k8s");
    std::fs::create_dir_all(&jobs_dir).with_context(|| format!("creating {}", jobs_dir.display()))?;
    let pods = k8s::Pods { image: k.image.clone(), claim: k.claim.clone(), gpubench: "gpubench".into() };
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
/// task per node; a PyTorchJob pod's RANK), and the rendezvous: MASTER_ADDR, else the job's first
/// node (`scontrol show hostnames`); MASTER_PORT, else one derived from the
/// job id, so that two cells on one node do not collide.
fn node_placement() -> Result<(usize, String, u16)> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let node_rank: usize =
        var("SLURM_NODEID").or_else(|| var("GPUBENCH_NODE_RANK")).and_then(|v| v.parse().ok()).ok_or_else(|| {
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

/// `sweep --cell DIR INDEX`: one cell into `DIR/cells/INDEX.csv`, written
/// beside and renamed into place, so that a node never appends to a shared
/// file and a reader never sees half of one. A cell run again replaces its
/// file and keeps the previous one beside it, saying so.
pub(crate) fn run_cell(dir: &std::path::Path, (index, total): (usize, usize), cell: &Cell) -> Result<i32> {
    use crate::fleet::manifest::cell_path;
    let nodes = cell.cfg.ddp.nnodes;
    let mut cell = cell.clone();
    if nodes > 1 {
        let (node_rank, addr, port) = node_placement()?;
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
            let spec =
                child::ChildSpec { program: &program, args: argv, mem_limit: None, inherit_fd: None, timeout: None };
            let res = child::run(&spec, || {})?;
            println!("cell {index}: node {node_rank} of {nodes} ended ({:?})", res.ended.exit);
            return Ok(if res.ended.exit == crate::proc::Exit::Code(0) { 0 } else { 1 });
        }
    }
    let cell = &cell;
    let final_path = cell_path(dir, index);
    let tmp = final_path.with_file_name(format!(".{index}.{}.csv", std::process::id()));
    child::install_interrupt_handler();
    let runner =
        Runner { program: child::child_program()?, out: tmp.clone(), mem_limit: None, timeout: None, inherit_fd: None };
    let o = runner.run(cell);
    let tmp_devs = long::devices_path(&tmp);
    let o = match o {
        Ok(o) => o,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            let _ = std::fs::remove_file(&tmp_devs);
            return Err(e);
        }
    };
    if final_path.exists() {
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
        let kept = final_path.with_file_name(format!("{index}.replaced-{stamp}.csv"));
        std::fs::rename(&final_path, &kept).with_context(|| format!("keeping {}", final_path.display()))?;
        eprintln!("gpubench: cell {index} ran again; its previous file is kept as {}", kept.display());
    }
    if tmp_devs.exists() {
        std::fs::rename(&tmp_devs, long::devices_path(&final_path))?;
    }
    std::fs::rename(&tmp, &final_path).with_context(|| format!("writing {}", final_path.display()))?;
    println!("{}", cell_line(index + 1, total, &cell.describe(), &o));
    Ok(if o.row.status == Status::Ok { 0 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_goes_before_the_run_options() {
        let a = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            resume_of(&a("gpubench sweep --out r.csv -- --steps 2")),
            a("gpubench sweep --out r.csv --resume -- --steps 2")
        );
        assert_eq!(resume_of(&a("gpubench sweep --out r.csv")), a("gpubench sweep --out r.csv --resume"));
        assert_eq!(resume_of(&a("gpubench sweep --resume -- --label x")), a("gpubench sweep --resume -- --label x"));
    }
}
