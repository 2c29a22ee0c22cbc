//! A log handler may drop the Subscriber whose thread is calling it, holding
//! the last `Arc<Index>` too: no abort (the thread does not join itself), no
//! use after free (the library keeps the index alive until the thread is
//! gone), and the thread really exits. Also: one subscriber per index.
//! (Alone in its test binary: the handler is process-wide and the test
//! counts the process's threads.)
//!
//! A line on the subscriber's own thread needs no publisher: the index holds
//! a batch, the subscriber points at a port nobody listens on, and after the
//! grace it clears the index and logs so, from its thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use shared_cache_index::{
    set_log_handler, Event, Index, LogLevel, Status, Subscriber, SubscriberOptions,
};

const NOBODY_LISTENS: &str = "tcp://127.0.0.1:9";

static SUBSCRIBER: Mutex<Option<Subscriber>> = Mutex::new(None);
static DROPPED_ON: Mutex<Option<ThreadId>> = Mutex::new(None);
static DROPPED: AtomicBool = AtomicBool::new(false);

fn drop_own_subscriber(_: LogLevel, line: &str) {
    if !line.contains("index cleared") {
        return;
    }
    let subscriber = SUBSCRIBER.lock().unwrap().take();
    if let Some(subscriber) = subscriber {
        drop(subscriber); // the stop, then the last Arc<Index>: sci_index_free
        *DROPPED_ON.lock().unwrap() = Some(thread::current().id());
        DROPPED.store(true, Ordering::SeqCst);
    }
}

fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .count()
}

fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while !condition() {
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(2));
    }
    true
}

fn stale_quickly() -> SubscriberOptions {
    SubscriberOptions::new(NOBODY_LISTENS).stale_after(Duration::from_millis(20))
}

#[test]
fn a_handler_drops_its_own_subscriber_and_the_last_index() {
    let baseline = thread_count();
    let index = Arc::new(Index::new().unwrap());
    index.apply_events(1, &[Event::stored("k")]).unwrap();
    set_log_handler(Some(drop_own_subscriber));
    {
        // The handler waits for this lock, so it finds the subscriber stored.
        let mut slot = SUBSCRIBER.lock().unwrap();
        *slot = Some(Subscriber::start(index, &stale_quickly()).unwrap()); // the only Arc
    }
    assert!(
        wait_until(Duration::from_secs(10), || DROPPED.load(Ordering::SeqCst)),
        "the handler never dropped the subscriber"
    );
    assert_ne!(*DROPPED_ON.lock().unwrap(), Some(thread::current().id()));
    assert!(
        wait_until(Duration::from_secs(10), || thread_count() == baseline),
        "{} threads, {} before: the stopped subscriber's thread did not exit",
        thread_count(),
        baseline
    );
    set_log_handler(None);

    // One subscriber per index; after a drop it takes another.
    let index = Arc::new(Index::new().unwrap());
    let first = Subscriber::start(index.clone(), &stale_quickly()).unwrap();
    let refused = Subscriber::start(index.clone(), &stale_quickly()).unwrap_err();
    assert_eq!(refused.status(), Status::InvalidArgument);
    assert!(
        refused.message().contains("already has a subscriber"),
        "{}",
        refused.message()
    );
    drop(first);
    drop(Subscriber::start(index, &stale_quickly()).unwrap());
}
