"""The library's log lines, forwarded to Python's ``logging`` (logger
``shared_cache_index``).

Why this is safe:

- Library threads (the subscriber's, the leader follower's) call the
  callback; ctypes takes the GIL for it, and the callback only formats one
  line and hands it to ``logging``. Any exception stays inside it.
- The library's own contract (sci_set_log_callback) says that once the
  setter returns, the previous callback runs on no thread. So at interpreter
  exit an ``atexit`` hook sets the callback to NULL while the interpreter is
  still whole: no library thread can enter Python during finalisation
  (where taking the GIL would hang or kill that thread). The setter is
  called through CDLL, so it releases the GIL while it waits for a callback
  in flight, which may itself be waiting for the GIL.
- The ctypes callback object is kept in a module global and never freed
  while installed.
"""

from __future__ import annotations

import atexit
import logging
from typing import Any

from . import _capi, _library

logger = logging.getLogger("shared_cache_index")
_LEVELS = {
    _capi.SCI_LOG_DEBUG: logging.DEBUG,
    _capi.SCI_LOG_INFO: logging.INFO,
    _capi.SCI_LOG_WARN: logging.WARNING,
    _capi.SCI_LOG_ERROR: logging.ERROR,
}
_installed = False
_shutting_down = False


def _forward(user: Any, level: int, msg: Any, length: int) -> None:
    try:
        python_level = _LEVELS.get(level, logging.WARNING)
        if _shutting_down or not logger.isEnabledFor(python_level):
            return
        text = msg[:length].decode("utf-8", "replace") if length else ""
        logger.log(python_level, "%s", text)
    except BaseException:  # noqa: BLE001 - nothing may propagate into C
        pass


# Created once; alive for the whole process (the library may hold it).
_CALLBACK = _capi.sci_log_fn(_forward)


def set_log_forwarding(enabled: bool = True) -> None:
    """Routes the library's log lines (process-wide) to the
    ``shared_cache_index`` logger (``enabled``), or silences them. On by
    default once the library is loaded. Levels map to DEBUG, INFO, WARNING,
    ERROR; a line the logger would drop costs no formatting.

    Raises:
        LibraryNotFound: the shared library cannot be loaded.
    """
    global _installed
    api = _library.api()
    # No Python lock around the C call: it waits for a callback in flight,
    # and that callback's handler may itself call this function (the library
    # serialises the calls; the last one wins).
    if enabled and not _shutting_down:
        _installed = True
        api.set_log_callback(_CALLBACK, None)
    else:
        api.set_log_callback(_capi.sci_log_fn(), None)  # type: ignore[call-overload]  # NULL
        _installed = False


def _at_exit() -> None:
    global _shutting_down
    _shutting_down = True
    if _installed:
        set_log_forwarding(False)


atexit.register(_at_exit)
