"""Events applied by hand (sci_event), as a Mooncake master would publish them."""

from __future__ import annotations

from typing import NamedTuple

from . import _capi


class Event(NamedTuple):
    """One event of a batch for ``Index.apply_events``.

    Build with the class methods; strings are str (UTF-8) or bytes.
    ``group_id`` empty means none, ``tenant`` empty means "default",
    ``medium`` is read under per-medium residency only.
    """

    kind: int
    key: str | bytes = ""
    group_id: str | bytes = ""
    tenant: str | bytes = ""
    medium: str | bytes = ""

    @classmethod
    def stored(cls, key: str | bytes, group_id: str | bytes = "", tenant: str | bytes = "",
               medium: str | bytes = "") -> "Event":
        """`key` is now stored (``SCI_EVENT_STORED``)."""
        return cls(_capi.SCI_EVENT_STORED, key, group_id, tenant, medium)

    @classmethod
    def removed(cls, key: str | bytes, group_id: str | bytes = "", tenant: str | bytes = "",
                medium: str | bytes = "") -> "Event":
        """`key` is gone (``SCI_EVENT_REMOVED``; under per-medium residency,
        from `medium`)."""
        return cls(_capi.SCI_EVENT_REMOVED, key, group_id, tenant, medium)

    @classmethod
    def all_cleared(cls) -> "Event":
        """Every object is gone (``SCI_EVENT_ALL_CLEARED``)."""
        return cls(_capi.SCI_EVENT_ALL_CLEARED)

    @classmethod
    def tenant_cleared(cls, tenant: str | bytes) -> "Event":
        """Every object of `tenant` is gone (``SCI_EVENT_TENANT_CLEARED``)."""
        return cls(_capi.SCI_EVENT_TENANT_CLEARED, "", "", tenant)
