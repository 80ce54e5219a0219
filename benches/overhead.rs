//! gpubench's measured throughput against a bare tch loop doing the same work
//! (same model, optimizer, data and device), printed side by side. The target
//! is a ratio ≥ 0.98: per-step synchronization, loss reads and bookkeeping
//! must not cost more than 2%.
//!
//! The two are interleaved (A B A B …) so that drift on a shared machine hits
//! both alike; medians of the rounds are reported.
//!
//!   scripts/bench-overhead [-- --model resnet18 --image-size 64 --batch-size 8 --steps 10 --rounds 5 --cpu]
use std::time::Instant;

use clap::Parser;
use gpubench::cli::{Cli, Command};
use gpubench::data::{synthetic::Synthetic, DataSource};
use gpubench::metrics::stats::percentile;
use gpubench::strategy::{build_model, build_optimizer, dp::DataParallel, loss_fn, single::Single, Strategy};
use gpubench::{config, device, runner};

fn main() -> anyhow::Result<()> {
    // `cargo bench` passes --bench; everything after `--` is ours.
    let mut args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let rounds = take_opt(&mut args, "--rounds").map(|s| s.parse().expect("--rounds N")).unwrap_or(5usize);
    let mut argv = vec!["gpubench".to_string(), "run".into(), "--quiet".into()];
    if args.is_empty() {
        args = "--model resnet18 --image-size 64 --batch-size 8 --steps 10 --warmup 2"
            .split(' ')
            .map(String::from)
            .collect();
    }
    argv.extend(args);
    let Command::Run(a) = Cli::try_parse_from(&argv)?.command else { unreachable!() };
    let devices = device::resolve(a.gpus.as_deref(), a.cpu, true)?;
    let cfg = config::validate(&a, devices)?;
    let steps = match cfg.timed {
        config::Length::Steps(n) => n,
        config::Length::Time(_) => anyhow::bail!("use --steps for this benchmark"),
    };
    let warmup = match cfg.warmup {
        config::Length::Steps(n) => n,
        config::Length::Time(_) => 2,
    };
    let dev = cfg.devices.device(0);
    println!(
        "{} {}×{} batch {} on {:?}, {} timed steps after {} warm-up, {} rounds",
        cfg.model.name(),
        cfg.image_size,
        cfg.image_size,
        cfg.batch_per_device,
        dev,
        steps,
        warmup,
        rounds
    );

    let (mut g, mut b, mut d, mut sm) = (vec![], vec![], vec![], vec![]);
    let run = |strat: &mut dyn Strategy| -> anyhow::Result<f64> {
        let mut data = Synthetic::new(strat.input_batch(), cfg.image_size, cfg.num_classes, dev, 1)?;
        let m = runner::measure(&cfg, strat, &mut data, &indicatif::ProgressBar::hidden());
        Ok(runner::figures(&m.step_secs, cfg.global_batch(), 1).expect("timed steps").throughput_img_s)
    };
    for r in 0..rounds {
        // gpubench: the runner and the single strategy, as `gpubench run` uses them.
        g.push(run(&mut Single::new(&cfg)?)?);
        // single again with the telemetry sampler running (NVML on CUDA,
        // the process on the CPU), at a 10× faster interval than the default
        // to make its cost visible.
        let mon = gpubench::metrics::collect::Monitor::start(&cfg.devices, std::time::Duration::from_millis(10));
        sm.push(run(&mut Single::new(&cfg)?)?);
        drop(mon.finish(&cfg.devices, &[], None));
        // dp on one device: replication, scatter and gather degenerate to
        // copies onto the same device; it should equal single.
        d.push(run(&mut DataParallel::new(&cfg)?)?);

        // bare: the same work, one clock read pair around all timed steps.
        let (vs, model) = build_model(&cfg, dev);
        let mut opt = build_optimizer(&cfg, &vs)?;
        let mut data = Synthetic::new(cfg.batch_per_device, cfg.image_size, cfg.num_classes, dev, 1)?;
        let mut step = |data: &mut Synthetic| -> anyhow::Result<()> {
            let batch = data.next_batch()?;
            let loss = loss_fn(&model.forward_t(&batch.images, true), &batch.labels)?;
            opt.zero_grad();
            loss.backward();
            opt.step();
            Ok(())
        };
        for _ in 0..warmup {
            step(&mut data)?;
        }
        cfg.devices.synchronize();
        let t = Instant::now();
        for _ in 0..steps {
            step(&mut data)?;
        }
        cfg.devices.synchronize();
        b.push((cfg.global_batch() as f64) * steps as f64 / t.elapsed().as_secs_f64());
        println!(
            "round {}: bare {:8.2} img/s   gpubench single {:8.2} ({:.3})   dp×1 {:8.2} ({:.3} of single)   sampled {:8.2} ({:.3} of single)",
            r + 1,
            b[r],
            g[r],
            g[r] / b[r],
            d[r],
            d[r] / g[r],
            sm[r],
            sm[r] / g[r]
        );
    }
    let (gm, bm, dm, smm) = (percentile(&g, 50.0), percentile(&b, 50.0), percentile(&d, 50.0), percentile(&sm, 50.0));
    println!(
        "median:  bare {bm:8.2} img/s   gpubench single {gm:8.2} img/s   dp×1 {dm:8.2} img/s   sampled {smm:8.2} img/s"
    );
    println!(
        "ratio:   single/bare {:.3} (target ≥ 0.98)   dp×1/single {:.3} (target ≥ 0.97)   sampled/single {:.3} (target ≥ 0.99)",
        gm / bm,
        dm / gm,
        smm / gm
    );
    Ok(())
}

fn take_opt(args: &mut Vec<String>, name: &str) -> Option<String> {
    let i = args.iter().position(|a| a == name)?;
    args.remove(i);
    (i < args.len()).then(|| args.remove(i))
}
