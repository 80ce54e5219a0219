//! Links gpubench against the libtorch that torch-sys found and compiles the C++ shims under `src/shim` (c10d,
//! autocast and the TF32/determinism switches, CUDA allocator statistics, versions).
//!
//! Inputs come from `scripts/setup`, which installs nothing into the system: it writes `$GPUBENCH_HOME/env.sh`
//! (default `~/.cache/gpubench`), which `scripts/gpubench`, `scripts/test` and the benchmark scripts source. By
//! hand: `scripts/setup && source ~/.cache/gpubench/env.sh && cargo build --release`. It provides:
//! - libtorch 2.11.0 (what tch 0.24 expects) for torch-sys through `LIBTORCH`: the user's own (it must hold
//!   `lib/libtorch_cpu.so`), else `torch==2.11.0` from PyPI in a versioned venv (`torch-2.11.0-py<X.Y>`). The
//!   PyPI wheel is built for CUDA 13 (NVIDIA driver ≥ 580); for older drivers set `GPUBENCH_TORCH_INDEX_URL` to
//!   a wheel index for an older CUDA before the first set-up.
//! - `GLOO_INCLUDE_DIR`: Gloo's headers, from Debian's `libgloo-dev` unpacked into the cache (never installed);
//!   without apt, point it at a directory holding `gloo/config.h`. The torch wheel does not ship them.
//! - the small CUDA header wheels (`nvidia-cuda-crt`, `nvidia-cuda-cccl`) that ProcessGroupNCCL's and CUDA's
//!   headers need and the torch wheel's own dependencies lack.
//!
//! Three fixes that torch-sys does not make:
//! - an rpath to libtorch's lib directory, so the binary runs without `LD_LIBRARY_PATH`;
//! - `libtorch_cuda` is force-linked when present (`--no-as-needed`): no Rust symbol references it, so
//!   `--as-needed` would drop it, and since loading it is what registers the CUDA backend, CUDA would silently
//!   look unavailable;
//! - the shims are compiled with Gloo's headers and, when `libtorch_cuda.so` and the CUDA and NCCL headers are
//!   found (`GPUBENCH_CUDA_INCLUDE`, colon-separated, else the `nvidia-*` wheels beside torch), with CUDA and NCCL
//!   enabled (`cfg(gpubench_cuda)`). With `libtorch_cuda` but no headers it warns and builds without the CUDA
//!   shim (no ddp over NCCL, no allocator statistics). `GPUBENCH_NO_CUDA` builds without CUDA.
use std::env;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/shim");
    for v in ["GLOO_INCLUDE_DIR", "GPUBENCH_CUDA_INCLUDE", "GPUBENCH_NO_CUDA"] {
        println!("cargo:rerun-if-env-changed={v}");
    }
    println!("cargo::rustc-check-cfg=cfg(gpubench_cuda)");

    // torch-sys (links = "tch") exports the lib dir it linked against.
    let lib = PathBuf::from(env::var("DEP_TCH_LIBTORCH_LIB").unwrap_or_else(|_| {
        fail("torch-sys did not report libtorch's lib directory; run scripts/setup, then `source ~/.cache/gpubench/env.sh`")
    }));
    let root = lib.parent().map(Path::to_path_buf).unwrap_or_else(|| lib.clone());
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    println!("cargo:rustc-env=GPUBENCH_LIBTORCH_LIB={}", lib.display());

    let gloo = env::var("GLOO_INCLUDE_DIR").map(PathBuf::from).unwrap_or_else(|_| {
        fail("GLOO_INCLUDE_DIR is not set: run scripts/setup (it fetches Debian's libgloo-dev headers), or point GLOO_INCLUDE_DIR at a directory holding gloo/config.h")
    });
    if !gloo.join("gloo/config.h").exists() {
        fail(&format!("GLOO_INCLUDE_DIR={} has no gloo/config.h", gloo.display()));
    }

    let mut b = cc::Build::new();
    b.cpp(true)
        .std("c++17")
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .define("USE_C10D_GLOO", None)
        .include(root.join("include"))
        .include(root.join("include/torch/csrc/api/include"))
        .include(&gloo)
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-deprecated-declarations")
        .flag_if_supported("-Wno-missing-field-initializers")
        .warnings(false);

    let has_cuda_lib = lib.join("libtorch_cuda.so").exists() && env::var_os("GPUBENCH_NO_CUDA").is_none();
    let cuda_inc = cuda_includes(&root);
    if has_cuda_lib {
        match &cuda_inc {
            Some(dirs) => {
                for d in dirs {
                    b.include(d);
                }
                b.define("USE_CUDA", None).define("USE_C10D_NCCL", None).define("GPUBENCH_CUDA", None);
                println!("cargo:rustc-cfg=gpubench_cuda");
            }
            None => println!(
                "cargo:warning=libtorch_cuda.so found but no CUDA/NCCL headers (nvidia/cu13/include, nvidia/nccl/include); \
                 building without the CUDA shim: ddp over NCCL and allocator statistics will be unavailable"
            ),
        }
    }

    let mut files: Vec<PathBuf> = std::fs::read_dir("src/shim")
        .expect("src/shim exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cpp"))
        .collect();
    files.sort();
    b.files(&files).compile("gpubench_shim");

    if has_cuda_lib {
        // Keep libtorch_cuda even though no Rust symbol references it: loading it
        // registers the CUDA backend with libtorch.
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg=-ltorch_cuda");
        if cuda_inc.is_some() {
            println!("cargo:rustc-link-arg=-lc10_cuda");
        }
        println!("cargo:rustc-link-arg=-Wl,--as-needed");
    }
    println!("cargo:rustc-link-search=native={}", lib.display());
    println!("cargo:rustc-link-lib=dylib=torch_cpu");
    println!("cargo:rustc-link-lib=dylib=c10");
}

/// CUDA and NCCL headers: GPUBENCH_CUDA_INCLUDE (colon-separated), else the
/// nvidia-* wheels beside the torch package.
fn cuda_includes(torch_root: &Path) -> Option<Vec<PathBuf>> {
    if let Ok(v) = env::var("GPUBENCH_CUDA_INCLUDE") {
        return Some(env::split_paths(&v).collect());
    }
    let nvidia = torch_root.parent()?.join("nvidia");
    let dirs: Vec<PathBuf> =
        ["cu13/include", "cu13/include/cccl", "nccl/include"].iter().map(|d| nvidia.join(d)).collect();
    let ok = dirs[0].join("cuda_runtime_api.h").exists()
        && dirs[0].join("crt/host_config.h").exists()
        && dirs[2].join("nccl.h").exists();
    ok.then_some(dirs)
}

fn fail(msg: &str) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(1);
}
