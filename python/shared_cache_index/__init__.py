"""shared_cache_index: which pages of a prompt are already in the shared
Mooncake KV-cache pool, for an LLM router.

A ctypes binding of the C library's stable ABI (libshared_cache_index.so.1,
include/shared_cache_index.h): no compiler at install, no runtime
dependency; numpy optional. See docs/python.md.

    import shared_cache_index as sci
    ix = sci.Index()
    sub = sci.Subscriber(ix, "tcp://mooncake-master:5557",
                         snapshot_url="http://mooncake-master:9003/get_all_keys")
    lay = sci.Layout(page_size=64, tp_size=8)
    r = ix.check_pages(lay, tokens)      # r.prefix_hits, r.hits, ...
"""

from __future__ import annotations

from . import _library
from ._capi import SCI_ABI_VERSION, SCI_TIERS_MAX
from ._log import set_log_forwarding
from .errors import (
    BufferTooSmall,
    DecodeError,
    Error,
    InternalError,
    InvalidArgument,
    IOFailure,
    LibraryNotFound,
    NoMemory,
)
from .events import Event
from .index import Index
from .layout import SGLANG, VLLM, Layout, Pool
from .query import PageResult, RequestExtras, TierResult
from .subscriber import RECONNECT_EVENT_IDS, RECONNECT_RESYNC, Subscriber

__version__ = "1.4.0"

MIN_LIBRARY_VERSION = ".".join(str(p) for p in _library.MIN_LIBRARY_VERSION)


def version() -> str:
    """The loaded library's version, "MAJOR.MINOR.PATCH" (``sci_version``).

    Raises:
        LibraryNotFound: the shared library cannot be loaded (or is too old).
    """
    return str(_library.api().version().decode("ascii"))


def abi_version() -> int:
    """The loaded library's ABI version (``sci_abi_version``); this package
    speaks ``SCI_ABI_VERSION``."""
    return int(_library.api().abi_version())


def library_path() -> str:
    """Where the loaded library came from (SCI_LIB, SCI_LIB_DIR, pkg-config
    or the dynamic loader)."""
    return _library.library_path()


def _on_load() -> None:
    set_log_forwarding(True)


_library.on_load.append(_on_load)

__all__ = [
    "BufferTooSmall",
    "DecodeError",
    "Error",
    "Event",
    "IOFailure",
    "Index",
    "InternalError",
    "InvalidArgument",
    "Layout",
    "LibraryNotFound",
    "MIN_LIBRARY_VERSION",
    "NoMemory",
    "PageResult",
    "Pool",
    "RECONNECT_EVENT_IDS",
    "RECONNECT_RESYNC",
    "RequestExtras",
    "SCI_ABI_VERSION",
    "SCI_TIERS_MAX",
    "SGLANG",
    "Subscriber",
    "TierResult",
    "VLLM",
    "abi_version",
    "library_path",
    "set_log_forwarding",
    "version",
]
