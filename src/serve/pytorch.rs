//! `--impl pytorch`: the same server in PyTorch Python (`pytorch_serve.py`,
//! embedded like the training reference), so that the cost of Python's
//! threads under the GIL is measured, not asserted. `replicas` runs as
//! Python threads, one per device, on one shared queue (the seed's first
//! detour); `processes` as one multiprocessing process per device. It gets
//! the same arrivals (a schedule file), the same frames and model, and
//! writes the same records, from which the row is computed here.
use anyhow::{anyhow, Context, Result};
use serde::Deserialize;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::records;
use super::schedule::{self, Schedule};
use super::server::{grace, ServeOutcome};
use crate::config::{InferConfig, Scenario, ServeStrategy};
use crate::proc;
use crate::reference::python::{find_python, TempDir};

pub(crate) const SCRIPT: &str = include_str!("pytorch_serve.py");

/// What the script says of itself.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct About {
    pub torch_version: String,
    pub python_version: String,
    pub device_name: String,
    pub status: String,
    #[serde(default)]
    pub error: String,
}

/// Runs the PyTorch server on `arrivals`; its outcome and what it said of itself.
pub(crate) fn run(cfg: &InferConfig, arrivals: Schedule) -> (ServeOutcome, Option<About>) {
    let mut out = ServeOutcome { records: vec![], late: 0, error: None, window: None, interference: vec![] };
    match run_script(cfg, arrivals, &mut out) {
        Ok(about) => (out, Some(about)),
        Err(e) => {
            out.error = Some(e);
            (out, None)
        }
    }
}

fn run_script(cfg: &InferConfig, arrivals: Schedule, out: &mut ServeOutcome) -> Result<About> {
    let py = find_python()?;
    let dir = TempDir::new()?;
    let write = |name: &str, text: &str| -> Result<std::path::PathBuf> {
        let p = dir.0.join(name);
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
        Ok(p)
    };
    write("pytorch_common.py", crate::reference::COMMON)?;
    let script = write("pytorch_serve.py", SCRIPT)?;
    let sched = dir.0.join("schedule.txt");
    // Written as it is generated: the file, not memory, holds a long load.
    (|| -> std::io::Result<()> {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&sched)?);
        schedule::write_text(arrivals, &mut f)?;
        std::io::Write::flush(&mut f)
    })()
    .with_context(|| format!("writing {}", sched.display()))?;
    let rec = dir.0.join("records.csv");
    let devices: Vec<String> = (0..cfg.devices.len())
        .map(|i| match cfg.devices.device(i) {
            tch::Device::Cuda(o) => format!("cuda:{o}"),
            _ => "cpu".into(),
        })
        .collect();
    let scenario = match cfg.scenario {
        Scenario::Offline => "offline",
        Scenario::SingleStream => "single-stream",
        _ => "arrivals",
    };
    let job = serde_json::json!({
        "strategy": if cfg.strategy == ServeStrategy::Processes { "processes" } else { "threads" },
        "devices": devices,
        "threads_per_worker": cfg.threads_per_worker(),
        "model": cfg.workload.model.name(),
        "num_classes": cfg.workload.num_classes,
        "image_size": cfg.workload.image_size,
        "frame_w": cfg.frame_w,
        "frame_h": cfg.frame_h,
        "frame_pool": 8,
        "seed": cfg.workload.seed,
        "preprocess": cfg.preprocess.name(),
        "precision": cfg.workload.precision.name(),
        "channels_last": cfg.workload.channels_last,
        "cudnn_benchmark": cfg.workload.cudnn_benchmark,
        "cuda_graphs": cfg.cuda_graphs,
        // The batch buckets, from gpubench's one definition (serve::graphs).
        "graph_buckets": super::graphs::buckets(cfg.max_batch),
        "overlap": cfg.overlap,
        "max_batch": cfg.max_batch,
        "max_wait_s": cfg.max_wait.as_secs_f64(),
        "drop_older_than_s": cfg.drop_older_than.map(|d| d.as_secs_f64()),
        "warmup_batches": cfg.warmup_batches,
        "scenario": scenario,
        "schedule": (scenario == "arrivals").then(|| sched.display().to_string()),
        "duration_s": cfg.duration.as_secs_f64(),
        "grace_s": grace(cfg).as_secs_f64(),
        "records": rec.display().to_string(),
        // Test hook (crate::internal::Hook::ServeCrash): this worker dies once serving.
        "test_crash_worker": crate::internal::Hook::ServeCrash.get().and_then(|v| v.parse::<u32>().ok()),
        // Test hook (crate::internal::Hook::Predictions): each worker writes its requests' logits there.
        "predictions_dir": crate::internal::Hook::Predictions.get(),
    });
    let job_path = write("job.json", &job.to_string())?;
    let mut cmd = Command::new(&py.path);
    cmd.arg(&script).arg("--job").arg(&job_path).stdout(Stdio::piped());
    let forward = cfg.output.talks().then(|| "[pytorch] ".to_string());
    let mut child = proc::spawn(&mut cmd, forward, 40).with_context(|| format!("starting {}", py.path.display()))?;
    let stdout = child.child_mut().stdout.take().ok_or_else(|| anyhow!("no stdout from the script"))?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut std::io::BufReader::new(stdout), &mut s);
        s
    });
    // Set-up (imports, model, warm-up) plus the load, with room to spare.
    let limit = std::time::Instant::now() + cfg.duration + grace(cfg) + Duration::from_secs(600);
    let exit = loop {
        if let Some(e) = child.try_wait()? {
            break Some(e);
        }
        if std::time::Instant::now() > limit {
            child.kill();
            break Some(proc::Exit::TimedOut);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let ended = child.finish(exit);
    let text = reader.join().unwrap_or_default();
    let about: Option<About> = text.lines().rev().find_map(|l| serde_json::from_str(l.trim()).ok());
    if rec.exists() {
        out.records = records::read(&rec)?;
    }
    match about {
        Some(a) if a.status == "ok" && ended.exit.success() => Ok(a),
        Some(a) if !a.error.is_empty() => Err(anyhow!("the PyTorch server failed: {}", a.error)),
        _ => Err(anyhow!(
            "the PyTorch server {}: {}",
            ended.how(),
            ended.tail.last().cloned().unwrap_or_else(|| "no message".into())
        )),
    }
}
