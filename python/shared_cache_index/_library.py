"""Finding and loading libshared_cache_index.so.1, once per process.

Where it looks, in order (the first source that is *set* decides):

1. ``SCI_LIB``: the path of the library file itself.
2. ``SCI_LIB_DIR``: a directory holding ``libshared_cache_index.so.1``
   (a build directory, or an install's libdir).
3. ``pkg-config --variable=libdir shared_cache_index``, when pkg-config is
   installed and knows the package.
4. The dynamic loader's own search (``LD_LIBRARY_PATH``, ``ld.so.cache``).

An environment variable that is set but unusable is an error at once: a
misspelt ``SCI_LIB`` must not silently load some other copy of the library.
Otherwise each place that fails is remembered, and the error names them all.

The library is loaded with ``ctypes.CDLL`` (never ``PyDLL``), so every call
into it releases the GIL.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import threading
from typing import Callable

from . import _capi
from .errors import LibraryNotFound

SONAME = "libshared_cache_index.so.1"
# prefix_tokens (sci_page_result, sci_tier_result) is filled, and
# sci_index_check_prefix_tokens exported, from 1.4 on.
MIN_LIBRARY_VERSION = (1, 4, 0)

_lock = threading.RLock()
_api: _capi.Api | None = None
# Called once, right after the library is loaded (the package's __init__
# adds the log forwarding here).
on_load: list[Callable[[], None]] = []


def _format_version(version: tuple[int, ...]) -> str:
    return ".".join(str(part) for part in version)


def _parse_version(text: str) -> tuple[int, int, int] | None:
    parts = text.split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return (int(parts[0]), int(parts[1]), int(parts[2]))


def _pkg_config_libdir() -> tuple[str | None, str]:
    """(libdir or None, what happened) from pkg-config."""
    tool = shutil.which("pkg-config")
    if tool is None:
        return None, "pkg-config: not installed"
    try:
        done = subprocess.run(
            [tool, "--print-errors", "--variable=libdir", "shared_cache_index"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"pkg-config: {e}"
    libdir = done.stdout.strip()
    if done.returncode != 0 or not libdir:
        reason = done.stderr.strip().splitlines()[:1] or ["no libdir"]
        return None, f"pkg-config shared_cache_index: {reason[0]}"
    return libdir, ""


def _open(path: str) -> ctypes.CDLL:
    return ctypes.CDLL(path)


def _check(lib: ctypes.CDLL, where: str) -> None:
    """Refuses a library too old for this package (naming both versions)."""
    wanted = _format_version(MIN_LIBRARY_VERSION)
    missing = _capi.missing_symbols(lib)
    found = "unknown"
    if "sci_version" not in missing:
        version_fn = lib.sci_version
        version_fn.restype = ctypes.c_char_p
        version_fn.argtypes = []
        found = (version_fn() or b"").decode("ascii", "replace")
    if missing:
        raise LibraryNotFound(
            f"{where} is shared-cache-index {found}, too old for this package (needs {wanted} or later): "
            f"it lacks {', '.join(missing)}"
        )
    abi = lib.sci_abi_version
    abi.restype = ctypes.c_uint32
    abi.argtypes = []
    if abi() != _capi.SCI_ABI_VERSION:
        raise LibraryNotFound(
            f"{where} has ABI version {abi()}, this package speaks ABI {_capi.SCI_ABI_VERSION}"
        )
    parsed = _parse_version(found)
    if parsed is None:
        raise LibraryNotFound(f"{where} reports an unreadable version {found!r} (this package needs {wanted} or later)")
    if parsed < MIN_LIBRARY_VERSION:
        raise LibraryNotFound(
            f"{where} is shared-cache-index {found}, too old for this package: it needs {wanted} or later"
        )


def _load() -> tuple[ctypes.CDLL, str]:
    tried: list[str] = []
    explicit = os.environ.get("SCI_LIB")
    if explicit:
        try:
            return _open(explicit), explicit
        except OSError as e:
            raise LibraryNotFound(f"SCI_LIB={explicit}: cannot load it: {e}") from None
    directory = os.environ.get("SCI_LIB_DIR")
    if directory:
        path = os.path.join(directory, SONAME)
        try:
            return _open(path), path
        except OSError as e:
            raise LibraryNotFound(f"SCI_LIB_DIR={directory}: cannot load {path}: {e}") from None
    tried.append("SCI_LIB (unset)")
    tried.append("SCI_LIB_DIR (unset)")
    libdir, why = _pkg_config_libdir()
    if libdir is not None:
        path = os.path.normpath(os.path.join(libdir, SONAME))
        try:
            return _open(path), path
        except OSError as e:
            tried.append(f"pkg-config libdir {path}: {e}")
    else:
        tried.append(why)
    try:
        return _open(SONAME), f"{SONAME} (dynamic loader)"
    except OSError as e:
        tried.append(f"the dynamic loader ({SONAME}): {e}")
    raise LibraryNotFound(
        "shared_cache_index: cannot find the shared library; tried: "
        + "; ".join(tried)
        + ". Set SCI_LIB to the library file or SCI_LIB_DIR to its directory."
    )


def api() -> _capi.Api:
    """The loaded library's functions (loading it on first use).

    Raises:
        LibraryNotFound: no usable library, or one too old (the message
            names every place tried, or the versions).
    """
    global _api
    loaded = _api
    if loaded is not None:
        return loaded
    with _lock:
        if _api is None:
            lib, where = _load()
            _check(lib, where)
            loaded = _capi.Api(lib)
            loaded.path = where  # type: ignore[attr-defined]
            _api = loaded
            for hook in on_load:
                hook()
        return _api


def library_path() -> str:
    """Where the loaded library came from (loading it if needed)."""
    return str(getattr(api(), "path"))
