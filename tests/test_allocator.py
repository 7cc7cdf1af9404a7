"""keep_freed_memory: glibc takes the settings on Linux; elsewhere nothing changes. return_freed_memory:
the heap's free pages go back to the OS."""

import os
import sys
from pathlib import Path

import pytest

from attnkit.core.allocator import keep_freed_memory, return_freed_memory


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt exists on Linux only")
def test_glibc_accepts_the_settings_and_allocation_still_works():
    import torch

    assert keep_freed_memory()
    for _ in range(3):  # blocks just under the 32 MB threshold, freed and allocated again
        x = torch.ones(16, 4, 256, 256)
        assert float(x.sum()) == 16 * 4 * 256 * 256
        del x


def test_other_platforms_are_left_alone(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    assert keep_freed_memory() is False and return_freed_memory() is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim exists on Linux only")
def test_freed_memory_in_the_middle_of_the_heap_goes_back_to_the_os():
    def resident() -> int:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    blocks, pins = [], []
    for _ in range(800):  # 50 MB in blocks of 64 KB, each followed by a small block still in use:
        blocks.append(b"\x01" * 65536)  # freed, they sit between pins, where no free() shrinks the heap
        pins.append(b"\x02" * 2048)
    del blocks
    before = resident()
    assert return_freed_memory()
    after = resident()
    assert before - after > 40 * 2**20, f"resident {before / 2**20:.0f} -> {after / 2**20:.0f} MiB"
    assert len(pins) == 800
