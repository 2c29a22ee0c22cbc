"""Layouts: how a model's workers name their pages (sci_layout_*)."""

from __future__ import annotations

import ctypes
import time
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from . import _capi, _library
from .errors import InvalidArgument, closed, from_status

SGLANG = "sglang"
VLLM = "vllm"
_FAMILIES = {_capi.SCI_LAYOUT_SGLANG: SGLANG, _capi.SCI_LAYOUT_VLLM: VLLM}


def check_status(api: _capi.Api, status: int) -> None:
    """Raises the exception for a failed call (message: sci_last_error())."""
    if status != _capi.SCI_OK:
        message = api.last_error()
        raise from_status(status, (message or b"").decode("utf-8", "replace"))


def as_bytes(value: str | bytes | None, name: str) -> bytes | None:
    """`value` as the bytes of a sci_str (str: UTF-8); None stays None."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"{name}: expected str or bytes, got {type(value).__name__}")


def as_u32(value: Any, name: str) -> int:
    """`value` as a C uint32_t, or InvalidArgument naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = value.__index__()
        except (AttributeError, TypeError):
            raise TypeError(f"{name}: expected an int, got {type(value).__name__}") from None
    if not 0 <= value <= 0xFFFFFFFF:
        raise InvalidArgument(f"{name} = {value} is out of the u32 range")
    return int(value)


@dataclass(frozen=True)
class Pool:
    """An advertised object pool of a layout (``sci_pool``).

    Args:
        suffixes: the key suffixes of each covered page, in order (non-empty).
        trailing_pages: None: the pool covers every page
            (``SCI_HIT_ALL_PAGES``); n: only the last n pages
            (``SCI_HIT_TRAILING_PAGES``).
    """

    suffixes: Sequence[str | bytes]
    trailing_pages: int | None = None


_SPEC_FIELDS = {
    "pp_size": "u32",
    "tp_lcm_size": "u32",
    "is_mla_model": "bool",
    "is_eagle": "bool",
    "should_split_heads": "bool",
    "extra_backend_tag": "str",
    "key_prefix": "str",
    "tenant_id": "str",
    "pools": "pools",
}


def _free_layout(free: Any, handle: int) -> None:
    free(handle)


# How long close() waits for the C calls already in flight on an Index or a
# Layout before leaving the free to collection instead (see wait_idle).
CLOSE_WAIT_SECONDS = 10.0


def wait_idle(inflight: "deque[None]") -> bool:
    """Waits until every call counted in `inflight` has returned; True then,
    False after CLOSE_WAIT_SECONDS.

    The protocol, for close() against calls on other threads: a call appends
    to its object's `_inflight` deque BEFORE it reads `_handle` and pops in
    ``finally``; close() sets `_handle` to None, swaps in a fresh deque, and
    waits here on the old one before freeing. deque.append / pop and the
    attribute reads are atomic under the GIL, so a call either appended
    before close() cleared the handle (it may be in C with the GIL released:
    waited for) or reads None and raises the closed error without calling
    C. Calls starting after the swap count in the new deque, so a steady
    stream of them cannot keep this one from draining.

    The bound covers the only way a counted call can outlive the wait: a
    close() from a signal handler (or a log callback) running on a thread
    that is itself inside a call of the same object. The caller then skips
    the free; collection frees the handle later, which is safe because a
    running call holds a reference to its object."""
    if not inflight:
        return True
    deadline = time.monotonic() + CLOSE_WAIT_SECONDS
    delay = 1e-5
    while inflight:
        if time.monotonic() > deadline:
            return False
        time.sleep(delay)  # the calls waited for are in C, the GIL released
        delay = min(delay * 2, 1e-3)
    return True


class Layout:
    """An immutable layout (``sci_layout``), shareable by any number of
    threads and indexes.

    ``Layout(page_size, tp_size=1, **spec_fields)`` builds an SGLang layout
    from ``sci_layout_spec`` fields: ``pp_size``, ``tp_lcm_size`` (ints),
    ``is_mla_model``, ``is_eagle``, ``should_split_heads`` (bools),
    ``extra_backend_tag``, ``key_prefix``, ``tenant_id`` (str; None or ""
    unset) and ``pools`` (a sequence of ``Pool``).

    Raises:
        InvalidArgument: a value the library refuses (the message names the
            field), or an int out of the u32 range.
        TypeError: an unknown field name, or a value of the wrong type.
        LibraryNotFound: the shared library cannot be loaded.

    A layout is freed by ``close()``, by leaving a ``with`` block, or when it
    is garbage collected (at the latest at interpreter exit), exactly once.
    ``close()`` may race with queries on other threads: it waits for the
    queries already in C, later ones raise ``InvalidArgument``.
    """

    __slots__ = ("_handle", "_block_size", "_family", "_finalizer", "_api", "_inflight", "__weakref__")

    def __init__(self, page_size: int, tp_size: int = 1, **spec_fields: Any) -> None:
        self._handle: int | None = None
        # Queries using this layout now (Index's queries count themselves
        # here; see wait_idle).
        self._inflight: deque[None] = deque()
        api = _library.api()
        spec = _capi.init(_capi.sci_layout_spec)
        spec.page_size = as_u32(page_size, "page_size")
        spec.tp_size = as_u32(tp_size, "tp_size")
        keep: list[Any] = []  # what the spec points to, alive until the call returns
        for name, value in spec_fields.items():
            kind = _SPEC_FIELDS.get(name)
            if kind is None:
                raise TypeError(
                    f"Layout: unknown field {name!r} (sci_layout_spec fields: page_size, tp_size, "
                    + ", ".join(_SPEC_FIELDS)
                    + ")"
                )
            if kind == "u32":
                setattr(spec, name, as_u32(value, name))
            elif kind == "bool":
                if not isinstance(value, bool):
                    raise TypeError(f"{name}: expected a bool, got {type(value).__name__}")
                setattr(spec, name, value)
            elif kind == "str":
                raw = as_bytes(value, name)
                keep.append(raw)
                setattr(spec, name, _capi.to_str(raw))
            else:
                pools, count = _pool_array(value, keep)
                spec.pools = pools
                spec.n_pools = count
        out = ctypes.c_void_p()
        check_status(api, api.layout_new(ctypes.byref(spec), ctypes.byref(out)))
        self._adopt(api, out.value)

    @classmethod
    def from_json(cls, text: str | bytes) -> "Layout":
        """A layout from the runtime config a worker publishes
        (``sci_layout_new_json``): SGLang's HiCache config or vLLM's
        MooncakeStoreConnector descriptor (bare or wrapped).

        Args:
            text: the JSON text (str: UTF-8 encoded).

        Returns:
            The layout.

        Raises:
            InvalidArgument: not a JSON object, a required field missing or
                of the wrong type, a value the library cannot honour (the
                message names the field by its JSON path).
            TypeError: `text` is neither str nor bytes.
        """
        api = _library.api()
        raw = as_bytes(text, "text")
        if raw is None:
            raise TypeError("text: expected str or bytes, got None")
        out = ctypes.c_void_p()
        check_status(api, api.layout_new_json(_capi.to_str(raw), ctypes.byref(out)))
        layout = cls.__new__(cls)
        layout._handle = None
        layout._inflight = deque()
        layout._adopt(api, out.value)
        return layout

    def _adopt(self, api: _capi.Api, handle: int | None) -> None:
        if not handle:  # pragma: no cover - SCI_OK always sets it
            raise InvalidArgument("the library returned no layout")
        self._api = api
        self._handle = handle
        # Cached: both are properties of the immutable layout, read per query.
        self._block_size = int(api.layout_block_size(handle))
        self._family = _FAMILIES.get(int(api.layout_get_family(handle)), SGLANG)
        # weakref.finalize frees exactly once: at close(), at collection or at exit.
        self._finalizer = weakref.finalize(self, _free_layout, api.layout_free, handle)

    @property
    def block_size(self) -> int:
        """The block size a router queries this layout with
        (``sci_layout_block_size``): SGLang's page_size, vLLM's
        main_event_block_size."""
        self._require()
        return self._block_size

    @property
    def family(self) -> str:
        """``"sglang"`` or ``"vllm"`` (``sci_layout_get_family``)."""
        self._require()
        return self._family

    @property
    def closed(self) -> bool:
        """Whether close() was called."""
        return self._handle is None

    def _require(self) -> int:
        handle = self._handle
        if handle is None:
            raise closed("Layout")
        return handle

    def close(self) -> None:
        """Frees the layout (a second call does nothing). Queries using it
        on other threads may still run: the ones already in C are waited
        for, later ones raise ``InvalidArgument``."""
        if self._handle is None:
            return
        self._handle = None  # first: see wait_idle
        inflight, self._inflight = self._inflight, deque()
        if wait_idle(inflight):
            self._finalizer()

    def __enter__(self) -> "Layout":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._handle is None:
            return "<shared_cache_index.Layout closed>"
        return f"<shared_cache_index.Layout {self._family} block_size={self._block_size}>"


def _pool_array(pools: Iterable[Pool] | None, keep: list[Any]) -> tuple[Any, int]:
    """(pointer to a sci_pool array or None, count); what it points to goes to `keep`."""
    if pools is None:
        return None, 0
    items = list(pools)
    if not items:
        return None, 0
    array = (_capi.sci_pool * len(items))()
    for i, pool in enumerate(items):
        if not isinstance(pool, Pool):
            raise TypeError(f"pools[{i}]: expected a shared_cache_index.Pool, got {type(pool).__name__}")
        raw = [as_bytes(s, f"pools[{i}].suffixes") or b"" for s in pool.suffixes]
        suffixes = (_capi.sci_str * max(len(raw), 1))(*[_capi.to_str(s) for s in raw])
        keep.extend([raw, suffixes])
        array[i].suffixes = ctypes.cast(suffixes, ctypes.POINTER(_capi.sci_str)) if raw else None
        array[i].n_suffixes = len(raw)
        if pool.trailing_pages is None:
            array[i].hit_policy = _capi.SCI_HIT_ALL_PAGES
        else:
            array[i].hit_policy = _capi.SCI_HIT_TRAILING_PAGES
            array[i].trailing_pages = as_u32(pool.trailing_pages, f"pools[{i}].trailing_pages")
    keep.append(array)
    return ctypes.cast(array, ctypes.POINTER(_capi.sci_pool)), len(items)
