"""Evaluation memory does not grow with length: peak RSS at 100,000 steps within 10% of 1,000."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from statetrack.training import memory

spec = importlib.util.spec_from_file_location(
    "eval_memory", Path(__file__).parents[1] / "bench" / "eval_memory.py"
)
eval_memory = importlib.util.module_from_spec(spec)
spec.loader.exec_module(eval_memory)


def test_peak_memory_flat_in_length():
    short = eval_memory.measure("negmamba(conv=0)*2", 1_000, batch=4, chunk=512, width=8)
    long = eval_memory.measure("negmamba(conv=0)*2", 100_000, batch=4, chunk=512, width=8)
    assert long["peak_kib"] <= 1.10 * short["peak_kib"], (short, long)


def _settings(**env):
    code = "import json, statetrack.ops, statetrack.training.memory as m; print(json.dumps(m.configure()))"
    env = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout)


def test_allocator_settings_follow_the_environment():
    """statetrack.training.memory: on by default (the malloc thresholds where glibc is present), both off with
    THP_MEM_ALLOC_ENABLE=0, and the user's own MALLOC_* thresholds left alone."""
    base = dict.fromkeys(
        ("THP_MEM_ALLOC_ENABLE", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_MAX_")
    )
    on = _settings(**base)
    assert on == {"huge_pages": True, "malloc_thresholds": memory._LIBC is not None}
    assert _settings(**{**base, "THP_MEM_ALLOC_ENABLE": "0"}) == {
        "huge_pages": False,
        "malloc_thresholds": False,
    }
    assert _settings(**{**base, "MALLOC_TRIM_THRESHOLD_": "131072"})["malloc_thresholds"] is False
    assert _settings(**{**base, "MALLOC_MMAP_MAX_": "65536"})["malloc_thresholds"] is False
    memory.release_free_memory()  # callable anywhere; a no-op without glibc


MMAPPED = """
import ctypes, ctypes.util, json, torch, statetrack.training.memory as m
m.configure()
class Info(ctypes.Structure):
    _fields_ = [(k, ctypes.c_size_t) for k in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.mallinfo2.restype = Info
x = torch.empty(96 << 18)  # 96 MiB: above glibc's largest mmap threshold
print(json.dumps(libc.mallinfo2().hblkhd >= 96 << 20))
"""


@pytest.mark.skipif(
    memory._LIBC is None or not hasattr(memory._LIBC, "mallinfo2"), reason="glibc >= 2.33 only"
)
@pytest.mark.parametrize("thp, mmapped", [("1", False), ("0", True)])
def test_large_tensors_come_from_the_heap(thp, mmapped):
    """With the settings on, a tensor above 32 MiB (a language model's scan states, its logits) is not
    mmapped, so it is not faulted in anew at every step; with them off (THP_MEM_ALLOC_ENABLE=0) it is."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run(
        [sys.executable, "-c", MMAPPED],
        capture_output=True,
        text=True,
        check=True,
        env={**env, "THP_MEM_ALLOC_ENABLE": thp},
    )
    assert json.loads(out.stdout) is mmapped
