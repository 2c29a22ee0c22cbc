"""Exceptions: one class per sci_status, carrying the library's message."""

from __future__ import annotations

from . import _capi


class Error(Exception):
    """A call into the library failed.

    Attributes:
        status: the ``sci_status`` the C function returned (``SCI_ERR_*``),
            or the one the package's own check stands for (a closed handle,
            a token out of range: ``SCI_ERR_INVALID_ARGUMENT``).
        message: what went wrong: ``sci_last_error()`` of the failing call,
            or the package's own explanation.
    """

    status: int = 0

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class InvalidArgument(Error, ValueError):
    """``SCI_ERR_INVALID_ARGUMENT``: a bad value (the message names it)."""

    status = _capi.SCI_ERR_INVALID_ARGUMENT


class DecodeError(Error):
    """``SCI_ERR_DECODE``: a malformed wire message (nothing was applied)."""

    status = _capi.SCI_ERR_DECODE


class IOFailure(Error, OSError):
    """``SCI_ERR_IO``: a socket or thread could not be set up."""

    status = _capi.SCI_ERR_IO


class NoMemory(Error, MemoryError):
    """``SCI_ERR_NO_MEMORY``: an allocation failed (mid-batch: the index was cleared)."""

    status = _capi.SCI_ERR_NO_MEMORY


class BufferTooSmall(Error):
    """``SCI_ERR_BUFFER_TOO_SMALL``: an output buffer could not hold the answer.

    The package sizes every buffer itself, so this is never raised through
    its API; it exists so that every status has its class.
    """

    status = _capi.SCI_ERR_BUFFER_TOO_SMALL


class InternalError(Error):
    """``SCI_ERR_INTERNAL``: a bug in the library; please report the message."""

    status = _capi.SCI_ERR_INTERNAL


class LibraryNotFound(ImportError):
    """The shared library could not be loaded, or is too old for this package.

    The message names every place tried (or both versions).
    """


_BY_STATUS: dict[int, type[Error]] = {
    cls.status: cls for cls in (InvalidArgument, DecodeError, IOFailure, NoMemory, BufferTooSmall, InternalError)
}


def from_status(status: int, message: str) -> Error:
    """The exception for `status` (an unknown status gives a plain Error)."""
    cls = _BY_STATUS.get(status)
    if cls is None:
        return Error(f"status {status}: {message}", status)
    return cls(message)


def closed(what: str) -> InvalidArgument:
    """The error for a handle used after close()."""
    return InvalidArgument(f"this {what} is closed")
