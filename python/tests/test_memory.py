"""A dropped Index (or Layout) gives its memory back: fill / drop cycles keep
the process's resident memory flat, where a leak would grow it by one index
per cycle (as rust-example/tests/drop_frees_memory.rs). In a process of its
own, so no other test's allocations blur the measure."""

from __future__ import annotations

import subprocess
import sys

from conftest import PYTHON_DIR

PROGRAM = r"""
import gc
import shared_cache_index as sci

def resident_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024

KEYS = 200_000
# The events are built once, outside the measure: only the index's memory
# comes and goes.
batches = [[sci.Event.stored(f"object-key-{i:08}_0_k", f"object-key-{i:08}_0_k") for i in range(b, b + 1000)]
           for b in range(0, KEYS, 1000)]

def filled_index(how):
    ix = sci.Index()
    for sequence, batch in enumerate(batches, 1):
        ix.apply_events(sequence, batch)
    assert ix.stats()["keys"] == KEYS
    if how == "close":
        ix.close()
    return None  # "drop": collected here, by reference counting

gc.collect()
before = resident_bytes()
ix = sci.Index()
for sequence, batch in enumerate(batches, 1):
    ix.apply_events(sequence, batch)
one_index = resident_bytes() - before
del ix
gc.collect()
for cycle in range(6):
    filled_index("drop" if cycle % 2 else "close")
for i in range(20_000):
    lay = sci.Layout(64, tp_size=1 + i % 8, key_prefix=f"model-{i}",
                     pools=[sci.Pool(["__k", "__v"]), sci.Pool(["__swa"], 4)])
    del lay
gc.collect()
growth = resident_bytes() - before
print(one_index, growth)
"""


def test_dropped_indexes_and_layouts_give_their_memory_back() -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=300,
                          cwd=str(PYTHON_DIR))
    assert done.returncode == 0, done.stderr
    one_index, growth = map(int, done.stdout.split())
    assert one_index > 4 << 20, f"an index of 200k keys should take megabytes, measured {one_index} bytes"
    # A leak would add about 6 indexes; freed memory is reused instead.
    assert growth < 3 * one_index, f"resident memory grew by {growth} bytes; one index is {one_index} bytes"
