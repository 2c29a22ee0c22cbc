"""Token containers: array('I') and numpy uint32 reach C without a copy
(the address the C function receives is the container's own buffer);
everything else is converted, and bad values are refused before any C call."""

from __future__ import annotations

from array import array
from typing import Any, Iterator

import numpy as np
import pytest

import shared_cache_index as sci


class Recorder:
    """Stands in for the bound C functions of the package's Api: records the
    tokens pointer each query passes, then calls the real function."""

    NAMES = ("index_check_pages", "index_check_pages_with_extras", "index_check_prefix",
             "index_check_prefix_with_extras", "index_check_tiers")

    def __init__(self, api: Any) -> None:
        self.api = api
        self.real = {name: getattr(api, name) for name in self.NAMES}
        self.addresses: list[int | None] = []
        self.contents: list[list[int]] = []
        for name in self.NAMES:
            setattr(api, name, self._wrap(self.real[name]))

    def _wrap(self, real: Any) -> Any:
        import ctypes

        def call(index: Any, layout: Any, tokens: Any, n_tokens: int, *rest: Any) -> Any:
            self.addresses.append(tokens)
            # What C will read at that address, read back now.
            self.contents.append(list((ctypes.c_uint32 * n_tokens).from_address(tokens)) if n_tokens else [])
            return real(index, layout, tokens, n_tokens, *rest)

        return call

    def restore(self) -> None:
        for name, real in self.real.items():
            setattr(self.api, name, real)


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    from shared_cache_index import _library

    r = Recorder(_library.api())
    try:
        yield r
    finally:
        r.restore()


@pytest.fixture
def small() -> Iterator[tuple[sci.Index, sci.Layout]]:
    with sci.Index() as ix, sci.Layout(4) as lay:
        yield ix, lay


def queries(ix: sci.Index, lay: sci.Layout, tokens: Any) -> None:
    ix.check_pages(lay, tokens)
    ix.check_pages(lay, tokens, extras=sci.RequestExtras(lora_name="a"))
    ix.check_prefix(lay, tokens)
    ix.check_prefix(lay, tokens, extras=sci.RequestExtras(cache_salt="b"))
    ix.check_tiers(lay, tokens)


def test_array_and_numpy_uint32_are_passed_without_a_copy(small: Any, recorder: Recorder) -> None:
    ix, lay = small
    values = list(range(100, 164))
    a = array("I", values)
    n = np.array(values, dtype=np.uint32)
    for container, address in ((a, a.buffer_info()[0]), (n, n.ctypes.data)):
        recorder.addresses.clear()
        recorder.contents.clear()
        queries(ix, lay, container)
        assert recorder.addresses == [address] * 5
        assert recorder.contents == [values] * 5


def test_read_only_numpy_arrays_are_passed_without_a_copy(small: Any, recorder: Recorder) -> None:
    ix, lay = small
    n = np.arange(64, dtype=np.uint32)
    n.setflags(write=False)
    ix.check_pages(lay, n)
    assert recorder.addresses == [n.ctypes.data]


@pytest.mark.parametrize("make", [
    lambda v: list(v), lambda v: tuple(v), lambda v: range(100, 164), lambda v: iter(v),
    lambda v: np.array(v, dtype=np.int64), lambda v: np.array(v, dtype=np.uint16),
    lambda v: np.array(v, dtype=">u4"),  # uint32, foreign byte order
    lambda v: np.repeat(np.array(v, dtype=np.uint32), 2)[::2],  # strided view
    lambda v: array("l", v), lambda v: memoryview(array("I", v)),
], ids=["list", "tuple", "range", "iterator", "int64", "uint16", "big-endian-u32", "strided", "array-l",
        "memoryview"])
def test_other_containers_are_converted_to_the_same_tokens(small: Any, recorder: Recorder, make: Any) -> None:
    ix, lay = small
    values = list(range(100, 164))
    container = make(values)
    ix.check_pages(lay, container)
    assert recorder.contents == [values]
    if isinstance(container, np.ndarray):
        assert recorder.addresses != [container.ctypes.data]  # a converted copy


@pytest.mark.parametrize("bad, position", [
    ([1, 2, -1], "tokens[2]"), ([1, 2**32], "tokens[1]"), ([1, "x"], "tokens[1]"), ([0.5], "tokens[0]"),
    (np.array([1, -5], dtype=np.int64), "tokens[1]"), (np.array([2**40], dtype=np.uint64), "tokens[0]"),
])
def test_bad_tokens_are_refused_before_any_c_call(small: Any, recorder: Recorder, bad: Any, position: str) -> None:
    ix, lay = small
    before = ix.stats()["queries"]
    for query in (ix.check_pages, ix.check_prefix, ix.check_tiers):
        with pytest.raises(sci.InvalidArgument) as e:
            query(lay, bad)
        assert position in e.value.message
        assert e.value.status == 1
    assert recorder.addresses == []
    assert ix.stats()["queries"] == before


@pytest.mark.parametrize("bad, words", [
    (np.zeros(8, dtype=np.float32), "dtype float32"), (np.zeros(8, dtype=bool), "dtype bool"),
    (np.zeros((2, 4), dtype=np.uint32), "2 dimensions"),
])
def test_numpy_arrays_that_are_not_token_ids_are_refused(small: Any, bad: Any, words: str) -> None:
    ix, lay = small
    with pytest.raises(sci.InvalidArgument) as e:
        ix.check_pages(lay, bad)
    assert words in e.value.message


def test_u32_extremes_are_valid_tokens(small: Any) -> None:
    ix, lay = small
    assert ix.check_pages(lay, [0, 2**32 - 1, 5, 6]).n_pages == 1
    assert ix.check_pages(lay, np.array([0, 2**32 - 1, 5, 6], dtype=np.int64)).n_pages == 1
