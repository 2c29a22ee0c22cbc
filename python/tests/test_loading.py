"""Finding the library (SCI_LIB, SCI_LIB_DIR, pkg-config, the loader), the
errors when it cannot, and refusing a library too old for the package.
Each case runs in a fresh interpreter (a process loads the library once)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BUILD_VERSION, LIB_DIR, LIB_PATH, PYTHON_DIR
from shared_cache_index import _capi

PROBE = "import shared_cache_index as s; print(s.version()); print(s.library_path())"


def run(env_changes: dict[str, str | None], program: str = PROBE) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    for key in ("SCI_LIB", "SCI_LIB_DIR", "PKG_CONFIG_PATH", "LD_LIBRARY_PATH"):
        env.pop(key, None)
    env["PKG_CONFIG_LIBDIR"] = "/nonexistent"  # no system .pc file answers unless a test adds one
    for key, value in env_changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return subprocess.run([sys.executable, "-W", "ignore", "-c", program], capture_output=True, text=True,
                          timeout=60, env=env, cwd=str(PYTHON_DIR))


def loaded_from(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    version, path = done.stdout.splitlines()
    assert version == BUILD_VERSION
    return path


def test_sci_lib_names_the_file() -> None:
    assert loaded_from(run({"SCI_LIB": str(LIB_PATH)})) == str(LIB_PATH)


def test_sci_lib_dir_names_the_directory() -> None:
    assert loaded_from(run({"SCI_LIB_DIR": str(LIB_DIR)})) == str(LIB_PATH)


def test_pkg_config_gives_the_libdir(tmp_path: Path) -> None:
    if shutil.which("pkg-config") is None:
        pytest.skip("pkg-config is not installed")
    (tmp_path / "shared_cache_index.pc").write_text(
        f"libdir={LIB_DIR}\nName: shared_cache_index\nDescription: t\nVersion: {BUILD_VERSION}\nLibs: -L${{libdir}}\n")
    assert loaded_from(run({"PKG_CONFIG_LIBDIR": str(tmp_path)})) == str(LIB_PATH)


def test_the_dynamic_loader_path_is_the_last_resort() -> None:
    assert loaded_from(run({"LD_LIBRARY_PATH": str(LIB_DIR)})) == "libshared_cache_index.so.1 (dynamic loader)"


def test_nothing_found_names_every_place_tried(tmp_path: Path) -> None:
    probe = run({}, "import ctypes\ntry:\n ctypes.CDLL('libshared_cache_index.so.1'); print('found')\n"
                    "except OSError: print('absent')")
    if probe.stdout.strip() == "found":
        pytest.skip("the library is installed on the loader's path")
    done = run({})
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "LibraryNotFound" in last
    for place in ("SCI_LIB (unset)", "SCI_LIB_DIR (unset)", "pkg-config", "the dynamic loader"):
        assert place in last, last


def test_a_bad_explicit_setting_is_an_error_naming_it(tmp_path: Path) -> None:
    done = run({"SCI_LIB": str(tmp_path / "nope.so")})
    assert done.returncode != 0 and f"SCI_LIB={tmp_path / 'nope.so'}" in done.stderr
    done = run({"SCI_LIB_DIR": str(tmp_path)})
    assert done.returncode != 0 and f"SCI_LIB_DIR={tmp_path}" in done.stderr
    # Even with a usable library on the loader's path: a setting is never ignored.
    done = run({"SCI_LIB_DIR": str(tmp_path), "LD_LIBRARY_PATH": str(LIB_DIR)})
    assert done.returncode != 0


def fake_library(tmp_path: Path, version: str, symbols: list[str]) -> Path:
    """A library exporting `symbols` (no-op stubs) whose sci_version() says `version`."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a fake library with")
    lines = ["#include <stdint.h>", f'const char *sci_version(void) {{ return "{version}"; }}',
             "uint32_t sci_abi_version(void) { return 1; }"]
    lines += [f"void {name}(void) {{}}" for name in symbols if name not in ("sci_version", "sci_abi_version")]
    source = tmp_path / "fake.c"
    source.write_text("\n".join(lines) + "\n")
    out = tmp_path / "libshared_cache_index.so.1"
    subprocess.run([cc, "-shared", "-fPIC", str(source), "-o", str(out)], check=True)
    return out


def test_a_library_below_the_minimum_version_is_refused_naming_both(tmp_path: Path) -> None:
    lib = fake_library(tmp_path, "1.3.9", list(_capi.PROTOTYPES))
    done = run({"SCI_LIB": str(lib)})
    assert done.returncode != 0
    assert "1.3.9" in done.stderr and "1.4.0" in done.stderr and "too old" in done.stderr


def test_a_library_missing_functions_is_refused_naming_them(tmp_path: Path) -> None:
    lib = fake_library(tmp_path, "1.2.0", [n for n in _capi.PROTOTYPES if n != "sci_index_check_tiers"])
    done = run({"SCI_LIB": str(lib)})
    assert done.returncode != 0
    assert "1.2.0" in done.stderr and "1.4.0" in done.stderr and "sci_index_check_tiers" in done.stderr


def test_a_library_without_the_1_4_function_is_refused_naming_it(tmp_path: Path) -> None:
    lib = fake_library(tmp_path, "1.3.0", [n for n in _capi.PROTOTYPES if n != "sci_index_check_prefix_tokens"])
    done = run({"SCI_LIB": str(lib)})
    assert done.returncode != 0
    assert "1.3.0" in done.stderr and "1.4.0" in done.stderr and "sci_index_check_prefix_tokens" in done.stderr


def test_a_library_at_or_above_the_minimum_loads(tmp_path: Path) -> None:
    lib = fake_library(tmp_path, "1.4.0", list(_capi.PROTOTYPES))
    done = run({"SCI_LIB": str(lib)}, "import shared_cache_index as s; print(s.version())")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1.4.0"


def test_importing_needs_no_library() -> None:
    done = run({"SCI_LIB": "/nonexistent.so"}, "import shared_cache_index as s; print(s.__version__)")
    assert done.returncode == 0 and done.stdout.strip() == "1.4.0"
