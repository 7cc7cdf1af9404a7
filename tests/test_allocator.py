"""keep_freed_memory: glibc takes the settings on Linux; elsewhere nothing changes. return_freed_memory:
the heap's free pages go back to the OS, and in a notebook kernel after every cell."""

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


# A notebook kernel as IPython runs one: `import attnkit` in a cell, then a cell that leaves 50 MB of
# freed blocks of 16 KB between blocks still in use (glibc's free() gives blocks of 64 KB and more back
# by itself, not these). Prints the resident MiB given back between the end of that cell's code and
# the next cell.
KERNEL = """
import os
from pathlib import Path
from IPython.core.interactiveshell import InteractiveShell
def resident():
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
shell = InteractiveShell.instance()
shell.user_ns["resident"] = resident
shell.run_cell("import attnkit")
shell.run_cell(
    "blocks, pins = [], []\\nfor _ in range(3200):\\n    blocks.append(b'1' * 16384)\\n    pins.append(b'2' * 2048)\\n"
    "del blocks\\nbefore = resident()"
)
print((shell.user_ns["before"] - resident()) / 2**20)
"""


@pytest.mark.slow  # two Python processes
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim exists on Linux only")
def test_a_notebook_kernel_gives_freed_memory_back_after_each_cell_unless_told_to_keep_it():
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    kept = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824"  # make test's KEEP_FREED
    freed = {
        setting: float(
            subprocess.run(
                [sys.executable, "-c", KERNEL], env=env | tunables, capture_output=True, text=True, check=True
            ).stdout.split()[-1]
        )
        for setting, tunables in (("default", {}), ("keep", {"GLIBC_TUNABLES": kept}))
    }
    assert freed["default"] > 40 and freed["keep"] < 10, freed
