//! The vLLM family through the safe API, end to end through the C ABI: the
//! three worked examples of docs/vllm-family.md (section 4), each built from
//! the descriptor a worker publishes, its chunks stored by events under the
//! keys the doc names, and the router's answer read from
//! `SharedCacheIndex::check_blocks` (Dynamo's single range). Digests are the
//! doc's (tokens 0..63, hash blocks of 16, sha256, PYTHONHASHSEED 0),
//! recomputed with CPython's pickle and hashlib.

mod common;

use std::sync::Arc;

use common::vllm::{descriptor, group, qwen_descriptor, qwen_prefixes, CHAIN};

use shared_cache_index::{
    Event, Index, Layout, LayoutFamily, PageScratch, RequestExtras,
    SharedCacheHits, SharedCacheIndex, Status,
};

/// Their GPU event hashes (the digests' low 64 bits); the doc names H_0's.
const EVENT_HASHES: [u64; 4] = [
    7982712666671721126,
    12675106281628537544,
    11576154700054564362,
    3578117338907894196,
];
/// H_0, H_1 of tokens 0..31 with LoRA "lora-a" and cache salt "salt".
const LORA_SALT_CHAIN: [&str; 2] = [
    "b02fc6e3bad08eb9430b7f3da3caf6859c90d2b906a575e115fd625c67815992",
    "45b37155d33b978679264cc8bbba8b281e3720cd4e26386f41cb28273d9c7a9a",
];

/// Example 3's prefixes of group `g`: TP 2 x PP 2, model "M", prefix "prod".
fn hybrid_prefixes(g: u32) -> Vec<String> {
    let mut prefixes = Vec::new();
    for pp in 0..2 {
        for tp in 0..2 {
            prefixes.push(format!("prod@M@tp_rank:{}@pcp0@dcp0@pp_rank:{}@group:{}", tp, pp, g));
        }
    }
    prefixes
}

/// The keys of one chunk: every prefix of its group holds `<prefix>@<hex>`.
fn keys(prefixes: &[String], hex: &str) -> Vec<String> {
    prefixes.iter().map(|p| format!("{}@{}", p, hex)).collect()
}

/// A router over one index, with `layout` registered under "model".
struct Router {
    cache: SharedCacheIndex,
    sequence: u64,
}

impl Router {
    fn new(descriptor: &str) -> Router {
        let layout = Layout::from_json(descriptor).unwrap();
        assert_eq!(layout.family(), LayoutFamily::Vllm);
        assert_eq!(layout.block_size(), 16);
        let mut cache = SharedCacheIndex::new(Arc::new(Index::new().unwrap()));
        cache.register_layout(Some("model"), layout);
        Router { cache, sequence: 0 }
    }

    fn store(&mut self, keys: &[String]) {
        let events: Vec<Event> = keys.iter().map(|k| Event::stored(k)).collect();
        self.sequence += 1;
        self.cache.index().apply_events(self.sequence, &events).unwrap();
    }

    fn remove(&mut self, keys: &[String]) {
        let events: Vec<Event> = keys.iter().map(|k| Event::removed(k)).collect();
        self.sequence += 1;
        self.cache.index().apply_events(self.sequence, &events).unwrap();
    }

    fn blocks(&self, tokens: &[u32]) -> SharedCacheHits {
        self.cache.check_blocks(tokens, 16, Some("model")).unwrap()
    }
}

fn hits(range: Option<std::ops::Range<u32>>) -> SharedCacheHits {
    match range {
        None => SharedCacheHits::default(),
        // The usual layout's chunk is its router block: the engine loads
        // the credited blocks, 16 tokens each.
        Some(range) => SharedCacheHits {
            total_hits: range.end - range.start,
            prefix_tokens: 16 * range.end as usize,
            ranges: vec![range],
        },
    }
}

/// Tokens 0..n-1.
fn tokens(n: u32) -> Vec<u32> {
    (0..n).collect()
}

fn digest(hex: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    out
}

#[test]
fn example_1_qwen3_8b_tp2_needs_both_ranks_and_answers_the_leading_run() {
    let mut router = Router::new(&qwen_descriptor());
    let prefixes = qwen_prefixes();
    // Chunk 0 needs the object of each TP rank: one is not enough.
    router.store(&keys(&prefixes[..1], CHAIN[0]));
    assert_eq!(router.blocks(&tokens(65)), hits(None));
    router.store(&keys(&prefixes[1..], CHAIN[0]));
    assert_eq!(router.blocks(&tokens(65)), hits(Some(0..1)));
    // Chunks 1 and 3: the answer is a prefix, so chunk 3 waits for chunk 2.
    router.store(&keys(&prefixes, CHAIN[1]));
    router.store(&keys(&prefixes, CHAIN[3]));
    assert_eq!(router.blocks(&tokens(65)), hits(Some(0..2)));
    router.store(&keys(&prefixes, CHAIN[2]));
    assert_eq!(router.blocks(&tokens(65)), hits(Some(0..4)));
    // 64 tokens: the last token is never credited, so block 3 is not.
    assert_eq!(router.blocks(&tokens(64)), hits(Some(0..3)));
    // Another block size does not line up with the chunks.
    assert_eq!(
        router.cache.check_blocks(&tokens(65), 32, Some("model")).unwrap(),
        hits(None)
    );
    // Per-block hits mean what they say for one full-attention group.
    router.remove(&keys(&prefixes[1..], CHAIN[1]));
    let mut scratch = PageScratch::new();
    let layout = Layout::from_json(&qwen_descriptor()).unwrap();
    let pages = router
        .cache
        .index()
        .check_pages(&layout, &tokens(65), 16, &mut scratch)
        .unwrap();
    assert_eq!(pages.ranges(), &[0..1, 2..4]);
    assert_eq!(router.blocks(&tokens(65)), hits(Some(0..1)));
}

#[test]
fn example_2_deepseek_v3_mla_tp4_needs_one_object_per_chunk() {
    // MLA: every rank writes tp_rank:0; no cache_prefix.
    let prefixes = vec!["DeepSeek-V3@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0".to_string()];
    let mut router = Router::new(&descriptor(16, &group(0, "full_attention", 16, &prefixes)));
    // Chunk 3 alone: present, but a prefix needs chunks 0..2 first.
    let chunk_3 = keys(&prefixes, CHAIN[3]);
    assert_eq!(
        chunk_3,
        ["DeepSeek-V3@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0@71c151a876275d6b365dfa670e47acb855b683a8880eaf3e31a806c3164561b4"]
    );
    router.store(&chunk_3);
    assert_eq!(router.blocks(&tokens(65)), hits(None));
    for hex in &CHAIN[..3] {
        router.store(&keys(&prefixes, hex));
    }
    assert_eq!(router.blocks(&tokens(65)), hits(Some(0..4)));
    assert_eq!(router.cache.index().stats().unwrap().keys, 4);
}

#[test]
fn example_3_hybrid_mamba_answers_only_at_multiples_of_64_with_the_mamba_chunk() {
    let full = hybrid_prefixes(0);
    let mamba = hybrid_prefixes(1);
    let groups = format!(
        "{}, {}",
        group(0, "full_attention", 16, &full),
        group(1, "mamba", 64, &mamba)
    );
    let mut router = Router::new(&descriptor(64, &groups));
    for hex in &CHAIN {
        router.store(&keys(&full, hex));
    }
    // Every full-attention chunk, no Mamba state: no candidate holds.
    assert_eq!(router.blocks(&tokens(65)), hits(None));
    // The Mamba chunk over tokens 0..63 is keyed by H_3 and needs 4 objects.
    let mamba_chunk = keys(&mamba, CHAIN[3]);
    assert_eq!(mamba_chunk.len(), 4);
    assert!(mamba_chunk.contains(
        &"prod@M@tp_rank:1@pcp0@dcp0@pp_rank:1@group:1@71c151a876275d6b365dfa670e47acb855b683a8880eaf3e31a806c3164561b4"
            .to_string()
    ));
    router.store(&mamba_chunk[..3]);
    assert_eq!(router.blocks(&tokens(65)), hits(None));
    router.store(&mamba_chunk[3..]);
    assert_eq!(router.blocks(&tokens(65)), hits(Some(0..4)));
    // Alignment 64: 64 tokens credit at most 48, so no candidate.
    assert_eq!(router.blocks(&tokens(64)), hits(None));
    // A full-attention chunk missing breaks the candidate too.
    router.remove(&keys(&full[2..3], CHAIN[1]));
    assert_eq!(router.blocks(&tokens(65)), hits(None));
}

#[test]
fn extras_change_the_hashes_and_must_be_given_to_hit() {
    let mut router = Router::new(&qwen_descriptor());
    for hex in &LORA_SALT_CHAIN {
        router.store(&keys(&qwen_prefixes(), hex));
    }
    let request = tokens(33);
    let extras = RequestExtras::none().lora("lora-a").salt("salt");
    let answer = |extras: &RequestExtras| {
        router
            .cache
            .check_blocks_with_extras(&request, 16, extras, Some("model"))
            .unwrap()
    };
    assert_eq!(answer(&extras), hits(Some(0..2)));
    // Without them, or with the LoRA name alone, the chain is another.
    assert_eq!(router.blocks(&request), hits(None));
    assert_eq!(answer(&RequestExtras::none().lora("lora-a")), hits(None));
    // An empty salt is no salt (vLLM tests it for truth).
    assert_eq!(
        answer(&RequestExtras::none().lora("lora-a").salt("")),
        answer(&RequestExtras::none().lora("lora-a"))
    );
    let index = router.cache.index();
    let layout = Layout::from_json(&qwen_descriptor()).unwrap();
    assert_eq!(
        index.check_prefix_with_extras(&layout, &request, 16, &extras).unwrap(),
        2
    );
    let mut scratch = PageScratch::new();
    let pages = index
        .check_pages_with_extras(&layout, &request, 16, &extras, &mut scratch)
        .unwrap();
    assert_eq!(pages.ranges(), &[0..2]);

    // SGLang's page hashes carry no extras: a request with any hits nothing.
    let sglang = Layout::from_json(r#"{"page_size": 16}"#).unwrap();
    assert_eq!(sglang.family(), LayoutFamily::SGLang);
    assert_eq!(
        index.check_prefix_with_extras(&sglang, &request, 16, &extras).unwrap(),
        0
    );
}

#[test]
fn block_hashes_answer_by_digest_or_by_event_hash() {
    let mut router = Router::new(&qwen_descriptor());
    for hex in &CHAIN[..3] {
        router.store(&keys(&qwen_prefixes(), hex));
    }
    let layout = Layout::from_json(&qwen_descriptor()).unwrap();
    let index = router.cache.index().clone();
    let digests: Vec<[u8; 32]> = CHAIN.iter().map(|hex| digest(hex)).collect();
    // The doc's event hash of H_0 is its digest's low 64 bits.
    assert_eq!(
        u64::from_be_bytes(digests[0][24..].try_into().unwrap()),
        7982712666671721126
    );
    assert_eq!(index.check_block_hashes(&layout, &digests, Some(64), 16).unwrap(), 3);
    assert_eq!(index.check_event_hashes(&layout, &EVENT_HASHES, None, 16).unwrap(), 3);
    router.store(&keys(&qwen_prefixes(), CHAIN[3]));
    // None: one token more than the hashes cover, every block creditable.
    assert_eq!(index.check_event_hashes(&layout, &EVENT_HASHES, None, 16).unwrap(), 4);
    assert_eq!(index.check_block_hashes(&layout, &digests, None, 16).unwrap(), 4);
    // 64 tokens: the last is never credited.
    assert_eq!(index.check_block_hashes(&layout, &digests, Some(64), 16).unwrap(), 3);
    // An event hash no present key has is a missing block.
    let mut unknown = EVENT_HASHES;
    unknown[1] ^= 1;
    assert_eq!(index.check_event_hashes(&layout, &unknown, None, 16).unwrap(), 1);
    assert_eq!(index.check_event_hashes(&layout, &[], None, 16).unwrap(), 0);

    // Fewer tokens than the hashes cover, or an SGLang layout: refused.
    let error = index
        .check_block_hashes(&layout, &digests, Some(63), 16)
        .unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
    let sglang = Layout::from_json(r#"{"page_size": 16}"#).unwrap();
    let error = index
        .check_event_hashes(&sglang, &EVENT_HASHES, None, 16)
        .unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
    assert!(error.message().contains("sci_index_check_page_hashes"), "{}", error);
}

#[test]
fn descriptors_are_read_bare_or_wrapped_and_refusals_carry_the_librarys_message() {
    let wrapped = format!(r#"{{"vllm_mooncake_store": {}}}"#, qwen_descriptor());
    let layout = Layout::from_json(&wrapped).unwrap();
    assert_eq!((layout.family(), layout.block_size()), (LayoutFamily::Vllm, 16));
    let bad = qwen_descriptor().replace("\"full_attention\"", "\"linear\"");
    let error = Layout::from_json(&bad).unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
    assert!(error.message().starts_with("sci_layout_new_json: "), "{}", error);
    assert!(error.message().contains("groups[0].kind"), "{}", error);
    // The builder is SGLang's: it refuses a descriptor rather than misread it.
    #[cfg(feature = "json")]
    {
        let error = shared_cache_index::LayoutBuilder::from_json(&qwen_descriptor()).unwrap_err();
        assert_eq!(error.status(), Status::InvalidArgument);
        assert!(error.message().contains("Layout::from_json"), "{}", error);
    }
}

/// `LayoutBuilder::from_json` (serde_json, in Rust) and the library's reader
/// behind `Layout::from_json` must take and refuse the same SGLang configs,
/// naming the same field.
#[cfg(feature = "json")]
#[test]
fn the_builders_reader_and_the_librarys_agree_on_sglang_configs() {
    let cases: &[(&str, Option<&str>)] = &[
        (r#"{"page_size": 64, "tp_size": 8, "model_path": "x"}"#, None),
        (r#"{"page_size": 16, "tp_lcm_size": null, "pools": null, "key_prefix": null}"#, None),
        (r#"{"page_size": -0, "tp_size": 2}"#, Some("page_size")),
        (r#"{"page_size": 4, "tp_size": 2, "page_size": 8}"#, None),
        (
            r#"{"page_size": 64, "pools": [{"suffixes": ["__swa"], "hit_policy": "trailing_pages", "trailing_pages": 4}]}"#,
            None,
        ),
        ("{\"page_size\": 64", Some("not valid JSON")),
        ("{\"page_size\": 64}\u{0}", Some("")),
        ("[64]", Some("expected a JSON object")),
        ("{}", Some("page_size is missing")),
        (r#"{"page_size": -1}"#, Some("page_size must be an unsigned 32-bit integer")),
        (r#"{"page_size": 64.0}"#, Some("page_size must be an unsigned 32-bit integer")),
        (r#"{"page_size": 4294967296}"#, Some("page_size must be an unsigned 32-bit integer")),
        (r#"{"page_size": 64, "tp_size": "8"}"#, Some("tp_size must be an unsigned 32-bit integer")),
        (r#"{"page_size": 64, "is_mla_model": 1}"#, Some("is_mla_model must be true or false")),
        (r#"{"page_size": 64, "key_prefix": 7}"#, Some("key_prefix must be a string")),
        (r#"{"page_size": 64, "pools": {}}"#, Some("pools must be an array")),
        (r#"{"page_size": 64, "pools": [3]}"#, Some("pools[0] must be an object")),
        (r#"{"page_size": 64, "pools": [{}]}"#, Some("pools[0].suffixes is missing")),
        (
            r#"{"page_size": 64, "pools": [{"suffixes": ["a"], "hit_policy": "some"}]}"#,
            Some("pools[0].hit_policy must be"),
        ),
        (
            r#"{"page_size": 64, "pools": [{"suffixes": ["a"], "hit_policy": "trailing_pages"}]}"#,
            Some("pools[0].trailing_pages is missing"),
        ),
        (
            r#"{"page_size": 64, "pools": [{"suffixes": ["a"], "trailing_pages": -2}]}"#,
            Some("pools[0].trailing_pages must be an unsigned 32-bit integer"),
        ),
    ];
    for (json, refusal) in cases {
        let builder = shared_cache_index::LayoutBuilder::from_json(json).and_then(|b| b.build());
        let library = Layout::from_json(json);
        match refusal {
            None => {
                let (builder, library) = (builder.unwrap(), library.unwrap());
                assert_eq!(builder.block_size(), library.block_size(), "{}", json);
                assert_eq!(library.family(), LayoutFamily::SGLang);
            }
            Some(field) => {
                let (builder, library) = (builder.unwrap_err(), library.unwrap_err());
                assert_eq!(builder.status(), Status::InvalidArgument, "{}", json);
                assert_eq!(library.status(), Status::InvalidArgument, "{}", json);
                assert!(builder.message().contains(field), "{} -> {}", json, builder);
                assert!(library.message().contains(field), "{} -> {}", json, library);
            }
        }
    }
}

/// Credit in tokens (added in 1.4): a router block of 64 tokens over chunks
/// of 16 (the DCP shape of Dynamo's DEP #14944, scaled down). Dynamo's range
/// stays in whole blocks; `prefix_tokens` counts the whole chunks the engine
/// loads past them, never the prompt's last token.
#[test]
fn a_router_block_of_four_chunks_credits_the_chunks_past_it_in_tokens() {
    let wide = qwen_descriptor()
        .replace(r#""main_event_block_size": 16"#, r#""main_event_block_size": 64"#)
        .replace(r#""lcm_block_size": 16"#, r#""lcm_block_size": 64"#);
    let layout = Layout::from_json(&wide).unwrap();
    assert_eq!(layout.block_size(), 64);
    let index = Arc::new(Index::new().unwrap());
    let mut cache = SharedCacheIndex::new(index.clone());
    cache.register_layout(None, layout);
    let prefixes = qwen_prefixes();
    for (sequence, hex) in CHAIN[..3].iter().enumerate() {
        let chunk_keys = keys(&prefixes, hex);
        let events: Vec<Event> = chunk_keys.iter().map(|k| Event::stored(k)).collect();
        index.apply_events(sequence as u64 + 1, &events).unwrap();
    }
    let answer = cache.check_blocks(&tokens(65), 64, None).unwrap();
    assert_eq!((answer.total_hits, answer.prefix_tokens), (0, 48), "no whole block, three chunks");
    let chunk_keys = keys(&prefixes, CHAIN[3]);
    let events: Vec<Event> = chunk_keys.iter().map(|k| Event::stored(k)).collect();
    index.apply_events(4, &events).unwrap();
    let answer = cache.check_blocks(&tokens(65), 64, None).unwrap();
    assert_eq!(answer.ranges, vec![0..1]);
    assert_eq!(answer.prefix_tokens, 64);
    let answer = cache.check_blocks(&tokens(64), 64, None).unwrap();
    assert_eq!((answer.total_hits, answer.prefix_tokens), (0, 48), "the last token is never loaded");
    // The same through the index, and per tier.
    let same = Layout::from_json(&wide).unwrap();
    let credit = index.check_prefix_tokens(&same, &tokens(65), 64, None).unwrap();
    assert_eq!((credit.pages, credit.tokens), (1, 64));
    let tiers = cache.check_tiers(&tokens(64), 64, None, None).unwrap();
    assert_eq!(tiers.summary.token_prefixes().last(), Some(&48));
    assert_eq!(tiers.per_tier.last().map(|hits| hits.prefix_tokens), Some(48));
}
