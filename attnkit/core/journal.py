"""Writing several files as one unit (a checkpoint and its report, an experiment's checkpoints
and results), so that no kill leaves a new checkpoint beside an old report.

Each file is written in full to a temporary beside it, `.NAME.<token>.tmp`; then a small journal
`.PRIMARY.commit` is put in place (the commit point) and the temporaries are renamed, the primary
file (the last one) last. A kill before the journal exists leaves every old file as it was (the
next save removes the orphaned temporaries); a kill after it is rolled forward by the next load or
save of the primary file.

A journal found on disk is untrusted (it may come with a downloaded checkpoint). It holds only
file names relative to the primary's folder and the token; every temporary's name is derived from
its file's name and the token, never read. A name with a folder part other than one plain
subfolder, a file that is not a .pt or .json, or an existing file that is not the kit's own of
that kind makes the whole journal refused (JournalRefused), and nothing is renamed.

One writer at a time per folder: a save holds an advisory lock on the primary's folder (flock),
so two processes saving the same checkpoint take turns instead of removing each other's
temporaries. Files are created with mode 0o666 less the user's umask, like any other program's.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import secrets
import stat
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; one writer per path, as before
    fcntl = None  # type: ignore[assignment]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")  # a plain name: no folder, no leading dot
_TOKEN = re.compile(r"[0-9a-f]{16}\Z")
MAX_JOURNAL_BYTES = 1 << 20
# A JSON file is one of the kit's when it holds the keys of one of its reports.
REPORT_KEYS = (
    {"model_config", "train_config", "test_metrics"},  # adder.json
    {"setup", "encodings", "variants"},  # sortedness_results.json
    {"format_version", "baseline", "modes"},
)  # ablation_results.json
CHECKPOINT_KEYS = (b"format_version", b"kind", b"config", b"state_dict", b"metrics")


class JournalRefused(ValueError):
    """A journal that attnkit did not write, or that names files it must not touch."""


def journal_path(primary: Path) -> Path:
    return primary.parent / f".{primary.name}.commit"


def temporary(final: Path, token: str) -> Path:
    return final.parent / f".{final.name}.{token}.tmp"


def create_new(path: Path, data: bytes, sync: bool = True) -> None:
    """Write `data` to a file that must not exist yet; its mode is 0o666 less the umask."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        if sync:
            os.fsync(f.fileno())  # on disk before the journal says "rename it"


def atomic_write(path: Path, data: bytes) -> None:
    """`data` to `path` through a temporary and one rename: readers never see half a file."""
    path = Path(path)
    tmp = temporary(path, secrets.token_hex(8))
    try:
        create_new(tmp, data)
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.remove(tmp)


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive advisory lock on `folder` (released on exit, or when the process dies)."""
    if fcntl is None:
        yield
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        yield  # a folder we cannot open cannot be written either: the write will say why
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def kit_file_kind(path: Path) -> str:
    """ "checkpoint", "report" (one of the kit's JSON files), "missing", or what else it is."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "missing"
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if path.suffix == ".pt":
        try:
            with zipfile.ZipFile(path) as z:
                pickles = [i for i in z.infolist() if i.filename.endswith("/data.pkl")]
                small = len(pickles) == 1 and pickles[0].file_size < 16 << 20  # ours: a few kB
                head = z.read(pickles[0]) if small else b""
        except (OSError, zipfile.BadZipFile, ValueError, KeyError):
            return "not a PyTorch archive"
        return "checkpoint" if all(key in head for key in CHECKPOINT_KEYS) else "another program's .pt file"
    if path.suffix == ".json":
        if st.st_size > 64 << 20:
            return "too large for one of the kit's reports"
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return "not a JSON file"
        if isinstance(obj, dict) and any(keys <= obj.keys() for keys in REPORT_KEYS):
            return "report"
        return "another program's JSON file"
    return "neither a .pt nor a .json file"


def planned_renames(primary: Path) -> list[tuple[Path, Path]]:
    """The (temporary, file) renames the journal beside `primary` asks for, after checking every
    rule in the module's docstring; JournalRefused says which one it breaks."""
    journal = journal_path(primary)
    st = os.lstat(journal)
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_JOURNAL_BYTES:
        raise JournalRefused(f"{journal} is not a journal attnkit wrote (not a small regular file)")
    try:
        entry = json.loads(journal.read_bytes())
        token, names = entry["token"], entry["files"]
    except (OSError, ValueError, TypeError, KeyError):
        raise JournalRefused(f"{journal} is not a journal attnkit wrote (unreadable)") from None
    if not (
        isinstance(token, str)
        and _TOKEN.match(token)
        and isinstance(names, list)
        and names
        and all(isinstance(n, str) for n in names)
    ):
        raise JournalRefused(f"{journal} is not a journal attnkit wrote (malformed)")
    if names[-1] != primary.name:
        raise JournalRefused(f"{journal} does not end with its own checkpoint {primary.name!r}")
    renames = []
    for name in names:
        rel = PurePosixPath(name)
        if len(rel.parts) > 2 or not all(_NAME.match(part) for part in rel.parts) or rel.suffix not in (".pt", ".json"):
            raise JournalRefused(
                f"{journal} names {name!r}: a journal may name only .pt and .json files "
                f"in {primary.parent} or one plain subfolder of it"
            )
        final = primary.parent.joinpath(*rel.parts)
        if len(rel.parts) == 2 and not stat.S_ISDIR(os.lstat(final.parent).st_mode):
            raise JournalRefused(f"{journal} names {name!r}, but {final.parent} is not a plain folder")
        kind = kit_file_kind(final)
        if kind not in ("missing", "checkpoint" if final.suffix == ".pt" else "report"):
            raise JournalRefused(f"{journal} would replace {final}, which is {kind}, not one of attnkit's files")
        tmp = temporary(final, token)
        if os.path.lexists(tmp) and not stat.S_ISREG(os.lstat(tmp).st_mode):
            raise JournalRefused(f"{journal}: {tmp} is not a regular file")
        renames.append((tmp, final))
    return renames


def roll_forward(primary: Path) -> bool:
    """Finish a save of `primary` killed between its renames (those done already are skipped), then
    drop the journal; False when there is none. JournalRefused (nothing renamed) for a journal
    that breaks a rule."""
    if not os.path.lexists(journal_path(primary)):
        return False
    _finish(planned_renames(primary), journal_path(primary))
    return True


def _finish(renames: list[tuple[Path, Path]], journal: Path) -> None:
    for tmp, final in renames:
        try:
            os.replace(tmp, final)
        except FileNotFoundError:
            pass  # renamed already, before the kill
    journal.unlink()


def _remove_orphans(path: Path) -> None:
    """Temporaries of `path` left by a killed save (before its commit point): our names only."""
    for orphan in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        token = orphan.name[len(path.name) + 2 : -len(".tmp")]
        if _TOKEN.match(token) and stat.S_ISREG(os.lstat(orphan).st_mode):
            orphan.unlink(missing_ok=True)


def write_together(files: list[tuple[Path, bytes]]) -> None:
    """Write every (path, bytes) as one unit: all new or all old, whatever kills the process.
    The last file is the primary one (the checkpoint), renamed last; every other file must be in
    its folder or one plain subfolder of it (so that a journal can name them)."""
    files = [(Path(p), data) for p, data in files]
    primary = files[-1][0]
    folder = primary.parent
    names = []
    for path, _ in files:
        try:
            rel = path.relative_to(folder)
        except ValueError:
            raise ValueError(f"{path} is not in {folder}: files saved together share a folder") from None
        names.append(rel.as_posix())
        if os.path.lexists(path) and not (path.is_symlink() or stat.S_ISREG(os.lstat(path).st_mode)):
            raise ValueError(f"cannot write {path}: it exists and is not a regular file")
    token, journal, written = secrets.token_hex(8), journal_path(primary), []
    with folder_lock(folder):
        roll_forward(primary)  # JournalRefused: a journal we did not write is left alone
        for path, _ in files:
            _remove_orphans(path)
        renames = [(temporary(path, token), path) for path, _ in files]
        try:
            for (tmp, _), (_, data) in zip(renames, files):
                written.append(tmp)
                create_new(tmp, data)
            atomic_write(journal, json.dumps({"token": token, "files": names}).encode())  # the commit point
            _finish(renames, journal)
        finally:
            if os.path.lexists(journal):  # interrupted after the commit point: finish, never half-undo
                _finish(renames, journal)
            for tmp in written:  # interrupted before it: the old files stay, the new ones go
                if os.path.lexists(tmp):
                    os.remove(tmp)
