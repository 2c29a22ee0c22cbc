//! The library's log lines reach a Rust handler (process-wide, so alone in
//! its test binary), and a panicking handler never unwinds into C.

use std::sync::Mutex;

use shared_cache_index::{set_log_handler, Index, LogLevel};

static LINES: Mutex<Vec<(LogLevel, String)>> = Mutex::new(Vec::new());

fn record(level: LogLevel, line: &str) {
    LINES.lock().unwrap().push((level, line.to_string()));
}

fn explode(_: LogLevel, _: &str) {
    panic!("a handler that panics");
}

#[test]
fn log_lines_reach_the_handler_until_silenced() {
    let index = Index::new().unwrap();
    let malformed: [&[u8]; 1] = [b"one frame is not a message"];

    set_log_handler(Some(record));
    assert!(index.apply_message(&malformed).is_err());
    let lines = std::mem::take(&mut *LINES.lock().unwrap());
    assert!(
        !lines.is_empty(),
        "a malformed message is reported through the log callback"
    );
    assert!(
        lines.iter().any(|(level, _)| *level >= LogLevel::Warn),
        "{:?}",
        lines
    );

    // A panic inside the handler is contained; the call still returns.
    set_log_handler(Some(explode));
    assert!(index.apply_message(&malformed).is_err());

    set_log_handler(None);
    assert!(index.apply_message(&malformed).is_err());
    assert!(LINES.lock().unwrap().is_empty());
    assert_eq!(index.stats().unwrap().malformed_messages, 3);
}
