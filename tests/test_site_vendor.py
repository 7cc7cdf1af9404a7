"""docs/build_site.py's pinned npm packages (build/site-vendor/): a fetch that dies half-way leaves
nothing another process could read as the package, and a whole one is renamed into place. npm is
replaced by a script on PATH: no network."""

import base64
import hashlib
import importlib.util
import subprocess
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
