//! Dropping a Subscriber stops its thread (joined, socket closed), promptly,
//! even when the publisher it was told to follow never answers. (Alone in its
//! test binary: it counts the process's threads.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use shared_cache_index::{Index, Subscriber, SubscriberOptions};

fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .count()
}

/// The thread count once no thread is still on its way out: a joined
/// thread can stay listed in /proc/self/task for a moment after the join
/// returns (the kernel reaps it just after waking the joiner), so a count
/// taken right after a drop may include it. Polls, bounded.
fn settled_thread_count() -> usize {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = thread_count();
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let now = thread_count();
        if now == last || Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

/// Waits (bounded) for the thread count to come back to `baseline`.
fn await_thread_count(baseline: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    while thread_count() != baseline && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    thread_count()
}

#[test]
fn dropped_subscribers_leave_no_thread_behind() {
    let index = Arc::new(Index::new().unwrap());
    let options = SubscriberOptions::new("tcp://127.0.0.1:9");
    // The first start may create the library's process-wide ZeroMQ context
    // threads: count from after it.
    drop(Subscriber::start(index.clone(), &options).unwrap());
    let baseline = settled_thread_count();
    for _ in 0..20 {
        let subscribers: Vec<Subscriber> = (0..3)
            .map(|_| Subscriber::start(Arc::new(Index::new().unwrap()), &options).unwrap())
            .collect();
        assert!(thread_count() > baseline);
        let started = Instant::now();
        drop(subscribers);
        // "Returns promptly" is the contract; the bound only catches a hang.
        assert!(started.elapsed() < Duration::from_secs(10));
    }
    assert_eq!(await_thread_count(baseline), baseline);
    assert_eq!(Arc::strong_count(&index), 1);
}
