//! `scripts/setup --plan`: which torch 2.11.0 build set-up chooses for the
//! GPUs and driver a (fake) nvidia-smi reports, and why; it installs nothing.
use super::common::{stderr, stdout};
use std::path::{Path, PathBuf};
use std::process::Command;

fn setup() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/setup")
}

/// Runs `scripts/setup --plan` with a fake nvidia-smi printing `rows` (None:
/// no nvidia-smi at all) first on PATH; returns (choice, reason).
fn plan(rows: Option<&str>) -> (String, String) {
    plan_with(rows.map(|r| format!("cat <<'EOF'\n{r}\nEOF\n")).as_deref())
}

/// `plan` with a fake nvidia-smi whose body (sh) is `script`.
fn plan_with(script: Option<&str>) -> (String, String) {
    plan_env(script, &[])
}

/// `plan_with`, with more variables in set-up's environment.
fn plan_env(script: Option<&str>, vars: &[(&str, &Path)]) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    if let Some(body) = script {
        let fake = dir.path().join("nvidia-smi");
        std::fs::write(&fake, format!("#!/bin/sh\n{body}")).unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let home = dir.path().join("cache");
    let o = Command::new(setup())
        .arg("--plan")
        .env("PATH", format!("{}:/usr/bin:/bin", dir.path().display()))
        .env("GPUBENCH_HOME", &home)
        .env_remove("LIBTORCH")
        .env_remove("GPUBENCH_TORCH_INDEX_URL")
        .env_remove("GPUBENCH_PYTHON")
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert!(!home.exists(), "--plan created {}", home.display());
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    let choice = lines[0].strip_prefix("choice: ").unwrap_or_else(|| panic!("{out}"));
    let reason = lines[1].strip_prefix("reason: ").unwrap_or_else(|| panic!("{out}"));
    (choice.to_string(), reason.to_string())
}

#[test]
fn h100_on_a_580_driver_gets_pypis_default() {
    let (c, r) = plan(Some("NVIDIA H100 80GB HBM3, 9.0, 580.65.06\nNVIDIA H100 80GB HBM3, 9.0, 580.65.06"));
    assert_eq!(c, "torch==2.11.0+cu130 from PyPI");
    assert!(r.contains("2 GPU(s)") && r.contains("driver is >= 580"), "{r}");
}

#[test]
fn v100_on_a_535_driver_gets_the_cuda_12_6_build() {
    let (c, r) = plan(Some("Tesla V100-SXM2-16GB, 7.0, 535.104.05"));
    assert_eq!(c, "torch==2.11.0+cu126 from https://download.pytorch.org/whl/cu126");
    assert!(r.contains("Tesla V100-SXM2-16GB (compute capability 7.0)") && r.contains("12.6"), "{r}");
}

#[test]
fn an_a100_on_an_old_driver_gets_the_cuda_12_8_build() {
    let (c, r) = plan(Some("NVIDIA A100-SXM4-40GB, 8.0, 550.54.15"));
    assert_eq!(c, "torch==2.11.0+cu128 from https://download.pytorch.org/whl/cu128");
    assert!(r.contains("needs driver >= 580"), "{r}");
}

#[test]
fn k80_on_a_470_driver_is_sent_to_the_legacy_route() {
    let (c, r) = plan(Some("Tesla K80, 3.7, 470.256.02\nTesla K80, 3.7, 470.256.02"));
    assert_eq!(c, "torch==2.11.0+cu130 from PyPI");
    assert!(r.contains("Tesla K80 (compute capability 3.7)") && r.contains("driver 470.256.02"), "{r}");
    assert!(r.contains("native binary cannot use these GPUs") && r.contains("--impl pytorch"), "{r}");
}

#[test]
fn an_old_nvidia_smi_without_compute_cap_still_gets_the_legacy_advice() {
    // R470's nvidia-smi may not know the compute_cap field (G12).
    let (c, r) = plan_with(Some(
        "case \"$*\" in *compute_cap*) echo 'Field \"compute_cap\" is not a valid field to query.' >&2; exit 2;; esac\n\
         echo 470.82.01\n",
    ));
    assert_eq!(c, "torch==2.11.0+cu130 from PyPI");
    assert!(r.contains("driver 470.82.01") && r.contains("--impl pytorch"), "{r}");
}

#[test]
fn no_nvidia_smi_means_the_default_build_for_the_cpu() {
    if Command::new("sh").args(["-c", "PATH=/usr/bin:/bin command -v nvidia-smi"]).status().unwrap().success() {
        eprintln!("skipped: this machine has a real nvidia-smi in /usr/bin or /bin");
        return;
    }
    let (c, r) = plan(None);
    assert_eq!(c, "torch==2.11.0+cu130 from PyPI");
    assert!(r.contains("no nvidia-smi"), "{r}");
}

#[test]
fn an_unknown_argument_is_refused() {
    let o = Command::new(setup()).arg("--plna").output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--plan"));
}

/// A python package `torch` of version `version` (CUDA `cuda`) in a fresh
/// folder, for PYTHONPATH: what set-up reads of a torch it may reuse.
fn torch_package(version: &str, cuda: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("torch")).unwrap();
    std::fs::write(d.path().join("torch/__init__.py"), "").unwrap();
    std::fs::write(d.path().join("torch/version.py"), format!("__version__ = '{version}'\ncuda = {cuda}\n")).unwrap();
    d
}

#[test]
fn a_python_with_torch_2_11_is_reused_and_one_of_another_version_is_not() {
    let py = Path::new("/usr/bin/python3");
    if !py.exists() {
        eprintln!("skipped: no /usr/bin/python3 here");
        return;
    }
    let cpu = torch_package("2.11.0+cpu", "None");
    let (c, _) = plan_env(None, &[("GPUBENCH_PYTHON", py), ("PYTHONPATH", cpu.path())]);
    let want =
        format!("torch 2.11.0+cpu already in /usr/bin/python3 ({}): used as it is", cpu.path().join("torch").display());
    assert!(c.starts_with(&want), "{c}");
    let old = torch_package("2.5.1+cu124", "'12.4'");
    let (c, r) = plan_env(None, &[("GPUBENCH_PYTHON", py), ("PYTHONPATH", old.path())]);
    assert_eq!(c, "torch==2.11.0+cu130 from PyPI");
    assert!(r.ends_with("/usr/bin/python3 has torch 2.5.1+cu124, not 2.11.0, so set-up installs its own"), "{r}");
}

#[test]
fn a_libtorch_of_another_version_is_refused_before_anything_is_installed() {
    let dir = tempfile::tempdir().unwrap();
    let lt = dir.path().join("libtorch");
    std::fs::create_dir_all(lt.join("lib")).unwrap();
    std::fs::write(lt.join("lib/libtorch_cpu.so"), "").unwrap();
    std::fs::write(lt.join("build-version"), "2.5.1+cu124\n").unwrap();
    let home = dir.path().join("cache");
    let o = Command::new(setup()).env("LIBTORCH", &lt).env("GPUBENCH_HOME", &home).output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("is libtorch 2.5.1+cu124, and gpubench builds against 2.11.0"), "{err}");
    assert!(!home.exists(), "set-up made {}", home.display());
}

/// The real thing: set-up given the torch venv's own python (torch 2.11.0)
/// makes no venv and downloads nothing; the environment it writes points at
/// that torch and that python.
#[test]
fn setup_given_a_python_with_torch_2_11_downloads_nothing() {
    let (Some(py), Some(gloo), Some(font)) = (
        std::env::var_os("GPUBENCH_PYTHON_BIN"),
        std::env::var_os("GLOO_INCLUDE_DIR"),
        std::env::var_os("GPUBENCH_FONT"),
    ) else {
        panic!(
            "run through scripts/test: set-up's env.sh gives GPUBENCH_PYTHON_BIN, GLOO_INCLUDE_DIR and GPUBENCH_FONT"
        );
    };
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("cache");
    let o = Command::new(setup())
        .env("GPUBENCH_HOME", &home)
        .env("GPUBENCH_PYTHON", &py)
        .env("GLOO_INCLUDE_DIR", &gloo)
        .env("GPUBENCH_FONT", &font)
        .env_remove("LIBTORCH")
        .env_remove("GPUBENCH_TORCH_INDEX_URL")
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("nothing downloaded"), "{err}");
    let made: Vec<_> = std::fs::read_dir(&home).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(made.iter().all(|f| !f.to_string_lossy().starts_with("torch-")), "a venv was made: {made:?}");
    let env = std::fs::read_to_string(home.join("env.sh")).unwrap();
    let site = Path::new(&py).parent().unwrap().parent().unwrap();
    assert!(env.contains(&format!("export LIBTORCH='{}/lib/python", site.display())), "{env}");
    assert!(env.contains(&format!("export GPUBENCH_PYTHON_BIN='{}'", Path::new(&py).display())), "{env}");
}
