//! The safe wrapper against the real library: events applied by hand, keys
//! derived per docs/sglang-hicache.md by the pure-Rust spec.

// `&[0..n]` is meant: a slice holding one range.
#![allow(clippy::single_range_in_vec_init)]

mod common;

use std::ops::Range;
use std::sync::Arc;
use std::thread;

use common::{
    benchmark_layouts, golden_message, prompt, stored_objects, unusual_layouts, XorShift,
};
use pure_rust_index as spec;
use shared_cache_index::{
    Event, Index, IndexOptions, Layout, LayoutBuilder, PageScratch, Pool, Residency, Status, Subscriber,
    SubscriberOptions,
};

fn stored_events<'a>(objects: &'a [(String, String)], tenant: &'a str) -> Vec<Event<'a>> {
    objects
        .iter()
        .map(|(key, group)| Event::stored(key).group(group).tenant(tenant))
        .collect()
}

fn tp2_layout() -> (Layout, spec::Layout) {
    let layout = LayoutBuilder::new(4).tp_size(2).build().unwrap();
    let spec_layout = spec::Layout {
        page_size: 4,
        tp_size: 2,
        pp_size: 1,
        ..spec::Layout::default()
    };
    (layout, spec_layout)
}

#[test]
fn handles_are_send_and_sync_as_the_contract_allows() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Index>();
    send_sync::<Layout>();
    send::<Subscriber>();
    send_sync::<Event<'static>>();
}

#[test]
fn library_abi_matches_the_bindings() {
    assert_eq!(
        shared_cache_index::abi_version(),
        shared_cache_index::ABI_VERSION
    );
    let version = shared_cache_index::version();
    assert_eq!(version.split('.').count(), 3, "{}", version);
    assert!(
        version.split('.').all(|part| part.parse::<u32>().is_ok()),
        "{}",
        version
    );
}

#[test]
fn stored_keys_are_present_per_tenant() {
    let index = Index::new().unwrap();
    index
        .apply_events(
            1,
            &[
                Event::stored("k1"),
                Event::stored("k2").tenant("tenant-a").medium("disk"),
                Event::stored(b"\xff\x00bin"),
            ],
        )
        .unwrap();
    assert!(index.contains("", "k1").unwrap());
    assert!(index.contains("default", "k1").unwrap());
    assert!(!index.contains("tenant-a", "k1").unwrap());
    assert!(index.contains("tenant-a", "k2").unwrap());
    assert!(!index.contains("", "k2").unwrap());
    assert!(index.contains("", b"\xff\x00bin").unwrap());
    index.apply_events(2, &[Event::removed("k1")]).unwrap();
    assert!(!index.contains("", "k1").unwrap());
}

#[test]
fn stats_count_batches_duplicates_and_gaps() {
    let index = Index::new().unwrap();
    assert_eq!(index.stats().unwrap().last_sequence, None);
    index
        .apply_events(7, &[Event::stored("a"), Event::stored("b")])
        .unwrap();
    index.apply_events(7, &[Event::stored("c")]).unwrap(); // duplicate: ignored
    index.apply_events(8, &[Event::stored("")]).unwrap(); // empty key: ignored
    let stats = index.stats().unwrap();
    assert_eq!(
        (stats.keys, stats.batches_applied, stats.duplicate_batches),
        (2, 2, 1)
    );
    assert_eq!(
        (
            stats.ignored_events,
            stats.sequence_gaps,
            stats.last_sequence
        ),
        (1, 0, Some(8))
    );
    assert!(!index.contains("", "c").unwrap());

    index.apply_events(10, &[Event::stored("d")]).unwrap(); // gap: cleared first
    let stats = index.stats().unwrap();
    assert_eq!((stats.keys, stats.sequence_gaps, stats.clears), (1, 1, 1));
    assert!(!index.contains("", "a").unwrap());

    index.clear();
    let stats = index.stats().unwrap();
    assert_eq!(
        (stats.keys, stats.clears, stats.last_sequence),
        (0, 2, None)
    );
    index.apply_events(3, &[Event::all_cleared()]).unwrap(); // any sequence after a clear
    assert_eq!(index.stats().unwrap().sequence_gaps, 1);
}

#[test]
fn errors_carry_the_status_and_the_library_message() {
    let error = LayoutBuilder::new(0).build().unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
    assert!(error.message().starts_with("sci_layout_new:"), "{}", error);
    assert!(error.message().contains("page_size"), "{}", error);
    assert!(
        error.to_string().contains("SCI_ERR_INVALID_ARGUMENT"),
        "{}",
        error
    );

    let error = LayoutBuilder::new(64)
        .pool(Pool::all_pages([""]))
        .build()
        .unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
    assert!(error.message().contains("pools[0]"), "{}", error);

    let error = LayoutBuilder::new(64).tp_size(1 << 20).build().unwrap_err();
    assert!(error.message().contains("tp_size"), "{}", error);

    let index = Index::new().unwrap();
    let error = index.prometheus("not a label list").unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
    assert!(
        error.message().starts_with("sci_stats_format_prometheus:"),
        "{}",
        error
    );
}

#[test]
fn malformed_message_is_a_decode_error_and_changes_nothing() {
    let index = Index::new().unwrap();
    index.apply_events(1, &[Event::stored("kept")]).unwrap();
    let error = index
        .apply_message(&[
            &b""[..],
            &b"\x00\x00\x00\x00\x00\x00\x00\x02"[..],
            &b"\xc1"[..],
        ])
        .unwrap_err();
    assert_eq!(error.status(), Status::Decode);
    assert!(!error.message().is_empty());
    let error = index.apply_message(&[b"only one frame"]).unwrap_err();
    assert_eq!(error.status(), Status::Decode);
    let stats = index.stats().unwrap();
    assert_eq!(
        (stats.malformed_messages, stats.keys, stats.last_sequence),
        (2, 1, Some(1))
    );
    assert!(index.contains("", "kept").unwrap());
}

#[test]
fn golden_captures_apply_and_answer_pages() {
    // basic: two stored keys of the page of tokens 1..4 (tp 1), a key of
    // tenant-a, a removal with that page's group id, a removal of "0x2a".
    let index = Index::new().unwrap();
    let layout = LayoutBuilder::new(4).build().unwrap();
    let tokens: Vec<u32> = (1..=10).collect();
    let mut scratch = PageScratch::new();
    for message in 0..3 {
        index
            .apply_message(&golden_message("basic", message))
            .unwrap();
    }
    let hits = index
        .check_pages(&layout, &tokens, 4, &mut scratch)
        .unwrap();
    assert_eq!((hits.n_pages(), hits.flags()), (2, &[1u8, 0][..]));
    assert_eq!(hits.ranges(), &[0..1]);
    assert!(index.contains("tenant-a", "12345").unwrap());

    index.apply_message(&golden_message("basic", 3)).unwrap();
    let hits = index
        .check_pages(&layout, &tokens, 4, &mut scratch)
        .unwrap();
    assert_eq!(hits.total_hits(), 0);
    index.apply_message(&golden_message("basic", 4)).unwrap();
    assert_eq!(index.stats().unwrap().last_sequence, Some(5));
}

#[test]
fn displaced_gap_capture_withholds_the_stores_of_each_runs_first_batch() {
    // 8 real messages: a new index's first batch (sequence 207) and the
    // batch revealing a gap both have their 32 stores withheld.
    let index = Index::new().unwrap();
    for message in 0..8 {
        index
            .apply_message(&golden_message("displaced-gap", message))
            .unwrap();
    }
    let stats = index.stats().unwrap();
    assert_eq!(stats.stores_withheld, 64);
    assert_eq!(stats.sequence_gaps, 1);
    assert_eq!(stats.keys, 35);
}

#[test]
fn check_pages_reports_every_hit_page_as_ranges() {
    let (layout, spec_layout) = tp2_layout();
    let tokens = prompt(1, 4 * 10 + 3); // 10 whole pages, 3 tokens over
    let hashes = spec::page_hashes(&tokens, 4, false);
    let index = Index::new().unwrap();
    let mut objects = Vec::new();
    for page in [0usize, 1, 2, 5, 6, 9] {
        for key in spec_layout.keys_for(&hashes[page], page, 10) {
            objects.push((key, spec_layout.group_id(&hashes[page])));
        }
    }
    // Page 7 has only one of its four keys: never a hit.
    objects.push((
        spec_layout.keys_for(&hashes[7], 7, 10)[0].clone(),
        spec_layout.group_id(&hashes[7]),
    ));
    index.apply_events(1, &stored_events(&objects, "")).unwrap();

    let mut scratch = PageScratch::new();
    let hits = index
        .check_pages(&layout, &tokens, 4, &mut scratch)
        .unwrap();
    let expected: Vec<Range<usize>> = vec![0..3, 5..7, 9..10];
    assert_eq!(hits.ranges(), &expected[..]);
    assert_eq!(
        (
            hits.n_pages(),
            hits.total_hits(),
            hits.prefix_hits(),
            hits.fast_path()
        ),
        (10, 6, 3, 6)
    );
    assert_eq!(hits.flags(), &[1, 1, 1, 0, 0, 1, 1, 0, 0, 1]);

    // Since 1.4 every hit is one page entry read (fast_path), the first
    // query's as the second's.
    let hits = index
        .check_pages(&layout, &tokens, 4, &mut scratch)
        .unwrap();
    assert_eq!((hits.total_hits(), hits.fast_path()), (6, 6));
    assert_eq!(hits.ranges(), &expected[..]);
    let stats = index.stats().unwrap();
    assert_eq!(
        (
            stats.queries,
            stats.pages_checked,
            stats.page_hits,
            stats.fast_path_hits
        ),
        (2, 20, 12, 12)
    );
    // 1.3's group counters are 0 since 1.4; `groups` counts page entries
    // (the six whole pages and page 7's one key).
    assert_eq!((stats.verified_groups, stats.summarised_pages, stats.tail_numbers), (0, 0, 0));
    assert_eq!(stats.groups, 7);
}

#[test]
fn pages_stored_without_their_groups_hit_from_the_first_query() {
    let (layout, spec_layout) = tp2_layout();
    let tokens = prompt(3, 4 * 3);
    let objects = stored_objects(&spec_layout, &tokens);
    let index = Index::new().unwrap();
    // Announced without group ids, as a snapshot loads keys: since 1.4 they
    // go straight into page entries, and the first query reads one a page.
    let events: Vec<Event> = objects.iter().map(|(key, _)| Event::stored(key)).collect();
    index.apply_events(1, &events).unwrap();
    let mut scratch = PageScratch::new();
    let hits = index
        .check_pages(&layout, &tokens, 4, &mut scratch)
        .unwrap();
    assert_eq!((hits.total_hits(), hits.fast_path()), (3, 3));
    let stats = index.stats().unwrap();
    assert_eq!((stats.groups_adopted, stats.stray_keys, stats.groups), (0, 0, 3));
}

#[test]
fn removal_and_new_objects_turn_verified_hits_into_misses() {
    let (layout, spec_layout) = tp2_layout();
    let tokens = prompt(2, 4 * 3);
    let objects = stored_objects(&spec_layout, &tokens);
    let index = Index::new().unwrap();
    index.apply_events(1, &stored_events(&objects, "")).unwrap();
    let mut scratch = PageScratch::new();
    assert_eq!(
        index
            .check_pages(&layout, &tokens, 4, &mut scratch)
            .unwrap()
            .total_hits(),
        3
    );

    // Page 1 loses a key (removal with its group id): the group is forgotten.
    let (key, group) = &objects[4];
    index
        .apply_events(2, &[Event::removed(key).group(group)])
        .unwrap();
    let hits = index
        .check_pages(&layout, &tokens, 4, &mut scratch)
        .unwrap();
    assert_eq!(hits.ranges(), &[0..1, 2..3]);

    // An unlabelled removal of an unrelated key touches no page's group: the
    // fast path answers both pages still present.
    index
        .apply_events(3, &[Event::removed("unrelated")])
        .unwrap();
    let hits = index
        .check_pages(&layout, &tokens, 4, &mut scratch)
        .unwrap();
    assert_eq!((hits.total_hits(), hits.fast_path()), (2, 2));

    // A sequence gap clears everything: every page misses.
    index.apply_events(9, &[]).unwrap();
    let hits = index
        .check_pages(&layout, &tokens, 4, &mut scratch)
        .unwrap();
    assert_eq!((hits.n_pages(), hits.total_hits()), (3, 0));
    assert!(hits.ranges().is_empty());
}

#[test]
fn block_size_other_than_the_page_size_answers_no_page() {
    let (layout, spec_layout) = tp2_layout();
    let tokens = prompt(3, 16);
    let index = Index::new().unwrap();
    index
        .apply_events(
            1,
            &stored_events(&stored_objects(&spec_layout, &tokens), ""),
        )
        .unwrap();
    let mut scratch = PageScratch::new();
    let hits = index
        .check_pages(&layout, &tokens, 8, &mut scratch)
        .unwrap();
    assert_eq!((hits.total_hits(), hits.ranges().len()), (0, 0));
    assert!(hits.flags().iter().all(|&f| f == 0));
    assert_eq!(
        index
            .check_pages(&layout, &tokens, 4, &mut scratch)
            .unwrap()
            .total_hits(),
        4
    );
}

#[test]
fn layout_from_json_derives_the_same_keys_as_the_builder() {
    let json = r#"{"page_size": 4, "tp_size": 2, "pp_size": 2, "extra_backend_tag": "tag",
                   "tenant_id": "tenant-a", "model_path": "/models/x", "tp_lcm_size": null}"#;
    let from_json = Layout::from_json(json).unwrap();
    assert_eq!(from_json.page_size(), 4);
    let spec_layout = spec::Layout {
        page_size: 4,
        tp_size: 2,
        pp_size: 2,
        extra_backend_tag: "tag".into(),
        tenant_id: "tenant-a".into(),
        ..spec::Layout::default()
    };
    let tokens = prompt(4, 12);
    let index = Index::new().unwrap();
    index
        .apply_events(
            1,
            &stored_events(&stored_objects(&spec_layout, &tokens), "tenant-a"),
        )
        .unwrap();
    let mut scratch = PageScratch::new();
    assert_eq!(
        index
            .check_pages(&from_json, &tokens, 4, &mut scratch)
            .unwrap()
            .ranges(),
        &[0..3]
    );
    // The same layout without the tenant looks in "default": nothing there.
    let other_tenant = Layout::from_json(
        r#"{"page_size": 4, "tp_size": 2, "pp_size": 2, "extra_backend_tag": "tag"}"#,
    )
    .unwrap();
    assert_eq!(
        index
            .check_pages(&other_tenant, &tokens, 4, &mut scratch)
            .unwrap()
            .total_hits(),
        0
    );
}

#[test]
fn layout_json_the_library_rejects_is_an_error_naming_the_field() {
    let error = Layout::from_json(r#"{"page_size": 0}"#).unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument);
    assert!(error.message().contains("page_size"), "{}", error);
    let error = Layout::from_json(r#"{"page_size": 64, "pools": [{"suffixes": []}]}"#).unwrap_err();
    assert!(error.message().contains("pools[0]"), "{}", error);
    let error = Layout::from_json("{\"page_size\": 64,").unwrap_err();
    assert!(error.message().contains("not valid JSON"), "{}", error);
}

/// Random batches (stores of whole prompts, partial stores, removals with
/// and without group, gaps, duplicates, clears) applied to the library and to
/// the pure-Rust spec: every query must give the same flags, and `contains`
/// the same answer.
#[test]
fn library_agrees_with_the_pure_rust_spec_on_random_workloads() {
    let mut layouts = unusual_layouts(4);
    layouts.extend(benchmark_layouts());
    for (li, named) in layouts.iter().enumerate() {
        let page = named.spec.page_size as usize;
        let layout = named.builder.build().unwrap();
        let index = Index::new().unwrap();
        let reference = spec::Index::new();
        let mut rng = XorShift::new(100 + li as u64);
        let prompts: Vec<Vec<u32>> = (0..6)
            .map(|p| prompt(1000 * li as u64 + p, page * 6 + 1))
            .collect();
        let mut sequence = 1u64;
        let mut scratch = PageScratch::new();
        let tenant = named.spec.tenant_id.clone();
        let (mut hit_pages, mut missed_pages) = (0usize, 0usize);
        for round in 0..60 {
            let mut batch: Vec<spec::Event> = Vec::new();
            for _ in 0..rng.below(6) {
                let tokens = &prompts[rng.below(prompts.len() as u64) as usize];
                let objects = stored_objects(&named.spec, tokens);
                let (key, group) = objects[rng.below(objects.len() as u64) as usize].clone();
                let mut event = match rng.below(10) {
                    0..=5 => spec::Event::stored(&key, &group),
                    6 => spec::Event::removed(&key, &group),
                    7 => spec::Event::removed(&key, ""),
                    8 => spec::Event::stored(&key, ""),
                    _ => {
                        // A whole prompt's prefix at once.
                        let n = objects
                            .len()
                            .min(1 + rng.below(objects.len() as u64) as usize);
                        batch.extend(objects[..n].iter().map(|(k, g)| {
                            let mut e = spec::Event::stored(k, g);
                            e.tenant_id = tenant.clone();
                            e
                        }));
                        continue;
                    }
                };
                event.tenant_id = tenant.clone();
                batch.push(event);
            }
            sequence = match rng.below(20) {
                0 => sequence + 3, // a gap: both clear
                1 => sequence,     // a duplicate: both ignore
                _ => sequence + 1,
            };
            let events: Vec<Event> = batch
                .iter()
                .map(|e| {
                    let event = match e.kind {
                        spec::EventKind::Stored => Event::stored(&e.object_key),
                        spec::EventKind::Removed => Event::removed(&e.object_key),
                        spec::EventKind::AllCleared => Event::all_cleared(),
                    };
                    event.group(&e.group_id).tenant(&e.tenant_id)
                })
                .collect();
            index.apply_events(sequence, &events).unwrap();
            reference.apply(sequence, &batch);

            for tokens in &prompts {
                // Query prefixes of several lengths: trailing pools depend on it.
                let len = page * (1 + rng.below(6) as usize) + rng.below(page as u64) as usize;
                let tokens = &tokens[..len.min(tokens.len())];
                let hits = index
                    .check_pages(&layout, tokens, page as u32, &mut scratch)
                    .unwrap();
                let expected: Vec<u8> = reference
                    .check_pages(&named.spec, tokens, page as u32)
                    .iter()
                    .map(|&h| h as u8)
                    .collect();
                assert_eq!(
                    hits.flags(),
                    &expected[..],
                    "layout {} round {}",
                    named.name,
                    round
                );
                assert_eq!(
                    hits.total_hits(),
                    expected.iter().filter(|&&h| h == 1).count()
                );
                hit_pages += hits.total_hits();
                missed_pages += hits.n_pages() - hits.total_hits();
            }
            if let Some(e) = batch.first() {
                assert_eq!(
                    index.contains(&e.tenant_id, &e.object_key).unwrap(),
                    reference.contains(&e.tenant_id, &e.object_key)
                );
            }
        }
        // Both answers were exercised, not only misses.
        assert!(
            hit_pages > 50 && missed_pages > 50,
            "{}: {} hits, {} misses",
            named.name,
            hit_pages,
            missed_pages
        );
    }
}

#[test]
fn warm_scratch_is_reused_without_reallocating() {
    let (layout, spec_layout) = tp2_layout();
    let index = Index::new().unwrap();
    let long = prompt(5, 4 * 50);
    index
        .apply_events(1, &stored_events(&stored_objects(&spec_layout, &long), ""))
        .unwrap();
    let mut scratch = PageScratch::new();
    let first = index
        .check_pages(&layout, &long, 4, &mut scratch)
        .unwrap()
        .flags()
        .as_ptr();
    for len in [4 * 10, 4 * 50, 4 * 3 + 1, 4 * 49] {
        let hits = index
            .check_pages(&layout, &long[..len], 4, &mut scratch)
            .unwrap();
        assert_eq!(hits.flags().as_ptr(), first);
        assert_eq!(hits.ranges(), &[0..len / 4]);
    }
}

#[test]
fn queries_from_many_threads_while_one_thread_applies() {
    let (layout, spec_layout) = tp2_layout();
    let index = Arc::new(Index::new().unwrap());
    let layout = Arc::new(layout);
    let tokens = prompt(6, 4 * 20);
    let objects = stored_objects(&spec_layout, &tokens);
    index.apply_events(1, &stored_events(&objects, "")).unwrap();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (index, layout, tokens) = (index.clone(), layout.clone(), tokens.clone());
            thread::spawn(move || {
                let mut scratch = PageScratch::with_capacity(20);
                for _ in 0..300 {
                    let hits = index
                        .check_pages(&layout, &tokens, 4, &mut scratch)
                        .unwrap();
                    // The writer only adds unrelated keys: pages stay hits.
                    assert_eq!(hits.ranges(), &[0..20]);
                }
            })
        })
        .collect();
    for sequence in 2..300u64 {
        let key = format!("unrelated-{}", sequence);
        index
            .apply_events(sequence, &[Event::stored(&key)])
            .unwrap();
    }
    readers.into_iter().for_each(|r| r.join().unwrap());
    assert_eq!(index.stats().unwrap().keys, objects.len() as u64 + 298);
}

#[test]
fn index_capacity_refuses_beyond_max_entries() {
    let index = Index::with_options(&IndexOptions { max_entries: 4, ..Default::default() }).unwrap();
    let keys: Vec<String> = (0..10).map(|i| format!("k{}", i)).collect();
    let events: Vec<Event> = keys.iter().map(Event::stored).collect();
    index.apply_events(1, &events).unwrap();
    let stats = index.stats().unwrap();
    assert!(stats.keys <= 4, "{:?}", stats);
    assert!(stats.capacity_refusals >= 6, "{:?}", stats);
}

#[test]
fn prometheus_text_renders_the_counters_with_labels() {
    let index = Index::new().unwrap();
    index.apply_events(1, &[Event::stored("a")]).unwrap();
    let text = index.prometheus("pool=\"a\"").unwrap();
    assert!(text.contains("sci_keys{pool=\"a\"} 1"), "{}", text);
    assert!(
        text.contains("# TYPE sci_sequence_gaps_total counter"),
        "{}",
        text
    );
    assert!(!text.contains('\0'));
}

#[test]
fn subscriber_holds_its_index_until_dropped() {
    let index = Arc::new(Index::new().unwrap());
    // Nothing listens there: ZeroMQ connects in the background, so the
    // subscriber starts and keeps retrying.
    let options = SubscriberOptions::new("tcp://127.0.0.1:9").reconnect(
        std::time::Duration::from_millis(10),
        std::time::Duration::from_millis(50),
    );
    let subscriber = Subscriber::start(index.clone(), &options).unwrap();
    assert_eq!(Arc::strong_count(&index), 2);
    assert!(Arc::ptr_eq(subscriber.index(), &index));
    assert!(!index.stats().unwrap().subscriber_connected);
    // Stopping joins the thread, and promptly: the drop releases the index.
    drop(subscriber);
    assert_eq!(Arc::strong_count(&index), 1);
    // The subscriber can be moved to, and stopped on, another thread.
    let subscriber = Subscriber::start(index.clone(), &options).unwrap();
    thread::spawn(move || subscriber.stop()).join().unwrap();
    assert_eq!(Arc::strong_count(&index), 1);
}

#[test]
fn subscriber_with_a_bad_endpoint_is_an_error() {
    let index = Arc::new(Index::new().unwrap());
    let error =
        Subscriber::start(index.clone(), &SubscriberOptions::new("not-an-endpoint")).unwrap_err();
    assert!(
        error.message().starts_with("sci_subscriber_start:"),
        "{}",
        error
    );
    assert!(
        matches!(error.status(), Status::InvalidArgument | Status::Io),
        "{}",
        error
    );
    assert_eq!(Arc::strong_count(&index), 1);
}

#[test]
fn resync_and_leader_options_are_checked() {
    let index = Arc::new(Index::new().unwrap());
    let error = Subscriber::start(
        index.clone(),
        &SubscriberOptions::new("tcp://127.0.0.1:9").snapshot("ftp://master/get_all_keys"),
    )
    .unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument, "{}", error);
    assert!(error.message().contains("snapshot_url"), "{}", error);
    // Following a leader needs its event port.
    let error = Subscriber::start(index.clone(), &SubscriberOptions::follow_leader("http://127.0.0.1:9", 0, 0))
        .unwrap_err();
    assert!(error.message().contains("event_port"), "{}", error);
    // Through Redis too, and a URL that is not redis:// is named.
    let error = Subscriber::start(index.clone(), &SubscriberOptions::follow_leader_redis("http://127.0.0.1:9", 5557, 0))
        .unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument, "{}", error);
    assert!(error.message().contains("redis_endpoint"), "{}", error);
    // A Redis nobody listens on is not an error: it starts, follows no leader, and stops.
    let subscriber =
        Subscriber::start(index.clone(), &SubscriberOptions::follow_leader_redis("redis://127.0.0.1:9", 5557, 0)).unwrap();
    assert_eq!(index.stats().unwrap().leader_changes, 0);
    drop(subscriber);
    // With a snapshot URL the index answers miss until a resync completes.
    let options = SubscriberOptions::new("tcp://127.0.0.1:9")
        .snapshot("http://127.0.0.1:9/get_all_keys")
        .resync_min_interval(std::time::Duration::from_millis(100))
        .snapshot_timeout(std::time::Duration::from_secs(1));
    let subscriber = Subscriber::start(index.clone(), &options).unwrap();
    assert!(index.stats().unwrap().resyncing);
    drop(subscriber);
}

#[test]
fn retarget_checks_its_arguments_and_switches() {
    let index = Arc::new(Index::new().unwrap());
    let subscriber = Subscriber::start(index.clone(), &SubscriberOptions::new("tcp://127.0.0.1:9")).unwrap();
    let error = subscriber.retarget("bogus://x", "").unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument, "{}", error);
    let error = subscriber.retarget("tcp://127.0.0.1:9", "file:///etc/passwd").unwrap_err();
    assert_eq!(error.status(), Status::InvalidArgument, "{}", error);
    subscriber.retarget("tcp://127.0.0.1:10", "http://127.0.0.1:10/get_all_keys").unwrap();
    assert!(index.stats().unwrap().resyncing);
    subscriber.retarget("tcp://127.0.0.1:9", "").unwrap();
    assert!(!index.stats().unwrap().resyncing);
}

#[test]
fn per_medium_residency_keeps_a_key_on_disk_and_a_tenant_clear_takes_only_its_tenant() {
    let options = IndexOptions { residency: Residency::PerMedium, ..Default::default() };
    let index = Index::with_options(&options).unwrap();
    let events = [
        Event::stored("k").medium("cpu"),
        Event::stored("k").medium("disk"),
        Event::removed("k").medium("cpu"),
        Event::stored("t").tenant("tenant-b").medium("cpu"),
    ];
    index.apply_events(1, &events).unwrap();
    assert!(index.contains("", "k").unwrap(), "still on disk");
    index.apply_events(2, &[Event::tenant_cleared("tenant-b")]).unwrap();
    assert!(!index.contains("tenant-b", "t").unwrap());
    assert!(index.contains("", "k").unwrap(), "another tenant's clear");
    let stats = index.stats().unwrap();
    assert_eq!((stats.tenant_clears, stats.medium_removals_kept), (1, 1));

    // The default, object rule: any removal drops the key.
    let object = Index::new().unwrap();
    let stored = [Event::stored("k").medium("cpu"), Event::stored("k").medium("disk")];
    object.apply_events(1, &stored).unwrap();
    object.apply_events(2, &[Event::removed("k").medium("cpu")]).unwrap();
    assert!(!object.contains("", "k").unwrap());
}
