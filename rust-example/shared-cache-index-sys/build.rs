//! Finds and links libshared_cache_index, in this order:
//!
//! 1. `SCI_LIB_DIR` (CI and development builds): the directory holding
//!    `libshared_cache_index.so` (`.a` with feature `static`), a CMake build
//!    directory or an installed lib directory. A relative path is taken from
//!    the directory that holds this crate (`rust-example/` in the
//!    repository). With `static`, the private dependencies are read from the
//!    `Libs.private` line of the `shared_cache_index.pc` that CMake writes
//!    beside the library (or into `<dir>/pkgconfig/` once installed).
//! 2. pkg-config's `shared_cache_index` (an installed library; set
//!    `PKG_CONFIG_PATH` for a prefix outside the system's), `--static` with
//!    feature `static`.
//! 3. Inside a checkout of the repository: its `build/` directory.
//!
//! Shared linking adds an rpath to the library's directory (unless it is a
//! system one) to this crate's own test binaries, and passes it on as `links`
//! metadata (`DEP_SHARED_CACHE_INDEX_RPATH`) so that the safe crate does the
//! same for its tests, examples and benches: they run without
//! `LD_LIBRARY_PATH`. Also passed on: `LIB_DIR`, `LINKAGE` (`shared` or
//! `static`), `BIN_DIR` (where `sci-publish` is, empty if unknown) and
//! `VERSION` (the library's, empty if unknown).

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// The oldest library version whose ABI these bindings declare.
const MIN_VERSION: &str = "1.4.0";
const PC_NAME: &str = "shared_cache_index";

/// What a lookup found: where to link from and what.
struct Found {
    /// Where it was found, for messages.
    how: String,
    lib_dir: PathBuf,
    /// The library file linked (rerun when it changes), if known.
    library: Option<PathBuf>,
    /// Private dependencies (static linking only), in link order.
    private_libs: Vec<String>,
    private_dirs: Vec<PathBuf>,
    bin_dir: Option<PathBuf>,
    version: Option<String>,
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SCI_LIB_DIR");
    println!("cargo:rerun-if-env-changed=DOCS_RS");
    // Documentation builds (docs.rs) have no library to link, and need none.
    if env::var_os("DOCS_RS").is_some() {
        return;
    }
    let statik = env::var_os("CARGO_FEATURE_STATIC").is_some();
    let found = match find(statik) {
        Ok(found) => found,
        Err(message) => {
            eprintln!("error: {}", message);
            std::process::exit(1);
        }
    };
    emit(&found, statik);
}

fn find(statik: bool) -> Result<Found, String> {
    let manifest_dir =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    if let Some(configured) = env::var_os("SCI_LIB_DIR") {
        let configured = PathBuf::from(configured);
        let dir = match manifest_dir.parent() {
            Some(parent) => parent.join(&configured),
            None => configured.clone(),
        };
        return from_dir(
            &dir,
            statik,
            format!("SCI_LIB_DIR={}", configured.display()),
        );
    }
    let pkg_config_error = match from_pkg_config(statik) {
        Ok(found) => return Ok(found),
        Err(error) => error,
    };
    // A checkout of the repository: its build directory, when it has the
    // library (the README's `cmake -S . -B build`).
    let repo = manifest_dir.join("../..");
    let repo_build = repo.join("build");
    let in_checkout = repo.join("include/shared_cache_index.h").exists();
    if in_checkout && repo_build.join(library_file(statik)).exists() {
        return from_dir(
            &repo_build,
            statik,
            "the repository's build directory".to_string(),
        );
    }
    let repo_build_said = if in_checkout {
        let dir = repo_build.canonicalize().unwrap_or(repo_build);
        format!("{}: no {} there", dir.display(), library_file(statik))
    } else {
        "this crate is not in a checkout of the repository".to_string()
    };
    Err(format!(
        "libshared_cache_index not found.\n\
         shared-cache-index-sys links the C++ library, looked for, in this order:\n\
         1. SCI_LIB_DIR: not set (set it to the directory holding libshared_cache_index.{ext}, \
         e.g. a CMake build directory);\n\
         2. pkg-config {pc}{static_flag}: {pkg_config_error}\n   \
         (install the library with cmake --install, and set PKG_CONFIG_PATH=<prefix>/lib/pkgconfig \
         for a prefix outside the system's);\n\
         3. the repository's build directory: {repo_build_said}.\n\
         To build the library: cmake -S <repository> -B build && cmake --build build --target {cmake_target}.",
        ext = if statik { "a" } else { "so" },
        pc = PC_NAME,
        static_flag = if statik { " --static" } else { "" },
        pkg_config_error = pkg_config_error.trim_end().replace('\n', "\n   "),
        repo_build_said = repo_build_said,
        cmake_target = if statik { "shared_cache_index_static" } else { "shared_cache_index" },
    ))
}

fn library_file(statik: bool) -> &'static str {
    if statik {
        "libshared_cache_index.a"
    } else {
        "libshared_cache_index.so"
    }
}

/// A directory given by hand: a CMake build directory or an installed lib
/// directory.
fn from_dir(dir: &Path, statik: bool, how: String) -> Result<Found, String> {
    let library = dir.join(library_file(statik));
    if !library.exists() {
        return Err(format!(
            "{} not found ({}).\n\
             Build it first (scripts/test.sh, or cmake -S . -B build && cmake --build build \
             --target {}), or point SCI_LIB_DIR at the directory that holds it; \
             unset SCI_LIB_DIR to find an installed library through pkg-config.",
            library.display(),
            how,
            if statik {
                "shared_cache_index_static"
            } else {
                "shared_cache_index"
            }
        ));
    }
    let dir = dir
        .canonicalize()
        .map_err(|e| format!("{}: {}", dir.display(), e))?;
    // The .pc file CMake configures beside the library (build directory) or
    // installs into <libdir>/pkgconfig: its Version, and its Libs.private for
    // static linking.
    let pc_file = [
        dir.join("shared_cache_index.pc"),
        dir.join("pkgconfig/shared_cache_index.pc"),
    ]
    .into_iter()
    .find(|path| path.exists());
    let pc_text = match &pc_file {
        Some(path) => {
            println!("cargo:rerun-if-changed={}", path.display());
            Some(fs::read_to_string(path).map_err(|e| format!("{}: {}", path.display(), e))?)
        }
        None => None,
    };
    let mut found = Found {
        how,
        library: Some(library.clone()),
        private_libs: Vec::new(),
        private_dirs: Vec::new(),
        bin_dir: [dir.join("src/tools"), dir.join("../bin")]
            .into_iter()
            .find(|bin| bin.join("sci-publish").exists())
            .and_then(|bin| bin.canonicalize().ok()),
        version: pc_text
            .as_deref()
            .and_then(|text| pc_field(text, "Version")),
        lib_dir: dir.clone(),
    };
    if statik {
        let text = pc_text.ok_or_else(|| {
            format!(
                "feature \"static\" with {}: no shared_cache_index.pc beside {} (nor in its \
                 pkgconfig/ directory) to name the library's private dependencies. CMake writes \
                 it into the build directory when it configures; an installed copy is in \
                 <prefix>/lib/pkgconfig.",
                found.how,
                library.display()
            )
        })?;
        let private = pc_field(&text, "Libs.private").unwrap_or_default();
        for flag in private.split_whitespace() {
            if let Some(name) = flag.strip_prefix("-l") {
                found.private_libs.push(name.to_string());
            } else if let Some(path) = flag.strip_prefix("-L") {
                found.private_dirs.push(PathBuf::from(path));
            }
            // -Wl,--push-state,--as-needed and the like: the libraries they
            // wrap are linked all the same.
        }
    }
    Ok(found)
}

/// `Field: value` of a .pc file.
fn pc_field(text: &str, field: &str) -> Option<String> {
    text.lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .map(|value| value.trim().to_string())
}

/// Runs the `pkg-config` program (`$PKG_CONFIG` if set) on the library's
/// module. The program, not the `pkg-config` crate: the -sys crate then
/// needs nothing from a registry, so a project outside this repository
/// builds it offline with no configuration.
fn pkg_config(args: &[&str]) -> Result<String, String> {
    let program = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let output = std::process::Command::new(&program)
        .args(args)
        .arg(PC_NAME)
        .output()
        .map_err(|e| format!("cannot run {}: {}", program, e))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "`{} {} {}` failed{}",
            program,
            args.join(" "),
            PC_NAME,
            if stderr.trim().is_empty() { String::new() } else { format!(": {}", stderr.trim()) }
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn from_pkg_config(statik: bool) -> Result<Found, String> {
    for var in ["PKG_CONFIG", "PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR", "PKG_CONFIG_SYSROOT_DIR"] {
        println!("cargo:rerun-if-env-changed={}", var);
    }
    pkg_config(&["--print-errors", &format!("--atleast-version={}", MIN_VERSION)])?;
    let version = pkg_config(&["--modversion"])?;
    let libs = pkg_config(if statik { &["--libs", "--static"][..] } else { &["--libs"][..] })?;
    let mut link_paths: Vec<PathBuf> = Vec::new();
    let mut link_libs: Vec<String> = Vec::new();
    for token in libs.split_whitespace() {
        if let Some(dir) = token.strip_prefix("-L") {
            link_paths.push(PathBuf::from(dir));
        } else if let Some(name) = token.strip_prefix("-l") {
            link_libs.push(name.to_string());
        }
    }
    let lib_dir = pkg_config(&["--variable=libdir"])
        .ok()
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| link_paths.first().cloned())
        .ok_or_else(|| format!("pkg-config {}: no libdir", PC_NAME))?;
    let lib_dir = lib_dir.canonicalize().unwrap_or(lib_dir);
    let file = lib_dir.join(library_file(statik));
    if !file.exists() {
        return Err(format!(
            "its libdir {} has no {}",
            lib_dir.display(),
            library_file(statik)
        ));
    }
    let bin_dir = pkg_config(&["--variable=prefix"])
        .ok()
        .map(|prefix| PathBuf::from(prefix).join("bin"))
        .and_then(|bin| bin.canonicalize().ok());
    let mut private_dirs = link_paths;
    private_dirs.retain(|dir| dir.canonicalize().ok().as_deref() != Some(lib_dir.as_path()));
    Ok(Found {
        how: format!("pkg-config {} {}", PC_NAME, version),
        lib_dir,
        library: Some(file),
        private_libs: if statik {
            link_libs
                .into_iter()
                .filter(|name| name != "shared_cache_index")
                .collect()
        } else {
            Vec::new()
        },
        private_dirs,
        bin_dir,
        version: Some(version),
    })
}

/// A directory the dynamic loader searches anyway: no rpath needed.
fn is_system_dir(dir: &Path) -> bool {
    let system = ["/usr/lib", "/lib", "/usr/lib64", "/lib64"];
    let multiarch = |d: &Path| {
        d.parent().map_or(false, |parent| {
            system.iter().any(|s| parent == Path::new(s))
        }) && d.to_string_lossy().ends_with("-linux-gnu")
    };
    system.iter().any(|s| dir == Path::new(s)) || multiarch(dir)
}

fn emit(found: &Found, statik: bool) {
    if let Some(library) = &found.library {
        // Rerun (and relink) when the library is rebuilt.
        println!("cargo:rerun-if-changed={}", library.display());
    }
    println!("cargo:rustc-link-search=native={}", found.lib_dir.display());
    for dir in &found.private_dirs {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
    let mut rpath = String::new();
    if statik {
        println!("cargo:rustc-link-lib=static=shared_cache_index");
        for name in &found.private_libs {
            println!("cargo:rustc-link-lib=dylib={}", name);
        }
    } else {
        println!("cargo:rustc-link-lib=dylib=shared_cache_index");
        if !is_system_dir(&found.lib_dir) {
            write!(rpath, "{}", found.lib_dir.display()).unwrap();
            // This crate's own test binaries (bindgen's layout tests).
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", rpath);
        }
    }
    // `links` metadata: DEP_SHARED_CACHE_INDEX_* in dependents' build scripts.
    println!("cargo:lib_dir={}", found.lib_dir.display());
    println!("cargo:linkage={}", if statik { "static" } else { "shared" });
    println!("cargo:rpath={}", rpath);
    println!(
        "cargo:bin_dir={}",
        found
            .bin_dir
            .as_deref()
            .map(|d| d.display().to_string())
            .unwrap_or_default()
    );
    println!(
        "cargo:version={}",
        found.version.as_deref().unwrap_or_default()
    );
    // Which library was linked, for `cargo build -vv`.
    println!("cargo:found_by={}", found.how);
}
