//! The router's page query through the FFI wrapper, side by side with the
//! straightforward pure-Rust index (pure-rust-index: DashSet<String> keys,
//! DashMap groups, format!-built keys, sha2), on the workloads of
//! docs/performance.md, plus the cost of crossing the FFI once.
//!
//!   cargo bench --bench ffi_vs_pure_rust      full run (1M keys; 16/169/1024 pages)
//!   cargo test  --bench ffi_vs_pure_rust      quick run (tiny sizes): stays buildable
//!                                             and checks both sides agree
//!
//! Cargo passes `--bench` to the binary under `cargo bench` only; that flag
//! (or `--full`) selects the full run. Every case first checks that both
//! indexes give the same per-page answer, so the timings compare equal work.
//! Timings: per-call medians over repeated runs; ratios come from one run.

#[path = "../tests/common/mod.rs"]
mod common;

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use common::{benchmark_layouts, prompt, stored_objects, NamedLayout, XorShift};
use pure_rust_index as spec;
use shared_cache_index::{sys, Event, Index, Layout, PageScratch};

const PAGE: usize = 64;

struct Config {
    full: bool,
    filler_keys: usize,
    page_counts: Vec<usize>,
    runs: usize,
    run_time: Duration,
    exact_calls_per_run: usize,
}

impl Config {
    fn from_args() -> Config {
        let full = std::env::args().any(|a| a == "--bench" || a == "--full");
        if full {
            Config {
                full,
                filler_keys: std::env::var("SCI_BENCH_KEYS")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(1_000_000),
                page_counts: vec![16, 169, 1024],
                runs: 9,
                run_time: Duration::from_millis(30),
                exact_calls_per_run: 5,
            }
        } else {
            Config {
                full,
                filler_keys: 5_000,
                page_counts: vec![2, 16],
                runs: 3,
                run_time: Duration::from_millis(2),
                exact_calls_per_run: 1,
            }
        }
    }
}

/// Calls per timed run so that one run lasts about `run_time`.
fn calibrate(config: &Config, call: &mut dyn FnMut()) -> u32 {
    let mut iterations = 1u32;
    loop {
        let started = Instant::now();
        (0..iterations).for_each(|_| call());
        let elapsed = started.elapsed();
        if elapsed >= config.run_time / 4 || iterations >= 1 << 22 {
            let scale = config.run_time.as_secs_f64() / elapsed.as_secs_f64().max(1e-9);
            return ((iterations as f64 * scale) as u32).max(1);
        }
        iterations *= 2;
    }
}

/// Per-call times of two calls measured side by side: runs alternate
/// between them, so both see the same machine (this one is shared and
/// noisy). Returns the median per-call time of each and the median of the
/// per-round ratios b / a.
fn side_by_side(
    config: &Config,
    a: &mut dyn FnMut(),
    b: &mut dyn FnMut(),
) -> (Duration, Duration, f64) {
    let (na, nb) = (calibrate(config, a), calibrate(config, b));
    let mut rounds: Vec<(Duration, Duration)> = (0..config.runs)
        .map(|_| {
            let started = Instant::now();
            (0..na).for_each(|_| a());
            let ta = started.elapsed() / na;
            let started = Instant::now();
            (0..nb).for_each(|_| b());
            (ta, started.elapsed() / nb)
        })
        .collect();
    medians(&mut rounds)
}

/// As `side_by_side`, for calls that each need an untimed setup first.
/// Each round times a block of (setup, call) of one side, then of the
/// other, and keeps each block's median: calls of one side follow each
/// other as they would in a router, instead of each paying for the cache
/// footprint the other side just left.
fn side_by_side_with_setup(
    config: &Config,
    (setup_a, a): (&mut dyn FnMut(), &mut dyn FnMut()),
    (setup_b, b): (&mut dyn FnMut(), &mut dyn FnMut()),
) -> (Duration, Duration, f64) {
    let block = |setup: &mut dyn FnMut(), call: &mut dyn FnMut()| {
        let mut samples: Vec<Duration> = (0..config.exact_calls_per_run)
            .map(|_| {
                setup();
                let started = Instant::now();
                call();
                started.elapsed()
            })
            .collect();
        samples.sort();
        samples[samples.len() / 2]
    };
    let mut rounds: Vec<(Duration, Duration)> = (0..config.runs)
        .map(|_| (block(&mut *setup_a, &mut *a), block(&mut *setup_b, &mut *b)))
        .collect();
    medians(&mut rounds)
}

fn medians(rounds: &mut [(Duration, Duration)]) -> (Duration, Duration, f64) {
    let mut ratios: Vec<f64> = rounds
        .iter()
        .map(|(a, b)| b.as_secs_f64() / a.as_secs_f64().max(1e-12))
        .collect();
    ratios.sort_by(|x, y| x.partial_cmp(y).unwrap());
    let mut a: Vec<Duration> = rounds.iter().map(|r| r.0).collect();
    let mut b: Vec<Duration> = rounds.iter().map(|r| r.1).collect();
    a.sort();
    b.sort();
    (a[a.len() / 2], b[b.len() / 2], ratios[ratios.len() / 2])
}

fn micros(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e6)
}

/// Both indexes, holding `filler_keys` keys of other prefixes (whole pages of
/// random hashes, with their groups) plus every object of the requests.
/// Each has its own sequence cursor, so one can be touched without the other.
struct Pair {
    ffi: Index,
    pure: spec::Index,
    ffi_sequence: Cell<u64>,
    pure_sequence: Cell<u64>,
}

fn next(sequence: &Cell<u64>) -> u64 {
    sequence.set(sequence.get() + 1);
    sequence.get()
}

impl Pair {
    fn apply(&self, batch: &[spec::Event]) {
        self.apply_ffi(batch);
        self.apply_pure(batch);
    }

    fn apply_ffi(&self, batch: &[spec::Event]) {
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
        self.ffi
            .apply_events(next(&self.ffi_sequence), &events)
            .unwrap();
    }

    fn apply_pure(&self, batch: &[spec::Event]) {
        self.pure.apply(next(&self.pure_sequence), batch);
    }
}

/// The first object of each page of `tokens`, stored again under its group:
/// a new object of a group invalidates its verification (in both indexes),
/// so the next query of the prompt takes the exact path (checks every key).
fn restore_first_objects(layout: &spec::Layout, tokens: &[u32]) -> Vec<spec::Event> {
    let mut events: Vec<spec::Event> = Vec::new();
    for (key, group) in stored_objects(layout, tokens) {
        if events.last().map_or(true, |e| e.group_id != group) {
            events.push(spec::Event::stored(&key, &group));
        }
    }
    events
}

fn build_pair(config: &Config, named: &NamedLayout, requests: &[Vec<u32>]) -> Pair {
    let pair = Pair {
        ffi: Index::new().unwrap(),
        pure: spec::Index::new(),
        ffi_sequence: Cell::new(0),
        pure_sequence: Cell::new(0),
    };
    let mut rng = XorShift::new(42);
    let mut batch = Vec::with_capacity(64);
    let mut filled = 0;
    while filled < config.filler_keys {
        let hash = format!(
            "{:016x}{:016x}{:016x}{:016x}",
            rng.next(),
            rng.next(),
            rng.next(),
            rng.next()
        );
        let group = named.spec.group_id(&hash);
        for key in named.spec.keys_for(&hash, 0, 1) {
            batch.push(spec::Event::stored(&key, &group));
            filled += 1;
        }
        if batch.len() >= 64 || filled >= config.filler_keys {
            pair.apply(&batch);
            batch.clear();
        }
    }
    for tokens in requests {
        for chunk in stored_objects(&named.spec, tokens).chunks(64) {
            batch.extend(chunk.iter().map(|(k, g)| spec::Event::stored(k, g)));
            pair.apply(&batch);
            batch.clear();
        }
    }
    pair
}

struct Row {
    layout: &'static str,
    pages: usize,
    path: &'static str,
    ffi: Duration,
    pure: Duration,
    ratio: f64,
}

/// `SCI_BENCH_LAYOUTS=tp8,mla` / `SCI_BENCH_PAGES=169` narrow a run.
fn selected<T: ToString>(variable: &str, value: T) -> bool {
    match std::env::var(variable) {
        Ok(list) if !list.is_empty() => list.split(',').any(|v| v.trim() == value.to_string()),
        _ => true,
    }
}

fn main() {
    let config = Config::from_args();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    println!(
        "# check_pages: FFI wrapper vs pure Rust ({} mode)\n\n{}, {} cores; shared-cache-index {}; {} filler keys; \
         pages of {} tokens; every page of every request hits.\n",
        if config.full { "full" } else { "quick" },
        cpu,
        cores,
        shared_cache_index::version(),
        config.filler_keys,
        PAGE
    );

    let longest = *config.page_counts.iter().max().unwrap();
    let base = prompt(7, longest * PAGE);
    let requests: Vec<Vec<u32>> = config
        .page_counts
        .iter()
        .map(|&p| base[..p * PAGE].to_vec())
        .collect();
    let mut rows = Vec::new();
    let checksum = Cell::new(0usize);
    let mut overhead_case = None;

    for named in benchmark_layouts() {
        let wanted = selected("SCI_BENCH_LAYOUTS", named.name);
        // tp8 is always built: the FFI overhead is measured on it.
        if !wanted && named.name != "tp8" {
            continue;
        }
        let pair = build_pair(&config, &named, &requests);
        let layout = named.builder.build().unwrap();
        let scratch = RefCell::new(PageScratch::with_capacity(longest));
        for tokens in requests
            .iter()
            .filter(|t| selected("SCI_BENCH_PAGES", t.len() / PAGE))
        {
            if !wanted {
                break;
            }
            let pages = tokens.len() / PAGE;
            // Same answer on both sides (and every page a hit) before timing.
            let ffi_flags = layout_flags(&pair.ffi, &layout, tokens, &mut scratch.borrow_mut());
            let pure_flags: Vec<u8> = pair
                .pure
                .check_pages(&named.spec, tokens, PAGE as u32)
                .iter()
                .map(|&h| h as u8)
                .collect();
            assert_eq!(
                ffi_flags, pure_flags,
                "{} {} pages: the two indexes disagree",
                named.name, pages
            );
            assert!(
                ffi_flags.iter().all(|&f| f == 1),
                "{} {} pages: not every page hits",
                named.name,
                pages
            );

            let mut ffi_call = || {
                let mut scratch = scratch.borrow_mut();
                let hits = pair
                    .ffi
                    .check_pages(&layout, tokens, PAGE as u32, &mut scratch)
                    .unwrap();
                checksum.set(checksum.get() + hits.total_hits());
            };
            let mut pure_call = || {
                let hits = pair.pure.check_pages(&named.spec, tokens, PAGE as u32);
                checksum.set(checksum.get() + hits.len());
            };
            // Steady state: every group already verified (the router's common case).
            let (ffi, pure, ratio) = side_by_side(&config, &mut ffi_call, &mut pure_call);
            rows.push(Row {
                layout: named.name,
                pages,
                path: "verified groups",
                ffi,
                pure,
                ratio,
            });
            // Exact path: verification dropped before each call, every key checked.
            let restore = restore_first_objects(&named.spec, tokens);
            let (ffi, pure, ratio) = side_by_side_with_setup(
                &config,
                (&mut || pair.apply_ffi(&restore), &mut ffi_call),
                (&mut || pair.apply_pure(&restore), &mut pure_call),
            );
            rows.push(Row {
                layout: named.name,
                pages,
                path: "exact keys",
                ffi,
                pure,
                ratio,
            });
        }
        if named.name == "tp8" {
            overhead_case = Some((pair, layout));
        }
    }

    // Fresh prompts: distinct prompts, each queried once per side and run.
    if selected("SCI_BENCH_LAYOUTS", "tp8") {
        rows.extend(fresh_prompt_rows(&config));
    }

    // `cargo test` runs this once at tiny sizes to keep it working: its
    // figures are no measurement, and say so wherever a ratio is printed.
    let smoke = if config.full {
        ""
    } else {
        " (smoke run: not a measurement)"
    };
    if !config.full {
        println!(
            "SMOKE RUN: tiny sizes, to keep the benchmark working; the ratios below are not \
             measurements (the targets apply to `cargo bench`).\n"
        );
    }
    println!("| layout | pages | path | FFI wrapper (µs) | pure Rust (µs) | pure Rust / FFI |");
    println!("|---|---:|---|---:|---:|---:|");
    for row in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {:.1}× |",
            row.layout,
            row.pages,
            row.path,
            micros(row.ffi),
            micros(row.pure),
            row.ratio
        );
    }

    // The cost of crossing the FFI: the same warm tp8 request (169 pages in
    // the full run) through the raw C function and through the wrapper; and
    // a request with no page (the fixed cost of one call).
    let (pair, layout) = overhead_case.expect("tp8 is a benchmark layout");
    let pages = if config.full {
        169
    } else {
        *config.page_counts.last().unwrap()
    };
    let tokens = &base[..pages * PAGE];
    let mut scratch = PageScratch::with_capacity(pages);
    let mut hits = vec![0u8; pages];
    let mut raw_call = || {
        let mut result = sys::sci_page_result {
            struct_size: std::mem::size_of::<sys::sci_page_result>() as u32,
            n_pages: 0,
            total_hits: 0,
            prefix_hits: 0,
            fast_path: 0,
            prefix_tokens: 0,
        };
        // SAFETY: live handles owned by `pair` and `layout`; `tokens` and
        // `hits` are valid for the lengths passed; `result` declares its size.
        // (The only unsafe outside the crate: it measures the bare C call.)
        let status = unsafe {
            sys::sci_index_check_pages(
                pair.ffi.as_raw(),
                layout.as_raw(),
                tokens.as_ptr(),
                tokens.len(),
                PAGE as u32,
                hits.as_mut_ptr(),
                hits.len(),
                &mut result,
            )
        };
        assert_eq!(status, sys::SCI_OK);
        checksum.set(checksum.get() + result.total_hits);
    };
    let mut wrapped_call = || {
        let hits = pair
            .ffi
            .check_pages(&layout, tokens, PAGE as u32, &mut scratch)
            .unwrap();
        checksum.set(checksum.get() + hits.total_hits());
    };
    let (raw, wrapped, wrapper_ratio) = side_by_side(&config, &mut raw_call, &mut wrapped_call);
    let mut empty_call = || {
        let mut scratch = PageScratch::new();
        let hits = pair
            .ffi
            .check_pages(&layout, &[], PAGE as u32, &mut scratch)
            .unwrap();
        checksum.set(checksum.get() + hits.n_pages());
    };
    let (empty, raw_again, empty_ratio) = side_by_side(&config, &mut empty_call, &mut raw_call);
    println!(
        "\nFFI overhead, tp8, {} pages, verified groups{}:\n",
        pages, smoke
    );
    println!("| call | per call (µs) | vs raw C call |");
    println!("|---|---:|---:|");
    println!(
        "| raw `sys::sci_index_check_pages` | {} / {} | 1 |",
        micros(raw),
        micros(raw_again)
    );
    println!(
        "| wrapper `Index::check_pages` (+ hit ranges) | {} | {:.3}× |",
        micros(wrapped),
        wrapper_ratio
    );
    println!(
        "| wrapper, empty request (the fixed cost of one call) | {} | {:.2}% |",
        micros(empty),
        100.0 / empty_ratio
    );
    println!("\n(checksum {})", checksum.get());
}

/// The router's usual request: a prompt this thread has never asked about.
/// `n` distinct tp8 prompts (169 pages in the full run) are stored on both
/// sides and their groups verified by another thread; then each round
/// queries a block of prompts it has not queried before, once each, on one
/// side and then on the other (per-call medians of each block). Enough
/// prompts that the library's per-thread digest memo (8192 pages) has
/// forgotten a prompt by the time it comes round again (256 x 169 pages),
/// so the library hashes every page, as the pure-Rust index always does.
/// The exact-path rows drop the prompt's verifications before each call
/// (untimed: `restore_first_objects`).
fn fresh_prompt_rows(config: &Config) -> Vec<Row> {
    let (pages, n_prompts, per_block) = if config.full {
        (169, 256, 24)
    } else {
        (2, 8, 2)
    };
    let named = benchmark_layouts()
        .into_iter()
        .find(|l| l.name == "tp8")
        .expect("tp8 is a benchmark layout");
    let prompts: Vec<Vec<u32>> = (0..n_prompts)
        .map(|i| prompt(1_000 + i as u64, pages * PAGE))
        .collect();
    let pair = build_pair(config, &named, &prompts);
    let layout = named.builder.build().unwrap();
    let verify = |pair: &Pair| {
        let (ffi, pure) = (&pair.ffi, &pair.pure);
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let mut scratch = PageScratch::with_capacity(pages);
                for tokens in &prompts {
                    ffi.check_pages(&layout, tokens, PAGE as u32, &mut scratch)
                        .unwrap();
                    pure.check_pages(&named.spec, tokens, PAGE as u32);
                }
            });
        });
    };
    let mut scratch = PageScratch::with_capacity(pages);
    let mut rows = Vec::new();
    for exact in [false, true] {
        verify(&pair);
        let mut next_prompt = 0usize;
        let mut rounds = Vec::new();
        for _ in 0..config.runs {
            let block: Vec<&Vec<u32>> = (0..per_block)
                .map(|i| &prompts[(next_prompt + i) % n_prompts])
                .collect();
            next_prompt += per_block;
            let mut ffi_times = Vec::new();
            for tokens in &block {
                if exact {
                    pair.apply_ffi(&restore_first_objects(&named.spec, tokens));
                }
                let started = Instant::now();
                let hits = pair
                    .ffi
                    .check_pages(&layout, tokens, PAGE as u32, &mut scratch)
                    .unwrap();
                ffi_times.push(started.elapsed());
                assert_eq!(hits.total_hits(), pages, "fresh tp8: not every page hits (FFI)");
                assert_eq!(hits.summary().fast_path, pages); // 1.4: every hit reads one page entry
            }
            let mut pure_times = Vec::new();
            for tokens in &block {
                if exact {
                    pair.apply_pure(&restore_first_objects(&named.spec, tokens));
                }
                let started = Instant::now();
                let hits = pair.pure.check_pages(&named.spec, tokens, PAGE as u32);
                pure_times.push(started.elapsed());
                assert!(hits.iter().all(|&h| h), "fresh tp8: not every page hits (pure Rust)");
            }
            ffi_times.sort();
            pure_times.sort();
            rounds.push((ffi_times[ffi_times.len() / 2], pure_times[pure_times.len() / 2]));
        }
        let (ffi, pure, ratio) = medians(&mut rounds);
        rows.push(Row {
            layout: "tp8",
            pages,
            path: if exact {
                "exact keys, fresh prompts"
            } else {
                "verified groups, fresh prompts"
            },
            ffi,
            pure,
            ratio,
        });
    }
    rows
}

fn layout_flags(
    index: &Index,
    layout: &Layout,
    tokens: &[u32],
    scratch: &mut PageScratch,
) -> Vec<u8> {
    index
        .check_pages(layout, tokens, PAGE as u32, scratch)
        .unwrap()
        .flags()
        .to_vec()
}
