//! The router's side of the demo (scripts/demo.sh): follow a Mooncake
//! publisher over ZeroMQ, then ask, for a handful of prompts, which pages are
//! already in the shared pool, how they group into ranges, how long the
//! query took, and what the index counted.
//!
//!   router_demo --endpoint tcp://127.0.0.1:5557 --layout-json layout.json \
//!               --prompts prompts.jsonl [--published summary.json] [--timeout-s 60]
//!
//! `--prompts` is what `sci-publish --prompts-out` wrote (one JSON line per
//! prompt: {"prompt":p,"tokens":[...]}). The demo waits until every
//! published prompt hits (its master keeps running, as a real one does), or
//! with `--published` (the summary a publisher that exits prints) until the
//! index has applied its last sequence; every wait is bounded.
//!
//! The failover act follows the Mooncake HA leader named in etcd instead,
//! resyncing from its snapshot, and plays a crash:
//!
//!   router_demo --etcd http://127.0.0.1:2379 --event-port 5557 --admin-port 9003 \
//!               --layout-json layout.json --prompts prompts.jsonl --kill-leader-pid PID
//!
//! It waits until every published prompt hits, prints the table, SIGKILLs the
//! leader (PID, a sci-publish), prints each change it sees while the standby
//! takes over and the subscriber follows it (hits gone, then back after the
//! resync), and prints the table again.
//!
//! When `--layout-json` is a vLLM MooncakeStoreConnector descriptor, the
//! router registers it under a cache namespace (`--cache-namespace`, default
//! `Qwen3-8B`) in a `SharedCacheIndex` and prints Dynamo's answer per
//! prompt: the blocks of the longest prefix every KV-cache group holds.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use shared_cache_index::{
    Index, Layout, LayoutFamily, PageHits, PageScratch, RequestExtras, SharedCacheIndex, Stats,
    Subscriber, SubscriberOptions,
};

struct Args {
    endpoint: String,
    layout_json: String,
    prompts: String,
    published: Option<String>,
    cache_namespace: String,
    timeout: Duration,
    failover: Option<Failover>,
}

/// The failover act's flags.
struct Failover {
    etcd: String,
    event_port: u16,
    admin_port: u16,
    kill_leader_pid: u32,
}

fn parse_args() -> Result<Args, String> {
    let mut values: HashMap<String, String> = HashMap::new();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let name = flag
            .strip_prefix("--")
            .ok_or_else(|| format!("unexpected argument {:?}", flag))?;
        if name == "help" {
            return Err(String::new());
        }
        let value = args
            .next()
            .ok_or_else(|| format!("--{} needs a value", name))?;
        values.insert(name.to_string(), value);
    }
    let mut take = |name: &str| values.remove(name);
    let failover = match take("etcd") {
        None => None,
        Some(etcd) => {
            let mut number = |name: &str| -> Result<u32, String> {
                let value = take(name).ok_or_else(|| format!("--etcd needs --{}", name))?;
                value.parse().map_err(|_| format!("bad --{} {:?}", name, value))
            };
            let port = |value: u32, name: &str| {
                u16::try_from(value).map_err(|_| format!("bad --{} {}", name, value))
            };
            Some(Failover {
                etcd,
                event_port: port(number("event-port")?, "event-port")?,
                admin_port: port(number("admin-port")?, "admin-port")?,
                kill_leader_pid: number("kill-leader-pid")?,
            })
        }
    };
    let args = Args {
        endpoint: if failover.is_some() {
            take("endpoint").unwrap_or_default()
        } else {
            take("endpoint").ok_or("--endpoint is required")?
        },
        layout_json: take("layout-json").ok_or("--layout-json is required")?,
        prompts: take("prompts").ok_or("--prompts is required")?,
        published: take("published"),
        cache_namespace: take("cache-namespace").unwrap_or_else(|| "Qwen3-8B".into()),
        timeout: Duration::from_secs(take("timeout-s").map_or(Ok(60), |v| {
            v.parse().map_err(|_| format!("bad --timeout-s {:?}", v))
        })?),
        failover,
    };
    if let Some(unknown) = values.keys().next() {
        return Err(format!("unknown flag --{}", unknown));
    }
    Ok(args)
}

fn read_prompts(path: &str) -> Result<Vec<Vec<u32>>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {}", path, e))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let value: serde_json::Value =
                serde_json::from_str(line).map_err(|e| format!("{}: {}", path, e))?;
            value["tokens"]
                .as_array()
                .ok_or_else(|| format!("{}: a line without \"tokens\"", path))?
                .iter()
                .map(|t| {
                    t.as_u64()
                        .and_then(|t| u32::try_from(t).ok())
                        .ok_or_else(|| format!("{}: bad token {}", path, t))
                })
                .collect()
        })
        .collect()
}

/// Polls until `ready` returns a value or `timeout` passes.
fn wait_for<T>(timeout: Duration, mut ready: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = ready() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

fn published_last_sequence(path: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let value: serde_json::Value = serde_json::from_str(text.lines().last()?).ok()?;
    value["last_sequence"].as_u64()
}

fn format_ranges(hits: &PageHits<'_>) -> String {
    if hits.ranges().is_empty() {
        return "-".into();
    }
    hits.ranges()
        .iter()
        .map(|r| format!("{}..{}", r.start, r.end))
        .collect::<Vec<_>>()
        .join(", ")
}

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// One prompt the router is asked to place.
struct Query {
    what: String,
    tokens: Vec<u32>,
    block_size: u32,
}

fn run(args: Args) -> Result<(), String> {
    let error = |e: shared_cache_index::Error| e.to_string();
    println!(
        "shared-cache-index {} (ABI {})",
        shared_cache_index::version(),
        shared_cache_index::abi_version()
    );
    let layout_text = std::fs::read_to_string(&args.layout_json)
        .map_err(|e| format!("{}: {}", args.layout_json, e))?;
    let layout = Layout::from_json(&layout_text).map_err(error)?;
    println!(
        "layout: {}",
        layout_text.split_whitespace().collect::<Vec<_>>().join(" ")
    );
    let page = layout.page_size();

    let index = Arc::new(Index::new().map_err(error)?);
    let started = Instant::now();
    let options = match &args.failover {
        None => SubscriberOptions::new(args.endpoint.clone()),
        // A snapshot at most every 200 ms: the demo's master is on loopback.
        Some(f) => SubscriberOptions::follow_leader(f.etcd.clone(), f.event_port, f.admin_port)
            .resync_min_interval(Duration::from_millis(200)),
    };
    let subscriber = Subscriber::start(index.clone(), &options).map_err(error)?;
    match &args.failover {
        None => println!("following {}", args.endpoint),
        Some(f) => println!(
            "following the Mooncake leader named in etcd ({}): events on port {}, snapshot on port {}",
            f.etcd, f.event_port, f.admin_port
        ),
    }

    let prompts = wait_for(args.timeout, || {
        read_prompts(&args.prompts).ok().filter(|p| !p.is_empty())
    })
    .ok_or_else(|| format!("no prompts in {} after {:?}", args.prompts, args.timeout))?;
    let mut scratch = PageScratch::with_capacity(prompts[0].len() / page as usize + 32);
    if args.failover.is_some() || args.published.is_none() {
        // The master keeps running (as a real one does: its exit would be a
        // disconnect, which clears the index by default): wait until the
        // stream (and, following a leader, its snapshot) has brought every
        // published prompt in.
        let failover = args.failover.is_some();
        wait_for(args.timeout, || {
            let resynced = !failover || index.stats().ok().map_or(false, |s| s.resyncs > 0 && !s.resyncing);
            (resynced && all_hit(&index, &layout, &prompts, &mut scratch)).then_some(())
        })
        .ok_or_else(|| format!("the published prompts did not all hit within {:?}: {:?}", args.timeout, index.stats()))?;
    }
    if let Some(published) = &args.published {
        let last = wait_for(args.timeout, || published_last_sequence(published))
            .ok_or_else(|| format!("the publisher did not finish within {:?}", args.timeout))?;
        wait_for(args.timeout, || {
            (index.stats().ok()?.last_sequence == Some(last)).then_some(())
        })
        .ok_or_else(|| {
            format!(
                "sequence {} not applied within {:?}: {:?}",
                last,
                args.timeout,
                index.stats()
            )
        })?;
    }
    let stats = index.stats().map_err(error)?;
    println!(
        "applied {} events in {} batches (last sequence {}) in {:.0} ms: {} keys, {} groups\n",
        stats.events_applied,
        stats.batches_applied,
        stats.last_sequence.map_or("-".into(), |s| s.to_string()),
        started.elapsed().as_secs_f64() * 1e3,
        stats.keys,
        stats.groups
    );

    if layout.family() == LayoutFamily::Vllm {
        let mut cache = SharedCacheIndex::new(index.clone());
        cache.register_layout(Some(&args.cache_namespace), layout);
        println!(
            "vLLM layout registered under cache namespace {:?}: block size {}\n",
            args.cache_namespace, page
        );
        print_vllm_table(&cache, &args.cache_namespace, &prompts, page)?;
        println!(
            "\nDynamo's answer: the blocks of the longest prefix whose every chunk is in the pool\n\
             (each chunk: one object per key prefix, here one per TP rank), computed from the tokens\n\
             (vLLM's block-hash chain); the request's last token is never credited."
        );
        drop(subscriber);
        print_counters(&index.stats().map_err(error)?);
        return Ok(());
    }

    // A handful of requests a router sees: the published prompts, an edit in
    // the middle of one, a new question on the shared prefix, a stranger, and
    // a misconfigured block size.
    let first = &prompts[0];
    let pages = first.len() / page as usize;
    let mut queries: Vec<Query> = prompts
        .iter()
        .enumerate()
        .map(|(i, tokens)| Query {
            what: format!("published prompt {}", i),
            tokens: tokens.clone(),
            block_size: page,
        })
        .collect();
    let edit_page = pages * 3 / 4;
    let mut edited = first.clone();
    edited[edit_page * page as usize + 1] ^= 0x5a5a;
    queries.push(Query {
        what: format!("prompt 0, edited in page {}", edit_page),
        tokens: edited,
        block_size: page,
    });
    let shared = common_prefix_pages(&prompts, page as usize);
    let mut follow_up = first[..shared * page as usize].to_vec();
    follow_up.extend((0..20 * page).map(|t| 31_000 - t % 1000));
    queries.push(Query {
        what: format!("{} shared pages + a new question", shared),
        tokens: follow_up,
        block_size: page,
    });
    queries.push(Query {
        what: "an unrelated prompt".into(),
        tokens: (0..pages as u32 * page).collect(),
        block_size: page,
    });
    queries.push(Query {
        what: format!("prompt 0 at block size {}", page / 2),
        tokens: first.clone(),
        block_size: page / 2,
    });

    print_table(&index, &layout, &queries, &mut scratch)?;
    println!(
        "\nhit ranges: runs of consecutive pages whose every object is in the pool. Every query\n\
         reads one page entry a page (the fast path), the first as the later ones."
    );
    if let Some(failover) = &args.failover {
        fail_over(&index, &layout, &prompts, &queries, failover, args.timeout, &mut scratch)?;
    }
    drop(subscriber);
    print_counters(&index.stats().map_err(error)?);
    Ok(())
}

/// Whether every page of every prompt is in the pool.
fn all_hit(index: &Index, layout: &Layout, prompts: &[Vec<u32>], scratch: &mut PageScratch) -> bool {
    prompts.iter().all(|tokens| {
        index
            .check_pages(layout, tokens, layout.page_size(), scratch)
            .map_or(false, |hits| hits.total_hits() == hits.n_pages())
    })
}

/// The failover act: the leader crashes (SIGKILL); its lease expires, the
/// standby wins the election and the subscriber follows it. Prints every
/// change of (hits of prompt 0, resyncing, leader changes) on the way, then
/// the table again.
fn fail_over(
    index: &Index,
    layout: &Layout,
    prompts: &[Vec<u32>],
    queries: &[Query],
    failover: &Failover,
    timeout: Duration,
    scratch: &mut PageScratch,
) -> Result<(), String> {
    let error = |e: shared_cache_index::Error| e.to_string();
    let before = index.stats().map_err(error)?;
    println!(
        "\n== the master fails over: SIGKILL to the leader (pid {}); its 5 s lease must expire first",
        failover.kill_leader_pid
    );
    let killed = Instant::now();
    let status = std::process::Command::new("kill")
        .args(["-KILL", &failover.kill_leader_pid.to_string()])
        .status()
        .map_err(|e| format!("kill: {}", e))?;
    if !status.success() {
        return Err(format!("could not kill the leader (pid {})", failover.kill_leader_pid));
    }
    let pages = prompts[0].len() / layout.page_size() as usize;
    let mut shown = None;
    loop {
        let stats = index.stats().map_err(error)?;
        let hits = index
            .check_pages(layout, &prompts[0], layout.page_size(), scratch)
            .map_err(error)?
            .total_hits();
        let state = (hits, stats.resyncing, stats.leader_changes);
        if shown != Some(state) {
            println!(
                "  +{:5.2} s  leader changes {}  resyncing {:<3}  prompt 0: {:>3}/{} pages hit",
                killed.elapsed().as_secs_f64(),
                stats.leader_changes,
                if stats.resyncing { "yes" } else { "no" },
                hits,
                pages
            );
            shown = Some(state);
        }
        if stats.leader_changes > before.leader_changes
            && stats.resyncs > before.resyncs
            && !stats.resyncing
            && all_hit(index, layout, prompts, scratch)
        {
            break;
        }
        if killed.elapsed() > timeout {
            return Err(format!("the hits did not come back within {:?}: {:?}", timeout, stats));
        }
        thread::sleep(Duration::from_millis(1));
    }
    let stats = index.stats().map_err(error)?;
    println!(
        "hits restored {:.2} s after the kill: the new leader's snapshot ({} keys) loaded, its stream caught up\n",
        killed.elapsed().as_secs_f64(),
        stats.snapshot_keys
    );
    print_table(index, layout, queries, scratch)
}

/// The table: for each query, pages, hits, hit ranges and query times.
fn print_table(index: &Index, layout: &Layout, queries: &[Query], scratch: &mut PageScratch) -> Result<(), String> {
    let error = |e: shared_cache_index::Error| e.to_string();
    println!("| request | pages | hit | hit ranges | first query | warm query (median) | fast path (warm) |");
    println!("|---|---:|---:|---|---:|---:|---:|");
    for query in queries {
        let t0 = Instant::now();
        let cold = index
            .check_pages(layout, &query.tokens, query.block_size, scratch)
            .map_err(error)?
            .summary();
        let cold_time = t0.elapsed();
        let mut times: Vec<Duration> = (0..101)
            .map(|_| {
                let t = Instant::now();
                let _ = index.check_pages(layout, &query.tokens, query.block_size, scratch);
                t.elapsed()
            })
            .collect();
        times.sort();
        let warm = index
            .check_pages(layout, &query.tokens, query.block_size, scratch)
            .map_err(error)?;
        assert_eq!(
            warm.total_hits(),
            cold.total_hits,
            "nothing changed between the two queries"
        );
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            query.what,
            warm.n_pages(),
            warm.total_hits(),
            format_ranges(&warm),
            micros(cold_time),
            micros(times[times.len() / 2]),
            warm.fast_path()
        );
    }
    Ok(())
}

/// The vLLM act's table: Dynamo's answer (`check_blocks`, one range
/// `0..L`) for the published prompts, an edit, a LoRA request and a stranger.
fn print_vllm_table(
    cache: &SharedCacheIndex,
    namespace: &str,
    prompts: &[Vec<u32>],
    block: u32,
) -> Result<(), String> {
    let error = |e: shared_cache_index::Error| e.to_string();
    let first = &prompts[0];
    let blocks = first.len() / block as usize;
    let mut queries: Vec<(String, Vec<u32>, RequestExtras)> = prompts
        .iter()
        .enumerate()
        .map(|(i, tokens)| (format!("published prompt {}", i), tokens.clone(), RequestExtras::none()))
        .collect();
    let edit_block = blocks * 3 / 4;
    let mut edited = first.clone();
    edited[edit_block * block as usize + 1] ^= 0x5a5a;
    queries.push((format!("prompt 0, edited in block {}", edit_block), edited, RequestExtras::none()));
    queries.push((
        "prompt 0 with LoRA \"sql-adapter\"".into(),
        first.clone(),
        RequestExtras::none().lora("sql-adapter"),
    ));
    queries.push(("an unrelated prompt".into(), (0..first.len() as u32).collect(), RequestExtras::none()));
    println!("| request | tokens | blocks | Dynamo's answer | hit range | tokens loaded | first query | warm query (median) |");
    println!("|---|---:|---:|---:|---|---:|---:|---:|");
    for (what, tokens, extras) in &queries {
        let ask = || cache.check_blocks_with_extras(tokens, block, extras, Some(namespace));
        let t0 = Instant::now();
        let cold = ask().map_err(error)?;
        let cold_time = t0.elapsed();
        let mut times: Vec<Duration> = (0..101)
            .map(|_| {
                let t = Instant::now();
                let _ = ask();
                t.elapsed()
            })
            .collect();
        times.sort();
        let warm = ask().map_err(error)?;
        assert_eq!(warm, cold, "nothing changed between the two queries");
        let range = warm
            .ranges
            .first()
            .map_or("-".to_string(), |r| format!("{}..{}", r.start, r.end));
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            what,
            tokens.len(),
            tokens.len() / block as usize,
            warm.total_hits,
            range,
            warm.prefix_tokens,
            micros(cold_time),
            micros(times[times.len() / 2])
        );
    }
    Ok(())
}

fn common_prefix_pages(prompts: &[Vec<u32>], page: usize) -> usize {
    let first = &prompts[0];
    let tokens = (0..first.len())
        .take_while(|&i| prompts.iter().all(|p| p.get(i) == Some(&first[i])))
        .count();
    tokens / page
}

fn print_counters(s: &Stats) {
    println!("\nindex counters:");
    let rows: [(&str, String); 19] = [
        ("keys", s.keys.to_string()),
        ("page entries", s.groups.to_string()),
        ("batches applied", s.batches_applied.to_string()),
        ("events applied", s.events_applied.to_string()),
        (
            "last sequence",
            s.last_sequence.map_or("-".into(), |v| v.to_string()),
        ),
        ("sequence gaps", s.sequence_gaps.to_string()),
        ("duplicate batches", s.duplicate_batches.to_string()),
        ("malformed messages", s.malformed_messages.to_string()),
        ("messages received", s.messages_received.to_string()),
        (
            "subscriber connects / disconnects",
            format!("{} / {}", s.subscriber_connects, s.subscriber_disconnects),
        ),
        ("queries", s.queries.to_string()),
        ("pages checked", s.pages_checked.to_string()),
        ("page hits", s.page_hits.to_string()),
        ("fast-path hits", s.fast_path_hits.to_string()),
        ("resyncs (failures)", format!("{} ({})", s.resyncs, s.resync_failures)),
        ("snapshot keys (last resync)", s.snapshot_keys.to_string()),
        (
            "tenant clears / removals kept",
            format!("{} / {}", s.tenant_clears, s.medium_removals_kept),
        ),
        ("resyncing", s.resyncing.to_string()),
        ("leader changes", s.leader_changes.to_string()),
    ];
    for (name, value) in rows.iter() {
        println!("  {:<34} {}", name, value);
    }
}

fn main() -> ExitCode {
    match parse_args() {
        Err(message) => {
            if !message.is_empty() {
                eprintln!("router_demo: {}", message);
            }
            eprintln!(
                "usage: router_demo --endpoint E --layout-json FILE --prompts FILE [--published FILE] [--cache-namespace NS] [--timeout-s N]\n       \
                 router_demo --etcd ENDPOINTS --event-port P --admin-port A --kill-leader-pid PID \\\n                   \
                 --layout-json FILE --prompts FILE [--timeout-s N]"
            );
            ExitCode::from(2)
        }
        Ok(args) => match run(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(message) => {
                eprintln!("router_demo: {}", message);
                ExitCode::FAILURE
            }
        },
    }
}
