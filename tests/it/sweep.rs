//! `gpubench sweep` and `gpubench max-batch` on the CPU: the matrix's rows and
//! charts, forced out-of-memory errors (a memory cap on the cells), cells
//! that die without a row, `kill -9` then `--resume`, Ctrl-C, concurrent
//! appends, and bad input. Small on purpose: tinycnn, 16-pixel images, a few
//! steps.
use super::common::*;
use gpubench::results::csv::{self as results_csv, Row};
use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// The small model for every cell, and few threads.
/// The small model's run options for every cell, and few threads.
const TINY_CELLS: &str = "--image-size 16 --num-classes 10 --threads 2";

/// `gpubench sweep SWEEP --models tinycnn -- RUN` with the small model's options.
fn tiny(sweep: &str, run: &str) -> String {
    format!("sweep {sweep} --models tinycnn -- {TINY_CELLS} {run}")
}

/// gpubench with `args`, in `dir`.
fn sweep_in(dir: &Path, args: &str) -> Gpubench {
    gpubench(args).cwd(dir)
}

fn run_in(dir: &Path, args: &str) -> std::process::Output {
    sweep_in(dir, args).output()
}

/// (strategy, n_devices, batch) → rows.
fn by_cell(rows: &[Row]) -> HashMap<(String, u32, u32), Vec<&Row>> {
    let mut m: HashMap<(String, u32, u32), Vec<&Row>> = HashMap::new();
    for r in rows {
        m.entry((r.strategy.clone(), r.n_devices, r.batch_per_device.unwrap())).or_default().push(r);
    }
    m
}

fn key(s: &str, n: u32, b: u32) -> (String, u32, u32) {
    (s.to_string(), n, b)
}

fn wait_for_rows(path: &Path, n: usize, child: &mut Child) {
    let t = Instant::now();
    loop {
        let rows = std::fs::read_to_string(path).map(|t| t.lines().count().saturating_sub(1)).unwrap_or(0);
        if rows >= n {
            return;
        }
        assert!(child.try_wait().unwrap().is_none(), "the sweep ended before writing {n} row(s)");
        assert!(t.elapsed() < Duration::from_secs(120), "no {n} row(s) after 120s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Processes whose command line contains `needle` (other than this test).
fn processes_with(needle: &str) -> Vec<String> {
    let me = std::process::id().to_string();
    let mut v = vec![];
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) || name == me {
            continue;
        }
        if let Ok(c) = std::fs::read(format!("/proc/{name}/cmdline")) {
            let c = String::from_utf8_lossy(&c).replace('\0', " ");
            if c.contains(needle) {
                v.push(format!("{name}: {c}"));
            }
        }
    }
    v
}

#[test]
fn a_cpu_sweep_writes_a_row_per_cell_and_the_charts() {
    let dir = tempfile::tempdir().unwrap();
    let args = tiny(
        "--cpu 2 --strategies dp,ddp --device-counts 1,2 --batch-sizes 16 --out r.csv --charts charts --html sweep.html", "--steps 2 --warmup 1");
    let o = run_in(dir.path(), &args);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let rows = results_csv::read_rows(&dir.path().join("r.csv")).unwrap();
    assert_eq!(rows.len(), 4, "{out}");
    let cells = by_cell(&rows);
    for k in [key("dp", 1, 16), key("dp", 2, 16), key("ddp", 1, 16), key("ddp", 2, 16)] {
        let r = &cells[&k];
        assert_eq!(r.len(), 1, "{k:?}");
        assert_eq!(r[0].status.name(), "ok", "{k:?}: {}", r[0].error);
        assert_eq!((r[0].model.as_str(), r[0].image_size, r[0].steps), ("tinycnn", Some(16), Some(2)));
        assert!(r[0].throughput_img_s.unwrap() > 0.0);
    }
    assert_eq!(cells[&key("ddp", 2, 16)][0].devices, "cpu×2");
    // a line per finished cell, then the summary with scaling efficiency
    for i in 1..=4 {
        assert!(out.contains(&format!("[{i}/4] ")), "{out}");
    }
    assert!(out.contains("sweep summary") && out.contains("scaling"), "{out}");
    // and why each 2-device configuration falls short of its 1-device run
    assert!(out.contains("why: the shortfall from ideal scaling"), "{out}");
    assert!(out.contains("ddp on 2 devices reaches ") && out.contains("dp on 2 devices reaches "), "{out}");
    assert!(out.contains("sweep done: 4 cell(s)") && out.contains("4 ok"), "{out}");
    // the per-device companion and the report's charts
    assert!(dir.path().join("r.devices.csv").is_file());
    for f in ["throughput.svg", "scaling.svg"] {
        let p = dir.path().join("charts").join(f);
        assert!(p.is_file(), "{f} missing; stderr: {err}");
        assert!(std::fs::read_to_string(&p).unwrap().contains("<svg"));
    }
    // the page: the summary table and the very SVG the charts directory got
    let page = std::fs::read_to_string(dir.path().join("sweep.html")).unwrap();
    assert!(page.contains("sweep summary (4 row(s) of this matrix"), "{page}");
    assert!(page.contains("why: the shortfall from ideal scaling"), "the verdicts are on the page");
    let svg = std::fs::read_to_string(dir.path().join("charts/throughput.svg")).unwrap();
    assert!(page.contains(svg.trim()), "the page embeds charts/throughput.svg as written");
    assert!(err.contains("wrote sweep.html"), "{err}");
}

/// Every cell and repeat of one sweep carries one id, and the sweep's
/// --commit and --branch: the rows its cells wrote and the rows it wrote
/// for cells that died. Another sweep into the same file has another id.
#[test]
fn the_cells_of_one_sweep_share_its_id_and_its_commit() {
    let dir = tempfile::tempdir().unwrap();
    // The documented test hook: the batch-3 cells die without a row.
    let script = dir.path().join("child.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\ncase \" $* \" in *\" --batch-size 3 \"*) kill -KILL $$ ;; esac\nexec \"$GPUBENCH_REAL\" \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let args = tiny(
        "--cpu 1 --strategies single --batch-sizes 3,4 --repeat 2 --out r.csv --commit 1234ABCD --branch nightly",
        "--steps 1 --warmup 0",
    );
    let o = sweep_in(dir.path(), &args)
        .without_provenance()
        .env("GPUBENCH_SWEEP_CHILD", &script)
        .env("GPUBENCH_REAL", bin())
        .output();
    assert_eq!(o.status.code(), Some(1), "{}\n{}", stdout(&o), stderr(&o));
    let rows = results_csv::read_rows(&dir.path().join("r.csv")).unwrap();
    let got: Vec<(Option<u32>, bool)> =
        rows.iter().map(|r| (r.batch_per_device, r.note.contains("gpubench sweep"))).collect();
    assert_eq!(got, [(Some(3), true), (Some(4), false), (Some(3), true), (Some(4), false)]);
    let id = rows[0].sweep_id.clone();
    assert!(id.starts_with('s') && id.len() > 8, "{id:?}");
    for r in &rows {
        assert_eq!((r.sweep_id.as_str(), r.commit.as_str(), r.branch.as_str()), (id.as_str(), "1234abcd", "nightly"));
    }
    let args = tiny("--cpu 1 --strategies single --batch-sizes 4 --out r.csv", "--steps 1 --warmup 0");
    let o = sweep_in(dir.path(), &args).without_provenance().output();
    assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(&o), stderr(&o));
    let rows = results_csv::read_rows(&dir.path().join("r.csv")).unwrap();
    let last = &rows[4];
    assert!(!last.sweep_id.is_empty() && last.sweep_id != id, "{:?} after {id:?}", last.sweep_id);
    assert_eq!((last.commit.as_str(), last.branch.as_str()), ("", ""), "no repository, no CI, no flag");
}

#[test]
fn a_sweep_html_path_in_a_missing_directory_is_refused_before_any_cell() {
    let dir = tempfile::tempdir().unwrap();
    let args =
        tiny("--cpu 2 --strategies ddp --device-counts 1 --batch-sizes 16 --out r.csv --html no/s.html", "--steps 2");
    let o = run_in(dir.path(), &args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        stderr(&o).trim(),
        "error: --html no/s.html: directory no does not exist; create it first (mkdir -p no)"
    );
    assert!(!dir.path().join("r.csv").exists(), "no cell ran");
}

#[test]
fn impl_gpubench_pytorch_runs_each_cell_under_both_into_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let args = tiny(
        "--cpu 2 --impls gpubench,pytorch --strategies single,dp --device-counts 1,2 --batch-sizes 8 --out r.csv",
        "--steps 2 --warmup 1",
    );
    let o = run_in(dir.path(), &args);
    let (out, err) = (stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    // PyTorch's DataParallel needs CUDA: its dp cells are left out, and said so.
    assert!(err.contains("note: no PyTorch dp cells on the CPU"), "{err}");
    let rows = results_csv::read_rows(&dir.path().join("r.csv")).unwrap();
    let mut got: Vec<(String, String, u32)> =
        rows.iter().map(|r| (r.implementation.name().to_string(), r.strategy.clone(), r.n_devices)).collect();
    got.sort();
    // (PyTorch's ddp against gpubench's is the fidelity tests' subject.)
    let want: Vec<(String, String, u32)> =
        [("gpubench", "dp", 1), ("gpubench", "dp", 2), ("gpubench", "single", 1), ("pytorch", "single", 1)]
            .iter()
            .map(|&(i, s, n)| (i.to_string(), s.to_string(), n))
            .collect();
    assert_eq!(got, want, "{out}");
    assert!(rows.iter().all(|r| r.status.name() == "ok"), "{out}");
    // --resume knows the two implementations apart: nothing is left to run.
    let o = run_in(dir.path(), &args.replace(" -- ", " --resume -- "));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(results_csv::read_rows(&dir.path().join("r.csv")).unwrap().len(), 4);
}

#[test]
fn out_of_memory_under_a_cap_gives_oom_rows_and_the_sweep_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    // 262144 images of 16 px need 0.8 GB for the input alone; 16 fit easily.
    let args = tiny(
        "--cpu 1 --strategies single,dp,ddp --batch-sizes 262144,16 --mem-limit 1G --out r.csv",
        "--steps 2 --warmup 1",
    );
    let o = run_in(dir.path(), &args);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", stderr(&o));
    let rows = results_csv::read_rows(&dir.path().join("r.csv")).unwrap();
    assert_eq!(rows.len(), 6, "{out}");
    // the big batch first, in every strategy; the sweep goes on to the small one
    for (i, s) in ["single", "dp", "ddp"].iter().enumerate() {
        let big = &rows[i];
        assert_eq!((big.strategy.as_str(), big.batch_per_device), (*s, Some(262144)));
        assert_eq!(big.status.name(), "oom", "{s}: {}", big.error);
        assert!(big.error.contains("allocate memory"), "{s}: {}", big.error);
        assert!(!big.error.contains("frame #"), "{s}: the libtorch backtrace was kept: {}", big.error);
        if *s != "ddp" {
            // In-process strategies know the memory in use; for ddp the
            // launcher writes the row for a worker that died, and cannot.
            assert!(big.peak_rss_mb.unwrap() > 10.0, "{s}: memory in use is known");
        }
        let small = &rows[3 + i];
        assert_eq!((small.strategy.as_str(), small.status.name()), (*s, "ok"), "{}", small.error);
    }
    // ddp names the rank that ran out
    assert!(rows[2].error.contains("rank 0"), "{}", rows[2].error);
    assert!(out.contains("3 ok, 3 oom"), "{out}");
    assert!(out.contains("excluded"), "the summary counts the oom cells: {out}");
}

#[test]
fn a_cell_that_dies_without_a_row_gets_one_from_the_sweep() {
    let dir = tempfile::tempdir().unwrap();
    // The documented test hook: each cell runs this script instead of gpubench.
    let script = dir.path().join("child.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\n\
         case \" $* \" in\n\
         *\" --batch-size 3 \"*) echo 'memory allocation of 1048576 bytes failed' >&2; kill -ABRT $$ ;;\n\
         *\" --batch-size 5 \"*) echo 'step 1' >&2; kill -KILL $$ ;;\n\
         esac\n\
         exec \"$GPUBENCH_REAL\" \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let args = tiny("--cpu 1 --strategies single --batch-sizes 3,5,4 --out r.csv", "--steps 1 --warmup 0");
    let o = sweep_in(dir.path(), &args).env("GPUBENCH_SWEEP_CHILD", &script).env("GPUBENCH_REAL", bin()).output();
    let out = stdout(&o);
    // a failed cell makes the sweep exit 1, after running every cell
    assert_eq!(o.status.code(), Some(1), "{out}\n{}", stderr(&o));
    let rows = results_csv::read_rows(&dir.path().join("r.csv")).unwrap();
    let b: Vec<(Option<u32>, &str)> = rows.iter().map(|r| (r.batch_per_device, r.status.name())).collect();
    assert_eq!(b[0], (Some(3), "oom"));
    assert_eq!(b[1].0, Some(5));
    assert_eq!(b[2], (Some(4), "ok"), "{}", rows[2].error);
    assert!(rows[0].error.contains("SIGABRT") && rows[0].error.contains("memory allocation"), "{}", rows[0].error);
    assert!(rows[1].error.contains("SIGKILL"), "{}", rows[1].error);
    if rows[1].status.name() == "oom" {
        // the kernel's OOM killer happened to fire (somewhere) meanwhile
        assert!(rows[1].error.contains("killed by the kernel's out-of-memory killer"), "{}", rows[1].error);
    } else {
        assert_eq!(rows[1].status.name(), "failed");
    }
    for r in &rows[..2] {
        assert!(r.note.contains("written by gpubench sweep"), "{}", r.note);
        let what = (r.strategy.as_str(), r.model.as_str(), r.implementation.name(), r.devices.as_str());
        assert_eq!(what, ("single", "tinycnn", "gpubench", "cpu×1"));
    }
    assert!(out.contains("(row written by the sweep)"), "{out}");
}

#[test]
fn kill_9_mid_sweep_then_resume_gives_every_cell_once() {
    let dir = tempfile::tempdir().unwrap();
    let args = tiny(
        "--cpu 2 --strategies single,ddp --device-counts 1,2 --batch-sizes 16 --out r.csv",
        "--steps 3 --warmup 1 --label kill9-test",
    );
    let out = dir.path().join("r.csv");
    let mut sweep = sweep_in(dir.path(), &args).spawn_with(Stdio::null(), Stdio::null());
    wait_for_rows(&out, 1, &mut sweep);
    std::thread::sleep(Duration::from_millis(300)); // into the next cell
    sweep.kill().unwrap(); // SIGKILL
    sweep.wait().unwrap();
    let before = results_csv::read_rows(&out).unwrap();
    assert!(!before.is_empty() && before.len() < 3, "{} rows", before.len());

    let o = run_in(dir.path(), &args.replace(" -- ", " --resume -- "));
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{text}\n{}", stderr(&o));
    // (a ddp worker of the killed cell may still have finished its row: resume
    // waits for the killed sweep's processes, then counts)
    let err = stderr(&o);
    let done: usize = err
        .lines()
        .find_map(|l| l.strip_prefix("resume: "))
        .and_then(|l| l.strip_suffix(" to run"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no resume line in {err}"));
    assert!(done >= before.len() && done < 3, "{err}");
    assert!(err.contains(&format!("resume: {done} of 3 cells already have an ok row")), "{err}");
    let rows = results_csv::read_rows(&out).unwrap();
    assert_eq!(rows.len(), 3, "complete, and no cell twice: {rows:#?}");
    let cells = by_cell(&rows);
    assert_eq!(cells.len(), 3);
    assert!(rows.iter().all(|r| r.status.name() == "ok"), "{rows:#?}");
    let ids: std::collections::HashSet<&str> = rows.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(ids.len(), 3);
    assert!(processes_with("kill9-test").is_empty(), "{:?}", processes_with("kill9-test"));
}

#[test]
fn ctrl_c_stops_the_cell_and_its_processes_and_says_how_to_resume() {
    let dir = tempfile::tempdir().unwrap();
    // The test hook again: the second cell (batch 16) warms up for a minute,
    // so that Ctrl-C lands while its launcher and two ddp workers run.
    let script = dir.path().join("child.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\n\
         case \" $* \" in *\" --batch-size 16 \"*) exec \"$GPUBENCH_REAL\" \"$@\" --warmup-time 60s ;; esac\n\
         exec \"$GPUBENCH_REAL\" \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let args = tiny(
        "--cpu 2 --strategies ddp --device-counts 2 --batch-sizes 8,16,32 --out r.csv",
        "--steps 2 --warmup 1 --label ctrl-c-test",
    );
    let out = dir.path().join("r.csv");
    let mut sweep =
        sweep_in(dir.path(), &args).env("GPUBENCH_SWEEP_CHILD", &script).env("GPUBENCH_REAL", bin()).spawn();
    wait_for_rows(&out, 1, &mut sweep);
    // The second cell's launcher and its two workers are up. One snapshot is judged, not a count
    // read twice: while the launcher starts a worker, its forked copy carries the same flag until
    // it execs, so a count of 3 can be the launcher, one worker and that copy for a moment.
    let t = Instant::now();
    let up = loop {
        assert!(sweep.try_wait().unwrap().is_none(), "the sweep ended early");
        let up = processes_with("--warmup-time 60s");
        let workers = up.iter().filter(|c| c.contains(" rank run ")).count();
        if (up.len(), workers) == (3, 2) || t.elapsed() > Duration::from_secs(60) {
            break up;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let workers = up.iter().filter(|c| c.contains(" rank run ")).count();
    assert_eq!((up.len(), workers), (3, 2), "launcher and two workers: {up:?}");
    unsafe {
        libc::kill(sweep.id() as i32, libc::SIGINT);
    }
    let t0 = Instant::now();
    let o = sweep.wait_with_output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(130), "{err}");
    // Well inside the cell's 60 s warm-up: Ctrl-C ended it.
    assert!(t0.elapsed() < Duration::from_secs(50), "Ctrl-C took {:?}", t0.elapsed());
    assert!(err.contains("interrupted: stopped cell 2 (ddp ×2 tinycnn 16px b16)"), "{err}");
    let hint = err.lines().find_map(|l| l.strip_prefix("resume with: ")).unwrap_or_else(|| panic!("{err}"));
    assert!(hint.contains(" --resume -- ") && hint.contains("--label ctrl-c-test"), "{hint}");
    assert!(processes_with("ctrl-c-test").is_empty(), "left behind: {:?}", processes_with("ctrl-c-test"));
    // the finished row is kept; the interrupted cell has none, the third never ran
    let rows = results_csv::read_rows(&out).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].batch_per_device, rows[0].status.name()), (Some(8), "ok"));
    assert!(stdout(&o).contains("[1/3] ddp ×2 tinycnn 16px b8"), "{}", stdout(&o));
}

#[test]
fn a_second_sweep_on_the_same_file_waits_for_the_first() {
    let dir = tempfile::tempdir().unwrap();
    // The first sweep's only cell starts 2 s late (test hook).
    let script = dir.path().join("slow.sh");
    std::fs::write(&script, "#!/bin/sh\nsleep 2\nexec \"$GPUBENCH_REAL\" \"$@\"\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let args = tiny("--cpu 1 --strategies single --batch-sizes 8 --out r.csv", "--steps 1 --warmup 0");
    let mut first = sweep_in(dir.path(), &args)
        .env("GPUBENCH_SWEEP_CHILD", &script)
        .env("GPUBENCH_REAL", bin())
        .spawn_with(Stdio::null(), Stdio::null());
    let t = Instant::now();
    while processes_with(script.to_str().unwrap()).is_empty() {
        assert!(t.elapsed() < Duration::from_secs(60) && first.try_wait().unwrap().is_none());
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = run_in(dir.path(), &args.replace(" -- ", " --resume -- "));
    assert!(first.wait().unwrap().success());
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("waiting for another sweep on this file"), "{err}");
    assert!(err.contains("resume: 1 of 1 cells already have an ok row"), "{err}");
    assert_eq!(results_csv::read_rows(&dir.path().join("r.csv")).unwrap().len(), 1);
}

#[test]
fn concurrent_appends_do_not_interleave() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.csv");
    // threads appending big rows (one 64 KiB label each) through the library
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let out = out.clone();
            std::thread::spawn(move || {
                for i in 0..25 {
                    let label = format!("t{t}-{i}-{}", char::from(b'a' + t as u8).to_string().repeat(65536));
                    let row = Row {
                        schema_version: results_csv::SCHEMA_VERSION,
                        run_id: format!("{t}-{i}"),
                        label,
                        status: gpubench::results::Status::Ok,
                        ..Default::default()
                    };
                    results_csv::append_rows(&out, &[row]).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let rows = results_csv::read_rows(&out).unwrap();
    assert_eq!(rows.len(), 100);
    for r in &rows {
        let (t, _) = r.run_id.split_once('-').unwrap();
        let c = char::from(b'a' + t.parse::<u8>().unwrap());
        assert!(r.label.starts_with(&format!("t{}-", r.run_id)), "{}", &r.label[..20]);
        assert_eq!(r.label.matches(c).count(), 65536, "row {} was mixed with another", r.run_id);
    }
    // and separate gpubench processes appending to the same file at once
    let out2 = dir.path().join("p.csv");
    let big = "x".repeat(100_000);
    let kids: Vec<Child> = (0..3)
        .map(|i| {
            let label = format!("p{i}{big}");
            gpubench(&format!(
                "run --cpu --model tinycnn --image-size 8 --num-classes 10 --batch-size 2 --steps 1 --warmup 0 \
                 --quiet --threads 1 --label {label} --out {}",
                out2.display()
            ))
            .spawn_with(Stdio::inherit(), Stdio::inherit())
        })
        .collect();
    for mut k in kids {
        assert!(k.wait().unwrap().success());
    }
    let rows = results_csv::read_rows(&out2).unwrap();
    let mut labels: Vec<String> = rows.iter().map(|r| r.label.clone()).collect();
    labels.sort();
    assert_eq!(labels, (0..3).map(|i| format!("p{i}{big}")).collect::<Vec<_>>());
    let devs = std::fs::read_to_string(dir.path().join("p.devices.csv")).unwrap();
    assert_eq!(devs.lines().count(), 4, "header and one line per run");
}

#[test]
fn max_batch_under_a_memory_cap_finds_a_plausible_batch() {
    let dir = tempfile::tempdir().unwrap();
    let o = run_in(
        dir.path(),
        "max-batch --cpu --mem-limit 1G --start 4096 --granularity 4096 --out mb.csv \
         -- --strategy single --model tinycnn --image-size 16 --num-classes 10 --threads 2 --steps 1 --warmup 0",
    );
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", stderr(&o));
    let best: u32 = out
        .lines()
        .find_map(|l| l.strip_prefix("largest batch that fits: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no result line in {out}"));
    // 1 GiB minus libtorch's own ~0.6 GiB holds thousands of 16-px images, not a million
    assert!((2048..262144).contains(&best), "{best}\n{out}");
    assert!(out.contains("peak memory per device:") && out.contains("cpu"), "{out}");
    // a row per probe: every batch up to the answer fit, every one above it did not
    let rows = results_csv::read_rows(&dir.path().join("mb.csv")).unwrap();
    let probes = out.lines().filter(|l| l.starts_with("probe ")).count();
    assert_eq!(rows.len(), probes);
    assert!(rows.iter().any(|r| r.status.name() == "oom"), "{out}");
    for r in &rows {
        let b = r.batch_per_device.unwrap();
        assert_eq!(r.status.name() == "ok", b <= best, "batch {b}: {} ({})", r.status, r.error);
        if r.status.name() == "ok" {
            assert_eq!((r.steps, r.warmup), (Some(1), Some(0)));
        }
    }
    assert!(rows.iter().any(|r| r.batch_per_device == Some(best) && r.status.name() == "ok"));
}

/// The frontier on the CPU: the levers tinycnn cannot use are skipped with
/// why, each other lever reaches the target by accumulating micro-batches
/// (`--max 16` stands in for a full device: every lever's largest batch is
/// 16), and the table, its CSV, the chart and the page all come out.
#[test]
fn the_frontier_reaches_a_target_batch_through_accumulation() {
    let dir = tempfile::tempdir().unwrap();
    // A CPU with fast bf16 kernels, whatever this host's is (the test hook's
    // cpuinfo): the bf16 lever runs.
    let cpuinfo = dir.path().join("cpuinfo");
    std::fs::write(&cpuinfo, "processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_bf16\n").unwrap();
    let o = sweep_in(
        dir.path(),
        "max-batch --frontier --target-global-batch 64 --cpu --start 8 --max 16 --out mb.csv --charts ch --html f.html \
         -- --model tinycnn --image-size 16 --num-classes 10 --threads 2 --steps 1 --warmup 0",
    )
    .env("GPUBENCH_TEST_CPUINFO", &cpuinfo)
    .output();
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", stderr(&o));
    assert!(
        out.contains("checkpoint, fp16 + checkpoint, bf16 + checkpoint, tf32 + checkpoint: skipped, --checkpoint"),
        "{out}"
    );
    assert!(out.contains("\ntf32: skipped, --precision tf32 is a CUDA tensor-core mode"), "{out}");
    assert!(out.contains("\nfp16: skipped, the CPU has no fast fp16 kernels"), "{out}");
    assert!(out.contains("fastest way to a global batch of 64 on 1 device(s): "), "{out}");
    assert!(out.contains("at batch 16 per device with --grad-accum 4"), "{out}");
    // the rows: the searches' probes, then each lever's way to the target
    let rows = results_csv::read_rows(&dir.path().join("mb.csv")).unwrap();
    let target: Vec<&Row> = rows.iter().filter(|r| r.grad_accum == Some(4)).collect();
    let precisions: Vec<&str> = target.iter().map(|r| r.precision.as_str()).collect();
    assert_eq!(precisions, ["fp32", "bf16"], "{out}");
    assert!(target.iter().all(|r| r.batch_per_device == Some(16) && r.global_batch == Some(64)));
    assert!(rows.iter().all(|r| r.status.name() == "ok" && !r.variant.contains("checkpoint")));
    // the table as CSV, one line per lever
    let csv = std::fs::read_to_string(dir.path().join("mb.frontier.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("lever,largest_batch_per_device,"), "{csv}");
    assert_eq!(lines.len(), 9, "{csv}");
    assert!(lines[1].starts_with("none,16,") && lines[1].contains(",16,4,"), "{csv}");
    assert!(lines[2].starts_with("checkpoint,,"), "{csv}");
    assert!(dir.path().join("ch/frontier.svg").is_file());
    let page = std::fs::read_to_string(dir.path().join("f.html")).unwrap();
    assert!(page.contains("<svg") && page.contains("bf16 + checkpoint"), "the page has the chart and the table");
}

/// An emitted sweep run by hand as Slurm would run it: `sweep.sbatch` once
/// per array task, with the variables a batch step has (SLURM_PROCID and
/// SLURM_NTASKS of its one task too, which the 2-rank ddp cell must not take
/// for its own), then `collect`: every row says where it ran, and a cell
/// whose file is gone becomes a `missing` row. `scripts/slurm-test` runs the
/// same through a real Slurm.
#[test]
fn an_emitted_sweep_run_by_hand_collects_with_its_tasks_and_a_missing_cell() {
    let dir = tempfile::tempdir().unwrap();
    let o = run_in(
        dir.path(),
        "sweep --cpu 2 --strategies ddp --device-counts 1,2 --models tinycnn --batch-sizes 8 --emit slurm sw \
         --max-parallel 1 --commit 0123abcd -- --image-size 16 --num-classes 10 --threads 1 --steps 1 --warmup 0",
    );
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    // The manifest records the sweep's id and the commit under test, for the cells to carry wherever they run.
    let manifest = gpubench::fleet::manifest::read(&dir.path().join("sw")).unwrap();
    let id = manifest[0].row.sweep_id.clone();
    assert!(id.starts_with('s') && id.len() > 8, "{id:?}");
    assert!(manifest.iter().all(|e| e.row.sweep_id == id && e.row.commit == "0123abcd"), "{manifest:?}");
    assert!(out.contains("(2 cells)") && out.contains("(2 job arrays)"), "{out}");
    assert!(out.contains("--array=0-0%1") && out.contains("--cpus-per-task=2 ") && out.contains("GPUBENCH_SHAPE=2"));
    let sw = dir.path().join("sw");
    for (shape, job) in [(1, "41"), (2, "42")] {
        let o = std::process::Command::new("bash")
            .arg(sw.join("sweep.sbatch"))
            .envs([
                ("GPUBENCH", bin().to_str().unwrap()),
                ("GPUBENCH_SHAPE", &shape.to_string()),
                ("SLURM_ARRAY_TASK_ID", "0"),
                ("SLURM_ARRAY_JOB_ID", job),
                ("SLURM_JOB_ID", job),
                ("SLURM_JOB_NODELIST", "node07"),
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "1"),
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "array {shape}: {}{}", stdout(&o), stderr(&o));
    }
    let o = run_in(dir.path(), "collect sw --out all.csv");
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let rows = results_csv::read_rows(&dir.path().join("all.csv")).unwrap();
    let got: Vec<(u32, &str, &str, Option<u32>, &str)> = rows
        .iter()
        .map(|r| (r.n_devices, r.status.name(), r.job_id.as_str(), r.array_task, r.node_list.as_str()))
        .collect();
    assert_eq!(got, [(1, "ok", "41", Some(0), "node07"), (2, "ok", "42", Some(0), "node07")]);
    assert!(rows.iter().all(|r| r.scheduler == "slurm"));
    assert!(rows.iter().all(|r| r.sweep_id == id && r.commit == "0123abcd"), "{rows:?}");
    let devs = std::fs::read_to_string(dir.path().join("all.devices.csv")).unwrap();
    assert_eq!(devs.lines().count(), 1 + 3, "a device line per rank: {devs}");
    // A lost cell: collect says so, in its row and its exit code.
    std::fs::remove_file(sw.join("cells/1.csv")).unwrap();
    let o = run_in(dir.path(), "collect sw --out all.csv");
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("replacing the previous file") && stdout(&o).contains("1 ok, 1 missing"),
        "{}",
        stdout(&o)
    );
    let rows = results_csv::read_rows(&dir.path().join("all.csv")).unwrap();
    assert_eq!((rows[1].status.name(), rows[1].n_devices, rows[1].array_task), ("missing", 2, Some(0)));
    assert_eq!((rows[1].sweep_id.as_str(), rows[1].commit.as_str()), (id.as_str(), "0123abcd"));
    // The file it replaced is kept beside it, whole.
    let kept: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("all.replaced-") && !n.contains("devices"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(results_csv::read_rows(&dir.path().join(&kept[0])).unwrap().len(), 2);
    // Someone else's CSV is never replaced.
    std::fs::write(dir.path().join("theirs.csv"), "a,b\n1,2\n").unwrap();
    let o = run_in(dir.path(), "collect sw --out theirs.csv");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(dir.path().join("theirs.csv")).unwrap(), "a,b\n1,2\n");
    assert!(rows[1].error.contains("cell 1 (ddp ×2 tinycnn 16px b8) left no"), "{}", rows[1].error);
    // --resume re-emits that one cell alone.
    let o = run_in(
        dir.path(),
        "sweep --cpu 2 --strategies ddp --device-counts 1,2 --models tinycnn --batch-sizes 8 --emit slurm sw \
         --resume -- --image-size 16 --num-classes 10 --threads 1 --steps 1 --warmup 0",
    );
    assert!(stdout(&o).contains("1 cells re-emitted") && stdout(&o).contains("--array=0-0 "), "{}", stdout(&o));
    let script = std::fs::read_to_string(sw.join("sweep.sbatch")).unwrap();
    assert!(script.contains("  2) cells=(1) ;;") && !script.contains("cells=(0)"), "{script}");
    // A re-emission is a sweep of its own: a new id.
    let again = gpubench::fleet::manifest::read(&sw).unwrap();
    assert!(again.iter().all(|e| !e.row.sweep_id.is_empty() && e.row.sweep_id != id), "{again:?}");
}

/// Slurm refuses an array whose task ids reach MaxArraySize: a shape with
/// more cells is split into arrays that fit, and each array's tasks still
/// find their cells; a corrupt cell file is one failed row, not a failed merge.
#[test]
fn arrays_are_split_to_fit_max_array_size_and_a_corrupt_cell_is_one_failed_row() {
    let dir = tempfile::tempdir().unwrap();
    let o = run_in(
        dir.path(),
        "sweep --cpu 1 --strategies single --models tinycnn --batch-sizes 4,8,16 --emit slurm sw --max-array-size 2 \
         -- --image-size 16 --num-classes 10 --threads 1 --steps 1 --warmup 0",
    );
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains("(3 cells)") && out.contains("(2 job arrays)"), "{out}");
    assert!(out.contains("--array=0-1 ") && out.contains("--array=0-0 "), "{out}");
    assert!(out.contains("split to fit Slurm's MaxArraySize (--max-array-size)"), "{out}");
    let sw = dir.path().join("sw");
    for (shape, task) in [(1, 0), (1, 1), (2, 0)] {
        let o = std::process::Command::new("bash")
            .arg(sw.join("sweep.sbatch"))
            .envs([
                ("GPUBENCH", bin().to_str().unwrap()),
                ("GPUBENCH_SHAPE", &shape.to_string()),
                ("SLURM_ARRAY_TASK_ID", &task.to_string()),
                ("SLURM_JOB_ID", "7"),
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "array {shape} task {task}: {}{}", stdout(&o), stderr(&o));
    }
    let o = run_in(dir.path(), "collect sw --out all.csv");
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let rows = results_csv::read_rows(&dir.path().join("all.csv")).unwrap();
    let got: Vec<(Option<u32>, Option<u32>)> = rows.iter().map(|r| (r.batch_per_device, r.array_task)).collect();
    assert_eq!(got, [(Some(4), Some(0)), (Some(8), Some(1)), (Some(16), Some(0))]);
    // One cell's file corrupted: the others merge, that one is a failed row, exit 1.
    std::fs::write(sw.join("cells/1.csv"), "not,a\n\"gpubench file\n").unwrap();
    let o = run_in(dir.path(), "collect sw --out again.csv");
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("2 ok, 1 failed"), "{}", stdout(&o));
    let rows = results_csv::read_rows(&dir.path().join("again.csv")).unwrap();
    assert_eq!(rows.iter().map(|r| r.status.name()).collect::<Vec<_>>(), ["ok", "failed", "ok"]);
    assert!(rows[1].error.contains("cells/1.csv that cannot be read"), "{}", rows[1].error);
}

/// A cell that the scheduler cancels or preempts (SIGTERM to the task) stops
/// its run and leaves a failed row saying so, at once (well within Slurm's
/// KillWait); collect shows it, --resume emits it again, and a task whose
/// manifest changed since it was emitted is refused.
#[test]
fn a_cancelled_cell_leaves_a_failed_row_and_resume_emits_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let sweep = "sweep --cpu 1 --strategies single --models tinycnn --batch-sizes 4 --emit slurm sw \
                 -- --image-size 16 --num-classes 10 --threads 1 --steps 1000000 --warmup 0 --label cancel-me";
    let o = run_in(dir.path(), sweep);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let sw = dir.path().join("sw");
    let script = std::fs::read_to_string(sw.join("sweep.sbatch")).unwrap();
    let digest = script.lines().find_map(|l| l.strip_prefix("digest=")).unwrap().to_string();
    let mut cell = sweep_in(dir.path(), &format!("cell sw 0 --manifest-digest {digest}")).spawn();
    // Its run is under way (a process of the cell's label), then cancelled.
    let t = Instant::now();
    while processes_with("cancel-me").is_empty() {
        assert!(t.elapsed() < Duration::from_secs(60) && cell.try_wait().unwrap().is_none(), "the cell never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    unsafe {
        libc::kill(cell.id() as i32, libc::SIGTERM);
    }
    let t = Instant::now();
    while cell.try_wait().unwrap().is_none() {
        assert!(t.elapsed() < Duration::from_secs(60), "the cancelled cell did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = cell.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(128 + libc::SIGTERM), "{}", stderr(&o));
    assert!(processes_with("cancel-me").is_empty(), "left behind: {:?}", processes_with("cancel-me"));
    let rows = results_csv::read_rows(&sw.join("cells/0.csv")).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].status.name(), "failed");
    assert!(rows[0].error.starts_with("stopped by SIGTERM after "), "{}", rows[0].error);
    let o = run_in(dir.path(), "collect sw --out all.csv");
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("failed: stopped by SIGTERM"), "{}", stdout(&o));
    // --resume emits it again; the old task's digest no longer matches.
    let o = run_in(dir.path(), &sweep.replace("--emit slurm sw", "--emit slurm sw --resume"));
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(!stdout(&o).contains("nothing to emit"), "{}", stdout(&o));
    let script = std::fs::read_to_string(sw.join("sweep.sbatch")).unwrap();
    assert!(script.contains("  1) cells=(0) ;;"), "{script}");
    std::fs::write(sw.join("manifest.jsonl"), std::fs::read_to_string(sw.join("manifest.jsonl")).unwrap() + "\n")
        .unwrap();
    let o = run_in(dir.path(), &format!("cell sw 0 --manifest-digest {digest}"));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("manifest.jsonl changed since this task was emitted"), "{}", stderr(&o));
}

/// `--emit k8s`: an Indexed Job per shape, as JSON (which kubectl takes),
/// read back here with what a cluster needs; the pods' cells are the manifest's.
#[test]
fn an_emitted_k8s_sweep_is_an_indexed_job_per_shape() {
    let dir = tempfile::tempdir().unwrap();
    let o = run_in(
        dir.path(),
        "sweep --cpu 2 --strategies ddp --device-counts 1,2 --models tinycnn --batch-sizes 8,16 --emit k8s sw \
         --image reg/gpubench:0.1 --pvc sweep-results --max-parallel 1 -- --image-size 16 --steps 1",
    );
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains("2 Indexed Jobs") && out.contains("kubectl apply -f "), "{out}");
    let sw = dir.path().join("sw");
    let manifest = std::fs::read_to_string(sw.join("manifest.jsonl")).unwrap();
    assert_eq!(manifest.lines().count(), 4);
    assert!(manifest.contains("\"scheduler\":\"kubernetes\""));
    for (shape, cells, cpu) in [(1, "0 2", 1), (2, "1 3", 2)] {
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(sw.join(format!("k8s/job-{shape}.json"))).unwrap()).unwrap();
        assert_eq!(j["spec"]["completionMode"], "Indexed");
        assert_eq!((j["spec"]["completions"].as_u64(), j["spec"]["parallelism"].as_u64()), (Some(2), Some(1)));
        let c = &j["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["image"], "reg/gpubench:0.1");
        assert_eq!(c["resources"]["limits"]["cpu"], cpu);
        assert!(c["command"][2].as_str().unwrap().starts_with(&format!("set -- {cells}; ")), "{c}");
    }
}

/// A 2-node ddp cell (`--node-counts 2`), run as srun runs it: one
/// `cell DIR INDEX` per node with its SLURM_NODEID, both on this machine here.
/// Each node's process is its node's launcher; node 0's writes the row.
#[test]
fn a_two_node_cell_runs_one_launcher_per_node_and_node_0_writes_the_row() {
    let dir = tempfile::tempdir().unwrap();
    let o = run_in(
        dir.path(),
        "sweep --cpu 1 --strategies ddp --device-counts 1 --node-counts 2 --models tinycnn --batch-sizes 8 \
         --emit slurm sw -- --image-size 16 --num-classes 10 --steps 2 --warmup 1 --threads 1",
    );
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains("--nodes=2 --ntasks-per-node=1"), "{out}");
    let port = gpubench::dist::free_port().unwrap().to_string();
    let node = |r: &str| {
        sweep_in(dir.path(), "cell sw 0")
            .env("SLURM_NODEID", r)
            .env("SLURM_PROCID", r)
            .env("SLURM_NTASKS", "2")
            .env("SLURM_JOB_NUM_NODES", "2")
            .env("SLURM_JOB_ID", "88")
            .env("SLURM_ARRAY_JOB_ID", "88")
            .env("SLURM_ARRAY_TASK_ID", "0")
            .env("MASTER_ADDR", "127.0.0.1")
            .env("MASTER_PORT", &port)
            .spawn_with(Stdio::inherit(), Stdio::piped())
    };
    let (n0, n1) = (node("0"), node("1"));
    let (o0, o1) = (n0.wait_with_output().unwrap(), n1.wait_with_output().unwrap());
    assert_eq!(o0.status.code(), Some(0), "{}{}", stdout(&o0), stderr(&o0));
    assert_eq!(o1.status.code(), Some(0), "{}{}", stdout(&o1), stderr(&o1));
    let rows = results_csv::read_rows(&dir.path().join("sw/cells/0.csv")).unwrap();
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!((r.status.name(), r.n_devices, r.devices.as_str()), ("ok", 2, "cpu×1 ×2 nodes"));
    assert_eq!((r.job_id.as_str(), r.array_task), ("88", Some(0)));
    assert_usage_error("sweep --cpu 1 --strategies ddp --node-counts 2 --out x.csv", "add --emit slurm DIR");
}

/// The same 2-node cell emitted for Kubernetes: a PyTorchJob, whose two
/// pods (RANK 0 and 1 in a pod, no LOCAL_RANK) each run `cell DIR INDEX` as
/// their node's launcher; the master pod's writes the row.
#[test]
fn a_two_node_cell_on_kubernetes_is_a_pytorchjob_whose_pods_are_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let o = run_in(
        dir.path(),
        "sweep --cpu 1 --strategies ddp --device-counts 1 --node-counts 1,2 --models tinycnn --batch-sizes 8 \
         --emit k8s sw --image reg/gpubench --pvc res -- --image-size 16 --num-classes 10 --steps 2 --warmup 1 \
         --threads 1",
    );
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains("1 Indexed Job and 1 PyTorchJob"), "{out}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("sw/k8s/cell-1.json")).unwrap()).unwrap();
    assert_eq!(j["kind"], "PyTorchJob");
    assert_eq!(j["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"], 1);
    let port = gpubench::dist::free_port().unwrap().to_string();
    let pod = |r: &str| {
        sweep_in(dir.path(), "cell sw 1")
            .env("RANK", r)
            .env("WORLD_SIZE", "2")
            .env("MASTER_ADDR", "127.0.0.1")
            .env("MASTER_PORT", &port)
            .env("KUBERNETES_PORT", "tcp://10.96.0.1:443")
            .env("KUBERNETES_SERVICE_HOST", "10.96.0.1")
            .spawn_with(Stdio::inherit(), Stdio::piped())
    };
    let (p0, p1) = (pod("0"), pod("1"));
    let (o0, o1) = (p0.wait_with_output().unwrap(), p1.wait_with_output().unwrap());
    assert_eq!(o0.status.code(), Some(0), "{}{}", stdout(&o0), stderr(&o0));
    assert_eq!(o1.status.code(), Some(0), "{}{}", stdout(&o1), stderr(&o1));
    let r = &results_csv::read_rows(&dir.path().join("sw/cells/1.csv")).unwrap()[0];
    assert_eq!((r.status.name(), r.n_devices, r.devices.as_str()), ("ok", 2, "cpu×1 ×2 nodes"));
    assert_eq!(r.scheduler, "kubernetes");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    assert_usage_error("sweep --cpu 2 --models tinycnn", "--out");
    assert_usage_error("sweep --cpu 2 --device-counts 3 --out /tmp/x.csv", "--device-counts 3");
    assert_usage_error(
        "sweep --cpu 1 --strategies single --device-counts 1 --batch-sizes 0 --out /tmp/x.csv",
        "--batch-sizes",
    );
    assert_usage_error("sweep --cpu 1 --mem-limit lots --out /tmp/x.csv", "--mem-limit");
    assert_usage_error("sweep --cpu 1 --strategies fast --out /tmp/x.csv", "fast");
    assert_usage_error("sweep --cpu 1 --out /nonexistent-gpubench-dir/x.csv", "does not exist");
    assert_usage_error("sweep --cpu 1 --models tinycnn --out /tmp/x.csv -- --image-size 2", "--image-size");
    assert_usage_error("sweep --cpu 1 --impls tensorflow --out /tmp/x.csv", "tensorflow");
    assert_usage_error("sweep --cpu 1 --impls pytorch --out /tmp/x.csv -- --breakdown", "--breakdown");
    // Run options go after --, exactly as run takes them; those the sweep
    // sets itself are refused there, with where they belong.
    assert_usage_error("sweep --cpu 1 --out /tmp/x.csv -- --steps many", "--steps");
    assert_usage_error("sweep --cpu 1 --out /tmp/x.csv -- --frobnicate", "--frobnicate");
    assert_usage_error("sweep --cpu 1 --out /tmp/x.csv -- --out y.csv", "give --out to the sweep itself");
    assert_usage_error("sweep --cpu 1 --out /tmp/x.csv -- --gpus 0", "give --gpus to the sweep itself");
    assert_usage_error("sweep --cpu 1 --out /tmp/x.csv --models tinycnn -- --model resnet18", "--model and --models");
    assert_usage_error("sweep --cpu 1 --out /tmp/x.csv --vary steps", "OPTION=V1,V2");
    assert_usage_error("sweep --cpu 1 --out /tmp/x.csv --vary frobs=1,2", "has no option --frobs");
    assert_usage_error("sweep --cpu 1 --out /tmp/x.csv --vary channels-last=yes", "vary it as on,off");
    assert_usage_error("sweep --cpu 1 --out /tmp/x.csv --vary lr=0.1 -- --lr 0.2", "give it in one place");
    assert_usage_error("sweep --cpu 2 --out /tmp/x.csv --vary comm-hook=zip --strategies ddp", "zip");
    assert_usage_error("max-batch --cpu -- --batch-size 8", "max-batch searches it itself");
    assert_usage_error("max-batch --cpu --model tinycnn", "max-batch --model is no longer taken");
    assert_usage_error("max-batch --cpu --start 0", "--start");
    assert_usage_error("max-batch --cpu --granularity 0", "--granularity");
    assert_usage_error("max-batch --cpu 2 -- --strategy single", "single");
    let tiny = "max-batch --cpu --frontier";
    assert_usage_error(&format!("{tiny} --target-global-batch 0"), "--target-global-batch 0: the global batch");
    assert_usage_error(
        "max-batch --cpu 2 --frontier --target-global-batch 5 -- --strategy ddp --model tinycnn",
        "multiple of the 2 device(s)",
    );
    assert_usage_error(&format!("{tiny} -- --precision bf16"), "--frontier tries each precision itself");
    assert_usage_error(&format!("{tiny} -- --grad-accum 2"), "--frontier tries --grad-accum itself");
    assert_usage_error(&format!("{tiny} --charts /etc/passwd"), "not a directory");
    assert_usage_error(&format!("{tiny} --html /nonexistent-gpubench-dir/f.html"), "--html");
    assert_usage_error("max-batch --cpu --target-global-batch 64", "--frontier");
    // The old spelling read as a per-device batch beside predict's --target-batch-size.
    assert_usage_error(
        "max-batch --cpu --frontier --target-batch 64",
        "max-batch --target-batch is no longer taken: use --target-global-batch",
    );
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    assert_usage_error(&format!("sweep --cpu 1 --models tinycnn --emit k8s {d}/k --pvc r"), "--image IMAGE");
    assert_usage_error(&format!("sweep --cpu 1 --models tinycnn --emit k8s {d}/k --image i"), "--pvc CLAIM");
    assert_usage_error(&format!("sweep --cpu 1 --models tinycnn --emit lsf {d}/k"), "slurm and k8s");
    assert_usage_error(&format!("sweep --cpu 1 --models tinycnn --emit slurm {d}/k --image i"), "for --emit k8s");
    assert_usage_error(&format!("sweep --cpu 1 --models tinycnn --emit slurm {d}/s --out x.csv"), "--out");
    assert_usage_error(
        &format!("sweep --cpu 1 --models tinycnn --emit slurm {d}/s --max-parallel 0"),
        "--max-parallel 0",
    );
    assert_usage_error(&format!("cell {d} 0"), "manifest.jsonl");
    assert_usage_error(&format!("collect {d} --out /nonexistent-gpubench-dir/x.csv"), "does not exist");
}

#[test]
fn vary_makes_an_axis_of_any_run_option_and_report_keeps_the_variants_apart() {
    let dir = tempfile::tempdir().unwrap();
    let args = "sweep --cpu 2 --strategies ddp --device-counts 2 --vary comm-hook=none,fp16 --out r.csv \
                -- --model tinycnn --image-size 32 --steps 3 --warmup 1";
    let o = run_in(dir.path(), args);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(&o), stderr(&o));
    let rows = results_csv::read_rows(&dir.path().join("r.csv")).unwrap();
    let got: Vec<(&str, &str)> = rows.iter().map(|r| (r.comm_hook.as_str(), r.status.name())).collect();
    assert_eq!(got, [("none", "ok"), ("fp16", "ok")]);
    assert!(stdout(&o).contains("ddp ×2 tinycnn 32px b64 comm-hook=fp16"), "{}", stdout(&o));
    // Two configurations in the report, not two repeats of one.
    let r = run_in(dir.path(), "report r.csv");
    let table = stdout(&r);
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    // The table's rows: after the rule under its header, up to the blank line
    // (notes below it, such as a disturbed run's, name configurations too).
    let lines: Vec<&str> =
        table.lines().skip_while(|l| !l.starts_with("---")).skip(1).take_while(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 2, "{table}");
    assert!(lines.iter().any(|l| l.contains("comm-hook=fp16")), "{table}");
    // --resume tells the variants apart: nothing is left to run.
    let o = run_in(dir.path(), &args.replace("--out r.csv", "--out r.csv --resume"));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("2 of 2 cells already have an ok row"), "{}", stderr(&o));
    assert_eq!(results_csv::read_rows(&dir.path().join("r.csv")).unwrap().len(), 2);
}

/// `--format json` makes the sweep's summary one JSON document on stdout,
/// the cells' lines going to stderr, so that the output parses whole.
#[test]
fn a_sweep_summary_in_json_is_one_document_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let o = run_in(
        dir.path(),
        "sweep --cpu 1 --strategies single --models tinycnn --batch-sizes 4 --out s.csv --format json \
         -- --image-size 16 --num-classes 10 --steps 1 --warmup 0 --threads 1",
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
    let t = &doc["tables"][0];
    assert!(t["title"].as_str().unwrap().starts_with("sweep summary"), "{doc}");
    assert_eq!(t["rows"].as_array().unwrap().len(), 1, "{doc}");
    let err = stderr(&o);
    assert!(err.contains("[1/1]") && err.contains("sweep done"), "{err}");
    // An emitted sweep has no summary here to format.
    assert_usage_error("sweep --cpu 1 --models tinycnn --format csv --emit slurm /tmp/gpubench-never", "collect");
}

/// A login node has no GPU: a sweep over the cluster's GPUs is emitted from
/// it all the same, the list checked for its form only, and the arrays and
/// Jobs ask for the GPUs each cell uses.
#[test]
fn a_gpu_sweep_is_emitted_from_a_host_without_gpus() {
    let dir = tempfile::tempdir().unwrap();
    let sweep = "sweep --gpus 0,1,2,3 --strategies ddp --device-counts 2,4 --models resnet18 --batch-sizes 32";
    let o = run_in(dir.path(), &format!("{sweep} --emit slurm sw -- --steps 5"));
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains("--gres=gpu:2") && out.contains("--gres=gpu:4"), "{out}");
    let o = run_in(dir.path(), &format!("{sweep} --emit k8s kube --image reg/gpubench --pvc res -- --steps 5"));
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let jobs: String = std::fs::read_dir(dir.path().join("kube/k8s"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert!(jobs.contains("\"nvidia.com/gpu\": 4") && jobs.contains("\"nvidia.com/gpu\": 2"), "{jobs}");
    assert_usage_error(&format!("sweep --gpus 0,x --models resnet18 --emit slurm {}/bad", dir.path().display()), "0,x");
}
