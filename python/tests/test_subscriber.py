"""The live subscription over loopback ZeroMQ, driven by the project's
sci-publish: a workload followed live, a resync from the admin server's
snapshot (at start, after a clear, after a retarget), the lifetimes, and the
library's log lines reaching Python's logging from the library's threads."""

from __future__ import annotations

import gc
import logging
import socket
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from typing import Any, Callable

import pytest

import shared_cache_index as sci
from conftest import PYTHON_DIR, SGLANG_TP8_JSON, Publisher, read_prompts, wait_until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_follows_the_sglang_workload_of_sci_publish(publisher: Callable[..., Publisher], tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="shared_cache_index")
    p = publisher("--endpoint", "tcp://127.0.0.1:*", "--workload", "--page-size", "16", "--tp", "2",
                  "--prompts", "3", "--pages", "8", "--shared-prefix-pages", "3", "--seed", "7",
                  "--prompts-out", str(tmp_path / "prompts.jsonl"), "--wait-subscribers-ms", "20000")
    ix = sci.Index()
    index_ref = weakref.ref(ix)
    # sci-publish exits once it has published: its disconnect must not clear
    # what it sent (by default it would).
    sub = sci.Subscriber(ix, p.endpoint, reconnect_policy="event-ids")
    del ix  # the subscriber keeps its index alive
    gc.collect()
    assert index_ref() is sub.index
    summary = p.finish()
    # 3 shared pages + 3 x 5 own pages, 4 objects each (tp 2: k and v per rank).
    assert (summary["events"], summary["subscribers"], summary["skipped_sequences"]) == (72, 1, 0)
    ix = sub.index
    wait_until(lambda: ix.stats()["last_sequence"] == summary["last_sequence"], 30, "the last batch")
    s = sub.stats()
    assert (s["keys"], s["groups"], s["sequence_gaps"], s["malformed_messages"]) == (72, 18, 0, 0)
    assert s["subscriber_connects"] >= 1 and s["messages_received"] == summary["messages"]

    lay = sci.Layout(16, tp_size=2)
    prompts = read_prompts(tmp_path / "prompts.jsonl")
    for tokens in prompts:
        assert ix.check_pages(lay, tokens).ranges() == [(0, 8)]
        warm = ix.check_pages(lay, tokens)
        assert (warm.total_hits, warm.fast_path, warm.prefix_hits) == (8, 8, 8)
    diverging = list(prompts[0])
    diverging[5 * 16 + 7] ^= 1
    assert ix.check_pages(lay, diverging).ranges() == [(0, 5)]
    assert ix.check_prefix(lay, prompts[1][: 3 * 16] + list(range(4 * 16))) == 3

    sub.stop()
    assert not sub.running and ix.stats()["subscriber_connected"] == 0
    assert ix.check_prefix(lay, prompts[0]) == 8  # the index keeps its contents
    del sub, ix
    gc.collect()
    assert index_ref() is None  # stopped and dropped: nothing keeps the index

    # The library's own lines, logged from its subscriber thread.
    lines = [r for r in caplog.records if r.name == "shared_cache_index"]
    assert any(r.thread != threading.main_thread().ident for r in lines), [r.getMessage() for r in lines]


def test_resyncs_from_the_snapshot_at_start_after_a_clear_and_after_a_retarget(
        publisher: Callable[..., Publisher], tmp_path: Path) -> None:
    # A master that holds a workload it restored (listed by its admin
    # server, never announced on the stream) and stays up with live traffic:
    # only a resync can bring those pages to the router.
    (tmp_path / "layout.json").write_text(SGLANG_TP8_JSON)
    p = publisher("--endpoint", "tcp://127.0.0.1:*", "--admin-port", "0", "--keep-running", "--live-every-ms", "50",
                  "--restore-workload", "--layout-json", str(tmp_path / "layout.json"), "--prompts", "2",
                  "--pages", "10", "--shared-prefix-pages", "3", "--seed", "5",
                  "--prompts-out", str(tmp_path / "prompts.jsonl"))
    assert p.admin is not None
    snapshot = p.admin + "/get_all_keys"
    prompts = read_prompts(tmp_path / "prompts.jsonl")
    lay = sci.Layout.from_json(SGLANG_TP8_JSON)

    def all_hit(ix: sci.Index) -> bool:
        return all(ix.check_prefix(lay, t) == 10 for t in prompts)

    with sci.Index() as ix:
        # Started against a port nobody serves, then moved to the master.
        with sci.Subscriber(ix, f"tcp://127.0.0.1:{free_port()}", resync_min_interval_ms=100,
                            stale_after_ms=60_000) as sub:
            assert not all_hit(ix)
            sub.retarget(p.endpoint, snapshot)
            wait_until(lambda: ix.stats()["resyncs"] >= 1 and not ix.stats()["resyncing"] and all_hit(ix), 60,
                       "the first resync")
            s = ix.stats()
            # 17 distinct pages x 16 objects restored, plus live objects.
            assert s["snapshot_keys"] >= 17 * 16
            assert s["keys"] >= 17 * 16
            # Snapshot keys carry no group; since 1.4 they load into page
            # entries and every hit reads one entry a page (nothing to adopt).
            r = ix.check_pages(lay, prompts[0])
            assert (r.total_hits, r.fast_path) == (10, 10)
            assert ix.stats()["groups_adopted"] == 0

            # A clear (as after a gap) empties the index; the subscriber
            # refills it from the snapshot again.
            resyncs = ix.stats()["resyncs"]
            ix.clear()
            assert ix.check_prefix(lay, prompts[0]) == 0
            wait_until(lambda: ix.stats()["resyncs"] > resyncs and not ix.stats()["resyncing"] and all_hit(ix),
                       60, "the resync after the clear")
            assert ix.stats()["clears"] >= 1
        assert not sub.running


def test_a_subscriber_left_running_at_exit_is_stopped_and_logging_stays_safe(tmp_path: Path) -> None:
    """Interpreter exit with a subscriber still running and logging from its
    thread (a dead endpoint, a 1 ms grace: warnings keep coming): the
    process ends, cleanly, every time."""
    program = f"""
import logging, sys, threading
import shared_cache_index as sci
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
seen = threading.Event()
class Flag(logging.Handler):
    def emit(self, record):
        seen.set()
logging.getLogger("shared_cache_index").addHandler(Flag())
ix = sci.Index()
sub = sci.Subscriber(ix, "tcp://127.0.0.1:{free_port()}", stale_after_ms=1, reconnect_ms=1, reconnect_max_ms=2)
assert seen.wait(30), "no log line from the subscriber"
print("exiting", flush=True)
"""
    for _ in range(5):
        done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60,
                              cwd=str(PYTHON_DIR))
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "exiting"
        assert "shared_cache_index" in done.stderr


def test_log_lines_of_a_synchronous_call_reach_logging(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="shared_cache_index")
    sci.Layout.from_json('{"page_size": 64, "tp_sizee": 2}')
    warnings = [r for r in caplog.records if r.name == "shared_cache_index" and r.levelno == logging.WARNING]
    assert any('"tp_sizee"' in r.getMessage() and "tp_size" in r.getMessage() for r in warnings)
    # Silenced on request, back on request.
    caplog.clear()
    sci.set_log_forwarding(False)
    try:
        sci.Layout.from_json('{"page_size": 64, "tp_sizee": 2}')
        assert not [r for r in caplog.records if r.name == "shared_cache_index"]
    finally:
        sci.set_log_forwarding(True)
    sci.Layout.from_json('{"page_size": 64, "tp_sizee": 2}')
    assert [r for r in caplog.records if r.name == "shared_cache_index"]


def test_options_reach_the_library(publisher: Callable[..., Publisher], tmp_path: Path) -> None:
    """The topic option filters: a subscription to the publisher's topic
    receives its messages, one to another topic none."""
    for topic, expected in (("other", True), ("mine", False)):
        p = publisher("--endpoint", "tcp://127.0.0.1:*", "--workload", "--page-size", "16", "--prompts", "1",
                      "--pages", "2", "--wait-subscribers-ms", "20000", "--topic", "other")
        with sci.Index() as ix:
            with sci.Subscriber(ix, p.endpoint, topic=topic, reconnect_policy=sci.RECONNECT_EVENT_IDS):
                summary = p.finish()
                if expected:
                    wait_until(lambda: ix.stats()["last_sequence"] == summary["last_sequence"], 30, "the batches")
                    assert ix.stats()["messages_received"] == summary["messages"] > 0
                else:
                    assert ix.stats()["messages_received"] == 0
    with sci.Index() as ix:
        with pytest.raises(sci.InvalidArgument):
            sci.Subscriber(ix, "", etcd_endpoints="http://127.0.0.1:1")  # event_port required with etcd


def test_a_log_handler_may_stop_its_subscriber_and_reset_forwarding() -> None:
    """From the subscriber's own thread, inside the library's callback: a
    handler stops the subscriber whose line it handles, and sets the
    forwarding again (as the Rust tests handler_drops_subscriber and
    handler_sets_handler). Neither hangs; the index can be closed at once."""
    ix = sci.Index()
    done = threading.Event()
    holder: dict[str, Any] = {}

    class StopIt(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if threading.get_ident() == threading.main_thread().ident or done.is_set():
                return
            sci.set_log_forwarding(True)  # takes effect once this callback returns
            holder["sub"].stop()
            holder["thread"] = threading.get_ident()
            done.set()

    logger = logging.getLogger("shared_cache_index")
    handler = StopIt(level=logging.DEBUG)
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        holder["sub"] = sci.Subscriber(ix, f"tcp://127.0.0.1:{free_port()}", stale_after_ms=1, reconnect_ms=1,
                                       reconnect_max_ms=2)
        assert done.wait(30), "no log line from the subscriber's thread"
        assert not holder["sub"].running
        ix.close()  # the library keeps what its exiting thread touches alive
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert holder["thread"] != threading.main_thread().ident
