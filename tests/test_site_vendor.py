"""docs/build_site.py's pinned npm packages (build/site-vendor/): a fetch that dies half-way leaves
nothing another process could read as the package, and a whole one is renamed into place. npm is
replaced by a script on PATH: no network."""

import base64
import contextlib
import hashlib
import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def build_site(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("build_site_under_test", ROOT / "docs" / "build_site.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "VENDOR_CACHE", tmp_path / "site-vendor")
    return module


def fake_npm(folder: Path, monkeypatch, body: str) -> None:
    """An `npm` on PATH that runs `body` (sh) in the folder npm pack writes to."""
    folder.mkdir()
    npm = folder / "npm"
    npm.write_text(f"#!/bin/sh\n{body}\n")
    npm.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")


def integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def test_an_interrupted_fetch_leaves_no_tarball(build_site, tmp_path, monkeypatch):
    fake_npm(tmp_path / "bin", monkeypatch, "printf half > pkg-1.0.0.tgz; exit 1")
    with pytest.raises(subprocess.CalledProcessError):
        build_site.npm_tarball("pkg@1.0.0", integrity(b"whole"))
    assert [p.name for p in (tmp_path / "site-vendor").iterdir()] == []  # no tarball, no fetch folder


def test_a_whole_fetch_is_renamed_into_place_and_checked(build_site, tmp_path, monkeypatch):
    fake_npm(tmp_path / "bin", monkeypatch, "printf whole > jupyter-widgets-pkg-1.0.0.tgz")
    path = build_site.npm_tarball("@jupyter-widgets/pkg@1.0.0", integrity(b"whole"))
    assert path == tmp_path / "site-vendor" / "jupyter-widgets-pkg-1.0.0.tgz" and path.read_bytes() == b"whole"
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    path.unlink()
    with pytest.raises(SystemExit, match="does not match its pinned sha512"):  # a tarball not the pinned one
        build_site.npm_tarball("@jupyter-widgets/pkg@1.0.0", integrity(b"other"))
    assert not path.exists()


FETCH = """import signal, sys
from pathlib import Path
signal.signal(signal.SIGINT, signal.default_int_handler)  # a background start may have ignored it
sys.path.insert(0, {docs!r})
import build_site
build_site.VENDOR_CACHE, build_site.NPM = Path({vendor!r}), {{"pkg@1.0.0": "sha512-x"}}
build_site.main(["--fetch-only"])
"""


@pytest.mark.parametrize("sig, status", [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)])
def test_a_stopped_fetch_says_so_and_leaves_no_temporary(tmp_path, monkeypatch, sig, status):
    """`make site-vendor` (build_site.py --fetch-only) stopped while npm is fetching: the temporary
    folder goes, nothing reaches build/site-vendor/, and the message says what is kept."""
    fake_npm(tmp_path / "bin", monkeypatch, "printf half > pkg-1.0.0.tgz\nexec sleep 60")
    vendor = tmp_path / "site-vendor"
    code = FETCH.format(docs=str(ROOT / "docs"), vendor=str(vendor))
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while not list(vendor.glob(".fetch-*/pkg-1.0.0.tgz")):  # npm is writing
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.05)
    proc.send_signal(getattr(signal, sig))
    try:
        proc.wait(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):  # the fake npm's sleep, where it outlived its session leader
            os.killpg(proc.pid, signal.SIGKILL)
    err = proc.stderr.read()
    assert proc.returncode == status and "keeps only the packages fetched whole" in err, (proc.returncode, err)
    assert "Traceback" not in err and list(vendor.iterdir()) == []
