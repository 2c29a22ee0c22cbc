"""The C ABI of include/shared_cache_index.h, transcribed by hand for ctypes.

Every struct here mirrors the header field for field, in order, with the
same C types; tests/test_struct_layout.py compiles the header and compares
every size and offset. ``struct_size`` is always set from ``ctypes.sizeof``
of these classes (``init()``), so the library reads and writes exactly the
fields declared here.

Prototypes (``argtypes`` / ``restype``) are set once, when the library is
loaded (``bind()``); the package calls only the bound functions of the
``Api`` object, never the ``CDLL`` attributes directly.
"""

from __future__ import annotations

import ctypes
from ctypes import (
    POINTER,
    Structure,
    c_bool,
    c_char_p,
    c_int32,
    c_size_t,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import Any, Callable, TypeVar

# ---------------------------------------------------------------------------
# Constants (the header's #defines)

SCI_ABI_VERSION = 1

SCI_OK = 0
SCI_ERR_INVALID_ARGUMENT = 1
SCI_ERR_DECODE = 2
SCI_ERR_IO = 3
SCI_ERR_NO_MEMORY = 4
SCI_ERR_BUFFER_TOO_SMALL = 5
SCI_ERR_INTERNAL = 6

SCI_RESIDENCY_OBJECT = 0
SCI_RESIDENCY_PER_MEDIUM = 1

SCI_EVENT_STORED = 1
SCI_EVENT_REMOVED = 2
SCI_EVENT_ALL_CLEARED = 3
SCI_EVENT_TENANT_CLEARED = 4

SCI_HIT_ALL_PAGES = 0
SCI_HIT_TRAILING_PAGES = 1

SCI_LAYOUT_SGLANG = 0
SCI_LAYOUT_VLLM = 1

SCI_TIERS_MAX = 4
SCI_TIER_ABSENT = 0xFF

SCI_RECONNECT_RESYNC = 0
SCI_RECONNECT_EVENT_IDS = 1

SCI_LOG_DEBUG = 0
SCI_LOG_INFO = 1
SCI_LOG_WARN = 2
SCI_LOG_ERROR = 3

sci_status = c_int32

# ---------------------------------------------------------------------------
# Structs


class sci_str(Structure):
    # c_char_p: ctypes converts bytes in and keeps them alive in the owning
    # struct's _objects for as long as the struct lives. None is NULL.
    _fields_ = [("ptr", c_char_p), ("len", c_size_t)]


class sci_bytes(Structure):
    _fields_ = [("ptr", c_char_p), ("len", c_size_t)]


class sci_index_options(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("max_entries", c_uint64),
        # 1.2
        ("residency", c_uint32),
        # 1.3
        ("medium_tiers", sci_str),
    ]


class sci_event(Structure):
    _fields_ = [
        ("kind", c_int32),
        ("object_key", sci_str),
        ("group_id", sci_str),
        ("tenant_id", sci_str),
        ("medium", sci_str),
    ]


class sci_pool(Structure):
    _fields_ = [
        ("suffixes", POINTER(sci_str)),
        ("n_suffixes", c_size_t),
        ("hit_policy", c_int32),
        ("trailing_pages", c_uint32),
    ]


class sci_layout_spec(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("page_size", c_uint32),
        ("tp_size", c_uint32),
        ("pp_size", c_uint32),
        ("tp_lcm_size", c_uint32),
        ("is_mla_model", c_bool),
        ("is_eagle", c_bool),
        ("should_split_heads", c_bool),
        ("extra_backend_tag", sci_str),
        ("key_prefix", sci_str),
        ("tenant_id", sci_str),
        ("pools", POINTER(sci_pool)),
        ("n_pools", c_size_t),
    ]


class sci_page_result(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("n_pages", c_size_t),
        ("total_hits", c_size_t),
        ("prefix_hits", c_size_t),
        ("fast_path", c_size_t),
        # 1.4
        ("prefix_tokens", c_size_t),
    ]


class sci_request_extras(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("lora_name", sci_str),
        ("cache_salt", sci_str),
    ]


class sci_block_hashes(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("digests", c_void_p),
        ("event_hashes", c_void_p),
        ("n_hashes", c_size_t),
        ("n_tokens", c_size_t),
    ]


class sci_tier_result(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("n_tiers", c_uint32),
        ("n_pages", c_size_t),
        ("prefix_pages", c_size_t * SCI_TIERS_MAX),
        ("pages_at", c_size_t * SCI_TIERS_MAX),
        # 1.4
        ("prefix_tokens", c_size_t * SCI_TIERS_MAX),
    ]


class sci_subscriber_options(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("endpoint", sci_str),
        ("topic", sci_str),
        ("reconnect_ms", c_uint32),
        ("reconnect_max_ms", c_uint32),
        ("stale_after_ms", c_uint32),
        # 1.1
        ("snapshot_url", sci_str),
        ("resync_min_interval_ms", c_uint32),
        ("snapshot_timeout_ms", c_uint32),
        ("etcd_endpoints", sci_str),
        ("cluster_id", sci_str),
        ("event_port", c_uint32),
        ("admin_port", c_uint32),
        # 1.2
        ("redis_endpoint", sci_str),
        # 1.3
        ("status_url", sci_str),
        ("status_poll_ms", c_uint32),
        # 1.3.0
        ("reconnect_policy", c_uint32),
        ("resync_catch_up_max_ms", c_uint32),
    ]


class sci_stats(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("keys", c_uint64),
        ("groups", c_uint64),
        ("verified_groups", c_uint64),
        ("batches_applied", c_uint64),
        ("events_applied", c_uint64),
        ("duplicate_batches", c_uint64),
        ("sequence_gaps", c_uint64),
        ("clears", c_uint64),
        ("malformed_messages", c_uint64),
        ("ignored_events", c_uint64),
        ("capacity_refusals", c_uint64),
        ("last_sequence", c_uint64),
        ("has_sequence", c_bool),
        ("subscriber_connected", c_bool),
        ("subscriber_connects", c_uint64),
        ("subscriber_disconnects", c_uint64),
        ("messages_received", c_uint64),
        ("queries", c_uint64),
        ("pages_checked", c_uint64),
        ("page_hits", c_uint64),
        ("fast_path_hits", c_uint64),
        # 1.1
        ("resyncs", c_uint64),
        ("resync_failures", c_uint64),
        ("snapshot_keys", c_uint64),
        ("resyncing", c_bool),
        ("leader_changes", c_uint64),
        ("stores_withheld", c_uint64),
        ("summarised_pages", c_uint64),
        ("tail_numbers", c_uint64),
        ("groups_adopted", c_uint64),
        ("stray_keys", c_uint64),
        # 1.2
        ("tenant_clears", c_uint64),
        ("medium_removals_kept", c_uint64),
        # 1.3
        ("block_size_mismatches", c_uint64),
        ("tail_losses", c_uint64),
        ("restarts_suspected", c_uint64),
        ("resyncs_anchored", c_uint64),
        ("resyncs_timed", c_uint64),
        ("status_unavailable", c_uint64),
        ("removals_per_medium", c_uint64),
        ("removals_whole_key", c_uint64),
        ("stream_generation", c_uint64),
        ("residency_mismatches", c_uint64),
        ("subscriber_failures", c_uint64),
        ("keys_tier0", c_uint64),
        ("keys_tier1", c_uint64),
        ("keys_tier2", c_uint64),
        ("keys_tier3", c_uint64),
        # 1.3.0
        ("status_refused", c_uint64),
        ("resyncs_withholding", c_uint64),
        ("catch_ups_unanchored", c_uint64),
        ("disconnect_clears", c_uint64),
        ("stores_past_slot_capacity", c_uint64),  # 1.4
    ]


# Sizes the header implies on an LP64 target (x86-64, aarch64 Linux), where
# the library is built: a transcription slip (a missing or reordered field)
# changes one of them and fails the import instead of corrupting memory.
# tests/test_struct_layout.py checks every offset against the compiled header.
EXPECTED_SIZES_LP64 = {
    sci_str: 16,
    sci_bytes: 16,
    sci_index_options: 40,
    sci_event: 72,
    sci_pool: 24,
    sci_layout_spec: 88,
    sci_page_result: 48,
    sci_request_extras: 40,
    sci_block_hashes: 40,
    sci_tier_result: 112,
    sci_subscriber_options: 168,
    sci_stats: 424,
}

if ctypes.sizeof(c_void_p) == 8:
    for _struct, _size in EXPECTED_SIZES_LP64.items():
        if ctypes.sizeof(_struct) != _size:  # pragma: no cover - a transcription bug
            raise ImportError(
                f"shared_cache_index: ctypes struct {_struct.__name__} is {ctypes.sizeof(_struct)} bytes, "
                f"the header implies {_size}"
            )

S = TypeVar("S", bound=Structure)


def init(struct_type: type[S]) -> S:
    """The SCI_*_INIT value: struct_size = sizeof as declared here, the rest zero."""
    value = struct_type()
    setattr(value, "struct_size", ctypes.sizeof(struct_type))
    return value


# ---------------------------------------------------------------------------
# Prototypes

sci_log_fn = ctypes.CFUNCTYPE(None, c_void_p, c_int32, ctypes.POINTER(ctypes.c_char), c_size_t)

# name: (restype, argtypes). Every function the package uses; all must be
# exported by the library loaded (a missing one means a library too old).
PROTOTYPES: dict[str, tuple[Any, list[Any]]] = {
    "sci_abi_version": (c_uint32, []),
    "sci_version": (c_char_p, []),
    "sci_last_error": (c_char_p, []),
    "sci_index_new": (sci_status, [POINTER(sci_index_options), POINTER(c_void_p)]),
    "sci_index_free": (None, [c_void_p]),
    "sci_index_clear": (None, [c_void_p]),
    "sci_index_note_reconnect": (None, [c_void_p]),
    "sci_index_apply_events": (sci_status, [c_void_p, c_uint64, POINTER(sci_event), c_size_t]),
    "sci_index_apply_message": (sci_status, [c_void_p, POINTER(sci_bytes), c_size_t]),
    "sci_index_contains": (sci_status, [c_void_p, sci_str, sci_str, POINTER(c_bool)]),
    "sci_layout_new": (sci_status, [POINTER(sci_layout_spec), POINTER(c_void_p)]),
    "sci_layout_free": (None, [c_void_p]),
    "sci_layout_new_json": (sci_status, [sci_str, POINTER(c_void_p)]),
    "sci_layout_get_family": (c_int32, [c_void_p]),
    "sci_layout_block_size": (c_uint32, [c_void_p]),
    # The hot path: pointers are passed as plain integers (c_void_p), which
    # ctypes converts with the least work; the package computes them once.
    "sci_index_check_pages": (
        sci_status,
        [c_void_p, c_void_p, c_void_p, c_size_t, c_uint32, c_void_p, c_size_t, c_void_p],
    ),
    "sci_index_check_pages_with_extras": (
        sci_status,
        [c_void_p, c_void_p, c_void_p, c_size_t, c_uint32, c_void_p, c_void_p, c_size_t, c_void_p],
    ),
    "sci_index_check_prefix": (sci_status, [c_void_p, c_void_p, c_void_p, c_size_t, c_uint32, c_void_p]),
    "sci_index_check_prefix_with_extras": (
        sci_status,
        [c_void_p, c_void_p, c_void_p, c_size_t, c_uint32, c_void_p, c_void_p],
    ),
    "sci_index_check_page_hashes": (
        sci_status,
        [c_void_p, c_void_p, POINTER(sci_str), c_size_t, c_void_p, c_size_t, c_void_p],
    ),
    "sci_index_check_block_hashes": (
        sci_status,
        [c_void_p, c_void_p, POINTER(sci_block_hashes), c_uint32, c_void_p],
    ),
    "sci_index_check_tiers": (
        sci_status,
        [c_void_p, c_void_p, c_void_p, c_size_t, c_uint32, c_void_p, c_void_p, c_size_t, c_void_p],
    ),
    # 1.4
    "sci_index_check_prefix_tokens": (
        sci_status,
        [c_void_p, c_void_p, c_void_p, c_size_t, c_uint32, c_void_p, c_void_p, c_void_p],
    ),
    "sci_subscriber_start": (
        sci_status,
        [c_void_p, POINTER(sci_subscriber_options), POINTER(c_void_p)],
    ),
    "sci_subscriber_stop": (None, [c_void_p]),
    "sci_subscriber_retarget": (sci_status, [c_void_p, sci_str, sci_str]),
    "sci_index_stats": (sci_status, [c_void_p, POINTER(sci_stats)]),
    "sci_stats_format_prometheus": (
        sci_status,
        [c_void_p, sci_str, c_void_p, c_size_t, POINTER(c_size_t)],
    ),
    "sci_set_log_callback": (None, [sci_log_fn, c_void_p]),
}


class Api:
    """The library's functions with their prototypes set, as attributes
    named without the ``sci_`` prefix (``api.index_check_pages``)."""

    lib: ctypes.CDLL

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        for name, (restype, argtypes) in PROTOTYPES.items():
            function: Callable[..., Any] = getattr(lib, name)
            function.restype = restype  # type: ignore[attr-defined]
            function.argtypes = argtypes  # type: ignore[attr-defined]
            setattr(self, name[len("sci_"):], function)

    def __getattr__(self, name: str) -> Callable[..., Any]:  # for type checkers only
        raise AttributeError(name)


def missing_symbols(lib: ctypes.CDLL) -> list[str]:
    """The functions of PROTOTYPES that `lib` does not export."""
    missing = []
    for name in PROTOTYPES:
        try:
            getattr(lib, name)
        except AttributeError:
            missing.append(name)
    return missing


def to_str(value: bytes | None) -> sci_str:
    """A sci_str over `value` (None: NULL, 0); the caller keeps `value` alive."""
    if value is None:
        return sci_str(None, 0)
    return sci_str(value, len(value))


c_uint8_p = POINTER(c_uint8)
