"""Output paths, checked before a long run starts: a run of minutes must not find out at its
end that it cannot write its result (a read-only folder, a directory in the way, a typo)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

PathLike = str | os.PathLike


def _as_path(path: PathLike, what: str) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what} must be a path (str or pathlib.Path), not {type(path).__name__}")
    if not str(path).strip():
        raise ValueError(f"{what} is empty: give a path")
    return Path(path)


def _check_writable(folder: Path, target: Path) -> None:
    """Create and remove a file in `folder`: the only test that holds for every file system
    (os.access says yes to root on a read-only mount, and no to some network shares)."""
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".attnkit-write-check-")
    except OSError as e:
        raise ValueError(f"cannot write {target}: folder {folder} is not writable ({e.strerror})") from e
    os.close(fd)
    os.remove(probe)


def check_free_space(folder: Path, needed: int, target: Path) -> None:
    """ValueError when `folder`'s file system has less than `needed` bytes free: a run that
    trains for minutes must not find a full disk only when it saves."""
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise ValueError(
            f"cannot write {target}: {folder} has {free / 2**20:.1f} MiB free, and saving "
            f"needs about {needed / 2**20:.0f} MiB; free some space first"
        )


def check_replaceable(path: Path, kind: str, what: str = "output file") -> Path:
    """ValueError unless `path` is missing or already one of the kit's own files of `kind`
    ("checkpoint" or "report", see core/journal.py): an output never replaces another program's file."""
    from .journal import kit_file_kind

    found = kit_file_kind(Path(path))
    if found not in ("missing", kind):
        raise ValueError(
            f"{what} {path} exists and is {'an attnkit ' + found if found in ('checkpoint', 'report') else found}, "
            f"not an attnkit {kind}: it is never replaced; move it or choose another path"
        )
    return Path(path)


def check_output_file(
    path: PathLike, suffix: str, what: str = "output file", kind: str | None = None, needed: int = 0
) -> Path:
    """`path` as a Path, or ValueError/TypeError saying why nothing could be written there:
    empty, wrong suffix, a directory, its folder missing or not a folder, not writable; with
    `kind`, an existing file that is not the kit's own of that kind; with `needed`, too little
    free space."""
    path = _as_path(path, what)
    if path.suffix != suffix:
        raise ValueError(f"{what} {str(path)!r} must end in {suffix!r}")
    if path.is_dir():
        raise ValueError(f"{what} {path} is a directory; give a file path ending in {suffix!r}")
    if path.exists() and not path.is_file():
        raise ValueError(f"{what} {path} exists and is not a regular file")
    folder = path.parent
    if not folder.exists():
        raise ValueError(f"cannot write {path}: folder {folder} does not exist")
    if not folder.is_dir():
        raise ValueError(f"cannot write {path}: {folder} is not a folder")
    _check_writable(folder, path)
    if kind is not None:
        check_replaceable(path, kind, what)
    if needed:
        check_free_space(folder, needed, path)
    return path


def check_output_dir(path: PathLike, what: str = "output folder") -> Path:
    """`path` as a Path to a writable folder (created if only its last part is missing)."""
    path = _as_path(path, what)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{what} {path} exists and is not a folder")
    if not path.exists():
        if not path.parent.is_dir():
            raise ValueError(f"cannot create {what} {path}: {path.parent} is not an existing folder")
        try:
            path.mkdir()
        except OSError as e:
            raise ValueError(f"cannot create {what} {path}: {e.strerror}") from e
    _check_writable(path, path)
    return path
