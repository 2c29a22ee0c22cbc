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


def test_a_zero_copy_array_cannot_be_resized_under_a_query() -> None:
    """The no-copy paths hold a buffer export of the caller's array('I') for
    the whole C call (the GIL released): another thread resizing it
    meanwhile gets BufferError instead of freeing the memory the query
    reads. The main thread resizes in a loop until the querying thread is
    done (each query spends milliseconds in C); at least one resize must
    have been refused, and nothing crashes. (Without the export the
    resizes all succeed, and a query may read freed memory.)"""
    ix, lay, _ = long_prompt()
    big = 1 << 22
    tokens = array("I", bytes(4 * big))
    tail = tokens[:64]
    done = threading.Event()
    answers: list[bool] = []

    def query() -> None:
        try:
            for name in ("check_pages", "check_prefix", "check_prefix_tokens", "check_tiers") * 3:
                answers.append(getattr(ix, name)(lay, tokens) is not None)
        finally:
            done.set()

    thread = threading.Thread(target=query)
    thread.start()
    refused = resized = 0
    while not done.is_set():
        try:
            tokens.extend(tail)  # a realloc: may move the buffer and free the old one
            del tokens[big:]
            resized += 1
        except BufferError:
            refused += 1
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert answers == [True] * 12
    assert refused >= 1, (refused, resized)
    # Once the queries are done the export is gone: resizing works again.
    tokens.extend(tail)
    assert len(tokens) == big + 64


def test_close_races_with_queries_on_other_threads() -> None:
    """close() of an Index or a Layout while other threads query with it:
    the queries in C are waited for, the later ones raise the closed error;
    never a crash. Each querying thread signals once it has answered, so
    the close comes while the threads are querying in a loop."""
    from conftest import SGLANG_TP8_JSON

    tokens = array("I", range(64 * 4000))
    for what in ("index", "layout") * 10:
        ix = sci.Index()
        lay = sci.Layout.from_json(SGLANG_TP8_JSON)
        answered = [threading.Event() for _ in range(3)]
        outcomes: list[str] = []

        def query(first: threading.Event) -> None:
            try:
                while True:
                    ix.check_pages(lay, tokens)
                    ix.check_prefix(lay, tokens)
                    ix.stats()
                    first.set()
            except sci.InvalidArgument as e:
                outcomes.append(str(e))
            finally:
                first.set()

        threads = [threading.Thread(target=query, args=(event,)) for event in answered]
        for thread in threads:
            thread.start()
        for event in answered:
            assert event.wait(timeout=60)
        (ix if what == "index" else lay).close()
        for thread in threads:
            thread.join(timeout=60)
            assert not thread.is_alive()
        assert len(outcomes) == 3
        assert all("closed" in message for message in outcomes), outcomes
        # Nothing left counted in flight, and the closed object was freed.
        closed_one = ix if what == "index" else lay
        assert not closed_one._finalizer.alive
        ix.close()
        lay.close()
