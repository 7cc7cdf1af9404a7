"""The fixtures several test modules share: the trained adder and an untrained one, one torch
thread, the system's Chromium (or a skip, never a skip under CI). Plain helpers that tests import
(a checker's one line, Chromium's flags) are in helpers.py."""

import os
import signal

import pytest

from helpers import CHROMIUM, in_ci

# A test run started in the background by a shell without job control inherits SIGINT ignored, and
# every process a test starts would inherit that too, so the Ctrl-C tests could not interrupt them.
# A handler (unlike SIG_IGN) is reset to the default in a new program: each child gets a terminal's.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="module")
def adder():
    """The committed, trained adder from data/ on the CPU, loaded once per test module."""
    from attnkit.adder import Adder

    return Adder.load(device="cpu")


@pytest.fixture(scope="module")
def untrained_adder():
    """An adder of the default size with random weights (seed 0): for the mechanism (hooks,
    patching, ablation), where the results must not depend on what training learned."""
    import torch

    from attnkit.adder import Adder
    from attnkit.adder.model import Seq2SeqConfig, Seq2SeqTransformer

    torch.manual_seed(0)
    return Adder(Seq2SeqTransformer(Seq2SeqConfig()))


@pytest.fixture(scope="module")
def one_thread():
    """The kit's models are tiny: one thread is as fast, and far faster when the cores are shared."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def chromium() -> str:
    if CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK):
        return str(CHROMIUM)
    message = (
        f"Chromium not found at {CHROMIUM}: `make test` installs it (apt-get install chromium), "
        f"or set CHROMIUM=/path/to/chromium"
    )
    if in_ci():
        pytest.fail(message + " — CI must run the browser tests")
    pytest.skip(message)
