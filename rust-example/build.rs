//! The safe crate's part of linking, from the `links` metadata of
//! shared-cache-index-sys (whose build script found the library):
//!
//! - its tests, examples and benches get the rpath to the library's
//!   directory (SCI_LIB_DIR, or a pkg-config prefix outside the system's),
//!   so `cargo test` and `cargo run --example` need no LD_LIBRARY_PATH;
//! - `SCI_DEFAULT_BIN_DIR`, where `sci-publish` is (`<SCI_LIB_DIR>/src/tools`
//!   or `<prefix>/bin`; empty if unknown), for the live tests.
//!
//! A binary of a crate that depends on this one gets no rpath from here:
//! cargo passes link arguments only to the package that asks for them. Link
//! a library installed outside the loader's path with your own
//! `-C link-arg=-Wl,-rpath,<libdir>`, or set LD_LIBRARY_PATH.

use std::env;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let rpath = env::var("DEP_SHARED_CACHE_INDEX_RPATH").unwrap_or_default();
    if !rpath.is_empty() {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", rpath);
    }
    println!(
        "cargo:rustc-env=SCI_DEFAULT_BIN_DIR={}",
        env::var("DEP_SHARED_CACHE_INDEX_BIN_DIR").unwrap_or_default()
    );
}
