"""Evaluation memory does not grow with length: peak RSS at 100,000 steps within 10% of 1,000."""
import importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location("eval_memory", Path(__file__).parents[1] / "bench" / "eval_memory.py")
eval_memory = importlib.util.module_from_spec(spec)
spec.loader.exec_module(eval_memory)


def test_peak_memory_flat_in_length():
    short = eval_memory.measure("negmamba(conv=0)*2", 1_000, batch=4, chunk=512, width=8)
    long = eval_memory.measure("negmamba(conv=0)*2", 100_000, batch=4, chunk=512, width=8)
    assert long["peak_kib"] <= 1.10 * short["peak_kib"], (short, long)
