"""Test support: the build's library and sci-publish, bounded waits, and an
independent ctypes view of the C functions to compare answers with.

Environment:
    SCI_LIB_DIR   the build directory holding libshared_cache_index.so.1
                  (default: <repo>/build)
    SCI_PUBLISH   the sci-publish binary (default: $SCI_LIB_DIR/src/tools/sci-publish)
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

HERE = Path(__file__).resolve().parent
PYTHON_DIR = HERE.parent
REPO = PYTHON_DIR.parent
sys.path.insert(0, str(PYTHON_DIR))  # the package from the source tree

# Absolute: subprocesses of the tests run in other directories.
LIB_DIR = Path(os.environ.get("SCI_LIB_DIR", str(REPO / "build"))).resolve()
os.environ["SCI_LIB_DIR"] = str(LIB_DIR)
LIB_PATH = LIB_DIR / "libshared_cache_index.so.1"
SCI_PUBLISH = Path(os.environ.get("SCI_PUBLISH", str(LIB_DIR / "src" / "tools" / "sci-publish"))).resolve()


def _library_version() -> str:
    lib = ctypes.CDLL(str(LIB_PATH))
    lib.sci_version.restype = ctypes.c_char_p
    return lib.sci_version().decode()


# The package needs 1.4.0: say so plainly instead of failing every test.
BUILD_VERSION = _library_version()
if tuple(int(p) for p in BUILD_VERSION.split(".")) < (1, 4, 0):
    raise pytest.UsageError(f"{LIB_PATH} is {BUILD_VERSION}; the Python package needs 1.4.0 or later")


def pytest_report_header(config: Any) -> list[str]:
    return [f"shared-cache-index library {BUILD_VERSION} at {LIB_PATH}", f"sci-publish: {SCI_PUBLISH}"]


# ---------------------------------------------------------------------------
# Bounded waits


def wait_until(condition: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    """Polls `condition` until it returns a truthy value (returned) or
    `timeout` seconds pass (AssertionError naming `what`)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.002)


# ---------------------------------------------------------------------------
# sci-publish


class Publisher:
    """`sci-publish <args>` as a child process; killed on every path."""

    def __init__(self, args: list[str], workdir: Path) -> None:
        if not SCI_PUBLISH.exists():
            pytest.fail(f"{SCI_PUBLISH} not found: build it (--target sci-publish) or set SCI_PUBLISH")
        self.stderr_path = workdir / f"publisher-{os.getpid()}-{id(self)}.err"
        self.stdout_path = workdir / f"publisher-{os.getpid()}-{id(self)}.out"
        self._stderr = open(self.stderr_path, "wb")
        self._stdout = open(self.stdout_path, "wb")
        self.proc = subprocess.Popen([str(SCI_PUBLISH), *args], stdin=subprocess.DEVNULL, stdout=self._stdout,
                                     stderr=self._stderr)
        ready = wait_until(self._listening, 30, "sci-publish to listen")
        self.endpoint: str = ready["listening"]
        self.admin: str | None = ready.get("admin")

    def _listening(self) -> dict[str, Any] | None:
        for line in self.stderr_path.read_text(errors="replace").splitlines():
            if '"listening"' in line:
                return json.loads(line)
        if self.proc.poll() is not None:
            raise AssertionError(f"sci-publish exited ({self.proc.returncode}): {self.stderr_path.read_text()}")
        return None

    def finish(self, timeout: float = 60.0) -> dict[str, Any]:
        """Waits until it exits on its own; its stdout summary."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"sci-publish still running after {timeout} s") from None
        assert self.proc.returncode == 0, self.stderr_path.read_text()
        return json.loads(self.stdout_path.read_text().strip().splitlines()[-1])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._stderr.close()
        self._stdout.close()


@pytest.fixture
def publisher(tmp_path: Path) -> Iterator[Callable[..., Publisher]]:
    """Starts publishers; every one is stopped at the end of the test."""
    started: list[Publisher] = []

    def start(*args: str) -> Publisher:
        p = Publisher(list(args), tmp_path)
        started.append(p)
        return p

    try:
        yield start
    finally:
        for p in started:
            p.stop()


def read_prompts(path: Path) -> list[list[int]]:
    return [json.loads(line)["tokens"] for line in path.read_text().splitlines() if line.strip()]


SGLANG_TP8_JSON = json.dumps({"page_size": 64, "tp_size": 8})
# The demo's vLLM descriptor (scripts/demo.sh, act 2): Qwen3-8B at TP 2.
VLLM_JSON = json.dumps({
    "schema_version": 1, "adapter": "vllm-1085b644",
    "hash": {"algorithm": "sha256", "digest_encoding": "hex", "gpu_event_hash": "low64",
             "seed_policy": "pythonhashseed-0", "key_separator": "@"},
    "main_event_group": 0, "main_event_block_size": 16,
    "coordinator": {"lcm_block_size": 16, "speculative": False, "drop_blocks": False},
    "groups": [{"group_id": 0, "kind": "full_attention", "block_size": 16, "hash_block_size": 16,
                "key_prefixes": ["prod@Qwen3-8B@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0",
                                 "prod@Qwen3-8B@tp_rank:1@pcp0@dcp0@pp_rank:0@group:0"]}]})


def published_world(layout_json: str, *, prompts: int, pages: int, shared: int, seed: int,
                    extra: tuple[str, ...] = (), index_options: dict[str, Any] | None = None) -> tuple[Any, list[list[int]]]:
    """An Index filled by a Subscriber from a sci-publish workload, and the
    workload's prompts; the publisher has exited, the subscriber stopped."""
    import shared_cache_index as sci

    with tempfile.TemporaryDirectory(prefix="sci-py-") as tmp:
        work = Path(tmp)
        (work / "layout.json").write_text(layout_json)
        p = Publisher(["--endpoint", "tcp://127.0.0.1:*", "--workload", "--layout-json", str(work / "layout.json"),
                       "--prompts", str(prompts), "--pages", str(pages), "--shared-prefix-pages", str(shared),
                       "--seed", str(seed), "--prompts-out", str(work / "prompts.jsonl"),
                       "--wait-subscribers-ms", "20000", *extra], work)
        try:
            ix = sci.Index(**(index_options or {}))
            # The publisher exits once done: its disconnect must not clear
            # what it sent (the default policy would).
            with sci.Subscriber(ix, p.endpoint, reconnect_policy="event-ids", stale_after_ms=600_000):
                summary = p.finish()
                wait_until(lambda: ix.stats()["last_sequence"] == summary["last_sequence"], 30,
                           "the last batch applied")
            return ix, read_prompts(work / "prompts.jsonl")
        finally:
            p.stop()


@pytest.fixture(scope="session")
def sglang_world() -> tuple[Any, list[list[int]]]:
    """tp 8, page 64: 3 prompts of 40 pages, 16 shared."""
    return published_world(SGLANG_TP8_JSON, prompts=3, pages=40, shared=16, seed=2024)


@pytest.fixture(scope="session")
def vllm_world() -> tuple[Any, list[list[int]]]:
    """The demo's vLLM descriptor: 3 prompts of 48 blocks (+1 token), 20 shared."""
    return published_world(VLLM_JSON, prompts=3, pages=48, shared=20, seed=2025)


# ---------------------------------------------------------------------------
# The C functions, called directly (an independent path to compare with)


class RawC:
    """The library through ctypes with plain prototypes, no package code
    in between (the structs are the package's, checked against the header
    by test_struct_layout)."""

    def __init__(self) -> None:
        from shared_cache_index import _capi

        self.capi = _capi
        self.lib = ctypes.CDLL(str(LIB_PATH))
        P = ctypes.POINTER
        u32p = P(ctypes.c_uint32)
        u8p = P(ctypes.c_uint8)
        self.lib.sci_index_check_pages.argtypes = [ctypes.c_void_p, ctypes.c_void_p, u32p, ctypes.c_size_t,
                                                   ctypes.c_uint32, u8p, ctypes.c_size_t, P(_capi.sci_page_result)]
        self.lib.sci_index_check_pages_with_extras.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, u32p, ctypes.c_size_t, ctypes.c_uint32,
            P(_capi.sci_request_extras), u8p, ctypes.c_size_t, P(_capi.sci_page_result)]
        self.lib.sci_index_check_prefix_with_extras.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, u32p, ctypes.c_size_t, ctypes.c_uint32,
            P(_capi.sci_request_extras), P(ctypes.c_size_t)]
        self.lib.sci_index_check_tiers.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, u32p, ctypes.c_size_t, ctypes.c_uint32,
            P(_capi.sci_request_extras), u8p, ctypes.c_size_t, P(_capi.sci_tier_result)]
        self.lib.sci_index_check_prefix_tokens.argtypes = [
            ctypes.c_void_p, ctypes.c_void_p, u32p, ctypes.c_size_t, ctypes.c_uint32,
            P(_capi.sci_request_extras), P(ctypes.c_size_t), P(ctypes.c_size_t)]
        self.lib.sci_index_check_prefix_tokens.restype = ctypes.c_int32
        self.lib.sci_last_error.restype = ctypes.c_char_p
        for name in ("sci_index_check_pages", "sci_index_check_pages_with_extras",
                     "sci_index_check_prefix_with_extras", "sci_index_check_tiers"):
            getattr(self.lib, name).restype = ctypes.c_int32

    def _extras(self, extras: Any) -> Any:
        if extras is None:
            return None
        raw = self.capi.init(self.capi.sci_request_extras)
        for field in ("lora_name", "cache_salt"):
            value = getattr(extras, field)
            if value is not None:
                data = value.encode() if isinstance(value, str) else value
                setattr(raw, field, self.capi.sci_str(data, len(data)))
        return ctypes.byref(raw)

    def check_pages(self, ix: Any, lay: Any, tokens: list[int], block_size: int, extras: Any = None
                    ) -> tuple[int, Any, bytes]:
        arr = (ctypes.c_uint32 * len(tokens))(*tokens)
        cap = len(tokens) // lay.block_size + 1
        hits = (ctypes.c_uint8 * cap)()
        res = self.capi.init(self.capi.sci_page_result)
        status = self.lib.sci_index_check_pages_with_extras(ix._handle, lay._handle, arr, len(tokens), block_size,
                                                            self._extras(extras), hits, cap, ctypes.byref(res))
        return status, res, bytes(hits)[: res.n_pages]

    def check_prefix(self, ix: Any, lay: Any, tokens: list[int], block_size: int, extras: Any = None) -> int:
        arr = (ctypes.c_uint32 * len(tokens))(*tokens)
        out = ctypes.c_size_t()
        status = self.lib.sci_index_check_prefix_with_extras(ix._handle, lay._handle, arr, len(tokens), block_size,
                                                             self._extras(extras), ctypes.byref(out))
        assert status == 0, self.lib.sci_last_error()
        return out.value

    def check_prefix_tokens(self, ix: Any, lay: Any, tokens: list[int], block_size: int, extras: Any = None
                            ) -> tuple[int, int]:
        arr = (ctypes.c_uint32 * len(tokens))(*tokens)
        pages, credited = ctypes.c_size_t(), ctypes.c_size_t()
        status = self.lib.sci_index_check_prefix_tokens(ix._handle, lay._handle, arr, len(tokens), block_size,
                                                        self._extras(extras), ctypes.byref(pages),
                                                        ctypes.byref(credited))
        assert status == 0, self.lib.sci_last_error()
        return pages.value, credited.value

    def check_tiers(self, ix: Any, lay: Any, tokens: list[int], block_size: int, extras: Any = None
                    ) -> tuple[Any, bytes]:
        arr = (ctypes.c_uint32 * len(tokens))(*tokens)
        cap = len(tokens) // lay.block_size + 1
        tiers = (ctypes.c_uint8 * cap)()
        res = self.capi.init(self.capi.sci_tier_result)
        status = self.lib.sci_index_check_tiers(ix._handle, lay._handle, arr, len(tokens), block_size,
                                                self._extras(extras), tiers, cap, ctypes.byref(res))
        assert status == 0, self.lib.sci_last_error()
        return res, bytes(tiers)[: res.n_pages]


@pytest.fixture(scope="session")
def raw_c() -> RawC:
    import shared_cache_index  # noqa: F401  (loads the library first, with the version accepted)

    return RawC()
