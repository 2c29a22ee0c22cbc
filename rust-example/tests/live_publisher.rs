//! End to end over loopback TCP: the project's `sci-publish` publishes the
//! production Mooncake format, a `Subscriber` follows it, and the router's
//! query must give exactly the hit ranges the published events imply —
//! after stores, removals, a reconnect, a forced gap and a publisher restart.

mod common;

use std::fmt::Write as _;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::publisher::{free_loopback_port, wait_until, Publisher, Summary};
use common::{prompt, stored_objects};
use pure_rust_index as spec;
use shared_cache_index::{
    Index, Layout, LayoutBuilder, PageScratch, Subscriber, SubscriberOptions,
};

const PUBLISH_TIMEOUT: Duration = Duration::from_secs(60);
const APPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// A scratch directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("sci-rust-{}-{}", name, std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn file(&self, name: &str, contents: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, contents).unwrap();
        path.to_str().unwrap().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Waits until the index has applied the publisher's last batch.
fn wait_applied(index: &Index, summary: &Summary) {
    let applied = wait_until(APPLY_TIMEOUT, || {
        index.stats().unwrap().last_sequence == Some(summary.last_sequence)
    });
    assert!(
        applied,
        "last sequence {} not applied; {:?}; {:?}",
        summary.last_sequence,
        summary,
        index.stats()
    );
}

fn hit_ranges(
    index: &Index,
    layout: &Layout,
    tokens: &[u32],
    scratch: &mut PageScratch,
) -> Vec<Range<usize>> {
    index
        .check_pages(layout, tokens, layout.page_size(), scratch)
        .unwrap()
        .ranges()
        .to_vec()
}

#[test]
fn subscriber_follows_the_sglang_workload_of_sci_publish() {
    let tmp = TempDir::new("workload");
    let prompts_file = tmp.0.join("prompts.jsonl");
    let publisher = Publisher::start(&args(&[
        "--endpoint",
        "tcp://127.0.0.1:*",
        "--workload",
        "--page-size",
        "16",
        "--tp",
        "2",
        "--prompts",
        "3",
        "--pages",
        "8",
        "--shared-prefix-pages",
        "3",
        "--seed",
        "7",
        "--prompts-out",
        prompts_file.to_str().unwrap(),
        "--wait-subscribers-ms",
        "20000",
    ]));
    let index = Arc::new(Index::new().unwrap());
    let subscriber = Subscriber::start(
        index.clone(),
        // sci-publish exits once it has published: its disconnect must not
        // clear what it sent (by default it would).
        &SubscriberOptions::new(publisher.endpoint.clone()).trust_reconnects_by_event_ids(true),
    )
    .unwrap();
    let summary = publisher.finish(PUBLISH_TIMEOUT);
    // 3 shared pages + 3 x 5 own pages, 4 objects each (tp 2: k and v per rank).
    assert_eq!(
        (
            summary.events,
            summary.subscribers,
            summary.skipped_sequences
        ),
        (72, 1, 0)
    );
    wait_applied(&index, &summary);

    let prompts: Vec<Vec<u32>> = std::fs::read_to_string(&prompts_file)
        .unwrap()
        .lines()
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            value["tokens"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_u64().unwrap() as u32)
                .collect()
        })
        .collect();
    assert_eq!(prompts.len(), 3);
    // What the workload stored is exactly what the spec derives for these prompts.
    let spec_layout = spec::Layout {
        page_size: 16,
        tp_size: 2,
        pp_size: 1,
        ..spec::Layout::default()
    };
    let mut expected_objects: Vec<(String, String)> = prompts
        .iter()
        .flat_map(|p| stored_objects(&spec_layout, p))
        .collect();
    expected_objects.sort();
    expected_objects.dedup();
    assert_eq!(expected_objects.len() as u64, summary.events);
    let stats = index.stats().unwrap();
    assert_eq!(
        (
            stats.keys,
            stats.groups,
            stats.sequence_gaps,
            stats.malformed_messages
        ),
        (72, 18, 0, 0)
    );
    assert!(stats.subscriber_connects >= 1); // the publisher has exited since
    assert!(expected_objects
        .iter()
        .all(|(key, _)| index.contains("", key).unwrap()));

    let layout = LayoutBuilder::new(16).tp_size(2).build().unwrap();
    let mut scratch = PageScratch::new();
    for tokens in &prompts {
        assert_eq!(
            hit_ranges(&index, &layout, tokens, &mut scratch),
            vec![0..8]
        );
        let warm = index
            .check_pages(&layout, tokens, 16, &mut scratch)
            .unwrap();
        assert_eq!((warm.total_hits(), warm.fast_path()), (8, 8));
    }
    // A prompt diverging inside page 5 keeps pages 0..5; one sharing only the
    // workload's common prefix keeps 0..3; an unrelated one has nothing.
    let mut diverging = prompts[0].clone();
    diverging[5 * 16 + 7] ^= 1;
    assert_eq!(
        hit_ranges(&index, &layout, &diverging, &mut scratch),
        vec![0..5]
    );
    let mut shared_only = prompts[1][..3 * 16].to_vec();
    shared_only.extend(&prompt(99, 4 * 16));
    assert_eq!(
        hit_ranges(&index, &layout, &shared_only, &mut scratch),
        vec![0..3]
    );
    assert!(hit_ranges(&index, &layout, &prompt(98, 8 * 16), &mut scratch).is_empty());
    drop(subscriber);
    assert_eq!(Arc::strong_count(&index), 1);
}

/// Script lines storing every object of `tokens`' pages.
fn store_script(layout: &spec::Layout, tokens: &[u32], script: &mut String) {
    for (key, group) in stored_objects(layout, tokens) {
        writeln!(script, "stored {} group={}", key, group).unwrap();
    }
}

#[test]
fn removals_reconnects_gaps_and_restarts_reach_the_router_exactly() {
    let tmp = TempDir::new("script");
    let endpoint = format!("tcp://127.0.0.1:{}", free_loopback_port());
    let spec_layout = spec::Layout {
        page_size: 16,
        tp_size: 2,
        pp_size: 1,
        ..spec::Layout::default()
    };
    let layout = LayoutBuilder::new(16).tp_size(2).build().unwrap();
    let [a, b, c, d] = [11u64, 12, 13, 14].map(|seed| prompt(seed, 16 * 6));

    // One subscriber follows four publisher processes in turn on one port,
    // reconnecting between them. The grace period is long: this test is
    // about sequences, not staleness, under 1.3's reconnect rule (the
    // default clears at every disconnect: the C++ suite's InvisibleRestart).
    let index = Arc::new(Index::new().unwrap());
    let options = SubscriberOptions::new(endpoint.clone())
        .reconnect(Duration::from_millis(10), Duration::from_millis(100))
        .stale_after(Duration::from_secs(600))
        .trust_reconnects_by_event_ids(true);
    let _subscriber = Subscriber::start(index.clone(), &options).unwrap();
    let mut scratch = PageScratch::new();
    // `first`: the sequence and event id to resume at (a master that goes on
    // after a blip), or a fresh master's 1 and 1.
    let run = |script: &str, file: &str, first: Option<(u64, u64)>| -> Summary {
        let path = tmp.file(file, script);
        let mut list = args(&[
            "--endpoint",
            &endpoint,
            "--script",
            &path,
            "--wait-subscribers-ms",
            "20000",
        ]);
        if let Some((sequence, event_id)) = first {
            list.extend(args(&[
                "--first-sequence",
                &sequence.to_string(),
                "--first-event-id",
                &event_id.to_string(),
            ]));
        }
        let summary = Publisher::start(&list).finish(PUBLISH_TIMEOUT);
        assert_eq!(summary.subscribers, 1, "{:?}", summary);
        wait_applied(&index, &summary);
        summary
    };

    // Run 1: A and B stored; one object of A's page 2 removed with its group
    // id; then an unlabelled removal of something else.
    let mut script = String::new();
    store_script(&spec_layout, &a, &mut script);
    store_script(&spec_layout, &b, &mut script);
    script.push_str("flush\n");
    let a_hashes = spec::page_hashes(&a, 16, false);
    let page2_key = spec_layout.keys_for(&a_hashes[2], 2, 6)[1].clone();
    writeln!(
        script,
        "removed {} group={}",
        page2_key,
        spec_layout.group_id(&a_hashes[2])
    )
    .unwrap();
    script.push_str("flush\nremoved some-other-object\n");
    let first = run(&script, "run1.txt", None);
    assert_eq!(
        hit_ranges(&index, &layout, &a, &mut scratch),
        vec![0..2, 3..6]
    );
    assert_eq!(hit_ranges(&index, &layout, &b, &mut scratch), vec![0..6]);
    let stats = index.stats().unwrap();
    assert_eq!((stats.keys, stats.sequence_gaps), (2 * 6 * 4 - 1, 0));

    // Run 2, a new publisher process continuing the sequence and the event
    // ids (the same master after a blip): a reconnect that lost nothing
    // keeps the state.
    let mut script = String::new();
    store_script(&spec_layout, &c, &mut script);
    let second = run(
        &script,
        "run2.txt",
        Some((first.last_sequence + 1, first.events + 1)),
    );
    assert_eq!(
        hit_ranges(&index, &layout, &a, &mut scratch),
        vec![0..2, 3..6]
    );
    assert_eq!(hit_ranges(&index, &layout, &b, &mut scratch), vec![0..6]);
    assert_eq!(hit_ranges(&index, &layout, &c, &mut scratch), vec![0..6]);
    assert_eq!(index.stats().unwrap().sequence_gaps, 0);
    assert_eq!(index.stats().unwrap().restarts_suspected, 0);
    assert!(index.stats().unwrap().subscriber_connects >= 2);

    // Run 3: the publisher skips two sequence numbers (its queue overflowed),
    // then stores D. Everything before the gap is gone; D is there. The batch
    // revealing the gap begins a run, whose stores the index withholds (the
    // Mooncake publisher signals a loss one batch early): here it only
    // removes, and D follows in sequence.
    let mut script = String::from("gap 2\nremoved never-stored\nflush\n");
    store_script(&spec_layout, &d, &mut script);
    let third = run(
        &script,
        "run3.txt",
        Some((second.last_sequence + 1, first.events + second.events + 1)),
    );
    assert_eq!(third.skipped_sequences, 2);
    for gone in [&a, &b, &c] {
        assert!(hit_ranges(&index, &layout, gone, &mut scratch).is_empty());
    }
    assert_eq!(hit_ranges(&index, &layout, &d, &mut scratch), vec![0..6]);
    let stats = index.stats().unwrap();
    assert_eq!(
        (stats.keys, stats.sequence_gaps, stats.stores_withheld),
        (6 * 4, 1, 0)
    );

    // Run 4: the master restarted (sequences from 1 again) and stores A.
    let mut script = String::new();
    store_script(&spec_layout, &a, &mut script);
    let fourth = run(&script, "run4.txt", None);
    assert!(hit_ranges(&index, &layout, &d, &mut scratch).is_empty());
    assert_eq!(hit_ranges(&index, &layout, &a, &mut scratch), vec![0..6]);
    let stats = index.stats().unwrap();
    assert_eq!(
        (stats.keys, stats.sequence_gaps, stats.malformed_messages),
        (6 * 4, 2, 0)
    );

    // Run 5: restarted again, and it resumes exactly at the cursor + 1 (the
    // sequence cannot show it), but its event ids start at 1: A is gone,
    // and its one batch of B begins a run (stores withheld).
    let mut script = String::new();
    store_script(&spec_layout, &b, &mut script);
    run(&script, "run5.txt", Some((fourth.last_sequence + 1, 1)));
    assert!(hit_ranges(&index, &layout, &a, &mut scratch).is_empty());
    assert!(hit_ranges(&index, &layout, &b, &mut scratch).is_empty());
    let stats = index.stats().unwrap();
    assert_eq!(
        (stats.keys, stats.sequence_gaps, stats.restarts_suspected),
        (0, 2, 1)
    );
}
