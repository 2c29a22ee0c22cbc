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

#[test]
fn dropped_subscribers_leave_no_thread_behind() {
    let index = Arc::new(Index::new().unwrap());
    let options = SubscriberOptions::new("tcp://127.0.0.1:9");
    // The first start may create the library's process-wide ZeroMQ context
    // threads: count from after it.
    drop(Subscriber::start(index.clone(), &options).unwrap());
    let baseline = thread_count();
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
    assert_eq!(thread_count(), baseline);
    assert_eq!(Arc::strong_count(&index), 1);
}
