//! vLLM prefix query: the library through the FFI (`sci_index_check_prefix`
//! on a layout from the worker's descriptor, `sci_layout_new_json`) against
//! an emulation of Dynamo's vLLM check (`pure_rust_index::vllm_dynamo`:
//! learned engine-hash edges, low64 -> digest and per-object medium masks in
//! `DashMap`s, `format!`-built keys), on the same prompts and keys
//! (docs/performance.md, "vLLM against an emulation of Dynamo's check").
//!
//!   cargo bench --bench vllm_vs_dynamo      full run (1M keys; 5 runs of 256 prompts per shape)
//!   cargo test  --bench vllm_vs_dynamo      quick run (tiny sizes): stays buildable, both agree
//!
//! Shapes as in bench/vllm_query_bench.cpp: `qwen` (Qwen3-8B, TP 2, one
//! full-attention group, block 16) and `hybrid` (full attention block 16 +
//! Mamba block 64, TP 2), sha256, 2048-token prompts (Qwen's 151,936-token
//! vocabulary), no extras. Every prompt is in the store: 3 in 4 whole, 1 in 4
//! its first 1024 tokens only. Half of them (every other one) were computed
//! by a GPU worker the emulation follows: it learned their edges. Both
//! sides hold the same keys (the prompts' first, so that the emulation's
//! 262,144-digest bound keeps them, then foreign chunks up to the key count).
//!
//! Each prompt is queried once per side (fresh: never asked before on
//! either side; the library's per-thread memo has not seen it), in blocks
//! of 8 prompts, the library's block then the emulation's, each call timed.
//! Reported per shape: per-prompt medians over the prompts both can answer
//! (the learned half) and their ratio (median over runs, with the range),
//! the library's median over every prompt, and how many prompts the
//! emulation could not answer at all (no learned edge) while the library
//! answered them from the tokens. Every prompt both answer must get the same
//! answer, or the benchmark panics.

#[path = "../tests/common/mod.rs"]
#[allow(dead_code)]
mod common;

use std::time::{Duration, Instant};

use common::XorShift;
use pure_rust_index::vllm_dynamo::{
    event_hash, hex32, parse_hex32, vllm_chain_sha256, BlockDigest, DynamoVllm, Group, GroupKind,
    MEDIUM_CPU, NONE_HASH_SHA256_SEED0,
};
use shared_cache_index::{sys, Event, Index};

const TOKENS: usize = 2048;
const BLOCK: usize = 16;
const VOCABULARY: u64 = 151_936;
const PER_BLOCK: usize = 8;

extern "C" {
    // include/shared_cache_index.h, 1.2; not in the -sys bindings yet.
    fn sci_layout_new_json(json: sys::sci_str, out: *mut *mut sys::sci_layout) -> sys::sci_status;
}

/// A vLLM layout built from its descriptor JSON, freed on drop.
struct VllmLayout(*mut sys::sci_layout);

impl VllmLayout {
    fn from_json(json: &str) -> VllmLayout {
        let mut out: *mut sys::sci_layout = std::ptr::null_mut();
        // SAFETY: `json` outlives the call; `out` is a valid out-pointer.
        let status = unsafe {
            sci_layout_new_json(
                sys::sci_str {
                    ptr: json.as_ptr() as *const _,
                    len: json.len(),
                },
                &mut out,
            )
        };
        assert_eq!(status, sys::SCI_OK, "sci_layout_new_json refused {}", json);
        assert!(!out.is_null());
        VllmLayout(out)
    }
}

impl Drop for VllmLayout {
    fn drop(&mut self) {
        // SAFETY: a layout sci_layout_new_json returned, freed once.
        unsafe { sys::sci_layout_free(self.0) }
    }
}

fn check_prefix(index: &Index, layout: &VllmLayout, tokens: &[u32]) -> usize {
    let mut blocks = 0usize;
    // SAFETY: live handles; `tokens` valid for its length; `blocks` an out-pointer.
    let status = unsafe {
        sys::sci_index_check_prefix(
            index.as_raw(),
            layout.0,
            tokens.as_ptr(),
            tokens.len(),
            BLOCK as u32,
            &mut blocks,
        )
    };
    assert_eq!(status, sys::SCI_OK);
    blocks
}

struct Shape {
    name: &'static str,
    groups: Vec<Group>,
}

impl Shape {
    fn descriptor(&self) -> String {
        let groups: Vec<String> = self
            .groups
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let prefixes: Vec<String> =
                    g.key_prefixes.iter().map(|p| format!("\"{}\"", p)).collect();
                format!(
                    "{{\"group_id\": {}, \"kind\": \"{}\", \"block_size\": {}, \"hash_block_size\": {}, \
                     \"key_prefixes\": [{}], \"sliding_window\": null, \"mamba_cache_mode\": {}}}",
                    i,
                    if g.kind == GroupKind::Mamba { "mamba" } else { "full_attention" },
                    g.block_size,
                    BLOCK,
                    prefixes.join(", "),
                    if g.kind == GroupKind::Mamba { "\"align\"" } else { "null" }
                )
            })
            .collect();
        format!(
            "{{\"vllm_mooncake_store\": {{\"schema_version\": 1, \"hash\": {{\"algorithm\": \"sha256\", \
             \"digest_encoding\": \"hex\", \"gpu_event_hash\": \"low64\", \"seed_policy\": \"pythonhashseed-0\", \
             \"key_separator\": \"@\"}}, \"main_event_group\": 0, \"main_event_block_size\": {}, \
             \"groups\": [{}]}}}}",
            BLOCK,
            groups.join(", ")
        )
    }
}

fn prefixes(model: &str, group: usize) -> Vec<String> {
    (0..2)
        .map(|tp| format!("prod@{}@tp_rank:{}@pcp0@dcp0@pp_rank:0@group:{}", model, tp, group))
        .collect()
}

fn shapes() -> Vec<Shape> {
    vec![
        Shape {
            name: "qwen",
            groups: vec![Group {
                kind: GroupKind::FullAttention,
                block_size: 16,
                key_prefixes: prefixes("Qwen3-8B", 0),
            }],
        },
        Shape {
            name: "hybrid",
            groups: vec![
                Group {
                    kind: GroupKind::FullAttention,
                    block_size: 16,
                    key_prefixes: prefixes("Hybrid-M", 0),
                },
                Group {
                    kind: GroupKind::Mamba,
                    block_size: 64,
                    key_prefixes: prefixes("Hybrid-M", 1),
                },
            ],
        },
    ]
}

fn tokens(seed: u64) -> Vec<u32> {
    let mut rng = XorShift::new(seed);
    (0..TOKENS).map(|_| (rng.next() % VOCABULARY) as u32).collect()
}

/// The object keys of the chunks of `chain` ending at or before `stored_tokens`.
fn keys_of(shape: &Shape, chain: &[BlockDigest], stored_tokens: usize) -> Vec<String> {
    let mut keys = Vec::new();
    for g in &shape.groups {
        let per = g.block_size / BLOCK;
        let mut end = per;
        while end <= chain.len() && end * BLOCK <= stored_tokens {
            let hex = hex32(&chain[end - 1]);
            for p in &g.key_prefixes {
                keys.push(format!("{}@{}", p, hex));
            }
            end += per;
        }
    }
    keys
}

fn median(v: &mut Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench" || a == "--full");
    let (runs, per_run, filler_keys) = if full {
        let keys = std::env::var("SCI_BENCH_KEYS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000_000usize);
        (5usize, 256usize, keys)
    } else {
        (1, 16, 5_000)
    };
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    println!(
        "# vLLM check_prefix: library (FFI) vs Dynamo emulation ({} mode)\n\n{}; shared-cache-index {}; \
         {} keys in all ({} per shape); {} runs x {} fresh 2048-token prompts per shape; \
         half of them learned by the emulation.\n",
        if full { "full" } else { "quick" },
        cpu,
        shared_cache_index::version(),
        filler_keys,
        filler_keys / 2,
        runs,
        per_run
    );
    if !full {
        println!("SMOKE RUN: tiny sizes; the figures below are not measurements.\n");
    }
    let none = parse_hex32(NONE_HASH_SHA256_SEED0).unwrap();
    println!(
        "| shape | library, learned prompts (µs) | emulation, learned prompts (µs) | emulation / library \
         (median of runs, range) | library, every prompt (µs) | emulation, unlearned prompts (µs) | \
         prompts | unanswered by the emulation | of which the library answered | agree |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (s, shape) in shapes().iter().enumerate() {
        let n = runs * per_run;
        let prompts: Vec<Vec<u32>> = (0..n)
            .map(|i| tokens(31_000_000 + 1_000_000 * s as u64 + i as u64))
            .collect();
        let chains: Vec<Vec<BlockDigest>> = prompts
            .iter()
            .map(|t| vllm_chain_sha256(&none, t, BLOCK))
            .collect();
        let index = Index::new().unwrap();
        let layout = VllmLayout::from_json(&shape.descriptor());
        let mut dynamo = DynamoVllm::new(BLOCK, shape.groups.clone());
        // The store's keys: the prompts' (3 in 4 whole, 1 in 4 half), then foreign chunks.
        let mut keys: Vec<String> = Vec::new();
        for (i, chain) in chains.iter().enumerate() {
            let stored_tokens = if i % 4 == 3 { TOKENS / 2 } else { TOKENS };
            keys.extend(keys_of(shape, chain, stored_tokens));
        }
        let mut rng = XorShift::new(977 + s as u64);
        let mut foreign = 0usize;
        while keys.len() < filler_keys / 2 {
            let mut d = [0u8; 32];
            for w in 0..4 {
                d[8 * w..8 * w + 8].copy_from_slice(&rng.next().to_le_bytes());
            }
            let g = if shape.groups.len() > 1 && foreign % 5 == 4 { 1 } else { 0 };
            for p in &shape.groups[g].key_prefixes {
                keys.push(format!("{}@{}", p, hex32(&d)));
            }
            foreign += 1;
        }
        let mut sequence = 0u64;
        for batch in keys.chunks(64) {
            let events: Vec<Event> = batch.iter().map(|k| Event::stored(k).medium("cpu")).collect();
            sequence += 1;
            index.apply_events(sequence, &events).unwrap();
            for k in batch {
                dynamo.apply_store_event(k, MEDIUM_CPU, true);
            }
        }
        // What the followed GPU workers computed: every other prompt, whole.
        for (i, (t, chain)) in prompts.iter().zip(&chains).enumerate() {
            if i % 2 == 0 {
                let engine: Vec<u64> = chain.iter().map(event_hash).collect();
                dynamo.learn_gpu_stored(t, &engine);
            }
        }
        let expected_whole = if shape.groups.len() > 1 { 124 } else { 127 };

        let mut run_ratios = Vec::new();
        let (mut lib_learned, mut emu_learned, mut lib_all, mut emu_unlearned) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut unanswered, mut unanswered_lib_hit, mut agreed) = (0usize, 0usize, 0usize);
        for r in 0..runs {
            let (mut run_lib, mut run_emu) = (Vec::new(), Vec::new());
            for first in (r * per_run..(r + 1) * per_run).step_by(PER_BLOCK) {
                let block = first..(first + PER_BLOCK).min((r + 1) * per_run);
                let mut lib_answers = Vec::new();
                for i in block.clone() {
                    let started = Instant::now();
                    let answer = check_prefix(&index, &layout, &prompts[i]);
                    lib_answers.push((micros(started.elapsed()), answer));
                }
                let mut emu_answers = Vec::new();
                for i in block.clone() {
                    let started = Instant::now();
                    let answer = dynamo.check_prefix(&prompts[i]);
                    emu_answers.push((micros(started.elapsed()), answer));
                }
                for (k, i) in block.enumerate() {
                    let (lt, la) = lib_answers[k];
                    let (et, ea) = emu_answers[k];
                    let want = if i % 4 == 3 { 64 } else { expected_whole };
                    assert_eq!(la, want, "{} prompt {}: the library's answer", shape.name, i);
                    lib_all.push(lt);
                    match ea {
                        Some(a) => {
                            assert_eq!(a, la, "{} prompt {}: the two disagree", shape.name, i);
                            agreed += 1;
                            lib_learned.push(lt);
                            emu_learned.push(et);
                            run_lib.push(lt);
                            run_emu.push(et);
                        }
                        None => {
                            unanswered += 1;
                            if la > 0 {
                                unanswered_lib_hit += 1;
                            }
                            emu_unlearned.push(et);
                        }
                    }
                }
            }
            run_ratios.push(median(&mut run_emu) / median(&mut run_lib));
        }
        let (low, high) = run_ratios
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        let ratio = median(&mut run_ratios);
        println!(
            "| {} | {:.1} | {:.1} | {:.2}× ({:.2}–{:.2}) | {:.1} | {:.2} | {} | {} | {} | {} |",
            shape.name,
            median(&mut lib_learned),
            median(&mut emu_learned),
            ratio,
            low,
            high,
            median(&mut lib_all),
            median(&mut emu_unlearned),
            n,
            unanswered,
            unanswered_lib_hit,
            agreed
        );
        eprintln!(
            "{}: {} keys; emulation learned {} edges ({} refused), {} digests ({} refused: the map was full)",
            shape.name,
            keys.len(),
            dynamo.edge_count(),
            dynamo.edges_dropped,
            dynamo.digest_count(),
            dynamo.digests_dropped
        );
    }
}
