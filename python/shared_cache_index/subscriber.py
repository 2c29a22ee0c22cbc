"""The live subscription (sci_subscriber_*): a library thread applies a
Mooncake master's ZeroMQ stream to an index."""

from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Any

from . import _capi
from .errors import InternalError, InvalidArgument, closed
from .index import Index
from .layout import as_bytes, as_u32, check_status

RECONNECT_RESYNC = _capi.SCI_RECONNECT_RESYNC
RECONNECT_EVENT_IDS = _capi.SCI_RECONNECT_EVENT_IDS

# sci_subscriber_options fields a caller may set, by kind (endpoint and
# snapshot_url are Subscriber's own arguments).
_OPTION_FIELDS = {
    name: ("str" if kind is _capi.sci_str else "u32")
    for name, kind in _capi.sci_subscriber_options._fields_
    if name not in ("struct_size", "endpoint", "snapshot_url")
}
_POLICIES = {"resync": RECONNECT_RESYNC, "event-ids": RECONNECT_EVENT_IDS}


class SubscriberStop:
    """Stops one subscriber handle, exactly once, for whichever asks first:
    ``Subscriber.stop()``, the subscriber's finalizer, or the finalizer of
    its index. The index's must stop it before freeing the index (the C
    contract of ``sci_index_free``), and when both objects are collected in
    one reference cycle the gc runs their finalizers in no set order. Holds
    neither object (a finalizer's arguments must not keep them alive).
    """

    __slots__ = ("_stop", "_handle", "_lock")

    def __init__(self, stop: Any, handle: int) -> None:
        self._stop = stop
        self._handle: int | None = handle
        self._lock = threading.Lock()

    def __call__(self) -> None:
        # The lock makes a second caller wait until the first one's stop has
        # returned: the index's finalizer frees only after that.
        with self._lock:
            handle, self._handle = self._handle, None
            if handle is not None:
                self._stop(handle)


class Subscriber:
    """Follows a publisher: a library thread connects a ZeroMQ SUB socket to
    `endpoint` and applies every message to `index` (``sci_subscriber_start``).

    Args:
        index: the index to feed (kept alive by the subscriber; one running
            subscriber per index).
        endpoint: ``tcp://host:port`` or ``ipc://path`` ("" when following
            an HA leader through ``etcd_endpoints`` / ``redis_endpoint``).
        snapshot_url: the master's ``http://.../get_all_keys``: every start
            and every clear refills the index from it; None: no resync.
        **options: other ``sci_subscriber_options`` fields by their C name:
            ``topic``, ``etcd_endpoints``, ``cluster_id``,
            ``redis_endpoint``, ``status_url`` (str); ``reconnect_ms``,
            ``reconnect_max_ms``, ``stale_after_ms``,
            ``resync_min_interval_ms``, ``snapshot_timeout_ms``,
            ``event_port``, ``admin_port``, ``status_poll_ms``,
            ``resync_catch_up_max_ms`` (ints, 0 = the default);
            ``reconnect_policy`` (``RECONNECT_RESYNC`` / ``"resync"``, the
            default, or ``RECONNECT_EVENT_IDS`` / ``"event-ids"``).

    Raises:
        InvalidArgument: a bad endpoint or option (the library's message
            names it), an index that already has a running subscriber, a
            closed index.
        IOFailure: the socket or thread could not be created.
        TypeError: an unknown option name or a value of the wrong type.

    ``stop()`` (or leaving a ``with`` block, or collection, or interpreter
    exit) stops the thread, exactly once. Log lines come through the
    ``shared_cache_index`` logger (see ``set_log_forwarding``).
    """

    __slots__ = ("_handle", "_index", "_api", "_finalizer", "_lock", "__weakref__")

    def __init__(self, index: Index, endpoint: str | bytes, snapshot_url: str | bytes | None = None,
                 **options: Any) -> None:
        self._handle: int | None = None
        if not isinstance(index, Index):
            raise TypeError(f"index: expected a shared_cache_index.Index, got {type(index).__name__}")
        index._require()  # a closed index first, before any option error
        api = index._api
        raw = _capi.init(_capi.sci_subscriber_options)
        keep: list[bytes | None] = []

        def put_str(name: str, value: Any) -> None:
            data = as_bytes(value, name)
            keep.append(data)
            setattr(raw, name, _capi.to_str(data))

        put_str("endpoint", endpoint)
        put_str("snapshot_url", snapshot_url)
        for name, value in options.items():
            kind = _OPTION_FIELDS.get(name)
            if kind is None:
                raise TypeError(f"Subscriber: unknown option {name!r} (sci_subscriber_options fields: "
                                + ", ".join(_OPTION_FIELDS) + ")")
            if name == "reconnect_policy" and isinstance(value, str):
                if value not in _POLICIES:
                    raise InvalidArgument(f"reconnect_policy = {value!r}: expected \"resync\" or \"event-ids\"")
                value = _POLICIES[value]
            if kind == "str":
                put_str(name, value)
            else:
                setattr(raw, name, as_u32(value, name))
        # Counted as a call on the index (see layout.wait_idle) until the
        # subscriber is registered with it: an Index.close() racing this
        # start waits, then finds the subscriber to stop before the free.
        inflight = index._inflight
        inflight.append(None)
        try:
            index_handle = index._require()
            out = ctypes.c_void_p()
            check_status(api, api.subscriber_start(index_handle, ctypes.byref(raw), ctypes.byref(out)))
            handle = out.value
            if not handle:  # pragma: no cover - SCI_OK always sets it
                raise InternalError("sci_subscriber_start returned no subscriber")
            self._api = api
            self._index = index
            self._handle = handle
            self._lock = threading.Lock()
            stop = SubscriberStop(api.subscriber_stop, handle)
            # Stops the thread exactly once: stop(), collection, interpreter
            # exit (finalizers run newest first there, so before the
            # index's), or the index's finalizer, whichever comes first.
            self._finalizer = weakref.finalize(self, stop)
            index._subscriber_stop[0] = stop
            index._subscriber = weakref.ref(self)
        finally:
            inflight.pop()

    @property
    def index(self) -> Index:
        """The index this subscriber feeds."""
        return self._index

    @property
    def running(self) -> bool:
        """Whether stop() has not been called yet."""
        return self._handle is not None

    def stop(self) -> None:
        """Stops the thread and closes the socket (``sci_subscriber_stop``);
        returns promptly even when the publisher is silent. The index keeps
        its contents. A second call does nothing."""
        with self._lock:
            if self._handle is None:
                return
            self._handle = None
            self._finalizer()

    def retarget(self, endpoint: str | bytes, snapshot_url: str | bytes = "") -> None:
        """Moves the subscriber to another publisher: connects to
        `endpoint`, clears the index and resyncs from `snapshot_url` ("" =
        no resync) (``sci_subscriber_retarget``). Returns once the
        subscriber's thread has switched; the resync goes on meanwhile.

        Raises:
            InvalidArgument: an unusable endpoint or URL (nothing changes),
                a stopped subscriber.
            IOFailure: the socket could not be set up.
            NoMemory: memory ran out part-way (the index was cleared; call
                again).
        """
        with self._lock:
            handle = self._handle
            if handle is None:
                raise closed("Subscriber")
            endpoint_bytes = as_bytes(endpoint, "endpoint")
            url_bytes = as_bytes(snapshot_url, "snapshot_url")
            api = self._api
            check_status(api, api.subscriber_retarget(handle, _capi.to_str(endpoint_bytes),
                                                      _capi.to_str(url_bytes)))

    def stats(self) -> dict[str, int]:
        """The index's counters (``Index.stats``), the subscriber's included
        (subscriber_connected, messages_received, resyncs, ...)."""
        return self._index.stats()

    def __enter__(self) -> "Subscriber":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<shared_cache_index.Subscriber {'running' if self._handle is not None else 'stopped'}>"
