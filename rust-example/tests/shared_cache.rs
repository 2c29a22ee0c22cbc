//! The Dynamo-shaped adapter (`SharedCacheIndex::check_blocks`) and the
//! prefix query, against the real library, with keys derived by the
//! pure-Rust spec of docs/sglang-hicache.md.

mod common;

use std::sync::Arc;

use common::{prompt, stored_objects};
use pure_rust_index as spec;
use shared_cache_index::{
    Event, Index, Layout, LayoutBuilder, SharedCacheHits, SharedCacheIndex, Status,
};

const PAGE: u32 = 4;

fn spec_layout(tp_size: u32, tag: &str) -> spec::Layout {
    spec::Layout {
        page_size: PAGE,
        tp_size,
        pp_size: 1,
        extra_backend_tag: tag.to_owned(),
        ..spec::Layout::default()
    }
}

fn library_layout(tp_size: u32, tag: &str) -> Layout {
    let mut builder = LayoutBuilder::new(PAGE).tp_size(tp_size);
    if !tag.is_empty() {
        builder = builder.extra_backend_tag(tag);
    }
    builder.build().unwrap()
}

/// Stores the objects of the pages of `tokens` whose index is in `pages`.
fn store_pages(index: &Index, sequence: &mut u64, layout: &spec::Layout, tokens: &[u32], pages: &[usize]) {
    let per_page = stored_objects(layout, tokens).len() / (tokens.len() / PAGE as usize);
    let objects = stored_objects(layout, tokens);
    let events: Vec<Event<'_>> = pages
        .iter()
        .flat_map(|&page| objects[page * per_page..(page + 1) * per_page].iter())
        .map(|(key, group)| Event::stored(key).group(group))
        .collect();
    *sequence += 1;
    index.apply_events(*sequence, &events).unwrap();
}

#[test]
fn check_blocks_reports_sorted_half_open_ranges_and_the_total() {
    let index = Arc::new(Index::new().unwrap());
    let mut cache = SharedCacheIndex::new(index.clone());
    cache.register_layout(None, library_layout(2, ""));
    let tokens = prompt(1, 8 * PAGE as usize + 3);
    let mut sequence = 0;
    store_pages(&index, &mut sequence, &spec_layout(2, ""), &tokens, &[0, 1, 2, 4, 6, 7]);
    let expected = SharedCacheHits {
        ranges: vec![0..3, 4..5, 6..8],
        total_hits: 6,
        prefix_tokens: 3 * PAGE as usize,
    };
    // Exact path, then fast path: the same answer.
    for _ in 0..2 {
        assert_eq!(cache.check_blocks(&tokens, PAGE, None).unwrap(), expected);
    }
    assert_eq!(cache.check_prefix_blocks(&tokens, PAGE, None).unwrap(), 3);
    assert_eq!(index.check_prefix(&library_layout(2, ""), &tokens, PAGE).unwrap(), 3);
    // Blocks that do not line up with SGLang's pages: no hit.
    assert_eq!(cache.check_blocks(&tokens, PAGE * 2, None).unwrap(), SharedCacheHits::default());
}

#[test]
fn each_namespace_answers_under_its_own_layout() {
    let index = Arc::new(Index::new().unwrap());
    let mut cache = SharedCacheIndex::new(index.clone());
    cache.register_layout(None, library_layout(1, ""));
    cache.register_layout(Some("llama-70b"), library_layout(8, "llama"));
    cache.register_layout(Some("qwen-7b"), library_layout(2, "qwen"));
    let tokens = prompt(2, 4 * PAGE as usize);
    let mut sequence = 0;
    // Only the llama model stored the prompt (all four pages).
    store_pages(&index, &mut sequence, &spec_layout(8, "llama"), &tokens, &[0, 1, 2, 3]);
    let all = SharedCacheHits {
        ranges: vec![0..4],
        total_hits: 4,
        // A prompt of exactly 4 pages: SGLang computes its last token, so
        // its last page does not load.
        prefix_tokens: 3 * PAGE as usize,
    };
    assert_eq!(cache.check_blocks(&tokens, PAGE, Some("llama-70b")).unwrap(), all);
    assert_eq!(cache.check_blocks(&tokens, PAGE, Some("qwen-7b")).unwrap(), SharedCacheHits::default());
    assert_eq!(cache.check_blocks(&tokens, PAGE, None).unwrap(), SharedCacheHits::default());
    assert_eq!(cache.check_prefix_blocks(&tokens, PAGE, Some("llama-70b")).unwrap(), 4);
    assert_eq!(cache.check_prefix_blocks(&tokens, PAGE, Some("qwen-7b")).unwrap(), 0);
}

#[test]
fn an_unregistered_namespace_is_an_error_naming_it() {
    let index = Arc::new(Index::new().unwrap());
    let mut cache = SharedCacheIndex::new(index);
    let tokens = prompt(3, 2 * PAGE as usize);
    let err = cache.check_blocks(&tokens, PAGE, None).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains("no default layout"), "{}", err.message());
    cache.register_layout(Some("llama"), library_layout(1, ""));
    let err = cache.check_blocks(&tokens, PAGE, Some("mistral")).unwrap_err();
    assert_eq!(err.status(), Status::InvalidArgument);
    assert!(err.message().contains("\"mistral\""), "{}", err.message());
}

#[test]
fn check_prefix_stops_at_the_first_missing_page() {
    let index = Index::new().unwrap();
    let layout = library_layout(2, "");
    let tokens = prompt(4, 6 * PAGE as usize);
    let mut sequence = 0;
    store_pages(&index, &mut sequence, &spec_layout(2, ""), &tokens, &[0, 1, 3, 4, 5]);
    let before = index.stats().unwrap();
    assert_eq!(index.check_prefix(&layout, &tokens, PAGE).unwrap(), 2);
    let after = index.stats().unwrap();
    // Pages 0 and 1, and the miss at page 2: nothing past it was checked.
    assert_eq!(after.pages_checked - before.pages_checked, 3);
    assert_eq!(after.page_hits - before.page_hits, 2);
}

/// A layout is parsed once and shared: a clone registered with the adapter
/// and the original used directly answer alike, and either outlives the
/// other (the handle goes with the last clone).
#[test]
fn a_cloned_layout_serves_the_adapter_and_direct_queries_alike() {
    let index = Arc::new(Index::new().unwrap());
    let layout = library_layout(2, "");
    let mut cache = SharedCacheIndex::new(index.clone());
    cache.register_layout(None, layout.clone());
    assert_eq!(layout.as_raw(), layout.clone().as_raw(), "a clone shares the handle");
    let tokens = prompt(7, 6 * PAGE as usize);
    let mut sequence = 0;
    store_pages(&index, &mut sequence, &spec_layout(2, ""), &tokens, &[0, 1, 2, 4]);

    let direct = index.check_prefix(&layout, &tokens, PAGE).unwrap();
    drop(layout); // the adapter's clone keeps the layout alive
    let hits = cache.check_blocks(&tokens, PAGE, None).unwrap();
    assert_eq!(direct, 3);
    assert_eq!(hits.ranges.first(), Some(&(0..3)));
}
