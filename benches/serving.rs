//! What gpubench's serving machinery costs: `infer --scenario offline`
//! (queue, batching, staging, preprocessing of frames already at the model's
//! size, forward, predictions back to the host, per-request records) against
//! a bare forward-only loop on a ready tensor, same model, batch, precision
//! and threads. Target: offline / bare ≥ 0.98.
//!
//! The two take turns for `--rounds` rounds (the order alternating), each
//! `--secs` seconds of load after its own warm-up, so a neighbour's burst
//! falls on both alike; the per-round ratios and their median are printed.
//! On a noisy machine that ratio drifts by ±10 % between rounds, so the
//! machinery is also timed alone: the same server with a model that returns
//! at once (`GPUBENCH_TEST_SERVICE_MS=0`), whose time per request, over the
//! bare loop's, is the share of each request serving costs.
//!
//!   scripts/bench-serving [--rounds 6 --secs 4] [infer options, default
//!   --cpu 1 --model resnet18 --image-size 64 --max-batch 16]
use std::time::{Duration, Instant};

use gpubench::cli::infer::parse_infer;
use gpubench::config::{InferConfig, Scenario};
use gpubench::model::build_model;
use gpubench::serve::measure;
use tch::{Kind, Tensor};

fn take(args: &mut Vec<String>, flag: &str, default: f64) -> f64 {
    match args.iter().position(|a| a == flag) {
        Some(i) if i + 1 < args.len() => {
            let v = args.remove(i + 1);
            args.remove(i);
            v.parse().unwrap_or_else(|_| {
                eprintln!("bench-serving: {flag} takes a number (got `{v}`)");
                std::process::exit(2)
            })
        }
        _ => default,
    }
}

/// Images per second of a bare no-grad forward loop for `secs`.
fn bare(cfg: &InferConfig, secs: f64) -> f64 {
    let device = cfg.devices.device(0);
    let (_vs, model) = build_model(&cfg.workload, device);
    let x = Tensor::randn([cfg.max_batch, 3, cfg.workload.image_size, cfg.workload.image_size], (Kind::Float, device));
    let step = || {
        tch::no_grad(|| {
            let y = model.forward_t(&x, false);
            let _ = y.argmax(1, false).to_device(tch::Device::Cpu);
        })
    };
    for _ in 0..cfg.warmup_batches {
        step();
    }
    let t = Instant::now();
    let mut n = 0;
    while t.elapsed().as_secs_f64() < secs {
        step();
        n += cfg.max_batch;
    }
    n as f64 / t.elapsed().as_secs_f64()
}

fn main() -> anyhow::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let rounds = take(&mut args, "--rounds", 6.0) as usize;
    let secs = take(&mut args, "--secs", 4.0);
    if args.is_empty() {
        args = "--cpu 1 --model resnet18 --image-size 64 --max-batch 16".split(' ').map(String::from).collect();
    }
    let argv: Vec<String> = ["--quiet", "--scenario", "offline"].iter().map(|s| s.to_string()).chain(args).collect();
    let mut cfg = parse_infer(&argv)?;
    // Frames already at the model's size: the comparison is of the machinery.
    (cfg.frame_w, cfg.frame_h) = (cfg.workload.image_size, cfg.workload.image_size);
    cfg.scenario = Scenario::Offline;
    cfg.duration = Duration::from_secs_f64(secs);
    if let Some(t) = cfg.threads {
        tch::set_num_threads(t as i32);
    }
    println!(
        "{} {}px, batch {}, {} on {}: offline server against a bare forward loop, {rounds} rounds of {secs} s\n",
        cfg.workload.model.name(),
        cfg.workload.image_size,
        cfg.max_batch,
        cfg.workload.precision.name(),
        cfg.devices.describe()
    );
    println!("{:>5} {:>12} {:>12} {:>8}", "round", "bare img/s", "offline", "ratio");
    let (mut ratios, mut bares) = (vec![], vec![]);
    for r in 0..rounds {
        let serve = || {
            let m = measure(&cfg);
            assert_eq!(m.row.status.name(), "ok", "{}", m.row.error);
            m.row.achieved_rate.unwrap_or(0.0)
        };
        let (b, o) = if r % 2 == 0 {
            let b = bare(&cfg, secs);
            (b, serve())
        } else {
            let o = serve();
            (bare(&cfg, secs), o)
        };
        ratios.push(o / b);
        bares.push(b);
        println!("{:>5} {b:>12.1} {o:>12.1} {:>8.3}", r + 1, o / b);
    }
    let median = gpubench::metrics::stats::percentile(&ratios, 50.0);
    ratios.sort_by(f64::total_cmp);
    // The machinery alone: the same server with a model that returns at once
    // (the test hook), so its rate is 1 / (machinery time per request). Its
    // share of a request's time at the bare rate is what serving costs,
    // free of the round-to-round drift that the ratio above carries.
    std::env::set_var(gpubench::internal::Hook::ServiceMs.var(), "0");
    let zero = measure(&cfg).row.achieved_rate.unwrap_or(f64::NAN);
    std::env::remove_var(gpubench::internal::Hook::ServiceMs.var());
    println!(
        "\noffline / bare: median {median:.3} (range {:.3}–{:.3}); target ≥ 0.98: {}",
        ratios[0],
        ratios[ratios.len() - 1],
        if median >= 0.98 { "met" } else { "missed" }
    );
    let b = gpubench::metrics::stats::percentile(&bares, 50.0);
    println!(
        "machinery alone (a model that returns at once): {} req/s, {:.1} us per request; at the bare rate of {b:.0} \
         img/s that is {:.2}% of each request's time (target <= 2%)",
        zero.round(),
        1e6 / zero,
        b / zero * 100.0
    );
    Ok(())
}
