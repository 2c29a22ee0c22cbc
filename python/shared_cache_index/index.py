"""The index (sci_index_*): events in, page queries out."""

from __future__ import annotations

import ctypes
import weakref
from array import array
from collections import deque
from typing import TYPE_CHECKING, Any, Sequence

from . import _capi, _library
from .errors import InternalError, InvalidArgument, closed
from .events import Event
from .layout import Layout, as_bytes, as_u32, check_status, wait_idle
from .query import PAGE_RESULT, SIZE_T, TIER_RESULT, TWO_SIZE_T, PageResult, RequestExtras, TierResult, scratch
from .tokens import Tokens, as_u32 as tokens_as_u32

if TYPE_CHECKING:
    from .subscriber import Subscriber

_RESIDENCY = {"object": _capi.SCI_RESIDENCY_OBJECT, "per-medium": _capi.SCI_RESIDENCY_PER_MEDIUM}
_STATS_FIELDS = [name for name, _ in _capi.sci_stats._fields_ if name != "struct_size"]
_BOOL_STATS = {name for name, kind in _capi.sci_stats._fields_ if kind is ctypes.c_bool}
_new_page_result = PageResult.__new__
_new_tier_result = TierResult.__new__
_ABSENT = _capi.SCI_TIER_ABSENT


def _free_index(free: Any, handle: int, subscriber_stop: list[Any]) -> None:
    # sci_index_free requires that no subscriber still feeds the index. A
    # subscriber stops itself (stop(), its own finalizer), but when it and
    # its index are collected in one reference cycle this finalizer may run
    # first: it stops the subscriber then (once per subscriber handle, see
    # subscriber.SubscriberStop).
    stop = subscriber_stop[0]
    if stop is not None:
        stop()
    free(handle)


def _not_a_layout(layout: Any) -> TypeError:
    return TypeError(f"layout: expected a shared_cache_index.Layout, got {type(layout).__name__}")


def _extras_address(extras: RequestExtras | None) -> int | None:
    if extras is None:
        return None
    if not isinstance(extras, RequestExtras):
        raise TypeError(f"extras: expected a RequestExtras or None, got {type(extras).__name__}")
    return extras._address


class Index:
    """An exact index of the objects a Mooncake master reports (``sci_index``).

    Args:
        max_entries: most entries (keys + groups) held at once; None: the
            library's default (33554432).
        residency: ``"object"`` (the default: any removal drops the key) or
            ``"per-medium"`` (a key is present while some medium holds it).
        medium_tiers: storage tiers for ``check_tiers``, e.g.
            ``"cpu=0,disk=1"`` (None: that default).

    Raises:
        InvalidArgument: a bad option (the message names it).
        LibraryNotFound: the shared library cannot be loaded.

    Every method may be called from any number of threads at once,
    ``close()`` included: it waits for the calls already in C, and later
    ones raise. The queries release the GIL. A closed index raises
    ``InvalidArgument`` (an ``Error``) on every use. An index is freed once:
    by ``close()``, by leaving a ``with`` block, or when collected (at the
    latest at interpreter exit); a running ``Subscriber`` keeps its index
    alive, and is stopped before the index is freed.
    """

    __slots__ = ("_handle", "_api", "_finalizer", "_subscriber", "_subscriber_stop", "_inflight", "__weakref__")

    def __init__(self, max_entries: int | None = None, residency: str = "object",
                 medium_tiers: str | bytes | None = None) -> None:
        self._handle: int | None = None
        self._subscriber: weakref.ref[Subscriber] | None = None
        # Calls passing the handle to C now (see layout.wait_idle).
        self._inflight: deque[None] = deque()
        # The running subscriber's SubscriberStop, for the finalizer.
        self._subscriber_stop: list[Any] = [None]
        api = _library.api()
        options = _capi.init(_capi.sci_index_options)
        if max_entries is not None:
            if isinstance(max_entries, bool) or not isinstance(max_entries, int):
                raise TypeError(f"max_entries: expected an int, got {type(max_entries).__name__}")
            if not 0 < max_entries <= 0xFFFFFFFFFFFFFFFF:
                raise InvalidArgument(f"max_entries = {max_entries}: give a positive count (None: the default)")
            options.max_entries = max_entries
        if residency not in _RESIDENCY:
            raise InvalidArgument(f"residency = {residency!r}: expected \"object\" or \"per-medium\"")
        options.residency = _RESIDENCY[residency]
        tiers = as_bytes(medium_tiers, "medium_tiers")
        options.medium_tiers = _capi.to_str(tiers)
        out = ctypes.c_void_p()
        check_status(api, api.index_new(ctypes.byref(options), ctypes.byref(out)))
        handle = out.value
        if not handle:  # pragma: no cover - SCI_OK always sets it
            raise InternalError("sci_index_new returned no index")
        self._api = api
        self._handle = handle
        self._finalizer = weakref.finalize(self, _free_index, api.index_free, handle, self._subscriber_stop)

    # ---- lifetime ----------------------------------------------------------

    def _require(self) -> int:
        handle = self._handle
        if handle is None:
            raise closed("Index")
        return handle

    @property
    def closed(self) -> bool:
        """Whether close() was called."""
        return self._handle is None

    def close(self) -> None:
        """Stops this index's subscriber if one runs, then frees the index
        (a second call does nothing). Calls on other threads may still run:
        the ones already in C are waited for, later ones raise
        ``InvalidArgument``."""
        if self._handle is None:
            return
        self._handle = None  # first: see layout.wait_idle
        inflight, self._inflight = self._inflight, deque()
        idle = wait_idle(inflight)
        # After the wait: a Subscriber being started meanwhile is registered
        # by now, and is stopped too.
        subscriber = self._subscriber() if self._subscriber is not None else None
        if subscriber is not None:
            subscriber.stop()
        if idle:
            self._finalizer()

    def __enter__(self) -> "Index":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "<shared_cache_index.Index closed>" if self._handle is None else "<shared_cache_index.Index>"

    # ---- events ------------------------------------------------------------

    def apply_events(self, sequence: int, events: Sequence[Event]) -> None:
        """Applies one batch published under `sequence`
        (``sci_index_apply_events``; the sequence rules of the header: a
        duplicate is ignored, a gap clears first).

        Args:
            sequence: the batch's sequence number (u64).
            events: the batch, in order.

        Raises:
            InvalidArgument: a closed index, a sequence out of the u64 range.
            TypeError: an element that is not an ``Event``.
            NoMemory: memory ran out mid-batch (the index was cleared).
        """
        inflight = self._inflight
        inflight.append(None)  # before the handle is read: see layout.wait_idle
        try:
            handle = self._require()
            if isinstance(sequence, bool) or not isinstance(sequence, int):
                raise TypeError(f"sequence: expected an int, got {type(sequence).__name__}")
            if not 0 <= sequence <= 0xFFFFFFFFFFFFFFFF:
                raise InvalidArgument(f"sequence = {sequence} is out of the u64 range")
            # One tuple per event, turned into the sci_event array by ctypes in
            # one go (the bytes stay referenced by `rows` until the call returns).
            rows: list[Any] = []
            for i, event in enumerate(events):
                if not isinstance(event, Event):
                    raise TypeError(f"events[{i}]: expected a shared_cache_index.Event, got {type(event).__name__}")
                kind, key, group, tenant, medium = event
                k = key.encode() if type(key) is str else as_bytes(key, f"events[{i}].key") or b""
                g = group.encode() if type(group) is str else as_bytes(group, f"events[{i}].group_id") or b""
                t = tenant.encode() if type(tenant) is str else as_bytes(tenant, f"events[{i}].tenant") or b""
                m = medium.encode() if type(medium) is str else as_bytes(medium, f"events[{i}].medium") or b""
                rows.append((kind, (k, len(k)), (g, len(g)), (t, len(t)), (m, len(m))))
            batch = (_capi.sci_event * len(rows))(*rows)
            api = self._api
            check_status(api, api.index_apply_events(handle, sequence, batch, len(events)))
        finally:
            inflight.pop()

    def apply_message(self, frames: Sequence[bytes]) -> None:
        """Decodes one ZeroMQ multipart message (its frames) in any wire
        format the library reads and applies it as one batch
        (``sci_index_apply_message``).

        Raises:
            DecodeError: a malformed message (nothing applied; counted).
            InvalidArgument: a closed index.
            TypeError: a frame that is not bytes.
        """
        inflight = self._inflight
        inflight.append(None)  # before the handle is read: see layout.wait_idle
        try:
            handle = self._require()
            raw = (_capi.sci_bytes * len(frames))()
            for i, frame in enumerate(frames):
                if not isinstance(frame, (bytes, bytearray)):
                    raise TypeError(f"frames[{i}]: expected bytes, got {type(frame).__name__}")
                data = bytes(frame)
                raw[i].ptr = data
                raw[i].len = len(data)
            api = self._api
            check_status(api, api.index_apply_message(handle, raw, len(frames)))
        finally:
            inflight.pop()

    def clear(self) -> None:
        """Forgets every key, group and the sequence cursor (``sci_index_clear``)."""
        inflight = self._inflight
        inflight.append(None)  # before the handle is read: see layout.wait_idle
        try:
            self._api.index_clear(self._require())
        finally:
            inflight.pop()

    def note_reconnect(self, ) -> None:
        """For a caller feeding ``apply_message`` from its own socket: that
        socket lost its connection (``sci_index_note_reconnect``)."""
        inflight = self._inflight
        inflight.append(None)  # before the handle is read: see layout.wait_idle
        try:
            self._api.index_note_reconnect(self._require())
        finally:
            inflight.pop()

    # ---- reads -------------------------------------------------------------

    def contains(self, key: str | bytes, tenant: str | bytes = "") -> bool:
        """Whether `key` is stored for `tenant` ("" = "default")
        (``sci_index_contains``).

        Raises:
            InvalidArgument: a closed index.
        """
        inflight = self._inflight
        inflight.append(None)  # before the handle is read: see layout.wait_idle
        try:
            handle = self._require()
            key_bytes = as_bytes(key, "key")
            tenant_bytes = as_bytes(tenant, "tenant")
            present = ctypes.c_bool()
            api = self._api
            check_status(api, api.index_contains(handle, _capi.to_str(tenant_bytes), _capi.to_str(key_bytes),
                                                 ctypes.byref(present)))
            return bool(present.value)
        finally:
            inflight.pop()

    def stats(self) -> dict[str, int]:
        """Every ``sci_stats`` counter by its C name (``struct_size`` left
        out; the bools as 0 / 1 ints: has_sequence, subscriber_connected,
        resyncing) (``sci_index_stats``).

        Raises:
            InvalidArgument: a closed index.
        """
        inflight = self._inflight
        inflight.append(None)  # before the handle is read: see layout.wait_idle
        try:
            handle = self._require()
            raw = _capi.init(_capi.sci_stats)
            api = self._api
            check_status(api, api.index_stats(handle, ctypes.byref(raw)))
            return {name: int(getattr(raw, name)) for name in _STATS_FIELDS}
        finally:
            inflight.pop()

    def prometheus(self, labels: str | bytes = "") -> str:
        """The counters in the Prometheus text format (0.0.4)
        (``sci_stats_format_prometheus``).

        Args:
            labels: a label list body added to every sample, e.g.
                ``'pool="mooncake-a"'``; "" for none.

        Raises:
            InvalidArgument: bad label syntax, a closed index.
        """
        inflight = self._inflight
        inflight.append(None)  # before the handle is read: see layout.wait_idle
        try:
            handle = self._require()
            label_bytes = as_bytes(labels, "labels")
            api = self._api
            needed = ctypes.c_size_t()
            # The size first, then the text; counters may grow in between, so
            # the buffer has room to spare and the exchange is retried.
            for _ in range(8):
                status = api.stats_format_prometheus(handle, _capi.to_str(label_bytes), None, 0, ctypes.byref(needed))
                if status not in (_capi.SCI_OK, _capi.SCI_ERR_BUFFER_TOO_SMALL):
                    check_status(api, status)
                buffer = ctypes.create_string_buffer(needed.value + 4096)
                status = api.stats_format_prometheus(handle, _capi.to_str(label_bytes), buffer, len(buffer),
                                                     ctypes.byref(needed))
                if status == _capi.SCI_OK:
                    return buffer.raw[: needed.value].decode("utf-8")
                if status != _capi.SCI_ERR_BUFFER_TOO_SMALL:
                    check_status(api, status)
            check_status(api, _capi.SCI_ERR_BUFFER_TOO_SMALL)  # pragma: no cover
            raise AssertionError("unreachable")  # pragma: no cover
        finally:
            inflight.pop()

    # ---- page queries (the router's hot path) ------------------------------

    def check_pages(self, layout: Layout, tokens: Tokens, block_size: int | None = None,
                    extras: RequestExtras | None = None) -> PageResult:
        """Which whole pages of `tokens` are in the pool
        (``sci_index_check_pages``, ``..._with_extras`` when `extras` is set).

        Args:
            layout: the model's layout.
            tokens: the prompt's token ids (see ``shared_cache_index.tokens``:
                ``array('I')`` and numpy ``uint32`` are passed without a copy).
            block_size: the router's block size; None: ``layout.block_size``.
                Another value answers zero pages (counted as a mismatch).
            extras: a vLLM request's LoRA name / cache salt, or None.

        Returns:
            A ``PageResult``.

        Raises:
            InvalidArgument: a closed index or layout, a token or block size
                out of the u32 range.
            TypeError: `extras` of the wrong type.
        """
        # Counted in flight on both objects before their handles are read:
        # a close() on another thread waits for this call's C call (see
        # layout.wait_idle).
        inflight = self._inflight
        try:
            layout_inflight = layout._inflight
        except AttributeError:
            raise _not_a_layout(layout) from None
        inflight.append(None)
        layout_inflight.append(None)
        try:
            handle = self._handle
            layout_handle = layout._handle
            if handle is None or layout_handle is None:
                raise closed("Index" if handle is None else "Layout")
            address: int | None
            if type(tokens) is array and tokens.typecode == "I":
                # A buffer export held until the C call has returned (the
                # GIL is released meanwhile): another thread resizing the
                # array gets BufferError instead of freeing what C reads.
                hold = memoryview(tokens)
                address, n_tokens = tokens.buffer_info()
            else:
                address, n_tokens, hold = tokens_as_u32(tokens)  # the owner holds the export
            own_block = layout._block_size
            block = own_block if block_size is None else as_u32(block_size, "block_size")
            cap = n_tokens // own_block if own_block else 0
            s = scratch()
            if cap > s.out_cap:
                s.grow(cap)
            s.busy = True
            try:
                api = self._api
                if extras is None:
                    status = api.index_check_pages(handle, layout_handle, address, n_tokens, block,
                                                   s.out.address, cap, s.page.address)
                else:
                    status = api.index_check_pages_with_extras(handle, layout_handle, address, n_tokens, block,
                                                               _extras_address(extras), s.out.address, cap,
                                                               s.page.address)
                if status:
                    check_status(api, status)
                r = _new_page_result(PageResult)
                _, n_pages, r.total_hits, r.prefix_hits, r.fast_path, r.prefix_tokens = \
                    PAGE_RESULT.unpack_from(s.page.data)
                r.n_pages = n_pages
                r.hits_bytes = s.out.view[:n_pages].tobytes()
                r._hits = None
                return r
            finally:
                s.busy = False
        finally:
            # Releases the export now, even when a traceback keeps this frame.
            hold = None  # noqa: F841
            layout_inflight.pop()
            inflight.pop()

    def check_prefix(self, layout: Layout, tokens: Tokens, block_size: int | None = None,
                     extras: RequestExtras | None = None) -> int:
        """The usable prefix in pages (``sci_index_check_prefix``): SGLang,
        the leading run of pages fully present (nothing past the first miss
        is looked up); vLLM, Dynamo's answer in blocks. Arguments and
        exceptions as ``check_pages``.

        Returns:
            The number of pages (blocks).
        """
        inflight = self._inflight  # counted as in check_pages
        try:
            layout_inflight = layout._inflight
        except AttributeError:
            raise _not_a_layout(layout) from None
        inflight.append(None)
        layout_inflight.append(None)
        try:
            handle = self._handle
            layout_handle = layout._handle
            if handle is None or layout_handle is None:
                raise closed("Index" if handle is None else "Layout")
            address: int | None
            if type(tokens) is array and tokens.typecode == "I":
                hold = memoryview(tokens)  # the export, as in check_pages
                address, n_tokens = tokens.buffer_info()
            else:
                address, n_tokens, hold = tokens_as_u32(tokens)
            block = layout._block_size if block_size is None else as_u32(block_size, "block_size")
            s = scratch()
            s.busy = True
            try:
                api = self._api
                if extras is None:
                    status = api.index_check_prefix(handle, layout_handle, address, n_tokens, block, s.prefix.address)
                else:
                    status = api.index_check_prefix_with_extras(handle, layout_handle, address, n_tokens, block,
                                                                _extras_address(extras), s.prefix.address)
                if status:
                    check_status(api, status)
                return int(SIZE_T.unpack_from(s.prefix.data)[0])
            finally:
                s.busy = False
        finally:
            hold = None  # noqa: F841 (as in check_pages)
            layout_inflight.pop()
            inflight.pop()

    def check_prefix_tokens(self, layout: Layout, tokens: Tokens, block_size: int | None = None,
                            extras: RequestExtras | None = None) -> tuple[int, int]:
        """The prefix query answering in pages and in tokens at once
        (``sci_index_check_prefix_tokens``, 1.4): the walk of
        ``check_prefix`` (it stops at the first missing page), with the
        credit of ``PageResult.prefix_tokens``. Arguments and exceptions as
        ``check_pages``.

        Returns:
            (prefix_pages, prefix_tokens): the tokens the engine will load,
            never the prompt's last one. SGLang: prefix_pages x page_size,
            at most the whole pages before the last token; vLLM: at least
            prefix_pages x block_size (whole chunks past the last whole
            router block where the layout loads them).
        """
        inflight = self._inflight  # counted as in check_pages
        try:
            layout_inflight = layout._inflight
        except AttributeError:
            raise _not_a_layout(layout) from None
        inflight.append(None)
        layout_inflight.append(None)
        try:
            handle = self._handle
            layout_handle = layout._handle
            if handle is None or layout_handle is None:
                raise closed("Index" if handle is None else "Layout")
            address: int | None
            if type(tokens) is array and tokens.typecode == "I":
                hold = memoryview(tokens)  # the export, as in check_pages
                address, n_tokens = tokens.buffer_info()
            else:
                address, n_tokens, hold = tokens_as_u32(tokens)
            block = layout._block_size if block_size is None else as_u32(block_size, "block_size")
            s = scratch()
            s.busy = True
            try:
                api = self._api
                out = s.prefix.address
                status = api.index_check_prefix_tokens(handle, layout_handle, address, n_tokens, block,
                                                       _extras_address(extras), out, out + SIZE_T.size)
                if status:
                    check_status(api, status)
                pages, credited = TWO_SIZE_T.unpack_from(s.prefix.data)
                return int(pages), int(credited)
            finally:
                s.busy = False
        finally:
            hold = None  # noqa: F841 (as in check_pages)
            layout_inflight.pop()
            inflight.pop()

    def check_tiers(self, layout: Layout, tokens: Tokens, block_size: int | None = None,
                    extras: RequestExtras | None = None) -> TierResult:
        """Which tier each page is in, and the usable prefix per tier
        (``sci_index_check_tiers``). Arguments and exceptions as
        ``check_pages``.

        Returns:
            A ``TierResult``.
        """
        inflight = self._inflight  # counted as in check_pages
        try:
            layout_inflight = layout._inflight
        except AttributeError:
            raise _not_a_layout(layout) from None
        inflight.append(None)
        layout_inflight.append(None)
        try:
            handle = self._handle
            layout_handle = layout._handle
            if handle is None or layout_handle is None:
                raise closed("Index" if handle is None else "Layout")
            address: int | None
            if type(tokens) is array and tokens.typecode == "I":
                hold = memoryview(tokens)  # the export, as in check_pages
                address, n_tokens = tokens.buffer_info()
            else:
                address, n_tokens, hold = tokens_as_u32(tokens)
            own_block = layout._block_size
            block = own_block if block_size is None else as_u32(block_size, "block_size")
            cap = n_tokens // own_block if own_block else 0
            s = scratch()
            if cap > s.out_cap:
                s.grow(cap)
            s.busy = True
            try:
                api = self._api
                status = api.index_check_tiers(handle, layout_handle, address, n_tokens, block,
                                               _extras_address(extras), s.out.address, cap, s.tier.address)
                if status:
                    check_status(api, status)
                fields = TIER_RESULT.unpack_from(s.tier.data)
                n_tiers = fields[1]
                n_pages = fields[2]
                m = _capi.SCI_TIERS_MAX
                r = _new_tier_result(TierResult)
                r.n_tiers = n_tiers
                r.n_pages = n_pages
                r.prefix_pages = list(fields[3:3 + n_tiers])
                r.pages_at = list(fields[3 + m:3 + m + n_tiers])
                r.prefix_tokens = list(fields[3 + 2 * m:3 + 2 * m + n_tiers])
                r.page_tier = [None if t == _ABSENT else t for t in s.out.view[:n_pages]]
                return r
            finally:
                s.busy = False
        finally:
            hold = None  # noqa: F841 (as in check_pages)
            layout_inflight.pop()
            inflight.pop()

    def check_page_hashes(self, layout: Layout, page_hashes: Sequence[str | bytes]) -> PageResult:
        """The page query for a caller that already holds SGLang's page
        hashes (64 lowercase hex characters each, in page order)
        (``sci_index_check_page_hashes``).

        Raises:
            InvalidArgument: a malformed hash (named), a vLLM layout (use
                ``check_block_hashes``), a closed index or layout.
        """
        inflight = self._inflight
        layout_inflight = layout._inflight
        # Counted before the handles are read: see layout.wait_idle.
        inflight.append(None)
        layout_inflight.append(None)
        try:
            handle = self._require()
            layout_handle = layout._require()
            raw = [as_bytes(h, f"page_hashes[{i}]") or b"" for i, h in enumerate(page_hashes)]
            strs = (_capi.sci_str * len(raw))(*[_capi.to_str(h) for h in raw])
            s = scratch()
            if len(raw) > s.out_cap:
                s.grow(len(raw))
            s.busy = True
            try:
                api = self._api
                check_status(api, api.index_check_page_hashes(handle, layout_handle, strs, len(raw), s.out.address,
                                                              len(raw), s.page.address))
                r = _new_page_result(PageResult)
                _, r.n_pages, r.total_hits, r.prefix_hits, r.fast_path, r.prefix_tokens = \
                    PAGE_RESULT.unpack_from(s.page.data)
                r.hits_bytes = s.out.view[:r.n_pages].tobytes()
                r._hits = None
                return r
            finally:
                s.busy = False
        finally:
            layout_inflight.pop()
            inflight.pop()

    def check_block_hashes(self, layout: Layout, *, digests: bytes | Sequence[bytes] | None = None,
                           event_hashes: Sequence[int] | None = None, n_tokens: int = 0,
                           block_size: int | None = None) -> int:
        """Dynamo's answer for a vLLM request by the block hashes the caller
        already holds (``sci_index_check_block_hashes``): give exactly one of

        Args:
            digests: the full 32-byte block digests, in order (one bytes of
                n x 32 bytes, or a sequence of 32-byte bytes).
            event_hashes: the engine's 64-bit event hashes (the digests' low
                64 bits, as vLLM's KV events carry them).
            n_tokens: the request's length; 0: n_hashes x hash_block_size + 1.
            block_size: None: ``layout.block_size``.

        Returns:
            The usable prefix in blocks.

        Raises:
            InvalidArgument: both or neither kind of hash, a digest not 32
                bytes, an SGLang layout, n_tokens shorter than the hashes,
                a closed index or layout.
        """
        inflight = self._inflight
        layout_inflight = layout._inflight
        # Counted before the handles are read: see layout.wait_idle.
        inflight.append(None)
        layout_inflight.append(None)
        try:
            handle = self._require()
            layout_handle = layout._require()
            if (digests is None) == (event_hashes is None):
                raise InvalidArgument("check_block_hashes: give exactly one of digests and event_hashes")
            spec = _capi.init(_capi.sci_block_hashes)
            keep: Any
            if digests is not None:
                joined = digests if isinstance(digests, (bytes, bytearray)) else b"".join(digests)
                if len(joined) % 32:
                    raise InvalidArgument(f"digests: {len(joined)} bytes, not a whole number of 32-byte digests")
                keep = ctypes.create_string_buffer(bytes(joined), max(len(joined), 1))
                spec.digests = ctypes.addressof(keep)
                spec.n_hashes = len(joined) // 32
            else:
                assert event_hashes is not None
                try:
                    keep = array("Q", event_hashes)
                except (OverflowError, TypeError) as e:
                    raise InvalidArgument(f"event_hashes: not u64 values ({e})") from None
                spec.event_hashes = keep.buffer_info()[0]
                spec.n_hashes = len(keep)
            if isinstance(n_tokens, bool) or not isinstance(n_tokens, int) or n_tokens < 0:
                raise InvalidArgument(f"n_tokens = {n_tokens!r}: give a count >= 0")
            spec.n_tokens = n_tokens
            block = layout._block_size if block_size is None else as_u32(block_size, "block_size")
            prefix = ctypes.c_size_t()
            api = self._api
            check_status(api, api.index_check_block_hashes(handle, layout_handle, ctypes.byref(spec), block,
                                                           ctypes.byref(prefix)))
            return prefix.value
        finally:
            layout_inflight.pop()
            inflight.pop()
