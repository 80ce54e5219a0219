//! Links gpubench against the libtorch that torch-sys found and compiles the C++ shims under `src/shim` (c10d,
//! autocast and the TF32/determinism switches, CUDA allocator statistics, versions).
//!
//! Inputs come from `scripts/setup`, which installs nothing into the system: it writes `$GPUBENCH_HOME/env.sh`
//! (default `~/.cache/gpubench`), which `scripts/gpubench`, `scripts/test` and the benchmark scripts source. By
//! hand: `scripts/setup && source ~/.cache/gpubench/env.sh && cargo build --release`. It provides:
//! - libtorch 2.11.0 (what tch 0.24 expects) for torch-sys through `LIBTORCH`: the user's own (it must hold
//!   `lib/libtorch_cpu.so`), else `torch==2.11.0` in a versioned venv: PyPI's CUDA 13 build, or PyTorch's CUDA
//!   12.6 or 12.8 build when the GPUs or driver need it (`scripts/setup --plan` says which, and why).
//! - `GLOO_INCLUDE_DIR`: Gloo's headers, from Debian's `libgloo-dev` unpacked into the cache (never installed);
//!   without apt, point it at a directory holding `gloo/config.h`. The torch wheel does not ship them.
//! - the small CUDA header wheels that ProcessGroupNCCL's and CUDA's headers need and the torch wheel's own
//!   dependencies lack, of torch's CUDA major version (`nvidia-cuda-crt`/`-cccl` for 13, `nvidia-cuda-nvcc-cu12`/
//!   `nvidia-cuda-cccl-cu12` for 12).
//!
//! Three fixes that torch-sys does not make:
//! - an rpath to libtorch's lib directory, so the binary runs without `LD_LIBRARY_PATH`;
//! - `libtorch_cuda` is force-linked when present (`--no-as-needed`): no Rust symbol references it, so
//!   `--as-needed` would drop it, and since loading it is what registers the CUDA backend, CUDA would silently
//!   look unavailable;
//! - the shims are compiled with Gloo's headers and, when `libtorch_cuda.so` and the CUDA and NCCL headers are
//!   found (`GPUBENCH_CUDA_INCLUDE`, colon-separated, else the `nvidia-*` wheels beside torch), with CUDA and NCCL
//!   enabled (`cfg(gpubench_cuda)`), in the CUDA 13 or the CUDA 12 wheels' layout. With `libtorch_cuda` but no
//!   headers the build fails with one line saying what to install: a binary without the CUDA shim would run
//!   and then lack NCCL and every CUDA figure. `GPUBENCH_NO_CUDA` builds without CUDA on purpose.
//!
//! Both builds, the torch-free one too, record the commit gpubench is built from (`GPUBENCH_GIT_COMMIT`, the
//! rows' `gpubench_commit`), so that two builds of one version tell apart. Build scripts rerun when a commit is
//! made (`rerun-if-changed` on git's HEAD and the ref it names); the shims, which take minutes, are then not
//! compiled again: a stamp beside the library records everything their compilation read (`shim_stamp`), and a
//! library whose stamp matches is linked as it is.
use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/shim");
    for v in ["GLOO_INCLUDE_DIR", "GPUBENCH_CUDA_INCLUDE", "GPUBENCH_NO_CUDA", "GPUBENCH_GIT_COMMIT"] {
        println!("cargo:rerun-if-env-changed={v}");
    }
    println!("cargo::rustc-check-cfg=cfg(gpubench_cuda)");
    println!("cargo:rustc-env=GPUBENCH_GIT_COMMIT={}", git_commit());
    // The torch-free build (--no-default-features): no libtorch to link, no
    // C++ shim to compile.
    if env::var_os("CARGO_FEATURE_TORCH").is_none() {
        return;
    }

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
    let cuda_inc = if has_cuda_lib { Some(cuda_includes(&root)) } else { None };
    if let Some(dirs) = &cuda_inc {
        for d in dirs {
            b.include(d);
        }
        b.define("USE_CUDA", None).define("USE_C10D_NCCL", None).define("GPUBENCH_CUDA", None);
        println!("cargo:rustc-cfg=gpubench_cuda");
    }

    let mut shim: Vec<PathBuf> =
        std::fs::read_dir("src/shim").expect("src/shim exists").filter_map(|e| e.ok().map(|e| e.path())).collect();
    shim.sort();
    let files: Vec<&PathBuf> = shim.iter().filter(|p| p.extension().is_some_and(|x| x == "cpp")).collect();
    // What the compilation reads besides the sources: libtorch's and Gloo's
    // headers, named by their paths (in the flags) and by these files'
    // size and time (a libtorch reinstalled in place).
    let installed = [lib.join("libtorch_cpu.so"), gloo.join("gloo/config.h")];
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let (library, stamp_path) = (out.join("libgpubench_shim.a"), out.join("gpubench_shim.stamp"));
    let stamp = shim_stamp(&b, &shim, &installed);
    if library.exists() && std::fs::read_to_string(&stamp_path).is_ok_and(|s| s == stamp) {
        // The same lines `compile` prints after building it.
        cc::emit_link_directives(&b, &library);
    } else {
        // A stamp left from an earlier library must not vouch for a half-built one.
        let _ = std::fs::remove_file(&stamp_path);
        b.files(&files).compile("gpubench_shim");
        std::fs::write(&stamp_path, &stamp).expect("writing the shim's stamp into OUT_DIR");
    }

    // The GPU code libtorch_cuda carries (its -gencode flags), for the check
    // that a GPU can run it where no driver is there to ask libtorch.
    let gencode = if has_cuda_lib { gencode_flags(&lib.join("libtorch_cuda.so")) } else { String::new() };
    println!("cargo:rustc-env=GPUBENCH_TORCH_GENCODE={gencode}");

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

/// Everything the shims' compilation depends on, as text: the compiler and
/// archiver with their flags (which hold the include paths, the defines, the
/// optimisation level and CXXFLAGS), each file of `src/shim` by name and
/// content digest, and the size and time of `installed`. Asking cc for the
/// compiler and archiver also prints its `rerun-if-env-changed` lines, so
/// cargo keeps watching CXX, CXXFLAGS, AR and the rest when the library is
/// reused.
fn shim_stamp(b: &cc::Build, shim: &[PathBuf], installed: &[PathBuf]) -> String {
    let compiler = b.get_compiler();
    let archiver = b.get_archiver();
    let mut s = format!("compiler {}\n", compiler.path().display());
    for a in compiler.args() {
        s += &format!("arg {}\n", a.to_string_lossy());
    }
    for (k, v) in compiler.get_envs() {
        s += &format!("env {}={}\n", k.to_string_lossy(), v.to_string_lossy());
    }
    s += &format!("archiver {}\n", archiver.get_program().to_string_lossy());
    for a in archiver.get_args() {
        s += &format!("arg {}\n", a.to_string_lossy());
    }
    for p in shim {
        let bytes = std::fs::read(p).unwrap_or_else(|e| fail(&format!("reading {}: {e}", p.display())));
        s += &format!("source {} {:016x}\n", p.display(), fnv1a(&bytes));
    }
    for p in installed {
        let m = std::fs::metadata(p).ok();
        let len = m.as_ref().map_or(0, |m| m.len());
        let time = m.and_then(|m| m.modified().ok()).and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        s += &format!("installed {} {len} {}\n", p.display(), time.map_or(0, |t| t.as_nanos()));
    }
    s
}

/// FNV-1a, 64 bits: a change detector for the stamp, not a guard.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// The commit of the checkout gpubench is built from: 12 hex digits, with
/// `-dirty` when tracked files differ from it; empty outside a git checkout
/// (a crate unpacked from a registry), where git is missing, and where the
/// checkout around the crate is not the crate's (build.rs is not tracked in
/// it). Asks cargo to run this again when HEAD moves: a commit, a checkout,
/// a branch switch; and when the sources change, which may make it dirty.
/// `GPUBENCH_GIT_COMMIT` in the environment wins: an image's build context
/// has no .git, so scripts/image passes the commit in.
fn git_commit() -> String {
    if let Some(c) = env::var("GPUBENCH_GIT_COMMIT").ok().filter(|c| !c.is_empty()) {
        return c;
    }
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into()));
    git_commit_in(&dir).unwrap_or_default()
}

fn git_commit_in(dir: &Path) -> Option<String> {
    let git = |args: &[&str]| -> Option<String> {
        let o = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            // git status would otherwise refresh the index, whose change could make cargo run this again.
            .env("GIT_OPTIONAL_LOCKS", "0")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        o.status.success().then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    git(&["ls-files", "--error-unmatch", "build.rs"])?;
    let watch = |path: Option<String>| {
        if let Some(p) = path.map(|p| dir.join(p)).filter(|p| p.exists()) {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    };
    watch(git(&["rev-parse", "--git-path", "HEAD"]));
    if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]).filter(|r| !r.is_empty()) {
        // A packed ref has no file of its own: packed-refs changes instead.
        let loose = git(&["rev-parse", "--git-path", &r]);
        let packed = git(&["rev-parse", "--git-path", "packed-refs"]);
        watch(if loose.as_ref().is_some_and(|p| dir.join(p).exists()) { loose } else { packed });
    }
    println!("cargo:rerun-if-changed=src");
    let head = git(&["rev-parse", "HEAD"]).filter(|h| h.len() >= 12 && h.bytes().all(|b| b.is_ascii_hexdigit()))?;
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(format!("{}{}", &head[..12], if dirty { "-dirty" } else { "" }))
}

/// CUDA and NCCL headers for a libtorch with CUDA: GPUBENCH_CUDA_INCLUDE
/// (colon-separated), else the nvidia-* wheels beside the torch package, in
/// the CUDA 13 layout (nvidia/cu13) or the CUDA 12 one (nvidia/cuda_runtime,
/// cuda_nvcc, cuda_cccl). Without them the build fails, saying what to
/// install: a binary without the CUDA shim would look like it works and then
/// have no NCCL, no device names and no allocator statistics.
fn cuda_includes(torch_root: &Path) -> Vec<PathBuf> {
    if let Ok(v) = env::var("GPUBENCH_CUDA_INCLUDE") {
        return env::split_paths(&v).collect();
    }
    let nvidia = torch_root.parent().map(|p| p.join("nvidia")).unwrap_or_default();
    let nccl = nvidia.join("nccl/include");
    let cu13 = nvidia.join("cu13/include");
    // [runtime headers, crt/ headers, cccl (nv/target)] of each layout.
    let layouts = [
        [cu13.clone(), cu13.clone(), cu13.join("cccl")],
        [nvidia.join("cuda_runtime/include"), nvidia.join("cuda_nvcc/include"), nvidia.join("cuda_cccl/include")],
    ];
    for [runtime, crt, cccl] in layouts {
        let found = runtime.join("cuda_runtime_api.h").exists()
            && crt.join("crt/host_config.h").exists()
            && nccl.join("nccl.h").exists();
        if found {
            let mut dirs = vec![runtime, crt, cccl, nccl];
            // NVTX3 is header-only: under cu13/include in the CUDA 13 layout,
            // its own wheel's folder in the CUDA 12 one (G12: --nvtx was
            // refused there as if the build had no CUDA).
            let nvtx = nvidia.join("nvtx/include");
            if nvtx.join("nvtx3/nvToolsExt.h").exists() {
                dirs.push(nvtx);
            }
            dirs.dedup();
            return dirs;
        }
    }
    fail(&format!(
        "{} has libtorch_cuda but the CUDA/NCCL headers the c10d shim needs are missing from {}: \
         run scripts/setup (it installs the header wheels that match torch's CUDA version: \
         nvidia-cuda-crt and nvidia-cuda-cccl for CUDA 13, nvidia-cuda-nvcc-cu12 and nvidia-cuda-cccl-cu12 for CUDA 12), \
         point GPUBENCH_CUDA_INCLUDE at them, or set GPUBENCH_NO_CUDA=1 for a CPU-only build",
        torch_root.display(),
        nvidia.display()
    ))
}

/// The first `-gencode;arch=…` run of printable flag characters in `path`
/// (libtorch's NVCC flags, kept in the library for its config text).
fn gencode_flags(path: &Path) -> String {
    use std::io::Read;
    let Ok(mut f) = std::fs::File::open(path) else { return String::new() };
    let needle = b"-gencode;arch=";
    let flag_byte = |b: u8| b.is_ascii_alphanumeric() || b";,=_-".contains(&b);
    let mut buf = vec![0u8; 1 << 20];
    let mut carry: Vec<u8> = vec![];
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) | Err(_) => return String::new(),
            Ok(n) => n,
        };
        carry.extend_from_slice(&buf[..n]);
        if let Some(i) = carry.windows(needle.len()).position(|w| w == needle) {
            let end = carry[i..].iter().position(|&b| !flag_byte(b)).map_or(carry.len(), |e| i + e);
            if end < carry.len() {
                return String::from_utf8_lossy(&carry[i..end]).into_owned();
            }
        } else {
            // Keep a tail that could hold the start of the needle.
            let keep = carry.len().saturating_sub(needle.len());
            carry.drain(..keep);
        }
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(1);
}
