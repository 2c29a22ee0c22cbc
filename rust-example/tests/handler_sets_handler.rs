//! A log handler may install another handler: it takes effect once the
//! handler returns (no deadlock), and a line logged from inside the handler
//! still reaches it. (Alone in its test binary: the handler is process-wide.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use shared_cache_index::{set_log_handler, Index, LogLevel};

static FIRST: AtomicUsize = AtomicUsize::new(0);
static SECOND: AtomicUsize = AtomicUsize::new(0);

const MALFORMED: [&[u8]; 1] = [b"one frame is not a message"];

fn first(_: LogLevel, _: &str) {
    if FIRST.fetch_add(1, Ordering::SeqCst) > 0 {
        return;
    }
    set_log_handler(Some(second));
    // Still this handler's turn: this line comes here again.
    assert!(Index::new().unwrap().apply_message(&MALFORMED).is_err());
}

fn second(_: LogLevel, _: &str) {
    SECOND.fetch_add(1, Ordering::SeqCst);
}

/// Runs `body` on another thread; a deadlock fails the test instead of
/// hanging it.
fn within_bound(body: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    thread::spawn(move || {
        body();
        let _ = done.send(());
    });
    finished
        .recv_timeout(Duration::from_secs(20))
        .expect("deadlock: the call did not return within 20 s");
}

#[test]
fn a_handler_set_from_a_handler_takes_effect_after_it_returns() {
    set_log_handler(Some(first));
    within_bound(|| assert!(Index::new().unwrap().apply_message(&MALFORMED).is_err()));
    assert_eq!(FIRST.load(Ordering::SeqCst), 2);
    assert_eq!(SECOND.load(Ordering::SeqCst), 0);
    within_bound(|| assert!(Index::new().unwrap().apply_message(&MALFORMED).is_err()));
    assert_eq!(FIRST.load(Ordering::SeqCst), 2);
    assert_eq!(SECOND.load(Ordering::SeqCst), 1);
    set_log_handler(None);
}
