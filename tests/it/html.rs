//! `--html`: the page `report`, `compare` and `check` write, read back as
//! text and loaded by a real browser.
//!
//! The browser is headless Chromium from Debian's packages, which
//! `scripts/test` installs when missing and names in `GPUBENCH_BROWSER`
//! (setting `GPUBENCH_REQUIRE_BROWSER=1`). Without one the browser test says
//! it is skipped, unless required, when it fails.
use super::common::{gpubench, Gpubench};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report")
}

fn reference() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("results/reference")
}

/// A label that would run as script if the page did not escape it.
const XSS: &str = "<script>alert(1)</script>";

/// v100.csv with its label replaced by [`XSS`], in `dir`.
fn hostile_copy(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(fixtures().join("v100.csv")).unwrap();
    let p = dir.join("v100.csv");
    std::fs::write(&p, text.replace("V100 box", XSS)).unwrap();
    std::fs::copy(fixtures().join("v100.devices.csv"), dir.join("v100.devices.csv")).unwrap();
    p
}

fn in_dir(dir: &Path, a: &str) -> Gpubench {
    gpubench(a).cwd(dir)
}

/// The page for v100.csv (hostile label) beside a published K80 reference.
fn report_page(dir: &Path) -> PathBuf {
    hostile_copy(dir);
    let k80 = reference().join("tf_cnn_benchmarks_k80.csv");
    let o = in_dir(dir, &format!("report v100.csv {} --html page.html", k80.display())).run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("wrote page.html\n"), "{}", o.stderr);
    // stdout is still the table, unchanged by --html
    assert!(o.stdout.starts_with("gpubench report: 27 ok runs from 2 files"), "{}", o.stdout);
    dir.join("page.html")
}

#[test]
fn report_page_has_the_cli_tables_and_charts_escaped_and_offline() {
    let dir = tempfile::tempdir().unwrap();
    let page = std::fs::read_to_string(report_page(dir.path())).unwrap();
    assert!(page.contains(&format!("<td>{}</td>", "&lt;script&gt;alert(1)&lt;/script&gt;")), "label shown as text");
    assert!(!page.contains("<script"), "no script element");
    // The same cells as the JSON the CLI prints for the same files.
    let json = in_dir(dir.path(), "report v100.csv --format json").run();
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let v = &doc["tables"][0];
    assert!(v["rows"].as_array().unwrap().len() >= 6);
    assert!(page.contains("why: the shortfall from ideal scaling"), "the verdicts' table is on the page");
    let text = in_dir(dir.path(), "report v100.csv").run().stdout;
    for line in text.lines().filter(|l| l.starts_with("Tesla V100")) {
        let rate = line.split_whitespace().find(|w| w.contains('±')).map(str::to_string);
        if let Some(rate) = rate {
            assert!(page.contains(&rate), "interval cell {rate} missing from the page");
        }
    }
    assert!(page.contains("<tr class=\"published\">"), "published rows are marked");
    assert!(page.contains("they were not measured here"));
    // charts: inline SVG, every one the report draws
    assert!(page.matches("<svg").count() >= 5, "{}", page.matches("<svg").count());
    for fetch in ["src=", "href=", "<link", "url("] {
        assert!(!page.contains(fetch), "{fetch}: the page must not fetch anything");
    }
}

#[test]
fn compare_and_check_pages() {
    let dir = tempfile::tempdir().unwrap();
    let f = fixtures();
    let o = in_dir(&f, "compare v100.csv k80.csv --html").arg(dir.path().join("cmp.html")).run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    let page = std::fs::read_to_string(dir.path().join("cmp.html")).unwrap();
    assert!(page.contains("<title>gpubench compare</title>") && page.contains("<svg"), "table and bar chart");
    assert!(page.contains("Tesla K80"));

    let out = dir.path().join("check.html");
    let o = in_dir(&f, "check --baseline baseline.csv --current current_regressed.csv --html").arg(&out).run();
    assert_eq!(o.code, 1, "the page does not change the verdict: {}", o.stderr);
    let page = std::fs::read_to_string(&out).unwrap();
    assert!(page.contains("<div class=\"banner fail\" id=\"outcome\">"), "{page}");
    assert!(page.contains("<td class=\"v-regressed\">REGRESSED"), "{page}");
    // a second page to the same path replaces the first, and says so
    let o = in_dir(&f, "check --baseline baseline.csv --current current_noise.csv --html").arg(&out).run();
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("(replacing the previous page)"), "{}", o.stderr);
    assert!(std::fs::read_to_string(&out).unwrap().contains("<div class=\"banner pass\""));
}

#[test]
fn an_html_path_in_a_missing_directory_is_refused_before_any_work() {
    let f = fixtures();
    for cmd in [
        "report v100.csv --html nowhere/r.html",
        "compare v100.csv k80.csv --html nowhere/r.html",
        "check --baseline baseline.csv --current current_regressed.csv --html nowhere/r.html",
    ] {
        let o = in_dir(&f, cmd).run();
        assert_eq!(o.code, 2, "{cmd}: {}", o.stderr);
        assert_eq!(
            o.stderr,
            "error: --html nowhere/r.html: directory nowhere does not exist; create it first (mkdir -p nowhere)\n",
            "{cmd}"
        );
        assert!(o.stdout.is_empty(), "{cmd}: nothing was done: {}", o.stdout);
    }
    let o = in_dir(&f, "report v100.csv --html .").run();
    assert_eq!(o.code, 2);
    assert!(o.stderr.starts_with("error: --html .: is a directory"), "{}", o.stderr);
}

// ---- a real browser -------------------------------------------------------

fn browser() -> Option<PathBuf> {
    if let Some(b) = std::env::var_os("GPUBENCH_BROWSER").filter(|b| !b.is_empty()) {
        return Some(PathBuf::from(b));
    }
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"].iter().map(PathBuf::from).find(|p| p.is_file())
}

/// Runs the browser headless on `page` with `extra` arguments; its stdout.
/// Killed after two minutes, so a stuck browser fails the test instead of hanging it.
fn headless(browser: &Path, profile: &Path, extra: &[String], page: &Path) -> String {
    let mut child = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", browser.display()));
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).map(|_| s)
    });
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{} exited with {status}", browser.display());
            break;
        }
        if t0.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{} did not finish within 120 s", browser.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    reader.join().unwrap().unwrap()
}

/// (width, height, RGB pixels) of a screenshot.
fn decode(path: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut dec = png::Decoder::new(std::io::BufReader::new(file));
    dec.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = dec.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let step = info.color_type.samples();
    let px = buf[..info.buffer_size()].chunks(step).map(|c| [c[0], c[1], c[2]]).collect();
    (info.width, info.height, px)
}

#[test]
fn a_real_browser_shows_the_page_from_disk() {
    let Some(browser) = browser() else {
        let required = std::env::var("GPUBENCH_REQUIRE_BROWSER").is_ok_and(|v| v == "1");
        assert!(!required, "GPUBENCH_REQUIRE_BROWSER=1 but no browser: set GPUBENCH_BROWSER or install chromium");
        eprintln!("skipped: no headless Chromium here (scripts/test installs Debian's chromium as root)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let page = report_page(dir.path());
    let profile = dir.path().join("profile");

    // The DOM after the page loaded: the table cells, the label as text, no script.
    let dom = headless(&browser, &profile, &["--dump-dom".into()], &page);
    assert!(dom.contains("<h1>gpubench report</h1>"), "{dom}");
    assert!(dom.contains("<td>&lt;script&gt;alert(1)&lt;/script&gt;</td>"), "label is a text cell");
    assert!(!dom.contains("<script"), "a script element reached the DOM");
    for cell in ["<td>Tesla V100-SXM2-16GB</td>", "<td>ddp</td>", "<td class=\"num\">4</td>", "<td>published"] {
        assert!(dom.contains(cell), "DOM lacks {cell}");
    }
    assert!(dom.matches("<svg").count() >= 5, "charts in the DOM");

    // A screenshot that is not blank: text, table rules and chart colours.
    let shot = dir.path().join("page.png");
    // The capture waits for every compositor stage and for the page to go
    // idle (virtual time), not for the host: under load a screenshot taken
    // at the load event once held only part of the charts (44 blue pixels).
    let extra = vec![
        format!("--screenshot={}", shot.display()),
        "--window-size=1280,2400".into(),
        "--run-all-compositor-stages-before-draw".into(),
        "--virtual-time-budget=10000".into(),
    ];
    headless(&browser, &profile, &extra, &page);
    if let Some(keep) = std::env::var_os("GPUBENCH_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, Path::new(&keep)).unwrap();
    }
    let (w, h, px) = decode(&shot);
    assert_eq!((w, h), (1280, 2400));
    let ink = px.iter().filter(|p| p.iter().any(|&c| c < 200)).count();
    assert!(ink * 100 > px.len(), "only {ink} of {} pixels are not near-white", px.len());
    // The charts' strategy colours (single blue, ddp green) were drawn.
    let near = |p: &[u8; 3], c: [u8; 3]| p.iter().zip(c).all(|(a, b)| a.abs_diff(b) < 12);
    for (name, c) in [("blue", [31, 119, 180]), ("green", [44, 160, 44])] {
        let n = px.iter().filter(|p| near(p, c)).count();
        assert!(n > 50, "{name} chart marks: {n} pixels");
    }
}
