//! Safe Rust bindings of `libshared_cache_index`: which pages of a prompt are
//! already stored in the shared Mooncake KV-cache pool.
//!
//! This is the Dynamo KV router's side of the library. Instead of asking the
//! pool over HTTP, or keeping its own Rust index, the router keeps an
//! [`Index`] fed by a [`Subscriber`] that follows the Mooncake master's event
//! stream, and asks [`Index::check_pages`] (or, one layout per model,
//! [`SharedCacheIndex::check_blocks`]) which pages of a request are fully
//! present under the [`Layout`] of the model: SGLang HiCache pages, or vLLM
//! MooncakeStoreConnector chunks (below).
//!
//! # Example
//!
//! Events applied by hand, as the Mooncake master would publish them when
//! SGLang stores pages 0, 1 and 3 of a four-page prompt (`sglang_objects`,
//! hidden here, derives SGLang's object keys and page groups from the
//! tokens, as `docs/sglang-hicache.md` specifies):
//!
//! ```
//! use std::sync::Arc;
//! use shared_cache_index::{Event, Index, Layout, PageScratch, SharedCacheIndex};
//! # fn sglang_objects(tokens: &[u32], page_size: u32, pages: &[usize]) -> Vec<(String, String)> {
//! #     let spec = pure_rust_index::Layout { page_size, tp_size: 1, ..Default::default() };
//! #     let hashes = pure_rust_index::page_hashes(tokens, page_size, false);
//! #     let mut objects = Vec::new();
//! #     for &page in pages {
//! #         for key in spec.keys_for(&hashes[page], page, hashes.len()) {
//! #             objects.push((key, spec.group_id(&hashes[page])));
//! #         }
//! #     }
//! #     objects
//! # }
//!
//! # fn main() -> Result<(), shared_cache_index::Error> {
//! let index = Arc::new(Index::new()?);
//! // The layout SGLang workers publish in their runtime config.
//! let layout = Layout::from_json(r#"{"page_size": 4, "tp_size": 1}"#)?;
//! let tokens: Vec<u32> = (100..116).collect(); // four pages of four tokens
//!
//! // (object key, page group) of each stored object. A router gets these
//! // events from a `Subscriber` instead.
//! let objects = sglang_objects(&tokens, 4, &[0, 1, 3]);
//! let events: Vec<Event> = objects.iter().map(|(key, group)| Event::stored(key).group(group)).collect();
//! index.apply_events(1, &events)?;
//!
//! // Which pages are in the pool: every one reported, as ranges.
//! let mut scratch = PageScratch::new(); // one per querying thread
//! let hits = index.check_pages(&layout, &tokens, 4, &mut scratch)?;
//! assert_eq!(hits.ranges(), &[0..2, 3..4]);
//! assert_eq!((hits.total_hits(), hits.prefix_hits()), (3, 2));
//! // Only the leading run (what SGLang loads): stops at the first miss.
//! assert_eq!(index.check_prefix(&layout, &tokens, 4)?, 2);
//!
//! // The Dynamo router's shape: one layout per model (cache namespace).
//! let mut cache = SharedCacheIndex::new(index.clone());
//! cache.register_layout(Some("llama-70b"), layout);
//! let blocks = cache.check_blocks(&tokens, 4, Some("llama-70b"))?;
//! assert_eq!((blocks.ranges, blocks.total_hits), (vec![0..2, 3..4], 3));
//! # Ok(())
//! # }
//! ```
//!
//! # vLLM (MooncakeStoreConnector)
//!
//! [`Layout::from_json`] also reads the descriptor vLLM workers publish
//! (Dynamo's `vllm_mooncake_store` runtime config). A chunk of a vLLM
//! prompt is one object per key prefix, named by vLLM's block-hash chain of
//! the tokens; the router's answer is Dynamo's: the single range `0..L` of
//! blocks of the longest prefix in the pool, never crediting the last token
//! ([`SharedCacheIndex::check_blocks`]). Here, Qwen3-8B at TP 2 stores the
//! first two chunks of tokens 0..32 (`docs/vllm-family.md`, example 1):
//!
//! ```
//! use std::sync::Arc;
//! use shared_cache_index::{Event, Index, Layout, LayoutFamily, RequestExtras, SharedCacheIndex};
//!
//! # fn main() -> Result<(), shared_cache_index::Error> {
//! let descriptor = r#"{"schema_version": 1, "hash": {"algorithm": "sha256", "seed_policy": "pythonhashseed-0"},
//!   "main_event_block_size": 16,
//!   "groups": [{"kind": "full_attention", "block_size": 16, "hash_block_size": 16,
//!               "key_prefixes": ["prod@Qwen3-8B@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0",
//!                                "prod@Qwen3-8B@tp_rank:1@pcp0@dcp0@pp_rank:0@group:0"]}]}"#;
//! let layout = Layout::from_json(descriptor)?;
//! assert_eq!((layout.family(), layout.block_size()), (LayoutFamily::Vllm, 16));
//!
//! // H_0 and H_1 of tokens 0..31 (sha256, PYTHONHASHSEED 0), each stored by both TP ranks.
//! let chain = ["6358e31578a64b75ebe28cdb99d3beae65de82a2087321dc6ec84ae048faaaa6",
//!              "3c3c50f324aefbdfbb124dfdc541efac3e94e59c40f4be08afe70601eeca92c8"];
//! let keys: Vec<String> = chain.iter()
//!     .flat_map(|hash| (0..2).map(move |rank| {
//!         format!("prod@Qwen3-8B@tp_rank:{rank}@pcp0@dcp0@pp_rank:0@group:0@{hash}")
//!     }))
//!     .collect();
//! let index = Arc::new(Index::new()?);
//! index.apply_events(1, &keys.iter().map(|k| Event::stored(k)).collect::<Vec<_>>())?;
//!
//! let mut cache = SharedCacheIndex::new(index);
//! cache.register_layout(Some("Qwen3-8B"), layout);
//! let tokens: Vec<u32> = (0..33).collect(); // two blocks and the token the engine computes
//! let blocks = cache.check_blocks(&tokens, 16, Some("Qwen3-8B"))?;
//! assert_eq!((blocks.ranges, blocks.total_hits), (vec![0..2], 2));
//! // The same tokens under a LoRA adapter hash to other chunks.
//! let extras = RequestExtras::none().lora("sql-adapter");
//! assert_eq!(cache.check_blocks_with_extras(&tokens, 16, &extras, Some("Qwen3-8B"))?.total_hits, 0);
//! # Ok(())
//! # }
//! ```
//!
//! [`Index::check_block_hashes`] and [`Index::check_event_hashes`] answer
//! for a router that already holds the request's block hashes (the 32-byte
//! digests, or the 64-bit hashes of vLLM's KV events).
//!
//! # A live router
//!
//! In a router, a [`Subscriber`] feeds the index from the Mooncake master:
//!
//! ```no_run
//! use std::sync::Arc;
//! use shared_cache_index::{Index, Layout, PageScratch, Subscriber, SubscriberOptions};
//!
//! # fn main() -> Result<(), shared_cache_index::Error> {
//! let index = Arc::new(Index::new()?);
//! let _feed = Subscriber::start(index.clone(), &SubscriberOptions::new("tcp://127.0.0.1:5557"))?;
//! let layout = Layout::from_json(r#"{"page_size": 64, "tp_size": 8}"#)?;
//! let mut scratch = PageScratch::new();
//! let tokens: Vec<u32> = (0..64 * 169).collect();
//! let hits = index.check_pages(&layout, &tokens, 64, &mut scratch)?;
//! for range in hits.ranges() {
//!     println!("pages {:?} are in the pool", range);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Linking
//!
//! The raw bindings and the linking are in the `shared-cache-index-sys`
//! crate (re-exported as [`sys`]). Its build script links the installed
//! library found by pkg-config (`shared_cache_index.pc`; set
//! `PKG_CONFIG_PATH=<prefix>/lib/pkgconfig` for a prefix outside the
//! system's), or the directory `SCI_LIB_DIR` names (a CMake build directory,
//! which wins over pkg-config). Feature `static` links
//! `libshared_cache_index.a` and its private dependencies instead of
//! `libshared_cache_index.so.1`. This crate's own tests, examples and benches
//! get an rpath to a library outside the system's directories; a binary of
//! yours that links a shared library installed elsewhere needs its own
//! (`-C link-arg=-Wl,-rpath,<libdir>`) or `LD_LIBRARY_PATH`.
//!
//! # Safety
//!
//! All `unsafe` code is in [`sys`] (generated by bindgen from the C header)
//! and in the private `handles` module; the rest of the crate denies
//! `unsafe`. See the crate's README.md for the argument.

#![deny(unsafe_code)]

/// The raw bindings: the `shared-cache-index-sys` crate.
pub use shared_cache_index_sys as sys;

#[allow(unsafe_code)]
mod handles;

mod error;
mod layout_builder;
#[cfg(feature = "json")]
mod layout_json;
mod options;
mod pages;
mod request_extras;
mod shared_cache;
mod tiers;

pub use error::{Error, Result, Status};
pub use handles::{
    abi_version, set_log_handler, version, Event, EventKind, Index, Layout, LayoutFamily, Subscriber,
    ABI_VERSION,
};
pub use layout_builder::{HitPolicy, LayoutBuilder, Pool};
pub use options::{IndexOptions, LogLevel, Residency, Stats, SubscriberOptions};
pub use pages::{PageHits, PageScratch, PageSummary, PrefixCredit};
pub use request_extras::RequestExtras;
pub use shared_cache::{SharedCacheHits, SharedCacheIndex, SharedCacheTiers};
pub use tiers::{TierSummary, TIERS_MAX, TIER_ABSENT};
