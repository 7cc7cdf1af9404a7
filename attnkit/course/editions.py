"""Two editions from one source. The notebooks in notebooks/ hold each exercise's worked solution
between nbgrader's markers, in a cell nbgrader's metadata marks as a solution cell:

    def my_causal_mask(n_pos):
        # (n_pos, n_pos) bool: True where key j <= query i
        ### BEGIN SOLUTION
        return torch.ones(n_pos, n_pos, dtype=torch.bool).tril()
        ### END SOLUTION

The student edition replaces every such region with a stub that raises NotImplementedError
(which the checkers report as ⏳) and drops every output. The
self-study edition (with_solutions=True) keeps each solution as a collapsible block under its
stub. nbgrader's own `generate_assignment` reads the same markers and metadata.
"""

from __future__ import annotations

import copy
import os
import secrets
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import nbformat

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
STUB = 'raise NotImplementedError("your code here")'


def is_solution_cell(cell) -> bool:
    return bool(cell.get("metadata", {}).get("nbgrader", {}).get("solution"))


def check_cells(nb) -> dict:
    """The notebook's check cells by exercise id, in order."""
    return {
        cell.metadata["attnkit"]["exercise"]: cell
        for cell in nb.cells
        if "check" in cell.get("metadata", {}).get("tags", [])
    }


def exercise_ids(nb) -> list[str]:
    """The exercises a notebook checks, in order."""
    return list(check_cells(nb))


def stub_source(source: str, where: str = "cell") -> str:
    """`source` with each BEGIN/END SOLUTION region replaced by a stub at the BEGIN line's indentation."""
    out, inside = [], False
    for number, line in enumerate(source.splitlines(), 1):
        marker = line.strip()
        if marker == BEGIN:
            if inside:
                raise ValueError(f"{where}, line {number}: {BEGIN} inside another solution region")
            inside = True
            out.append(line[: len(line) - len(line.lstrip())] + STUB)
        elif marker == END:
            if not inside:
                raise ValueError(f"{where}, line {number}: {END} without a {BEGIN} before it")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{where}: {BEGIN} without an {END}")
    return "\n".join(out)


def without_markers(source: str) -> str:
    return "\n".join(line for line in source.splitlines() if line.strip() not in (BEGIN, END))


def student_notebook(nb, with_solutions: bool = False, hints: bool = True):
    """A copy of `nb` as the student edition (stubs for solutions, no outputs; no hints at all
    unless `hints`)."""
    nb = copy.deepcopy(nb)
    nb.metadata["attnkit"] = {"edition": "self-study" if with_solutions else "student"}
    if not hints:
        from .hints import without_hints

        without_hints(nb)
    cells = []
    for index, cell in enumerate(nb.cells):
        where = f"cell {index + 1}"
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            has_region = any(line.strip() == BEGIN for line in cell.source.splitlines())
            if has_region and not is_solution_cell(cell):
                raise ValueError(f"{where} has a {BEGIN} region but no nbgrader solution metadata")
            if has_region:
                solution = without_markers(cell.source)
                cell.source = stub_source(cell.source, where)
                cells.append(cell)
                if with_solutions:
                    cells.append(
                        nbformat.v4.new_markdown_cell(
                            f"<details><summary>Solution</summary>\n\n```python\n{solution}\n```\n\n</details>",
                            id=f"{cell.get('id', index)}-solution"[:64],
                        )
                    )
                continue
        cells.append(cell)
    nb.cells = cells
    return nb


EDITIONS = ("complete", "student", "self-study")


def edition_notebook(nb, edition: str, hints: bool = True):
    """`nb` as the given edition: "complete" (the course as written, every solution in place),
    "student" (stubs, no outputs) or "self-study" (stubs, each solution collapsed under its stub)."""
    if edition not in EDITIONS:
        raise ValueError(f"unknown edition {edition!r}; choose one of {', '.join(EDITIONS)}")
    if edition == "complete":
        return nb
    return student_notebook(nb, with_solutions=edition == "self-study", hints=hints)


def write_student_edition(
    source_dir, out_dir, with_solutions: bool = False, force: bool = False, hints: bool = True
) -> list[Path]:
    """Write the student (or, with_solutions, the self-study) edition: see write_edition."""
    return write_edition(source_dir, out_dir, "self-study" if with_solutions else "student", force, hints=hints)[0]


def write_edition(
    source_dir, out_dir, edition: str = "student", force: bool = False, keep_changed: bool = False, hints: bool = True
) -> tuple[list[Path], list[Path]]:
    """Write `edition` of every notebook in `source_dir` to `out_dir`; return (written, kept).

    A file already in out_dir is replaced only when `force` is set or it is exactly what would be
    written: a learner's work there is never overwritten by accident. A file that differs stops
    everything with a ValueError, or with `keep_changed` is kept as it is (and listed in `kept`),
    so that a course update reaches every notebook the learner has not touched. All files are
    checked (and every notebook converted) before the first is written. All or nothing: every
    notebook goes to a temporary first, then all are renamed with Ctrl-C, SIGTERM and SIGHUP held
    back (a few microseconds), so a signal leaves either the old files or the whole edition, and
    no temporary. Files get mode 0o666 less the umask (a course group can read them).
    """
    source_dir, out_dir = Path(source_dir), Path(out_dir)
    sources = sorted(source_dir.glob("[0-9][0-9]_*.ipynb"))
    if not sources:
        raise ValueError(f"no course notebooks (NN_name.ipynb) in {source_dir}")
    if out_dir.resolve() == source_dir.resolve():
        raise ValueError(f"{out_dir} is the source folder: the {edition} edition must go elsewhere")
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"{out_dir} exists and is not a folder")
    editions, kept = {}, []
    for path in sources:
        try:
            nb = nbformat.read(path, as_version=4)
        except Exception as e:
            raise ValueError(f"{path} is not a readable notebook: {e}") from None
        text = nbformat.writes(edition_notebook(nb, edition, hints)) + "\n"
        target = out_dir / path.name
        if target.is_symlink() or target.exists():  # a link or folder there is never the edition
            same = (
                target.is_file()
                and not target.is_symlink()
                and target.read_text(encoding="utf-8", errors="replace") == text
            )
            if same or force:
                editions[target] = text
                continue
            if keep_changed:
                kept.append(target)
                continue
            raise ValueError(
                f"{target} exists and differs from the edition ({edition}; a learner's work?): "
                "choose another folder, pass --keep-changed to keep it, or --force to overwrite it"
            )
        editions[target] = text
    out_dir.mkdir(parents=True, exist_ok=True)
    token, renames = secrets.token_hex(8), []
    try:
        for target, text in editions.items():
            tmp = out_dir / f".{target.name}.{token}.tmp"
            renames.append((tmp, target))
            with open(tmp, "x", encoding="utf-8") as f:  # "x": created new, mode 0o666 less the umask
                f.write(text)
        with signals_held():
            for tmp, target in renames:
                os.replace(tmp, target)
    finally:
        for tmp, _ in renames:
            if os.path.lexists(tmp):
                os.unlink(tmp)
    return list(editions), kept


class EditionWritten(KeyboardInterrupt):
    """A signal that arrived while the edition's files were renamed: delivered after the last
    rename, so the edition is complete."""


STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP held back inside the block and delivered after it (a
    KeyboardInterrupt becomes EditionWritten). Python-level handlers, not a thread's signal mask:
    a process with other threads (a Jupyter kernel, a test worker) has the signal delivered to one
    of them, which a mask on this thread does not hold. Outside the main thread the block runs as is."""
    caught: list[int] = []
    try:
        previous = {s: signal.signal(s, lambda number, frame: caught.append(number)) for s in STOP_SIGNALS}
    except ValueError:  # not the main thread: handlers cannot be set
        yield
        return
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if caught:
            try:
                signal.raise_signal(caught[0])  # now handled as it would have been (the CLI's handlers)
            except KeyboardInterrupt:
                raise EditionWritten() from None
