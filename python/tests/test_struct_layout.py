"""Every ctypes struct matches the header: the C compiler, given
include/shared_cache_index.h, prints each struct's size and each field's
offset, and they must equal ctypes'."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO
from shared_cache_index import _capi

STRUCTS = [
    _capi.sci_str, _capi.sci_bytes, _capi.sci_index_options, _capi.sci_event, _capi.sci_pool,
    _capi.sci_layout_spec, _capi.sci_page_result, _capi.sci_request_extras, _capi.sci_block_hashes,
    _capi.sci_tier_result, _capi.sci_subscriber_options, _capi.sci_stats,
]


def compiled_layout(tmp_path: Path) -> dict[str, int]:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to read the header with")
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <shared_cache_index.h>", "int main(void) {"]
    for struct in STRUCTS:
        name = struct.__name__
        lines.append(f'  printf("{name} %zu\\n", sizeof({name}));')
        for field, _ in struct._fields_:
            lines.append(f'  printf("{name}.{field} %zu\\n", offsetof({name}, {field}));')
    lines += ["  return 0;", "}"]
    source = tmp_path / "layout.c"
    source.write_text("\n".join(lines) + "\n")
    binary = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-I", str(REPO / "include"), str(source), "-o", str(binary)], check=True)
    out = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout
    return {name: int(value) for name, value in (line.split() for line in out.splitlines())}


def test_every_struct_matches_the_header(tmp_path: Path) -> None:
    c = compiled_layout(tmp_path)
    py = {}
    for struct in STRUCTS:
        py[struct.__name__] = ctypes.sizeof(struct)
        for field, _ in struct._fields_:
            py[f"{struct.__name__}.{field}"] = getattr(struct, field).offset
    assert py == c


def test_the_header_has_no_field_the_package_lacks(tmp_path: Path) -> None:
    # A field appended to the header's struct without its ctypes twin shows
    # as a larger sizeof (trailing fields are how the ABI grows).
    c = compiled_layout(tmp_path)
    for struct in STRUCTS:
        assert ctypes.sizeof(struct) == c[struct.__name__], struct.__name__


def test_struct_size_is_set_from_ctypes_sizeof() -> None:
    for struct in STRUCTS:
        if any(f == "struct_size" for f, _ in struct._fields_):
            assert _capi.init(struct).struct_size == ctypes.sizeof(struct)
