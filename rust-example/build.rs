//! Links the CMake-built libshared_cache_index.so.
//!
//! Directory: `SCI_LIB_DIR`, default `../build` (the README's build
//! directory), relative to this crate. An rpath to it goes into every binary
//! of this crate, so `cargo test` and `cargo run` need no LD_LIBRARY_PATH.
//! The tools directory next to it (`<dir>/src/tools`, holding `sci-publish`)
//! is passed on as `SCI_DEFAULT_BIN_DIR` for the tests and the demo.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=SCI_LIB_DIR");
    println!("cargo:rerun-if-changed=build.rs");

    let manifest_dir =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let configured = env::var_os("SCI_LIB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("../build"));
    let dir = manifest_dir.join(&configured);
    let library = dir.join("libshared_cache_index.so");
    if !library.exists() {
        eprintln!(
            "error: {} not found (SCI_LIB_DIR={}).\n\
             The Rust crate links the C++ library: build it first with scripts/test.sh \
             or cmake -S . -B build && cmake --build build --target shared_cache_index, \
             or point SCI_LIB_DIR at the build directory that holds it.",
            library.display(),
            configured.display()
        );
        std::process::exit(1);
    }
    let dir = dir.canonicalize().expect("the library's directory exists");
    // Rerun (and relink) when the library is rebuilt.
    println!("cargo:rerun-if-changed={}", library.display());
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=shared_cache_index");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    println!(
        "cargo:rustc-env=SCI_DEFAULT_BIN_DIR={}",
        dir.join("src/tools").display()
    );
}
