//! The smallest program on the crate: which library it linked, and one query.
//!
//!   cargo run --example linked_library
//!
//! Prints the crate's and the library's versions and ABI, then asks an empty
//! index about a four-page prompt (no page hits). tests/check_install_rust.sh
//! runs it against an installed prefix, shared and static.

use shared_cache_index::{abi_version, version, Index, Layout, PageScratch, ABI_VERSION};

fn main() -> Result<(), shared_cache_index::Error> {
    if abi_version() != ABI_VERSION {
        eprintln!(
            "libshared_cache_index has ABI {}, these bindings were generated for ABI {}",
            abi_version(),
            ABI_VERSION
        );
        std::process::exit(1);
    }
    let index = Index::new()?;
    let layout = Layout::from_json(r#"{"page_size": 4, "tp_size": 8}"#)?;
    let tokens: Vec<u32> = (0..16).collect();
    let mut scratch = PageScratch::new();
    let hits = index.check_pages(&layout, &tokens, 4, &mut scratch)?;
    println!(
        "shared-cache-index {}: libshared_cache_index {} (ABI {}), {} of {} pages hit in an empty index",
        env!("CARGO_PKG_VERSION"),
        version(),
        abi_version(),
        hits.total_hits(),
        hits.n_pages()
    );
    Ok(())
}
