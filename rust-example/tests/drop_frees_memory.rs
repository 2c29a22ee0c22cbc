//! Dropping an Index or a Layout frees what the library allocated for it:
//! create/fill/drop cycles keep the process's resident memory flat, where a
//! leak would grow it by one index per cycle. (Alone in its test binary, so
//! no other test's allocations blur the measure.)

use shared_cache_index::{Event, Index, LayoutBuilder, Pool};

fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS line");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("VmRSS value");
    kib * 1024
}

fn filled_index(keys: usize) -> Index {
    let index = Index::new().unwrap();
    let mut names = Vec::with_capacity(1000);
    for (sequence, batch) in (0..keys).collect::<Vec<_>>().chunks(1000).enumerate() {
        names.clear();
        names.extend(batch.iter().map(|i| format!("object-key-{:08}_0_k", i)));
        let events: Vec<Event> = names.iter().map(|n| Event::stored(n).group(n)).collect();
        index.apply_events(sequence as u64 + 1, &events).unwrap();
    }
    assert_eq!(index.stats().unwrap().keys, keys as u64);
    index
}

#[test]
fn dropped_indexes_and_layouts_give_their_memory_back() {
    const KEYS: usize = 200_000;
    const CYCLES: u64 = 10;
    let before = resident_bytes();
    let one = filled_index(KEYS);
    let one_index = resident_bytes().saturating_sub(before);
    drop(one);
    assert!(
        one_index > 4 << 20,
        "an index of {} keys should take megabytes, measured {} bytes",
        KEYS,
        one_index
    );

    for _ in 0..CYCLES {
        drop(filled_index(KEYS));
    }
    for i in 0..20_000u32 {
        let layout = LayoutBuilder::new(64)
            .tp_size(1 + i % 8)
            .key_prefix(format!("model-{}", i))
            .pool(Pool::all_pages(["__k", "__v"]))
            .pool(Pool::trailing_pages(4, ["__swa"]))
            .build()
            .unwrap();
        drop(layout);
    }
    let growth = resident_bytes().saturating_sub(before);
    // A leak would add ~CYCLES indexes; freed memory is reused instead.
    assert!(
        growth < 3 * one_index,
        "resident memory grew by {} bytes over {} cycles; one index is {} bytes",
        growth,
        CYCLES,
        one_index
    );
}
