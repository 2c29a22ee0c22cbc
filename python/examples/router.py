#!/usr/bin/env python3
"""The router's side of the demo, in Python (as rust-example's router_demo):
follow a Mooncake publisher over ZeroMQ, then ask, for a handful of prompts,
which pages are already in the shared pool, how they group into ranges, how
long the query took, and what the index counted.

With no --endpoint it plays the whole demo on its own: it starts sci-publish
(--sci-publish, else $SCI_PUBLISH, else $SCI_LIB_DIR/src/tools/sci-publish)
with scripts/demo.sh's first act: 4 prompts of 169 pages (64 tokens, tp 8),
100 pages shared. Or against a publisher already running:

    router.py --endpoint tcp://127.0.0.1:5557 --layout-json layout.json \\
              --prompts prompts.jsonl [--published summary.json] [--timeout-s 60]

`--prompts` is what `sci-publish --prompts-out` wrote; with `--published`
(the publisher's stdout summary) it waits until the index has applied the
publisher's last sequence. Every wait is bounded. A vLLM descriptor as
--layout-json prints Dynamo's answer per prompt instead.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from the source tree too

import shared_cache_index as sci  # noqa: E402

T = TypeVar("T")
DEMO_LAYOUT = {"page_size": 64, "tp_size": 8, "pp_size": 1, "is_mla_model": False, "is_eagle": False,
               "should_split_heads": False, "extra_backend_tag": None, "key_prefix": None}


def wait_for(timeout: float, ready: Callable[[], T | None]) -> T | None:
    """Polls `ready` until it returns a value other than None, or `timeout` s pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = ready()
        if value is not None:
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.005)


def read_prompts(path: Path) -> list[list[int]] | None:
    try:
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        return [json.loads(line)["tokens"] for line in lines] or None
    except (OSError, ValueError, KeyError):
        return None


def published_last_sequence(path: Path) -> int | None:
    try:
        return int(json.loads(path.read_text().strip().splitlines()[-1])["last_sequence"])
    except (OSError, ValueError, KeyError, IndexError):
        return None


def micros(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs"


def timed(ask: Callable[[], T]) -> tuple[T, float, float, T]:
    """(first answer, its time, median of 101 warm calls, last answer)."""
    t0 = time.perf_counter()
    cold = ask()
    cold_time = time.perf_counter() - t0
    times = []
    for _ in range(101):
        t = time.perf_counter()
        ask()
        times.append(time.perf_counter() - t)
    return cold, cold_time, statistics.median(times), ask()


def format_ranges(r: sci.PageResult) -> str:
    return ", ".join(f"{a}..{b}" for a, b in r.ranges()) or "-"


def common_prefix_pages(prompts: list[list[int]], page: int) -> int:
    first = prompts[0]
    n = 0
    while n < len(first) and all(n < len(p) and p[n] == first[n] for p in prompts):
        n += 1
    return n // page


def sglang_table(ix: sci.Index, lay: sci.Layout, prompts: list[list[int]]) -> None:
    page = lay.block_size
    first = prompts[0]
    pages = len(first) // page
    queries: list[tuple[str, list[int], int]] = [(f"published prompt {i}", p, page) for i, p in enumerate(prompts)]
    edit_page = pages * 3 // 4
    edited = list(first)
    edited[edit_page * page + 1] ^= 0x5A5A
    queries.append((f"prompt 0, edited in page {edit_page}", edited, page))
    shared = common_prefix_pages(prompts, page)
    follow_up = first[: shared * page] + [31_000 - t % 1000 for t in range(20 * page)]
    queries.append((f"{shared} shared pages + a new question", follow_up, page))
    queries.append(("an unrelated prompt", list(range(pages * page)), page))
    queries.append((f"prompt 0 at block size {page // 2}", first, page // 2))

    print("| request | pages | hit | hit ranges | first query | warm query (median) | fast path (warm) |")
    print("|---|---:|---:|---|---:|---:|---:|")
    from array import array

    for what, tokens, block in queries:
        buffer = array("I", tokens)  # converted once, as a router holding its tokens would
        cold, cold_time, warm_time, warm = timed(lambda: ix.check_pages(lay, buffer, block))
        assert warm.total_hits == cold.total_hits, "nothing changed between the two queries"
        print(f"| {what} | {warm.n_pages} | {warm.total_hits} | {format_ranges(warm)} | {micros(cold_time)} | "
              f"{micros(warm_time)} | {warm.fast_path} |")
    print("\nhit ranges: runs of consecutive pages whose every object is in the pool. The first query\n"
          "of a page checks each of its object keys and then trusts its group; later queries answer\n"
          "with one lookup per page (fast path) until an event touches the group.")


def vllm_table(ix: sci.Index, lay: sci.Layout, prompts: list[list[int]]) -> None:
    block = lay.block_size
    first = prompts[0]
    blocks = len(first) // block
    queries: list[tuple[str, list[int], sci.RequestExtras | None]] = [
        (f"published prompt {i}", p, None) for i, p in enumerate(prompts)]
    edit_block = blocks * 3 // 4
    edited = list(first)
    edited[edit_block * block + 1] ^= 0x5A5A
    queries.append((f"prompt 0, edited in block {edit_block}", edited, None))
    queries.append(('prompt 0 with LoRA "sql-adapter"', first, sci.RequestExtras(lora_name="sql-adapter")))
    queries.append(("an unrelated prompt", list(range(len(first))), None))
    print(f"vLLM layout: block size {block}\n")
    print("| request | tokens | blocks | Dynamo's answer | hit range | first query | warm query (median) |")
    print("|---|---:|---:|---:|---|---:|---:|")
    for what, tokens, extras in queries:
        cold, cold_time, warm_time, warm = timed(lambda: ix.check_prefix(lay, tokens, extras=extras))
        assert warm == cold
        print(f"| {what} | {len(tokens)} | {len(tokens) // block} | {warm} | {f'0..{warm}' if warm else '-'} | "
              f"{micros(cold_time)} | {micros(warm_time)} |")
    print("\nDynamo's answer: the blocks of the longest prefix whose every chunk is in the pool;\n"
          "the request's last token is never credited.")


def print_counters(s: dict[str, int]) -> None:
    print("\nindex counters:")
    rows = [
        ("keys", s["keys"]),
        ("page entries", s["groups"]),
        ("batches applied", s["batches_applied"]),
        ("events applied", s["events_applied"]),
        ("last sequence", s["last_sequence"] if s["has_sequence"] else "-"),
        ("sequence gaps", s["sequence_gaps"]),
        ("duplicate batches", s["duplicate_batches"]),
        ("malformed messages", s["malformed_messages"]),
        ("messages received", s["messages_received"]),
        ("subscriber connects / disconnects", f"{s['subscriber_connects']} / {s['subscriber_disconnects']}"),
        ("queries", s["queries"]),
        ("pages checked", s["pages_checked"]),
        ("page hits", s["page_hits"]),
        ("fast-path hits", s["fast_path_hits"]),
        ("resyncs (failures)", f"{s['resyncs']} ({s['resync_failures']})"),
        ("resyncing", bool(s["resyncing"])),
    ]
    for name, value in rows:
        print(f"  {name:<34} {value}")


def start_demo_publisher(path: Path, work: Path) -> tuple[subprocess.Popen[bytes], str]:
    """sci-publish with the demo's first act; (process, endpoint)."""
    (work / "layout.json").write_text(json.dumps(DEMO_LAYOUT))
    err = open(work / "publisher.log", "wb")
    proc = subprocess.Popen(
        [str(path), "--endpoint", "tcp://127.0.0.1:*", "--workload", "--layout-json", str(work / "layout.json"),
         "--prompts", "4", "--pages", "169", "--shared-prefix-pages", "100", "--seed", "2024",
         "--prompts-out", str(work / "prompts.jsonl"), "--wait-subscribers-ms", "30000"],
        stdout=open(work / "published.json", "wb"), stderr=err)

    def listening() -> str | None:
        for line in (work / "publisher.log").read_text(errors="replace").splitlines():
            if '"listening"' in line:
                return str(json.loads(line)["listening"])
        if proc.poll() is not None:
            raise SystemExit(f"sci-publish exited: {(work / 'publisher.log').read_text()}")
        return None

    endpoint = wait_for(30, listening)
    if endpoint is None:
        proc.kill()
        raise SystemExit("sci-publish did not start within 30 s")
    return proc, endpoint


def run(args: argparse.Namespace, work: Path) -> None:
    print(f"shared-cache-index {sci.version()} (ABI {sci.abi_version()})")
    publisher = None
    try:
        if args.endpoint is None:
            tool = Path(args.sci_publish or os.environ.get("SCI_PUBLISH")
                        or Path(os.environ.get("SCI_LIB_DIR", "build")) / "src" / "tools" / "sci-publish")
            if not tool.exists():
                raise SystemExit(f"{tool} not found: give --endpoint, or --sci-publish PATH")
            print("starting sci-publish: 4 prompts of 169 pages (64 tokens), 100 pages shared, tp 8")
            publisher, endpoint = start_demo_publisher(tool, work)
            layout_json, prompts_path = work / "layout.json", work / "prompts.jsonl"
            published: Path | None = work / "published.json"
        else:
            if args.layout_json is None or args.prompts is None:
                raise SystemExit("--endpoint needs --layout-json and --prompts")
            endpoint, layout_json, prompts_path = args.endpoint, Path(args.layout_json), Path(args.prompts)
            published = Path(args.published) if args.published else None
        layout_text = layout_json.read_text()
        lay = sci.Layout.from_json(layout_text)
        print(f"layout: {' '.join(layout_text.split())}")

        ix = sci.Index()
        started = time.monotonic()
        # A demo publisher exits once done: its disconnect must not clear
        # what it sent (a production subscriber keeps the default).
        with sci.Subscriber(ix, endpoint, reconnect_policy="event-ids") as sub:
            print(f"following {endpoint}")
            prompts = wait_for(args.timeout_s, lambda: read_prompts(prompts_path))
            if prompts is None:
                raise SystemExit(f"no prompts in {prompts_path} after {args.timeout_s} s")
            if published is not None:
                summary_path = published
                last = wait_for(args.timeout_s, lambda: published_last_sequence(summary_path))
                if last is None:
                    raise SystemExit(f"the publisher did not finish within {args.timeout_s} s")
                if wait_for(args.timeout_s, lambda: True if ix.stats()["last_sequence"] == last else None) is None:
                    raise SystemExit(f"sequence {last} not applied within {args.timeout_s} s: {ix.stats()}")
            s = ix.stats()
            print(f"applied {s['events_applied']} events in {s['batches_applied']} batches (last sequence "
                  f"{s['last_sequence'] if s['has_sequence'] else '-'}) in "
                  f"{(time.monotonic() - started) * 1e3:.0f} ms: {s['keys']} keys, {s['groups']} groups\n")
            if lay.family == sci.VLLM:
                vllm_table(ix, lay, prompts)
            else:
                sglang_table(ix, lay, prompts)
            sub.stop()
        print_counters(ix.stats())
        ix.close()
    finally:
        if publisher is not None:
            if publisher.poll() is None:
                publisher.terminate()
            publisher.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--endpoint", help="a running publisher (default: start sci-publish with the demo workload)")
    parser.add_argument("--layout-json", help="the model's layout (SGLang config or vLLM descriptor)")
    parser.add_argument("--prompts", help="sci-publish --prompts-out's file")
    parser.add_argument("--published", help="sci-publish's stdout summary: wait for its last sequence")
    parser.add_argument("--sci-publish", help="the sci-publish binary to start when no --endpoint is given")
    parser.add_argument("--timeout-s", type=float, default=60.0)
    args = parser.parse_args()
    # The library's own lines (connects, disconnects, warnings) on stderr.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="library: %(message)s")
    with tempfile.TemporaryDirectory(prefix="sci-router-") as tmp:
        run(args, Path(tmp))


if __name__ == "__main__":
    main()
