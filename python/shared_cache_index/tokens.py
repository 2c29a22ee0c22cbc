"""Token ids as the C queries take them: a pointer to contiguous uint32.

Three inputs, in order of cost:

- ``array.array('I')`` (4-byte items, which is every Linux target): passed
  without a copy; its address comes from ``buffer_info()``, and a
  ``memoryview`` of it is held until the C call returns (resizing it on
  another thread meanwhile raises ``BufferError``).
- a numpy array of dtype ``uint32`` (native byte order), one-dimensional and
  C-contiguous, writable or not: passed without a copy; its address is that
  of the buffer it lends to ctypes (a read-only one's, from numpy's ctypes
  interface). numpy is never imported by this package: an object is taken
  as numpy's when its type comes from numpy.
- anything else: copied into a new ``array('I')``: any sequence or iterable
  of ints (a list, a tuple, ``range``, another numpy dtype, a strided numpy
  or byte-swapped view; bytes count one token per byte). Each value must be
  an integer in [0, 2**32 - 1]; numpy arrays of a non-integer dtype (float,
  bool, object...) or of more than one dimension are refused. A bad value
  raises ``InvalidArgument`` naming its position (an exhausted iterator
  cannot be named) before any C call.
"""

from __future__ import annotations

import ctypes
from array import array
from typing import Any, Iterable, Sequence, Union

from .errors import InvalidArgument

U32_MAX = 0xFFFFFFFF

# What the queries accept (numpy arrays included, typed as Any so that numpy
# stays optional).
Tokens = Union[Sequence[int], "array[int]", Any]

if array("I").itemsize != 4:  # pragma: no cover - no such Linux target
    raise ImportError("shared_cache_index: array('I') is not 4 bytes on this platform")


def _bad_value(values: Iterable[Any]) -> InvalidArgument:
    """The error naming the first token that is not a u32 (slow path only)."""
    for i, value in enumerate(values):
        try:
            as_int = int(value.__index__())
        except (AttributeError, TypeError):
            return InvalidArgument(f"tokens[{i}] = {value!r} is not an integer")
        if not 0 <= as_int <= U32_MAX:
            return InvalidArgument(f"tokens[{i}] = {as_int} is out of the u32 range [0, {U32_MAX}]")
    return InvalidArgument("tokens: not a sequence of u32 token ids")


def _from_numpy(tokens: Any) -> tuple[int, int, Any]:
    dtype = tokens.dtype
    flags = tokens.flags
    if tokens.ndim == 1 and dtype.char == "I" and dtype.isnative and flags.c_contiguous:
        # The zero-copy case, kept short: it runs on every query.
        count = tokens.shape[0]
        if not count:
            return 0, 0, tokens
        if flags.writeable:
            # A writable array lends its buffer to ctypes (about 0.25 us;
            # numpy's own interfaces build a dict or an object per call).
            # The ctypes object is the owner: it holds a buffer export until
            # dropped, so the array cannot be resized under the C call.
            lent = ctypes.c_char.from_buffer(tokens)
            return ctypes.addressof(lent), count, lent
        # The memoryview holds a buffer export the same way.
        return int(tokens.ctypes.data), count, memoryview(tokens)
    if tokens.ndim != 1:
        raise InvalidArgument(f"tokens: a numpy array of {tokens.ndim} dimensions; give a 1-D array")
    if dtype.kind == "u" and dtype.itemsize == 4 and dtype.isnative:
        return _from_numpy(tokens.copy())  # a strided view: one contiguous copy
    if dtype.kind not in "iu":
        raise InvalidArgument(f"tokens: a numpy array of dtype {dtype}; token ids are integers (give uint32)")
    if tokens.shape[0]:
        low, high = int(tokens.min()), int(tokens.max())
        if low < 0 or high > U32_MAX:
            raise _bad_value(tokens.tolist())
    return _from_numpy(tokens.astype("uint32"))  # native byte order, C-contiguous, writable


def as_u32(tokens: Tokens) -> tuple[int | None, int, Any]:
    """(address or None, count, owner) for `tokens`; keep `owner` alive
    until the C call returns, and drop it right after. When nothing was
    copied, `owner` holds a buffer export of `tokens` (the queries release
    the GIL: another thread resizing the array meanwhile then raises
    BufferError instead of freeing the memory C reads).

    Raises:
        InvalidArgument: a token that is not an integer in the u32 range, a
            numpy array that is not 1-D or not of an integer dtype.
    """
    kind = type(tokens)
    if kind is array and tokens.typecode == "I":  # type: ignore[union-attr]
        hold = memoryview(tokens)  # type: ignore[arg-type]
        address, count = tokens.buffer_info()  # type: ignore[union-attr]
        return (address if count else None), count, hold
    # The type's attribute, not the instance's: the instance's builds a dict.
    if kind.__module__ == "numpy" and hasattr(kind, "__array_interface__"):
        address, count, owner = _from_numpy(tokens)
        return (address if count else None), count, owner
    if isinstance(tokens, (bytes, bytearray, memoryview)):
        # array() would read these as raw machine words, not one token per item.
        tokens = list(memoryview(tokens).cast("B")) if not isinstance(tokens, memoryview) else tokens.tolist()
    try:
        copied = array("I", tokens)
    except (OverflowError, TypeError, ValueError):
        raise _bad_value(tokens) from None
    address, count = copied.buffer_info()
    return (address if count else None), count, copied
