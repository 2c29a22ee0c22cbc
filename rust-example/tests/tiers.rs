//! Answers per storage tier (1.3) through the safe crate: `Index::check_tiers`
//! on an SGLang layout (keys derived by the pure-Rust spec) and on a vLLM
//! descriptor, the per-tier `SharedCacheIndex::check_tiers`, the map option,
//! and the per-tier key gauges.

mod common;

use std::sync::Arc;

use common::vllm::{descriptor, group, CHAIN};
use common::{prompt, stored_objects};
use pure_rust_index as spec;
use shared_cache_index::{
    Event, Index, IndexOptions, Layout, LayoutBuilder, Residency, SharedCacheIndex, Status, TIER_ABSENT,
};

const PAGE: u32 = 4;

fn per_medium(tiers: &str) -> Index {
    let options = IndexOptions { residency: Residency::PerMedium, medium_tiers: tiers.to_owned(), ..Default::default() };
    Index::with_options(&options).unwrap()
}

/// Stores every object of `tokens`' pages under a tp2 layout (4 keys a page)
/// on cpu, then moves the first key of each page of `one_key` and every key
/// of each page of `whole` to disk.
fn store(index: &Index, tokens: &[u32], one_key: &[usize], whole: &[usize]) {
    let layout = spec::Layout { page_size: PAGE, tp_size: 2, pp_size: 1, ..spec::Layout::default() };
    let objects = stored_objects(&layout, tokens);
    let per_page = objects.len() / (tokens.len() / PAGE as usize);
    let stored: Vec<Event<'_>> = objects.iter().map(|(key, group)| Event::stored(key).group(group).medium("cpu")).collect();
    index.apply_events(1, &stored).unwrap();
    let mut moved = Vec::new();
    let keys = one_key
        .iter()
        .map(|&page| &objects[page * per_page])
        .chain(whole.iter().flat_map(|&page| &objects[page * per_page..(page + 1) * per_page]));
    for (key, _) in keys {
        moved.push(Event::stored(key).medium("disk"));
        moved.push(Event::removed(key).medium("cpu"));
    }
    index.apply_events(2, &moved).unwrap();
}

#[test]
fn sglang_pages_report_their_tier_and_the_prefix_per_tier() {
    let index = per_medium("");
    let tokens = prompt(7, 5 * PAGE as usize);
    store(&index, &tokens, &[1], &[3]);
    let layout = LayoutBuilder::new(PAGE).tp_size(2).build().unwrap();
    let mut tiers = Vec::new();
    for pass in 0..2 {
        let summary = index.check_tiers(&layout, &tokens, PAGE, None, &mut tiers).unwrap();
        assert_eq!(tiers, vec![0, 1, 0, 1, 0], "pass {pass}");
        assert_eq!(summary.n_tiers, 2);
        assert_eq!(summary.n_pages, 5);
        assert_eq!(summary.prefixes(), &[1, 5]);
        assert_eq!(&summary.pages_at[..2], &[3, 2]);
        assert_eq!(summary.prefix_pages[1], index.check_prefix(&layout, &tokens, PAGE).unwrap());
    }
    let stats = index.stats().unwrap();
    assert_eq!(stats.keys_by_tier, [15, 5, 0, 0]);

    // Through the Dynamo-shaped adapter: every block at each tier.
    let mut shared = SharedCacheIndex::new(Arc::new(index));
    shared.register_layout(None, layout);
    let answer = shared.check_tiers(&tokens, PAGE, None, None).unwrap();
    assert_eq!(answer.per_tier.len(), 2);
    assert_eq!(answer.per_tier[0].ranges, vec![0..1, 2..3, 4..5]);
    assert_eq!(answer.per_tier[0].total_hits, 3);
    assert_eq!(answer.per_tier[1].ranges, vec![0..5]);
    assert_eq!(answer.per_tier[1], shared.check_blocks(&tokens, PAGE, None).unwrap());
    // Dynamo's weights for host and disk, each block once, nothing past a hole.
    assert_eq!(answer.summary.weighted_credit(0, &[0.75, 0.25]), 0.75 + 4.0 * 0.25);
}

#[test]
fn the_object_rule_and_unknown_media_are_the_slowest_tier() {
    let index = Index::new().unwrap();
    let tokens = prompt(8, 2 * PAGE as usize);
    store(&index, &tokens, &[1], &[]);
    let layout = LayoutBuilder::new(PAGE).tp_size(2).build().unwrap();
    let mut tiers = Vec::new();
    let summary = index.check_tiers(&layout, &tokens, PAGE, None, &mut tiers).unwrap();
    // The object rule keeps no media; page 1 lost a key to a cpu removal.
    assert_eq!(tiers, vec![1, TIER_ABSENT]);
    assert_eq!(summary.prefixes(), &[0, 1]);
}

#[test]
fn a_map_that_is_not_one_is_refused_naming_the_item() {
    let options = IndexOptions { medium_tiers: "cpu=0,disk=5".to_owned(), ..Default::default() };
    let error = Index::with_options(&options).unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
    assert!(error.to_string().contains("medium 'disk' has tier '5'"), "{error}");
    let three = per_medium("hbm=0,cpu=1,disk=2");
    let tokens = prompt(9, 2 * PAGE as usize);
    store(&three, &tokens, &[1], &[]);
    let layout = LayoutBuilder::new(PAGE).tp_size(2).build().unwrap();
    let mut tiers = Vec::new();
    let summary = three.check_tiers(&layout, &tokens, PAGE, None, &mut tiers).unwrap();
    assert_eq!(tiers, vec![1, 2]);
    assert_eq!(summary.prefixes(), &[0, 1, 2]);
}

#[test]
fn vllm_blocks_and_dynamos_prefix_per_tier() {
    // Example 1's descriptor with one rank: keys "m@tp_rank:0@<digest>".
    let prefixes = vec!["m@tp_rank:0".to_owned()];
    let layout = Layout::from_json(&descriptor(16, &group(0, "full_attention", 16, &prefixes))).unwrap();
    let keys: Vec<String> = CHAIN[..3].iter().map(|h| format!("m@tp_rank:0@{h}")).collect();
    let index = per_medium("");
    let events = [
        Event::stored(&keys[0]).medium("cpu"),
        Event::stored(&keys[1]).medium("disk"),
        Event::stored(&keys[2]).medium("cpu"),
    ];
    index.apply_events(1, &events).unwrap();
    let tokens: Vec<u32> = (0..64).collect();
    let mut tiers = Vec::new();
    let summary = index.check_tiers(&layout, &tokens, 16, None, &mut tiers).unwrap();
    assert_eq!(tiers, vec![0, 1, 0, TIER_ABSENT]);
    assert_eq!(summary.prefixes(), &[1, 3]);
    let mut shared = SharedCacheIndex::new(Arc::new(index));
    shared.register_layout(None, layout);
    let answer = shared.check_tiers(&tokens, 16, None, None).unwrap();
    assert_eq!(answer.per_tier[0].ranges, vec![0..1]);
    assert_eq!(answer.per_tier[1].ranges, vec![0..3]);
}
