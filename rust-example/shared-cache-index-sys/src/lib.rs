//! Raw FFI bindings of `libshared_cache_index`, the C ABI of
//! `include/shared_cache_index.h`: every `sci_*` function, struct and
//! constant, as bindgen generates them (`scripts/regen-bindings.sh` writes
//! `src/bindings.rs`; `--check` fails when it drifts from the header).
//!
//! Use the safe crate, `shared-cache-index`, unless you need a raw call.
//! The header's "Conventions" section is the contract of every function here:
//! ownership of handles, which calls are thread-safe, the `struct_size` of
//! versioned structs, and `sci_last_error()`.
//!
//! # Linking
//!
//! The build script finds the library in this order:
//!
//! 1. `SCI_LIB_DIR`, a directory holding `libshared_cache_index.so` (or `.a`
//!    with the `static` feature): a CMake build directory or an installed
//!    `lib` directory. Binaries of this workspace get an rpath to it. A
//!    relative path is taken from the directory that holds this crate.
//! 2. pkg-config's `shared_cache_index` (the `.pc` file `cmake --install`
//!    writes; set `PKG_CONFIG_PATH` for a prefix outside the system's).
//! 3. In a checkout of the repository only: its `build/` directory.
//!
//! Feature `static` links `libshared_cache_index.a` and the library's private
//! dependencies (`pkg-config --static`; with `SCI_LIB_DIR`, the
//! `Libs.private` line of the `shared_cache_index.pc` file beside the
//! library) instead of `libshared_cache_index.so.1`.
//!
//! The build script passes on, as `links` metadata for the crates that
//! depend on this one: `DEP_SHARED_CACHE_INDEX_LIB_DIR` (the directory
//! linked from), `DEP_SHARED_CACHE_INDEX_LINKAGE` (`shared` or `static`),
//! `DEP_SHARED_CACHE_INDEX_RPATH` (the directory a binary needs in its rpath,
//! empty when none is needed: static, or a system directory),
//! `DEP_SHARED_CACHE_INDEX_BIN_DIR` (where `sci-publish` is, if known) and
//! `DEP_SHARED_CACHE_INDEX_VERSION` (the library's version, if known).
//!
//! ```
//! use std::ffi::CStr;
//!
//! // SAFETY: sci_version returns a static NUL-terminated string.
//! let version = unsafe { CStr::from_ptr(shared_cache_index_sys::sci_version()) };
//! println!("libshared_cache_index {}", version.to_string_lossy());
//! ```

#![allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code
)]
#![allow(clippy::all)]

include!("bindings.rs");
