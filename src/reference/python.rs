//! Finding the Python that runs the reference: one that has torch installed,
//! preferably set-up's venv of the torch version gpubench is built on.
use anyhow::{anyhow, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The torch version gpubench is built against; the reference should use the same.
pub(crate) const TORCH_VERSION: &str = "2.11.0";

/// A Python interpreter with torch installed, and torch's version.
#[derive(Debug, Clone)]
pub(crate) struct Python {
    pub path: PathBuf,
    pub torch_version: String,
}

/// torch's installed version, from its package metadata: importing torch to
/// ask would cost two seconds of every `--impl pytorch` run (the run itself
/// imports it, and a broken install fails there with torch's own message).
fn torch_version_of(py: &Path) -> Option<String> {
    let out = Command::new(py)
        .args(["-W", "ignore", "-c", "import importlib.metadata as m; print(m.version('torch'))"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !v.is_empty()).then_some(v)
}

/// Where to look, in order: $GPUBENCH_PYTHON, $GPUBENCH_PYTHON_BIN (set-up's
/// env.sh), set-up's venv in the cache, python3.
pub(crate) fn python_candidates() -> Vec<PathBuf> {
    let mut c: Vec<PathBuf> = vec![];
    for k in ["GPUBENCH_PYTHON", "GPUBENCH_PYTHON_BIN"] {
        if let Some(v) = std::env::var_os(k).filter(|v| !v.is_empty()) {
            c.push(PathBuf::from(v));
        }
    }
    let home = std::env::var_os("GPUBENCH_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("gpubench")));
    if let Some(dir) = home.and_then(|h| std::fs::read_dir(h).ok()) {
        let mut venvs: Vec<PathBuf> = dir
            .filter_map(|e| e.ok())
            // torch-2.11.0-py3.11, or torch-2.11.0-cu126-py3.11 for a CUDA 12 build.
            .filter(|e| e.file_name().to_string_lossy().starts_with(&format!("torch-{TORCH_VERSION}-")))
            .map(|e| e.path().join("bin").join("python"))
            .filter(|p| p.exists())
            .collect();
        venvs.sort();
        venvs.reverse();
        c.extend(venvs);
    }
    c.push(PathBuf::from("python3"));
    c
}

/// The first candidate that has torch installed.
pub(crate) fn find_python() -> Result<Python> {
    // A Python named on purpose is the one to use, or an error: falling back
    // to another torch would run the legacy route (a K80's old torch) on the
    // wrong one without a word.
    if let Some(v) = std::env::var_os("GPUBENCH_PYTHON").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(&v);
        return match torch_version_of(&p) {
            Some(torch_version) => Ok(Python { path: p, torch_version }),
            None => {
                let why = if p.components().count() > 1 && !p.exists() { "does not exist" } else { "has no torch" };
                Err(anyhow!(
                    "GPUBENCH_PYTHON={} {why}: point it at a python with torch installed, or unset it to use \
                     set-up's venv (scripts/setup)",
                    p.display()
                ))
            }
        };
    }
    let cands = python_candidates();
    for p in &cands {
        if let Some(v) = torch_version_of(p) {
            return Ok(Python { path: p.clone(), torch_version: v });
        }
    }
    let tried: Vec<String> = cands.iter().map(|p| p.display().to_string()).collect();
    Err(anyhow!(
        "--impl pytorch needs a Python with torch {TORCH_VERSION}, and none of {} has torch installed: run scripts/setup, \
         or set GPUBENCH_PYTHON to such a python",
        tried.join(", ")
    ))
}

/// A private temporary directory, removed on drop.
pub(crate) struct TempDir(pub PathBuf);

const TEMP_PREFIX: &str = "gpubench-pytorch-";

/// Temporary directories of gpubench processes that no longer exist (killed,
/// so their drop never ran): removed at the next start. Each name carries its
/// owner's pid; a live pid keeps its directory.
fn remove_orphans() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(TEMP_PREFIX).and_then(|r| r.split('-').next()?.parse::<u32>().ok()) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl TempDir {
    pub(crate) fn new() -> Result<Self> {
        remove_orphans();
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        let p = std::env::temp_dir().join(format!("{TEMP_PREFIX}{}-{nanos:x}", std::process::id()));
        std::fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
        Ok(TempDir(p))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
