"""keep_freed_memory: glibc takes the settings on Linux; elsewhere nothing changes."""

import sys

import pytest

from attnkit.core.allocator import keep_freed_memory


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
    assert keep_freed_memory() is False
