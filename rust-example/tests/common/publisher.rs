//! Runs the project's `sci-publish` (the Mooncake master stand-in) as a child
//! process: every wait is bounded, and the child is killed on every path
//! (Drop), a failed assertion included.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// `$SCI_BIN_DIR/sci-publish`; SCI_BIN_DIR defaults to the tools directory
/// of the build that provided the library (`<SCI_LIB_DIR>/src/tools`).
pub fn sci_publish() -> PathBuf {
    let dir = std::env::var_os("SCI_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("SCI_DEFAULT_BIN_DIR")));
    let path = dir.join("sci-publish");
    assert!(
        path.exists(),
        "{} not found: build it (cmake --build <build> --target sci-publish) or set SCI_BIN_DIR",
        path.display()
    );
    path
}

/// Polls `condition` until it holds or `timeout` passes; whether it held.
pub fn wait_until(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(2));
    }
}

/// A port nothing listens on right now (the OS picks it).
pub fn free_loopback_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// What sci-publish prints on stdout when it is done.
#[derive(Debug)]
pub struct Summary {
    pub messages: u64,
    pub events: u64,
    pub last_sequence: u64,
    pub skipped_sequences: u64,
    pub subscribers: u64,
}

pub struct Publisher {
    child: Child,
    /// The endpoint it bound (the real port when asked for `tcp://host:*`).
    pub endpoint: String,
    stderr_lines: mpsc::Receiver<String>,
}

impl Publisher {
    /// Starts `sci-publish <args>` and waits (bounded) until it listens.
    pub fn start(args: &[String]) -> Publisher {
        let mut child = Command::new(sci_publish())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("sci-publish starts");
        let stderr = child.stderr.take().unwrap();
        let (lines, stderr_lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let mut publisher = Publisher {
            child,
            endpoint: String::new(),
            stderr_lines,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while publisher.endpoint.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            match publisher.stderr_lines.recv_timeout(left) {
                Ok(line) => {
                    if let Ok(value) = serde_json::from_str::<serde_json::Value>(&line) {
                        if let Some(endpoint) = value.get("listening").and_then(|v| v.as_str()) {
                            publisher.endpoint = endpoint.to_string();
                        }
                    }
                }
                Err(_) => panic!(
                    "sci-publish {:?} did not report listening within 20 s",
                    args
                ),
            }
        }
        publisher
    }

    /// Waits (bounded) for it to publish everything and exit; its summary.
    pub fn finish(mut self, timeout: Duration) -> Summary {
        let mut status = None;
        let exited = wait_until(timeout, || {
            status = self.child.try_wait().expect("try_wait");
            status.is_some()
        });
        let stderr: Vec<String> = self.stderr_lines.try_iter().collect();
        assert!(
            exited,
            "sci-publish did not finish within {:?}; stderr: {:?}",
            timeout, stderr
        );
        let status = status.unwrap();
        let mut stdout = String::new();
        self.child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        assert!(
            status.success(),
            "sci-publish failed ({}); stderr: {:?}",
            status,
            stderr
        );
        let line = stdout.lines().last().unwrap_or_default();
        let value: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("summary {:?}: {}", line, e));
        let field = |name: &str| {
            value
                .get(name)
                .and_then(|v| v.as_u64())
                .unwrap_or_else(|| panic!("{} in {}", name, line))
        };
        Summary {
            messages: field("messages"),
            events: field("events"),
            last_sequence: field("last_sequence"),
            skipped_sequences: field("skipped_sequences"),
            subscribers: field("subscribers"),
        }
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        // Already exited: both fail harmlessly.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
