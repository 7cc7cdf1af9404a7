"""Keep freed memory in the process, so that evaluation does not spend its time on page faults.

Evaluating a batch allocates and frees tensors of a few MB hundreds of times (attention
scores at length 256: 16 × 4 × 256 × 256 floats = 17 MB; a chunk of 2,048 sums through
the feed-forward block: 15 MB). glibc serves blocks that big with mmap and hands them back
to the OS on free, so the next allocation page-faults every 4 KB page in again, which can
take longer than the arithmetic (benchmarks/bench_sortedness.py measures it; the README
gives the figures).

keep_freed_memory() raises glibc's mmap threshold to its 32 MB ceiling and stops it trimming
the heap: freed blocks are reused instead of returned. The price is that the process keeps
its peak memory until it exits. return_freed_memory() does the opposite once, after a computation
whose peak will not come back soon (training, in a learner's kernel); in a notebook kernel the kit
also does it after every cell (return_freed_memory_after_each_cell), so that the memory a hub counts
for a learner is what their notebook holds, not the leftovers of each cell's temporaries. Other C
libraries (macOS, Windows, musl) are left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt() parameters, from glibc's malloc.h
MMAP_THRESHOLD_MAX = 32 * 1024 * 1024  # glibc refuses more on 64-bit


def _glibc() -> ctypes.CDLL | None:
    """The C library on Linux, when it is glibc (it has mallopt and malloc_trim); else None."""
    return _find_glibc() if sys.platform.startswith("linux") else None


@functools.cache
def _find_glibc() -> ctypes.CDLL | None:
    """Looked up once: find_library runs ldconfig (about 4 ms), and a notebook kernel trims after
    every cell."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    except (OSError, AttributeError):  # not glibc (e.g. musl has no mallopt)
        return None
    return libc


def keep_freed_memory(keep: bool = True) -> bool:
    """True when glibc accepted the settings (Linux); False elsewhere, changing nothing.
    keep=False sets glibc's initial thresholds (128 KiB) again: the baseline of the benchmark."""
    libc = _glibc()
    if libc is None:
        return False
    # Setting either one also switches off glibc's own adjustment of both thresholds.
    mmap_threshold, trim_threshold = (MMAP_THRESHOLD_MAX, 2**30) if keep else (128 * 1024, 128 * 1024)
    return bool(libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(libc.mallopt(M_TRIM_THRESHOLD, trim_threshold))


def return_freed_memory() -> bool:
    """Hand the free pages of the heap back to the OS (glibc's malloc_trim), after a computation
    whose peak the process will not see again soon: training a model in a learner's kernel left
    61 MB it kept until the kernel exited, and each later peak (the next training) came on top of
    it. True when glibc did it; False elsewhere, changing nothing."""
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


def _after_cell(result) -> None:
    return_freed_memory()


def return_freed_memory_after_each_cell(shell) -> bool:
    """In a notebook kernel (IPython's `shell`), return_freed_memory() after every cell: notebook 03's
    peak fell from 425-429 MiB to 417-418 MiB, and what it holds at the end from 425 to 408 MiB; a trim
    takes a few ms. Not where the environment sets glibc's trim threshold (GLIBC_TUNABLES, as `make
    test` does to keep freed memory): that choice stands. True when registered (once per shell)."""
    if "glibc.malloc.trim_threshold" in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    if _glibc() is None:
        return False
    shell.events.register("post_run_cell", _after_cell)  # IPython registers a function once
    return True
