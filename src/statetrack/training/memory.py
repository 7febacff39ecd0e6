"""CPU memory settings that the scans and mixers depend on for speed, and how much memory and how many
cores there are (what a run or a sweep's workers may use: :func:`available`, :func:`cores`), in one place.

Three facts measured on this project's 2-core machine (docs/benchmarks.md, "Memory"):

* First-touching fresh 4 KiB pages runs at about 1.6 GB/s, so every new (B, T, E, N) tensor of tens
  of MiB costs more to create than to compute. PyTorch's CPU allocator asks for transparent huge pages
  for allocations of 2 MiB and more when ``THP_MEM_ALLOC_ENABLE=1`` (read once, at its first
  allocation): a Mamba training step at batch 256 x length 64 went from 485 to 329 ms, S4D 520 -> 205.
* Those 2 MiB-aligned allocations defeat glibc's dynamic thresholds: a freed 2-32 MiB block is
  returned to the OS and the next one is faulted in again (a 4 MiB add into a fresh tensor: 1.2 ms
  against 0.17 ms into an existing one). Fixing glibc's mmap threshold at 32 MiB and its trim
  threshold at 1 GiB keeps such blocks in the heap for reuse: the same add 0.17 ms, the Mamba step
  371 -> 291 ms, S4D 285 -> 222 ms.
* Blocks of 32 MiB and more (glibc's largest mmap threshold) would still come straight from mmap and be
  faulted in anew at every step: a language model's (B, T, E, N) scan states (94 MiB for Mamba at batch
  16 x 256, width 180) and its logits. Turning mmap off for malloc (``M_MMAP_MAX`` 0) keeps them in the
  heap too: 100 steps of Mamba [-1,1] on stdlib (BPE 2,048, batch 16) took 67 s instead of 79, two
  runs side by side on the 2 cores.

:func:`configure` applies them; the entry points call it (``statetrack.cli.main``, the sweep's
worker processes and Ray tasks, the benchmarks), importing the package does not. It leaves alone
what the environment already sets (``THP_MEM_ALLOC_ENABLE``, ``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_MMAP_MAX_``); ``THP_MEM_ALLOC_ENABLE=0`` turns them all off. With
mmap off the mmap threshold no longer decides anything; it is still set, for a C library that refuses
``M_MMAP_MAX``. A heap that keeps its free blocks can fragment and grow
with the number of chunks a long evaluation streams; :func:`release_free_memory` hands the free part
back to the OS, and evaluation calls it through :func:`trim_if_grown` after each chunk, when the
resident set has grown by more than 2% (docs/reliability.md: peak memory flat in length).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_MMAP_MAX = -1, -3, -4  # glibc's mallopt parameters
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 1 << 30


def _glibc():
    name = ctypes.util.find_library("c")
    lib = ctypes.CDLL(name) if name else None
    # mallopt and malloc_trim are glibc's; on other C libraries (macOS, musl) there is nothing to set
    return lib if lib is not None and hasattr(lib, "mallopt") and hasattr(lib, "malloc_trim") else None


_LIBC = _glibc()


def configure() -> dict:
    """Apply the settings above (idempotent). Returns what is in effect."""
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
    on = os.environ["THP_MEM_ALLOC_ENABLE"] != "0"
    user_set = any(
        k in os.environ for k in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_MAX_")
    )
    tuned = bool(
        on
        and not user_set
        and _LIBC is not None
        and _LIBC.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
        and _LIBC.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
        and _LIBC.mallopt(M_MMAP_MAX, 0) == 1
    )
    return {"huge_pages": on, "malloc_thresholds": tuned}


def release_free_memory() -> None:
    """Hand the heap's free memory back to the OS (glibc ``malloc_trim``; a no-op elsewhere)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _statm(field: int) -> int:
    """A size from ``/proc/self/statm`` in bytes (0: the virtual size, 1: the resident set); 0 where it
    cannot be read."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[field]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def resident_bytes() -> int:
    """This process's resident set size (0 where it cannot be read)."""
    return _statm(1)


#: the resident set may grow this much over its level before :func:`trim_if_grown` trims the heap
TRIM_GROWTH = 1.02
_level = 0  # the resident set after a chunk: at the first call, and at the first call after each trim
_settle = True  # the next call sets the level


def trim_if_grown() -> bool:
    """After a chunk of a long evaluation: hand the heap's free memory back (:func:`release_free_memory`)
    only when the resident set has grown past ``TRIM_GROWTH`` times its level, the resident set after the
    first chunk and after the first chunk that follows each trim (so that a larger chunk, a longer test
    length's, sets a new level after one trim instead of trimming at every chunk). Trimming after every
    chunk kept memory as flat, but every page of the next chunk was then faulted in again: 25-37% of
    evaluation's CPU time, nearly all of it system time. Returns whether it trimmed."""
    global _level, _settle
    rss = resident_bytes()
    if _LIBC is None or rss == 0:
        return False
    if _settle:
        _level, _settle = rss, False
        return False
    if rss <= TRIM_GROWTH * _level:
        return False
    release_free_memory()
    _settle = True
    return True


# -- how much memory there is: what a run or a sweep's workers may use ---------------------------------
#: the resident memory of a sweep's worker process before its run starts (Python, torch and statetrack
#: imported): about 325 MiB measured on this project's machine; a worker's run needs this beside its own
WORKER_BYTES = 350 << 20


def _meminfo(key: str) -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
        return None if text == "max" else int(text)
    except (OSError, ValueError):
        return None


def _vm_size() -> int:
    """This process's virtual memory size (the quantity ``ulimit -v`` limits)."""
    return _statm(0)


def available() -> tuple[int, str]:
    """(bytes, where the figure comes from) that a new allocation of this process may still take: the
    least of the machine's available memory (``MemAvailable``), the room left under its cgroup's limit (a
    container's), and the room left under ``ulimit -v`` (RLIMIT_AS); ``(2**62, ...)`` where none is known."""
    import resource

    limits = []
    if (free := _meminfo("MemAvailable")) is not None:
        limits.append((free, "available on this machine"))
    limit = _read_int("/sys/fs/cgroup/memory.max") or _read_int("/sys/fs/cgroup/memory/memory.limit_in_bytes")
    used = _read_int("/sys/fs/cgroup/memory.current") or _read_int(
        "/sys/fs/cgroup/memory/memory.usage_in_bytes"
    )
    if limit is not None and used is not None and limit < 1 << 60:
        limits.append((max(0, limit - used), "left under this container's memory limit"))
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        limits.append((max(0, soft - _vm_size()), "left under ulimit -v"))
    return min(limits) if limits else (1 << 62, "no limit known")


def cores() -> int:
    """The CPU cores this process may run on (its affinity: a container's or ``taskset``'s share)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def gib(n: float) -> str:
    """Bytes in GiB for a message: ``3.2 GiB`` (``0.25 GiB`` below one)."""
    return f"{n / (1 << 30):.{1 if n >= 1 << 30 else 2}f} GiB"
