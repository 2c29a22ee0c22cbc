//! Shared by the integration tests and the benchmark: the named layouts of
//! docs/performance.md, each described once and built both as a
//! library [`Layout`] and as the pure-Rust spec layout, plus small helpers.
#![allow(dead_code)]

pub mod publisher;
pub mod vllm;

use std::path::PathBuf;

use pure_rust_index as spec;
use shared_cache_index::{LayoutBuilder, Pool};

/// A layout described once, for both implementations.
pub struct NamedLayout {
    pub name: &'static str,
    pub builder: LayoutBuilder,
    pub spec: spec::Layout,
}

fn named(name: &'static str, builder: LayoutBuilder, spec: spec::Layout) -> NamedLayout {
    NamedLayout {
        name,
        builder,
        spec,
    }
}

/// `tp1`, `tp8`, `tp8pp2`, `mla`, `pools6` with 64-token pages.
pub fn benchmark_layouts() -> Vec<NamedLayout> {
    let page = 64;
    let base = spec::Layout {
        page_size: page,
        tp_size: 1,
        pp_size: 1,
        ..spec::Layout::default()
    };
    vec![
        named("tp1", LayoutBuilder::new(page), base.clone()),
        named(
            "tp8",
            LayoutBuilder::new(page).tp_size(8),
            spec::Layout {
                tp_size: 8,
                ..base.clone()
            },
        ),
        named(
            "tp8pp2",
            LayoutBuilder::new(page).tp_size(8).pp_size(2),
            spec::Layout {
                tp_size: 8,
                pp_size: 2,
                ..base.clone()
            },
        ),
        named(
            "mla",
            LayoutBuilder::new(page).mla(true),
            spec::Layout {
                is_mla_model: true,
                ..base.clone()
            },
        ),
        named(
            "pools6",
            LayoutBuilder::new(page)
                .key_prefix("llama")
                .pool(Pool::all_pages([
                    "__k",
                    "__v",
                    "__k_scale",
                    "__v_scale",
                    "__idx",
                ]))
                .pool(Pool::trailing_pages(4, ["__swa"])),
            spec::Layout {
                key_prefix: "llama".into(),
                pools: vec![
                    spec::Pool {
                        suffixes: ["__k", "__v", "__k_scale", "__v_scale", "__idx"]
                            .iter()
                            .map(|s| s.to_string())
                            .collect(),
                        hit_policy: spec::HitPolicy::AllPages,
                    },
                    spec::Pool {
                        suffixes: vec!["__swa".into()],
                        hit_policy: spec::HitPolicy::TrailingPages(4),
                    },
                ],
                ..base
            },
        ),
    ]
}

/// Less common shapes the differential test covers too: eagle, a backend
/// tag, a tenant, split heads, MLA over pipeline stages.
pub fn unusual_layouts(page: u32) -> Vec<NamedLayout> {
    let base = spec::Layout {
        page_size: page,
        tp_size: 1,
        pp_size: 1,
        ..spec::Layout::default()
    };
    vec![
        named(
            "eagle-tag-tenant",
            LayoutBuilder::new(page)
                .tp_size(2)
                .eagle(true)
                .extra_backend_tag("tag")
                .tenant_id("tenant-a"),
            spec::Layout {
                tp_size: 2,
                is_eagle: true,
                extra_backend_tag: "tag".into(),
                tenant_id: "tenant-a".into(),
                ..base.clone()
            },
        ),
        named(
            "split-heads",
            LayoutBuilder::new(page)
                .tp_size(2)
                .tp_lcm_size(4)
                .split_heads(true),
            spec::Layout {
                tp_size: 2,
                tp_lcm_size: 4,
                should_split_heads: true,
                ..base.clone()
            },
        ),
        named(
            "mla-pp3",
            LayoutBuilder::new(page).mla(true).pp_size(3),
            spec::Layout {
                is_mla_model: true,
                pp_size: 3,
                ..base.clone()
            },
        ),
        named(
            "pools-tag-trailing",
            LayoutBuilder::new(page)
                .extra_backend_tag("tag")
                .pool(Pool::all_pages(["__kv"]))
                .pool(Pool::trailing_pages(2, ["__swa", "__x"])),
            spec::Layout {
                extra_backend_tag: "tag".into(),
                pools: vec![
                    spec::Pool {
                        suffixes: vec!["__kv".into()],
                        hit_policy: spec::HitPolicy::AllPages,
                    },
                    spec::Pool {
                        suffixes: vec!["__swa".into(), "__x".into()],
                        hit_policy: spec::HitPolicy::TrailingPages(2),
                    },
                ],
                ..base
            },
        ),
    ]
}

/// Every object a worker stores for `tokens` under `layout` (all pages of the
/// request, each with the keys its position needs), as (key, group) pairs.
pub fn stored_objects(layout: &spec::Layout, tokens: &[u32]) -> Vec<(String, String)> {
    let hashes = spec::page_hashes(tokens, layout.page_size, layout.is_eagle);
    let n = hashes.len();
    let mut objects = Vec::new();
    for (page, hash) in hashes.iter().enumerate() {
        for key in layout.keys_for(hash, page, n) {
            objects.push((key, layout.group_id(hash)));
        }
    }
    objects
}

/// Deterministic tokens of prompt number `seed`.
pub fn prompt(seed: u64, n_tokens: usize) -> Vec<u32> {
    let mut rng = XorShift::new(seed);
    (0..n_tokens).map(|_| rng.next() as u32).collect()
}

/// A tiny deterministic generator (xorshift64*): reproducible, no dependency.
pub struct XorShift(u64);

impl XorShift {
    pub fn new(seed: u64) -> XorShift {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Golden captures of the real Mooncake publisher (`SCI_TESTDATA_DIR`, else
/// the repository's `testdata/mooncake-publisher`).
pub fn testdata_dir() -> PathBuf {
    std::env::var_os("SCI_TESTDATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../testdata/mooncake-publisher")
        })
}

/// The frames of capture `msgNNNN` of `set`.
pub fn golden_message(set: &str, message: usize) -> Vec<Vec<u8>> {
    (0..)
        .map(|frame| {
            testdata_dir()
                .join(set)
                .join(format!("msg{:04}.frame{}.bin", message, frame))
        })
        .take_while(|path| path.exists())
        .map(|path| std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {}", path.display(), e)))
        .collect()
}
