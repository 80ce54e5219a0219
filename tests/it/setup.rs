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
