"""Threads: the queries release the GIL, and concurrent queries on many
threads give each its own, correct answer."""

from __future__ import annotations

import sys
import threading
from array import array
from typing import Any

import numpy as np
import pytest

import shared_cache_index as sci


def long_prompt() -> tuple[sci.Index, sci.Layout, Any]:
    """A query that spends milliseconds in C: 4M tokens, 65536 pages, each
    hashed and looked up."""
    ix = sci.Index()
    lay = sci.Layout(64, tp_size=8)
    tokens = np.arange(1 << 22, dtype=np.uint32)
    return ix, lay, tokens


@pytest.mark.parametrize("query", ["check_pages", "check_tiers", "vllm_check_pages_with_extras"])
def test_queries_release_the_gil(query: str) -> None:
    """With the switch interval huge, the interpreter hands the GIL over only
    when a thread releases it. Another thread, released by an Event just
    before the query, can therefore run Python code before the query returns
    only if the query released the GIL while in C. It counts; the counter
    read right after the query returns must have moved. A query holding the
    GIL would leave it at 0 in every attempt."""
    ix, lay, tokens = long_prompt()
    if query == "vllm_check_pages_with_extras":
        from conftest import VLLM_JSON

        lay = sci.Layout.from_json(VLLM_JSON)
        extras = sci.RequestExtras(lora_name="a")
        run = lambda: ix.check_pages(lay, tokens, extras=extras)  # noqa: E731
    else:
        run = lambda: getattr(ix, query)(lay, tokens)  # noqa: E731
    run()  # warm: the first call may allocate
    old_interval = sys.getswitchinterval()
    observed = []
    try:
        sys.setswitchinterval(1000.0)
        for _attempt in range(10):  # a loaded machine may not schedule the worker in one query
            counter = [0]
            go = threading.Event()

            def spin() -> None:
                go.wait()
                for _ in range(200_000):  # bounded: then it blocks and lets the main thread on
                    counter[0] += 1

            worker = threading.Thread(target=spin)
            worker.start()
            go.set()  # the worker is now runnable, but needs the GIL we hold
            run()
            observed.append(counter[0])
            worker.join(60)
            assert not worker.is_alive()
            if observed[-1] > 0:
                break
    finally:
        sys.setswitchinterval(old_interval)
        ix.close()
    assert observed[-1] > 0, f"no progress of another thread during the query in {len(observed)} attempts"


def test_the_gil_test_fails_on_a_call_that_holds_the_gil() -> None:
    """The method above, on a long call made through ctypes.PyDLL (which
    keeps the GIL): the other thread never moves. Shows the test can fail."""
    import ctypes

    from conftest import LIB_PATH
    from shared_cache_index import _capi

    held = ctypes.PyDLL(str(LIB_PATH))
    check = held.sci_index_check_pages
    check.restype, check.argtypes = _capi.PROTOTYPES["sci_index_check_pages"]
    ix, lay, tokens = long_prompt()
    hits = (ctypes.c_uint8 * (len(tokens) // 64))()
    result = _capi.init(_capi.sci_page_result)
    old_interval = sys.getswitchinterval()
    try:
        sys.setswitchinterval(1000.0)
        counter = [0]
        go = threading.Event()

        def spin() -> None:
            go.wait()
            for _ in range(200_000):
                counter[0] += 1

        worker = threading.Thread(target=spin)
        worker.start()
        go.set()
        status = check(ix._handle, lay._handle, tokens.ctypes.data, len(tokens), 64, ctypes.addressof(hits),
                       len(hits), ctypes.addressof(result))
        seen = counter[0]
        worker.join(60)
    finally:
        sys.setswitchinterval(old_interval)
        ix.close()
    assert status == 0 and result.n_pages == len(hits)
    assert seen == 0


def test_concurrent_queries_each_get_their_own_answer(sglang_world: Any) -> None:
    ix, prompts = sglang_world
    lay = sci.Layout(64, tp_size=8)
    # Different prompts with different answers, so a shared buffer would show.
    cases = [array("I", p) for p in prompts] + [array("I", range(40 * 64)),
                                                array("I", prompts[0][: 20 * 64] + list(range(5 * 64)))]
    expected = [(ix.check_pages(lay, t).hits_bytes, ix.check_tiers(lay, t).page_tier) for t in cases]
    errors: list[str] = []
    start = threading.Barrier(4)

    def worker(k: int) -> None:
        start.wait(30)
        for i in range(300):
            case = (i + k) % len(cases)
            got = (ix.check_pages(lay, cases[case]).hits_bytes, ix.check_tiers(lay, cases[case]).page_tier)
            if got != expected[case]:
                errors.append(f"thread {k} call {i}: case {case} answered another case's hits")
                return

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
