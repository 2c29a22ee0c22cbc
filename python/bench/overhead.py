#!/usr/bin/env python3
"""What the Python package adds to a query: ``Index.check_pages`` against the
bare C call ``sci_index_check_pages``, in one process, on the same index,
layout and prompts (169 pages of 64 tokens, tp 8).

The C side is a loop in a bench-only module (bench/python_overhead.c, CMake
target ``sci_python_bench``) handed the very function the package loaded;
the Python side is the package's public call in a Python loop over the same
prompts, in the same order. Cases, as a router sees them:

- stored, rotated: many distinct published prompts, each call another one
  (no call warms the caches for the next);
- unstored, rotated: as many prompts nobody stored (all misses);
- warm: one stored prompt repeated.

Rounds alternate C and Python; the medians are reported. Then N threads
querying: throughput with 1 and 2 threads, for C (its loop, the GIL released
for the whole loop) and for Python (each thread calling the package).

    cmake --build build --target shared_cache_index sci-publish sci_python_bench
    SCI_LIB_DIR=build /usr/bin/python3 python/bench/overhead.py [--calls 4000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import shared_cache_index as sci  # noqa: E402
from shared_cache_index import _library  # noqa: E402

PAGE = 64
PAGES = 169


def publish_and_follow(build: Path, prompts: int, seed: int) -> tuple[sci.Index, list[list[int]]]:
    """An index filled by a subscriber from a sci-publish workload."""
    publisher = build / "src" / "tools" / "sci-publish"
    with tempfile.TemporaryDirectory(prefix="sci-py-bench-") as tmp:
        work = Path(tmp)
        (work / "layout.json").write_text(json.dumps({"page_size": PAGE, "tp_size": 8}))
        err = open(work / "err", "wb")
        proc = subprocess.Popen(
            [str(publisher), "--endpoint", "tcp://127.0.0.1:*", "--workload", "--layout-json",
             str(work / "layout.json"), "--prompts", str(prompts), "--pages", str(PAGES), "--seed", str(seed),
             "--prompts-out", str(work / "prompts.jsonl"), "--wait-subscribers-ms", "30000"],
            stdout=subprocess.PIPE, stderr=err)
        try:
            deadline = time.monotonic() + 30
            endpoint = None
            while endpoint is None:
                for line in (work / "err").read_text().splitlines():
                    if '"listening"' in line:
                        endpoint = json.loads(line)["listening"]
                if endpoint is None:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise SystemExit(f"sci-publish did not start: {(work / 'err').read_text()}")
                    time.sleep(0.01)
            ix = sci.Index()
            with sci.Subscriber(ix, endpoint, reconnect_policy="event-ids"):
                out, _ = proc.communicate(timeout=120)
                last = json.loads(out.decode().strip().splitlines()[-1])["last_sequence"]
                deadline = time.monotonic() + 60
                while ix.stats()["last_sequence"] != last:
                    if time.monotonic() > deadline:
                        raise SystemExit("the workload was not applied within 60 s")
                    time.sleep(0.01)
            tokens = [json.loads(line)["tokens"] for line in (work / "prompts.jsonl").read_text().splitlines()]
            return ix, tokens
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            err.close()


class CLoop:
    """sci_bench_check_pages over prompts held in array('I') buffers."""

    def __init__(self, module: Path) -> None:
        self.lib = ctypes.CDLL(str(module))
        self.fn = self.lib.sci_bench_check_pages
        self.fn.restype = ctypes.c_uint64
        self.fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                            ctypes.c_size_t, ctypes.c_size_t, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t,
                            ctypes.POINTER(ctypes.c_uint64)]
        # The very function the package calls, from the library it loaded.
        self.check_pages = ctypes.cast(_library.api().index_check_pages, ctypes.c_void_p).value  # type: ignore[arg-type]

    def run(self, ix: sci.Index, lay: sci.Layout, prompts: list["array[int]"], calls: int) -> tuple[float, int]:
        """(ns per call, total hits) of `calls` C calls rotating over `prompts`."""
        pointers = (ctypes.c_void_p * len(prompts))(*[p.buffer_info()[0] for p in prompts])
        lengths = (ctypes.c_size_t * len(prompts))(*[len(p) for p in prompts])
        cap = max(len(p) for p in prompts) // PAGE
        hits = (ctypes.c_uint8 * cap)()
        total = ctypes.c_uint64()
        ns = self.fn(self.check_pages, ix._handle, lay._handle, pointers, lengths, len(prompts), calls, PAGE, hits,
                     cap, ctypes.byref(total))
        if ns == 0:
            raise SystemExit("a C call failed")
        return ns / calls, total.value


def python_loop(call: Callable[[Any], Any], sequence: list[Any]) -> float:
    """ns per call of `call` over `sequence` (the loop's own cost included)."""
    start = time.perf_counter_ns()
    for tokens in sequence:
        call(tokens)
    return (time.perf_counter_ns() - start) / len(sequence)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.environ.get("SCI_LIB_DIR", "build"))
    parser.add_argument("--prompts", type=int, default=48, help="distinct stored prompts (and as many unstored)")
    parser.add_argument("--calls", type=int, default=4000, help="calls per timed run")
    parser.add_argument("--rounds", type=int, default=7, help="C / Python runs per case (medians reported)")
    parser.add_argument("--json", help="write the results there too")
    args = parser.parse_args()
    build = Path(args.build).resolve()
    os.environ["SCI_LIB_DIR"] = str(build)
    module = build / "bench" / "libsci_python_bench.so"
    if not module.exists():
        raise SystemExit(f"{module} missing: cmake --build {build} --target sci_python_bench")

    ix, stored = publish_and_follow(build, args.prompts, seed=2024)
    lay = sci.Layout(PAGE, tp_size=8)
    stored_arrays = [array("I", t) for t in stored]
    unstored_arrays = [array("I", [(7919 * (p + 1) + 104729 * j) % 32000 for j in range(PAGE * PAGES)])
                       for p in range(args.prompts)]
    c_loop = CLoop(module)
    check = ix.check_pages

    def call(tokens: Any) -> Any:
        return check(lay, tokens)

    # Answers agree, and every stored page hits (the index is what we think).
    for tokens in stored_arrays:
        r = ix.check_pages(lay, tokens)
        assert (r.n_pages, r.total_hits) == (PAGES, PAGES), r
    _, c_hits = c_loop.run(ix, lay, stored_arrays, len(stored_arrays))
    assert c_hits == PAGES * len(stored_arrays)

    cases = {
        "stored, rotated": stored_arrays,
        "unstored, rotated": unstored_arrays,
        "warm (one stored prompt repeated)": stored_arrays[:1],
        # The fixed cost alone: a one-page prompt, where C's own work is small.
        "1 page, stored, rotated (fixed cost)": [p[:PAGE] for p in stored_arrays],
    }
    results: dict[str, Any] = {"library": sci.version(), "python": sys.version.split()[0], "cases": {}}
    print(f"library {sci.version()}, Python {sys.version.split()[0]}, {PAGES} pages x {PAGE} tokens, tp 8, "
          f"{len(stored)} stored prompts ({ix.stats()['keys']} keys), {args.calls} calls x {args.rounds} rounds")
    print()
    print("| case | C ns/call | Python ns/call | ratio (median of rounds) | added ns (median of rounds) |")
    print("|---|---:|---:|---:|---:|")
    for name, prompts in cases.items():
        sequence = [prompts[i % len(prompts)] for i in range(args.calls)]
        numpy_sequence = None
        try:
            import numpy as np

            numpy_arrays = [np.frombuffer(p, dtype=np.uint32) for p in prompts]
            numpy_sequence = [numpy_arrays[i % len(prompts)] for i in range(args.calls)]
        except ImportError:
            pass
        c_ns, py_ns, np_ns, hits_ns, prefix_ns = [], [], [], [], []
        for _ in range(args.rounds):
            c_ns.append(c_loop.run(ix, lay, prompts, args.calls)[0])
            py_ns.append(python_loop(call, sequence))
            if numpy_sequence is not None:
                np_ns.append(python_loop(call, numpy_sequence))
            hits_ns.append(python_loop(lambda t: check(lay, t).hits, sequence))
            prefix_ns.append(python_loop(lambda t: ix.check_prefix(lay, t), sequence))
        # Each round pairs a C run and a Python run a moment apart; the
        # medians of the per-round ratio and difference drift least with the
        # machine's load (it is shared).
        c, py = statistics.median(c_ns), statistics.median(py_ns)
        ratio = statistics.median(p / q for p, q in zip(py_ns, c_ns))
        added = statistics.median(p - q for p, q in zip(py_ns, c_ns))
        row = {"c_ns": c, "python_ns": py, "ratio": ratio, "added_ns": added,
               "python_numpy_ns": statistics.median(np_ns) if np_ns else None,
               "python_with_hits_list_ns": statistics.median(hits_ns),
               "python_check_prefix_ns": statistics.median(prefix_ns)}
        results["cases"][name] = row
        print(f"| {name} | {c:,.0f} | {py:,.0f} | {ratio:.3f} | {added:,.0f} |")
    print()
    print("Python variants (ns/call, same prompts): numpy uint32 input; .hits read (the list[bool] built); "
          "check_prefix")
    for name, row in results["cases"].items():
        print(f"  {name}: numpy {row['python_numpy_ns'] or float('nan'):,.0f}, "
              f"with .hits {row['python_with_hits_list_ns']:,.0f}, check_prefix {row['python_check_prefix_ns']:,.0f}")

    # A list of ints is copied into an array('I') first: its cost, once.
    as_list = stored[0]
    list_ns = statistics.median(python_loop(call, [as_list] * 200) for _ in range(3))
    results["python_list_input_ns"] = list_ns
    print(f"  a list of {len(as_list)} ints instead of array('I'): {list_ns:,.0f} ns/call (the copy)")

    # Threads: throughput with 1 and 2 threads, C loop vs Python calls.
    print()
    print("| threads | C calls/s | Python calls/s |")
    print("|---:|---:|---:|")
    throughput: dict[int, tuple[float, float]] = {}
    per_thread = args.calls
    for n_threads in (1, 2):
        c_rates: list[float] = []
        py_rates: list[float] = []
        for _ in range(max(3, args.rounds // 2)):
            for kind in ("c", "py"):
                barrier = threading.Barrier(n_threads + 1)

                def work(k: int, kind: str = kind) -> None:
                    mine = stored_arrays[k::n_threads] or stored_arrays
                    sequence = [mine[i % len(mine)] for i in range(per_thread)]
                    barrier.wait()
                    if kind == "c":
                        c_loop.run(ix, lay, mine, per_thread)
                    else:
                        for tokens in sequence:
                            check(lay, tokens)

                threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
                for t in threads:
                    t.start()
                barrier.wait()
                start = time.perf_counter()
                for t in threads:
                    t.join()
                rate = n_threads * per_thread / (time.perf_counter() - start)
                (c_rates if kind == "c" else py_rates).append(rate)
        throughput[n_threads] = (statistics.median(c_rates), statistics.median(py_rates))
        print(f"| {n_threads} | {throughput[n_threads][0]:,.0f} | {throughput[n_threads][1]:,.0f} |")
    c_scale = throughput[2][0] / throughput[1][0]
    py_scale = throughput[2][1] / throughput[1][1]
    print(f"\n2 threads / 1 thread: C {c_scale:.2f}x, Python {py_scale:.2f}x (cores: {os.cpu_count()}, "
          f"load average {os.getloadavg()[0]:.2f})")
    results["threads"] = {str(k): {"c_calls_per_s": v[0], "python_calls_per_s": v[1]} for k, v in throughput.items()}
    results["scaling"] = {"c": c_scale, "python": py_scale}
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    ix.close()


if __name__ == "__main__":
    main()
