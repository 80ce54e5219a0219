//! `gpubench allreduce` on the CPU (Gloo): nccl-tests' figures, rows and
//! JSON, correctness, and bad input.
use crate::common::{assert_usage_error, gpubench, num, read_csv};

#[test]
fn allreduce_reports_nccl_tests_figures_rows_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ar.csv");
    let a = format!("allreduce --cpu 3 -b 8 -e 64K -f 8 -n 3 -w 1 --dtype bf16 --out {}", out.display());
    let o = gpubench(&a).run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    // nccl-tests' table: a line per size, then the summary lines.
    assert!(o.stdout.contains("bfloat16") && o.stdout.contains("# Avg bus bandwidth"), "{}", o.stdout);
    assert!(o.stdout.contains("# Out of bounds values : 0 OK"), "{}", o.stdout);
    let rows = read_csv(&out);
    // 8, 64, 512, 4K, 32K bytes, each out-of-place and in-place.
    assert_eq!(rows.len(), 10);
    for r in &rows {
        assert_eq!((r["mode"].as_str(), r["backend"].as_str(), r["status"].as_str()), ("allreduce", "gloo", "ok"));
        assert_eq!(num(r, "n_devices"), 3.0);
        assert_eq!(num(r, "nwrong"), 0.0);
        // busbw = algbw × 2(n-1)/n, algbw = bytes / time.
        let (alg, bus, bytes, ms) = (num(r, "algbw_gbs"), num(r, "busbw_gbs"), num(r, "bytes"), num(r, "step_ms_mean"));
        assert!((bus - alg * 4.0 / 3.0).abs() <= 1e-9 * bus.max(1.0), "{alg} {bus}");
        assert!((alg - bytes / 1e9 / (ms / 1e3)).abs() <= 1e-6 * alg.max(1e-9), "{alg} {bytes} {ms}");
    }
    let o = gpubench("allreduce --cpu 2 -b 1K -e 4K -n 2 -w 1 --format json").run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
    let res = v["results"].as_array().unwrap();
    assert_eq!(res.len(), 3);
    assert_eq!((res[0]["size"].as_u64(), res[0]["count"].as_u64()), (Some(1024), Some(256)));
    assert_eq!(res[0]["type"], "float");
    for p in ["out_of_place", "in_place"] {
        for f in ["time", "alg_bw", "bus_bw", "nwrong"] {
            assert!(res[2][p][f].is_number(), "{p}.{f} in {}", res[2]);
        }
    }
    // World size 2: busbw equals algbw.
    assert_eq!(res[1]["in_place"]["bus_bw"], res[1]["in_place"]["alg_bw"]);
    let report = gpubench(&format!("report {}", out.display())).run();
    assert_eq!(report.code, 0, "{}", report.stderr);
    assert!(report.stdout.contains("all-reduce report") && report.stdout.contains("32K"), "{}", report.stdout);
}

/// A rank that dies at the third size: the two sizes before it stay in the
/// file and on screen, and the error names the rank that died, not the one
/// that lost its peer.
#[test]
fn a_dying_rank_keeps_the_sizes_already_measured() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ar.csv");
    let a = format!("allreduce --cpu 2 -b 8 -e 64K -f 8 -n 3 -w 1 --out {}", out.display());
    let o = gpubench(&a).env("GPUBENCH_FAULT", "1:3:crash").run();
    assert_eq!(o.code, 1, "{}", o.stderr);
    let lines: Vec<&str> = o.stdout.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines.len(), 2, "{}", o.stdout);
    assert!(lines[0].trim_start().starts_with("8 ") && lines[1].trim_start().starts_with("64 "), "{}", o.stdout);
    let rows = read_csv(&out);
    assert_eq!(rows.iter().map(|r| num(r, "bytes")).collect::<Vec<_>>(), [8.0, 8.0, 64.0, 64.0]);
    assert!(o.stderr.contains("stopped after 2 of 5 sizes"), "{}", o.stderr);
    assert!(o.stderr.lines().last().unwrap().contains("allreduce rank 1 failed (killed by signal 6"), "{}", o.stderr);
    // --quiet: that one line alone.
    let o = gpubench(&format!("{a} -q")).env("GPUBENCH_FAULT", "1:2:oom").run();
    assert_eq!(o.code, 1);
    assert_eq!(o.stderr.trim_end().lines().count(), 1, "{}", o.stderr);
    assert!(
        o.stderr.starts_with("error: allreduce rank 1 failed") && o.stderr.contains("out of memory"),
        "{}",
        o.stderr
    );
}

#[test]
fn bad_allreduce_input_is_one_line_and_exit_2() {
    assert_usage_error("allreduce --cpu 2 -b 1M -e 1K", "larger than -e");
    assert_usage_error("allreduce --cpu 2 -f 1", "step factor of 2 or more");
    assert_usage_error("allreduce --cpu 2 -b 12Q", "is not a size");
    assert_usage_error("allreduce --cpu 2 --dtype fp64", "fp64");
    assert_usage_error("allreduce --cpu 2 --backend nccl", "needs CUDA devices");
    assert_usage_error("allreduce --cpu 1", "at least 2 ranks");
    assert_usage_error("allreduce --cpu 0", "at least 2 ranks");
    assert_usage_error("allreduce --cpu 2 --op max", "only sum");
}

#[test]
fn predict_turns_a_profile_and_a_curve_into_rows_beside_measurement() {
    let dir = tempfile::tempdir().unwrap();
    let (curve, out) = (dir.path().join("curve.csv"), dir.path().join("pred.csv"));
    let o = gpubench(&format!("allreduce --cpu 2 -b 1K -e 1M -f 8 -n 3 -w 1 -q --out {}", curve.display())).run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let a = format!(
        "predict --cpu --device-counts 2,4 --model tinycnn --image-size 16 --num-classes 10 --batch-size 8 --steps 3 \
         --min-time 0s --warmup 1 --allreduce {} --out {} --format json",
        curve.display(),
        out.display()
    );
    let o = gpubench(&a).run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).expect("JSON");
    let preds = v["predictions"].as_array().unwrap();
    // The file has no curve at 4 ranks: that world size is skipped, and said so.
    assert_eq!(preds.len(), 1, "{v}");
    assert!(v["notes"][0].as_str().unwrap().contains("world size 4 skipped"), "{v}");
    let p = &preds[0];
    let (step, one) = (
        p["prediction"]["step"].as_f64().unwrap(),
        p["profile"]["forward"].as_f64().unwrap()
            + p["profile"]["backward"].as_f64().unwrap()
            + p["profile"]["optimizer"].as_f64().unwrap(),
    );
    assert!(step >= one && p["prediction"]["efficiency"].as_f64().unwrap() <= 1.0 + 1e-12, "{p}");
    assert!(!p["profile"]["buckets"].as_array().unwrap().is_empty());
    let r = read_csv(&out).pop().unwrap();
    assert_eq!(
        (r["impl"].as_str(), r["strategy"].as_str(), r["n_devices"].as_str(), r["backend"].as_str()),
        ("predicted", "ddp", "2", "gloo")
    );
    assert!(num(&r, "throughput_img_s") > 0.0 && r["source"].contains("curve.csv"));
    assert_eq!(r["steps"], "3", "--min-time 0s: exactly --steps");
    // Published figures instead of a file: every world size. --min-time times more than 2 steps of a
    // millisecond each; every step's sample is kept, and the slowest rank's wait grows with the ranks.
    let o = gpubench(
        "predict --cpu --device-counts 2,4,8 --model tinycnn --image-size 16 --num-classes 10 --batch-size 8 --steps 2 \
         --min-time 100ms --warmup 1 --busbw 10 --latency 50us --format json",
    )
    .run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let preds = v["predictions"].as_array().unwrap();
    assert_eq!(preds.len(), 3);
    for p in preds {
        assert!(p["profile"]["samples"].as_array().unwrap().len() > 2, "{p}");
        let x = &p["prediction"];
        // tinycnn has no BatchNorm: nothing to broadcast.
        assert!(x["wait"].as_f64().unwrap() >= 0.0 && x["broadcast"].as_f64() == Some(0.0), "{x}");
    }
    // resnet18's BatchNorm statistics are broadcast before every forward, unless told not to.
    let r18 =
        "predict --cpu --device-counts 2 --model resnet18 --image-size 32 --num-classes 10 --batch-size 2 --steps 1 \
               --min-time 0s --warmup 0 --busbw 10 --latency 50us --format json";
    for (extra, sent) in [("", true), (" --no-broadcast-buffers", false)] {
        let o = gpubench(&format!("{r18}{extra}")).run();
        assert_eq!(o.code, 0, "{}", o.stderr);
        let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        let p = &v["predictions"][0];
        assert!(p["profile"]["buffer_bytes"].as_u64().unwrap() > 0, "{p}");
        assert_eq!(p["prediction"]["broadcast"].as_f64().unwrap() >= 50e-6, sent, "{extra}: {p}");
    }
}

#[test]
fn predict_scales_the_profile_to_another_devices_published_figure() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pred.csv");
    let o = gpubench(&format!(
        "predict --cpu --model tinycnn --image-size 16 --num-classes 10 --batch-size 4 --steps 2 --min-time 0s \
         --warmup 1 --device-counts 2,8 --busbw 10 --latency 20us --scale-to 1000 --target-batch-size 64 --format json --out {}",
        out.display()
    ))
    .run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    for p in v["predictions"].as_array().unwrap() {
        let pr = &p["profile"];
        let one = ["forward", "backward", "optimizer"].iter().map(|k| pr[k].as_f64().unwrap()).sum::<f64>();
        assert!((one - 64.0 / 1000.0).abs() < 1e-9, "the profile takes the target's step time: {one}");
        let x = &p["prediction"];
        assert_eq!(x["wait"].as_f64(), Some(0.0), "no straggler wait for a device whose jitter is unknown");
        let n = x["n"].as_f64().unwrap();
        assert!(x["throughput"].as_f64().unwrap() <= n * 1000.0 + 1e-6, "{x}");
    }
    assert!(v["notes"].to_string().contains("scaled to 1000 img/s on one device at batch 64"), "{v}");
    let rows = read_csv(&out);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["batch_per_device"], "64");
    assert_eq!(rows[0]["device_name"], "scaled to 1000 img/s/device");
    // A GPU's figure: predicted for NCCL, as the first H200 run's rows were not (they said gloo).
    assert_eq!(rows[0]["backend"], "nccl");
}

#[test]
fn bad_predict_input_is_one_line_and_exit_2() {
    let s = "predict --cpu --model tinycnn --image-size 16";
    assert_usage_error(s, "needs an all-reduce curve");
    assert_usage_error(&format!("{s} --busbw 0"), "--busbw must be above zero");
    assert_usage_error(&format!("{s} --busbw 5 --device-counts 1"), "world size of 2 or more");
    assert_usage_error(&format!("{s} --busbw 5 --device-counts two"), "two");
    assert_usage_error(&format!("{s} --allreduce /nonexistent.csv"), "no such file");
    assert_usage_error(&format!("{s} --busbw 5 --min-time soon"), "--min-time \"soon\" is not a duration");
    assert_usage_error(&format!("{s} --busbw 5 --nnodes 0"), "--nnodes must be at least 1");
    assert_usage_error(&format!("{s} --busbw 5 --scale-to 0"), "--scale-to must be a throughput above zero");
    assert_usage_error(
        &format!("{s} --busbw 5 --scale-to 10 --target-batch-size 0"),
        "--target-batch-size must be at least 1",
    );
    assert_usage_error(&format!("{s} --busbw 5 --target-batch-size 8"), "--scale-to");
    assert_usage_error(
        &format!("{s} --busbw 5 --devices 2"),
        "predict --devices is no longer taken: use --device-counts",
    );
    let dir = tempfile::tempdir().unwrap();
    let train = dir.path().join("train.csv");
    let o = gpubench(&format!(
        "run --cpu --model tinycnn --image-size 16 --batch-size 4 --steps 1 --warmup 0 -q --out {}",
        train.display()
    ))
    .run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_usage_error(&format!("{s} --allreduce {}", train.display()), "no all-reduce rows");
}
