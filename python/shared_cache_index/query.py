"""What a query takes beside its tokens (RequestExtras), what it returns
(PageResult, TierResult), and the per-thread buffers the C call writes into.

The C queries write their answer into caller memory: a byte per page and a
result struct. The package keeps one such pair per thread (``scratch()``),
grown as prompts grow and reused call after call, so a query allocates no
ctypes object; the answer is copied out into an immutable result before the
call returns, so nothing in a result is shared between threads.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Any

from . import _capi
from .layout import as_bytes


class RequestExtras:
    """What a vLLM request adds to its block hashes beyond its tokens
    (``sci_request_extras``): a LoRA adapter's name (on every block) and a
    cache salt (on the first).

    Args:
        lora_name: None: no adapter; a str (UTF-8) or bytes, "" included.
        cache_salt: None: no salt; a str or bytes, "" included.

    On an SGLang layout a request with any extras has no hit.
    Immutable; build it once per adapter and reuse it.
    """

    __slots__ = ("lora_name", "cache_salt", "_struct", "_address", "_keep")

    def __init__(self, lora_name: str | bytes | None = None, cache_salt: str | bytes | None = None) -> None:
        self.lora_name = lora_name
        self.cache_salt = cache_salt
        lora = as_bytes(lora_name, "lora_name")
        salt = as_bytes(cache_salt, "cache_salt")
        raw = _capi.init(_capi.sci_request_extras)
        raw.lora_name = _capi.to_str(lora)
        raw.cache_salt = _capi.to_str(salt)
        self._keep = (lora, salt)  # the bytes raw points into
        self._struct = raw
        self._address: int = ctypes.addressof(raw)

    def __repr__(self) -> str:
        return f"RequestExtras(lora_name={self.lora_name!r}, cache_salt={self.cache_salt!r})"


class PageResult:
    """The answer of ``Index.check_pages`` (``sci_page_result`` and hits).

    Attributes:
        n_pages: whole pages (vLLM: router blocks) in the request.
        total_hits: pages fully present.
        prefix_hits: the usable prefix in pages: the leading run of hits
            (SGLang); on a vLLM layout Dynamo's answer (``check_prefix``).
        prefix_tokens: the leading prompt tokens the engine will load from
            the pool (1.4; 0 from an older library).
        fast_path: SGLang hits answered by one page entry each (every hit since 1.4); vLLM 0.
        hits: list[bool], one per page: every object of the page present.
        hits_bytes: the same as bytes, one 0/1 byte per page (no list built).
    """

    __slots__ = ("n_pages", "total_hits", "prefix_hits", "fast_path", "prefix_tokens", "hits_bytes", "_hits")

    n_pages: int
    total_hits: int
    prefix_hits: int
    fast_path: int
    prefix_tokens: int
    hits_bytes: bytes
    _hits: list[bool] | None

    @property
    def hits(self) -> list[bool]:
        """One bool per page (built on first access, then kept)."""
        hits = self._hits
        if hits is None:
            hits = self._hits = [b == 1 for b in self.hits_bytes]
        return hits

    def ranges(self) -> list[tuple[int, int]]:
        """The runs of consecutive hit pages, as (start, end) pairs."""
        runs: list[tuple[int, int]] = []
        start = -1
        for i, b in enumerate(self.hits_bytes):
            if b and start < 0:
                start = i
            elif not b and start >= 0:
                runs.append((start, i))
                start = -1
        if start >= 0:
            runs.append((start, len(self.hits_bytes)))
        return runs

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PageResult):
            return NotImplemented
        return _page_fields(self) == _page_fields(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"PageResult(n_pages={self.n_pages}, total_hits={self.total_hits}, prefix_hits={self.prefix_hits}, "
            f"prefix_tokens={self.prefix_tokens}, fast_path={self.fast_path}, ranges={self.ranges()})"
        )


def _page_fields(r: PageResult) -> tuple[Any, ...]:
    return (r.n_pages, r.total_hits, r.prefix_hits, r.fast_path, r.prefix_tokens, r.hits_bytes)


class TierResult:
    """The answer of ``Index.check_tiers`` (``sci_tier_result`` and page_tier).

    Attributes:
        n_tiers: tiers in the index's map (``medium_tiers``).
        n_pages: as ``PageResult.n_pages``.
        page_tier: list[int | None], per page the best tier at which it is
            fully present, None when it is not.
        prefix_pages: n_tiers entries: the longest prefix fully present at
            tier <= t (the last is ``check_prefix``'s answer).
        pages_at: n_tiers entries: how many pages have their best tier = t.
        prefix_tokens: n_tiers entries: ``PageResult.prefix_tokens``,
            loadable from tier <= t (1.4; zeros from an older library).
    """

    __slots__ = ("n_tiers", "n_pages", "page_tier", "prefix_pages", "pages_at", "prefix_tokens")

    n_tiers: int
    n_pages: int
    page_tier: list[int | None]
    prefix_pages: list[int]
    pages_at: list[int]
    prefix_tokens: list[int]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TierResult):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in TierResult.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in TierResult.__slots__ if f != "page_tier")
        return f"TierResult({fields})"


# Results as the C call leaves them, read in one unpack (native alignment,
# the same as the compiler's): struct_size, n_pages, total_hits,
# prefix_hits, fast_path, prefix_tokens.
PAGE_RESULT = struct.Struct("@I5N")
# struct_size, n_tiers, n_pages, prefix_pages[4], pages_at[4], prefix_tokens[4].
TIER_RESULT = struct.Struct(f"@IIN{3 * _capi.SCI_TIERS_MAX}N")
# check_prefix's answer, one size_t; check_prefix_tokens', two.
SIZE_T = struct.Struct("@N")
TWO_SIZE_T = struct.Struct("@NN")
assert PAGE_RESULT.size == ctypes.sizeof(_capi.sci_page_result)
assert TIER_RESULT.size == ctypes.sizeof(_capi.sci_tier_result)


class _Pinned:
    """A bytearray whose address is fixed while this object lives (the
    ctypes view holds a buffer export, so the bytearray cannot be resized)."""

    __slots__ = ("data", "address", "view", "_ctypes_view")

    def __init__(self, size: int) -> None:
        self.data = bytearray(max(size, 1))
        self._ctypes_view = (ctypes.c_char * len(self.data)).from_buffer(self.data)
        self.address: int = ctypes.addressof(self._ctypes_view)
        self.view = memoryview(self.data)  # slices copy out without an intermediate bytearray


class Scratch:
    """One thread's buffers for the C answers (see the module docstring)."""

    __slots__ = ("out", "out_cap", "page", "tier", "prefix", "busy")

    def __init__(self) -> None:
        self.out = _Pinned(256)
        self.out_cap = 256
        self.page = _Pinned(PAGE_RESULT.size)
        PAGE_RESULT.pack_into(self.page.data, 0, PAGE_RESULT.size, 0, 0, 0, 0, 0)
        self.tier = _Pinned(TIER_RESULT.size)
        TIER_RESULT.pack_into(self.tier.data, 0, TIER_RESULT.size, *([0] * (2 + 3 * _capi.SCI_TIERS_MAX)))
        self.prefix = _Pinned(TWO_SIZE_T.size)
        self.busy = False

    def grow(self, cap: int) -> None:
        size = self.out_cap
        while size < cap:
            size *= 2
        self.out = _Pinned(size)
        self.out_cap = size


_local = threading.local()


def scratch() -> Scratch:
    """This thread's scratch; a fresh one if it is in use (a query made
    from a signal handler in the middle of another on the same thread)."""
    try:
        mine: Scratch = _local.scratch
    except AttributeError:
        mine = _local.scratch = Scratch()
    if mine.busy:
        return Scratch()
    return mine
