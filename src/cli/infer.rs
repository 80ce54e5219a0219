//! `gpubench infer`'s arguments, and their one conversion into an
//! `InferConfig`: every check the command line can fail, before any model is
//! built or file written.
use anyhow::Result;
use clap::{Args, ValueEnum};

use super::opts::{CommitOpts, CudaGraphs, DataOpt, DeviceOpts, DurationOpt, HostOpts, ImplOpt, ModelOpts, OutputOpts};
use super::parse::{parse_duration, parse_fraction};
use super::{Configure, Job};
use crate::config::{CapacitySearch, Format, Impl, InferConfig, Preprocess, Scenario, ServeStrategy};
use crate::device::capacity::{check_cpu_workers, Workers};
use crate::device::{self, DeviceKind};
use crate::error::usage;

/// How requests arrive (MLPerf LoadGen's scenario names).
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScenarioArg {
    /// All frames ready at the start: throughput.
    Offline,
    /// Poisson arrivals at --rate requests per second.
    Server,
    /// --streams cameras at --fps frames per second each, random phases.
    Streams,
    /// One request at a time: latency.
    SingleStream,
}

/// Serve camera frames or requests with the model and record how many are
/// answered within a latency bound (replicas, processes or dp).
#[derive(Args, Debug, Clone)]
#[command(mut_arg("duration", |a| a.default_value("30s")))]
pub(crate) struct InferArgs {
    /// How the devices serve.
    #[arg(long, value_enum, default_value_t = ServeStrategy::Replicas)]
    pub serving: ServeStrategy,
    #[command(flatten)]
    pub implementation: ImplOpt,
    #[command(flatten)]
    pub devices: DeviceOpts,
    #[command(flatten)]
    pub model: ModelOpts,
    /// How requests arrive, as MLPerf LoadGen names it: offline (all at
    /// once), streams (cameras at a frame rate) or server (Poisson arrivals).
    #[arg(long, value_enum, default_value_t = ScenarioArg::Offline)]
    pub scenario: ScenarioArg,
    /// streams: number of cameras (with --find-max-streams: where the search starts).
    #[arg(long, value_name = "N")]
    pub streams: Option<i64>,
    /// streams: frames per second per camera.
    #[arg(long, value_name = "FPS")]
    pub fps: Option<f64>,
    /// server: mean requests per second (with --find-max-rate: where the search starts).
    #[arg(long, value_name = "PER_SECOND")]
    pub rate: Option<f64>,
    /// Camera frame size, WIDTHxHEIGHT (uint8 RGB).
    #[arg(long, default_value = "1280x720", value_name = "WxH")]
    pub frame_size: String,
    #[command(flatten)]
    pub cuda_graphs: CudaGraphs,
    /// On a GPU, stage the next batch (frames copied to pinned memory, then
    /// to the GPU and resized there, on a stream of its own) while the
    /// current one computes: on (the default) or off, the serial path, for
    /// comparison. The CPU computes on the host that stages, so there it
    /// changes nothing. Replicas and processes; dp serving stays serial.
    #[arg(long, value_name = "on|off", num_args = 0..=1, default_value = "on", default_missing_value = "on",
          action = clap::ArgAction::Set, value_parser = super::parse::parse_on_off)]
    pub overlap: bool,
    /// Where frames are resized and normalised.
    #[arg(long, value_enum, default_value_t = Preprocess::Device)]
    pub preprocess: Preprocess,
    #[command(flatten)]
    pub data: DataOpt,
    /// Dynamic batching: the most requests in one batch.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub max_batch: i64,
    /// Dynamic batching: how long a batch waits for more after its first request.
    #[arg(long, default_value = "2ms", allow_hyphen_values = true, value_name = "DURATION")]
    pub max_wait: String,
    /// Drop a frame older than this when a worker takes it (a stale camera frame).
    #[arg(long, allow_hyphen_values = true, value_name = "DURATION")]
    pub drop_older_than: Option<String>,
    /// The p99 latency the load must stay within (needed by the searches).
    #[arg(long, allow_hyphen_values = true, value_name = "DURATION")]
    pub latency_bound: Option<String>,
    /// Search for the most streams within --latency-bound (scenario streams).
    #[arg(long, conflicts_with = "find_max_rate")]
    pub find_max_streams: bool,
    /// Search for the highest Poisson rate within --latency-bound (scenario server).
    #[arg(long)]
    pub find_max_rate: bool,
    /// Searches: the most requests a probe may drop, e.g. 1%.
    #[arg(long, default_value = "1%", value_parser = parse_fraction, value_name = "PCT")]
    pub max_drop_rate: f64,
    /// Searches: each probe runs at least this long...
    #[arg(long, default_value = "10s", allow_hyphen_values = true, value_name = "DURATION")]
    pub min_duration: String,
    /// ...and long enough for this many requests at its load.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub min_requests: u64,
    // How long the load runs: at most 2,000,000 requests are scheduled
    // (--rate, or --streams × --fps, times --duration), each timed and recorded.
    #[command(flatten)]
    pub duration: DurationOpt,
    /// Untimed warm-up batches per worker, at --max-batch and at batch 1 each.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub warmup_batches: u64,
    #[command(flatten)]
    pub host: HostOpts,
    // --out: the row (a row per probe when searching).
    // csv: the rows; json: the row (a search: its answer and probes).
    #[command(flatten)]
    pub output: OutputOpts,
    #[command(flatten)]
    pub commit: CommitOpts,
}

impl Configure for InferArgs {
    fn configure(self) -> Result<Job> {
        self.commit.export();
        let cfg = self.into_config(false)?;
        Ok(Box::new(move || crate::commands::infer::run(cfg)))
    }
}

fn positive(flag: &str, v: f64) -> Result<f64> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(usage(format!("{flag} must be above zero (it is {v})")))
    }
}

fn frame_size(s: &str) -> Result<(i64, i64)> {
    let bad = || usage(format!("--frame-size {s:?} is not WIDTHxHEIGHT; write it like 1280x720"));
    let (w, h) = s.trim().split_once(['x', 'X']).ok_or_else(bad)?;
    let (w, h): (i64, i64) = (w.trim().parse().map_err(|_| bad())?, h.trim().parse().map_err(|_| bad())?);
    if !(1..=16384).contains(&w) || !(1..=16384).contains(&h) {
        return Err(bad());
    }
    Ok((w, h))
}

impl InferArgs {
    /// The configuration, with every check that needs no device work;
    /// `worker`: for an `infer-worker` child, which warns of nothing its
    /// parent already said.
    pub(crate) fn into_config(self, worker: bool) -> Result<InferConfig> {
        let a = self;
        let output = a.output.output("infer", &[Format::Table, Format::Csv, Format::Json])?;
        let talks = output.talks();
        let m = &a.model;
        let implementation = *a.implementation;
        if a.max_batch <= 0 {
            return Err(usage("--max-batch must be at least 1"));
        }
        let searching = a.find_max_streams || a.find_max_rate;
        let scenario = match a.scenario {
            ScenarioArg::Offline | ScenarioArg::SingleStream => {
                for (given, flag) in
                    [(a.streams.is_some(), "--streams"), (a.fps.is_some(), "--fps"), (a.rate.is_some(), "--rate")]
                {
                    if given {
                        return Err(usage(format!(
                            "{flag} has no meaning with --scenario {}; use --scenario streams or server",
                            a.scenario.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default()
                        )));
                    }
                }
                if a.scenario == ScenarioArg::Offline {
                    Scenario::Offline
                } else {
                    Scenario::SingleStream
                }
            }
            ScenarioArg::Server => {
                if a.streams.is_some() || a.fps.is_some() {
                    return Err(usage(
                        "--streams and --fps belong to --scenario streams; the server scenario takes --rate",
                    ));
                }
                let rate = match (a.rate, a.find_max_rate) {
                    (Some(r), _) => positive("--rate", r)?,
                    (None, true) => 10.0,
                    (None, false) => {
                        return Err(usage("--scenario server needs --rate, e.g. --rate 500 (requests per second)"))
                    }
                };
                Scenario::Server { rate }
            }
            ScenarioArg::Streams => {
                if a.rate.is_some() {
                    return Err(usage("--rate belongs to --scenario server; streams take --streams and --fps"));
                }
                let fps =
                    positive("--fps", a.fps.ok_or_else(|| usage("--scenario streams needs --fps, e.g. --fps 5"))?)?;
                let streams = match (a.streams, a.find_max_streams) {
                    (Some(n), _) if n <= 0 => return Err(usage(format!("--streams must be at least 1 (it is {n})"))),
                    (Some(n), _) => n,
                    (None, true) => 1,
                    (None, false) => return Err(usage("--scenario streams needs --streams, e.g. --streams 200")),
                };
                Scenario::Streams { streams: u32::try_from(streams).map_err(|_| usage("--streams is too large"))?, fps }
            }
        };
        let duration = a.duration.time("infer")?.ok_or_else(|| usage("infer needs --duration"))?;
        if let Some(msg) = too_many_requests(&scenario, duration) {
            return Err(usage(msg));
        }
        if a.find_max_streams && a.scenario != ScenarioArg::Streams {
            return Err(usage("--find-max-streams searches --scenario streams; add --scenario streams --fps F"));
        }
        if a.find_max_rate && a.scenario != ScenarioArg::Server {
            return Err(usage("--find-max-rate searches --scenario server; add --scenario server"));
        }
        let latency_bound = a.latency_bound.as_deref().map(|s| parse_duration("--latency-bound", s)).transpose()?;
        if searching && latency_bound.is_none() {
            return Err(usage("a capacity search needs --latency-bound, e.g. --latency-bound 100ms"));
        }
        let search = match latency_bound.filter(|_| searching) {
            Some(bound) => Some(CapacitySearch {
                bound,
                max_drop_rate: a.max_drop_rate,
                min_duration: parse_duration("--min-duration", &a.min_duration)?,
                min_requests: a.min_requests,
            }),
            None => None,
        };
        let (frame_w, frame_h) = frame_size(&a.frame_size)?;
        if implementation == Impl::Pytorch && a.serving == ServeStrategy::Dp {
            return Err(usage(
                "--impl pytorch serves with Python threads (--serving replicas) or processes; dp serving is \
                 gpubench's own",
            ));
        }
        if *a.data != "synthetic" && !std::path::Path::new(&*a.data).is_dir() {
            return Err(usage(format!("--data {}: no such folder; give a folder of JPEG images", *a.data)));
        }
        let devices = device::resolve(a.devices.gpus.as_deref(), a.devices.cpu, !talks)?;
        let workload = m.workload(devices.kind)?;
        if *a.cuda_graphs {
            if devices.kind == DeviceKind::Cpu {
                return Err(usage(
                    "--cuda-graphs captures CUDA work, and this server is on the CPU; drop --cuda-graphs (or serve on \
                     a GPU)",
                ));
            }
            if a.serving == ServeStrategy::Dp {
                return Err(usage(
                    "--cuda-graphs captures a forward on one GPU; dp serving runs a thread per replica, which one \
                     capture cannot hold: use --serving replicas or processes",
                ));
            }
        }
        if let Some(n) = a.devices.cpu {
            // PyTorch's server runs its workers as processes whatever the serving.
            let workers = match a.serving == ServeStrategy::Processes || implementation == Impl::Pytorch {
                true => Workers::Processes,
                false => Workers::Threads,
            };
            check_cpu_workers(n, workers, !talks || worker)?;
        }
        Ok(InferConfig {
            strategy: a.serving,
            implementation,
            devices,
            workload,
            frame_w,
            frame_h,
            preprocess: a.preprocess,
            data: a.data.data.clone(),
            scenario,
            max_batch: a.max_batch,
            max_wait: super::parse::parse_duration_or_zero("--max-wait", &a.max_wait)?,
            drop_older_than: a
                .drop_older_than
                .as_deref()
                .map(|s| parse_duration("--drop-older-than", s))
                .transpose()?,
            latency_bound,
            search,
            duration,
            warmup_batches: a.warmup_batches,
            cuda_graphs: *a.cuda_graphs,
            overlap: a.overlap,
            threads: a.host.threads.map(crate::metrics::interference::resolve_threads),
            output,
            sample_interval: parse_duration("--sample-interval", &a.host.sample_interval)?,
        })
    }
}

/// The most requests one run schedules: each becomes an arrival, a timed
/// record and, for PyTorch's server, a line of its schedule (a 1e9 req/s
/// load once aborted on a 4 GB allocation).
const MAX_REQUESTS: f64 = 2_000_000.0;

/// Why a load is too large to schedule, naming the options that set it.
fn too_many_requests(scenario: &Scenario, duration: std::time::Duration) -> Option<String> {
    let secs = duration.as_secs_f64();
    let (n, what) = match *scenario {
        Scenario::Server { rate } => (rate * secs, format!("--rate {rate} × --duration {secs} s")),
        Scenario::Streams { streams, fps } => {
            (streams as f64 * fps * secs, format!("--streams {streams} × --fps {fps} × --duration {secs} s"))
        }
        _ => return None,
    };
    (n > MAX_REQUESTS).then(|| {
        format!(
            "{what} is {n:.0} requests, over the {MAX_REQUESTS:.0} one run schedules (each is timed and \
             recorded): lower the load or the duration"
        )
    })
}

/// `infer` ARGS' configuration, as the command line gives it (the serving
/// benchmark and the serving engine's tests build theirs so).
pub fn parse_infer<S: AsRef<str>>(args: &[S]) -> Result<InferConfig> {
    let argv = ["gpubench", "infer"].into_iter().map(String::from).chain(args.iter().map(|s| s.as_ref().to_string()));
    match super::Cli::parse_args(argv).map_err(|e| super::clap_usage(&e, "see gpubench infer --help"))?.command {
        super::Command::Infer(a) => a.into_config(false),
        _ => unreachable!("parsed as infer"),
    }
}
