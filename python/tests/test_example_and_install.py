"""The example router runs as documented, and the package installs offline
with Debian's pip and setuptools (no build isolation, no index)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

from conftest import LIB_DIR, PYTHON_DIR, SCI_PUBLISH, VLLM_JSON, Publisher

ROUTER = PYTHON_DIR / "examples" / "router.py"


def test_the_router_example_plays_the_demo_on_its_defaults() -> None:
    done = subprocess.run([sys.executable, str(ROUTER), "--sci-publish", str(SCI_PUBLISH), "--timeout-s", "60"],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "applied 6016 events in 94 batches (last sequence 94)" in out
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in out.splitlines()
            if line.startswith("| ") and not line.startswith("| request")}
    for i in range(4):
        assert rows[f"published prompt {i}"][1:4] == ["169", "169", "0..169"]
        assert rows[f"published prompt {i}"][-1].rstrip(" |") == "169"  # warm: all by the fast path
    assert rows["prompt 0, edited in page 126"][1:4] == ["169", "126", "0..126"]
    assert rows["100 shared pages + a new question"][1:4] == ["120", "100", "0..100"]
    assert rows["an unrelated prompt"][1:4] == ["169", "0", "-"]
    assert rows["prompt 0 at block size 32"][1:4] == ["0", "0", "-"]
    assert "  keys                               6016" in out
    assert "  sequence gaps                      0" in out


def test_the_router_example_answers_for_a_vllm_layout(publisher: Callable[..., Publisher], tmp_path: Path) -> None:
    (tmp_path / "vllm.json").write_text(VLLM_JSON)
    p = publisher("--endpoint", "tcp://127.0.0.1:*", "--workload", "--layout-json", str(tmp_path / "vllm.json"),
                  "--prompts", "2", "--pages", "32", "--shared-prefix-pages", "10", "--seed", "2025",
                  "--prompts-out", str(tmp_path / "prompts.jsonl"), "--wait-subscribers-ms", "30000")
    done = subprocess.run([sys.executable, str(ROUTER), "--endpoint", p.endpoint, "--layout-json",
                           str(tmp_path / "vllm.json"), "--prompts", str(tmp_path / "prompts.jsonl"),
                           "--published", str(p.stdout_path), "--timeout-s", "60"],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in done.stdout.splitlines()
            if line.startswith("| ") and not line.startswith("| request")}
    assert rows["published prompt 0"][1:5] == ["513", "32", "32", "0..32"]
    assert rows['prompt 0 with LoRA "sql-adapter"'][3:5] == ["0", "-"]
    assert rows["an unrelated prompt"][3] == "0"
    assert int(rows["prompt 0, edited in block 24"][3]) == 24


def test_pip_installs_the_package_offline_into_a_venv(tmp_path: Path) -> None:
    # From a copy: pip builds in place, and the source tree stays clean.
    source = tmp_path / "src"
    shutil.copytree(PYTHON_DIR, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info",
                                                                       ".pytest_cache"))
    venv = tmp_path / "venv"
    system_python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    subprocess.run([system_python, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_NO_INPUT"] = "1"
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index",
                                "--no-cache-dir", str(source)], capture_output=True, text=True, timeout=300, env=env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    env["SCI_LIB_DIR"] = str(LIB_DIR)
    probe = ("import shared_cache_index as s, importlib.metadata as m, pathlib; "
             "p = pathlib.Path(s.__file__).parent; "
             "print(s.version(), m.version('shared-cache-index'), (p / 'py.typed').exists(), p)")
    done = subprocess.run([str(venv / "bin" / "python"), "-W", "ignore", "-c", probe], capture_output=True,
                          text=True, timeout=60, env=env, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    version, dist_version, typed, where = done.stdout.split()
    assert (dist_version, typed) == ("1.4.0", "True")
    assert version == subprocess.run([sys.executable, "-W", "ignore", "-c",
                                      "import shared_cache_index as s; print(s.version())"],
                                     capture_output=True, text=True, cwd=str(PYTHON_DIR)).stdout.strip()
    assert str(venv) in where  # the installed copy, not the source tree
