"""A feedback page per learner, from the gradebook's rows: Markdown (for an LMS comment box) and
HTML (to mail or post), written by `attnkit grade ... --feedback DIR`.

Each page lists every exercise of every notebook the learner was graded on: passed or not, its
points (an exercise's stars, ⭐ to ⭐⭐⭐, as the notebook's heading gives them), the checker's line —
which names the likely mistake and never the answer — and the section of the notebook to review.
With hints off (`--no-hints`) a page says only whether each exercise passed.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import nbformat

from ..core.journal import atomic_write  # torch-free: the grader's process never imports torch
from .grading import NOTEBOOKS_DIR, Row, course_notebooks, exercise_of

HEADING = re.compile(r"^#+\s*(⭐+)\s*(.+)$", re.MULTILINE)  # "### ⭐⭐ Exercise: scaled dot-product attention"


def exercises(notebooks_dir: Path = NOTEBOOKS_DIR) -> dict[str, tuple[str, str, int]]:
    """exercise id -> (its notebook's name, the exercise's heading, its points: the heading's stars)."""
    found: dict[str, tuple[str, str, int]] = {}
    for path in course_notebooks(notebooks_dir):
        heading, stars = "", 1
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "markdown" and (match := HEADING.search(cell.source)):
                heading, stars = match.group(2).strip(), len(match.group(1))
            exercise = exercise_of(cell)
            if exercise:
                found[exercise] = (path.stem, heading, stars)
    return found


def _status(row: Row) -> str:
    if row.passed:
        return "✅ passed"
    return "⏳ not done" if row.mistake in ("not-done", "not-handed-in") else "❌ not passed"


MARK = "<!-- written by attnkit grade --feedback -->"  # a page the kit may overwrite carries it


def page(
    learner: str,
    rows: list[Row],
    known: dict[str, tuple[str, str, int]],
    hints: bool = True,
    worth: dict[str, float] | None = None,
) -> str:
    """The learner's page in Markdown; `worth`: points per exercise (default: its stars)."""

    def about(row: Row) -> tuple[str, str, str]:  # (notebook, heading, points); 1 point for an unknown one
        notebook, heading, stars = known.get(row.exercise, (Path(row.learner_file).stem, row.exercise, 1))
        return notebook, heading, f"{(worth or {}).get(row.exercise, stars):g}"

    def points(some: list[Row]) -> tuple[str, str]:
        earned = sum(float(about(r)[2]) for r in some if r.passed)
        return f"{earned:g}", f"{sum(float(about(r)[2]) for r in some):g}"

    earned, possible = points(rows)
    out = [
        f"# Feedback for {learner}",
        MARK,
        "",
        f"**{earned} of {possible} points** ({sum(r.passed for r in rows)} of {len(rows)} exercises passed).",
        "",
    ]
    by_notebook: dict[str, list[Row]] = {}
    for row in rows:
        by_notebook.setdefault(about(row)[0], []).append(row)
    for notebook, notebook_rows in by_notebook.items():
        got, of = points(notebook_rows)
        out += [
            f"## {notebook}: {got} of {of} points",
            "",
            "| exercise | points | result | to review |",
            "|---|---|---|---|",
        ]
        for row in notebook_rows:
            _, heading, stars = about(row)  # the points it is worth
            result = row.line if hints and not row.passed else _status(row)
            if not hints and row.mistake == "not-handed-in":
                result = "⏳ not handed in"
            review = "" if row.passed else f"{notebook}, “{heading}”"
            cells = [row.exercise, f"{stars if row.passed else 0} / {stars}", result, review]
            out.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
        out.append("")
    return "\n".join(out)


def as_html(markdown: str) -> str:
    """The page's Markdown as a small, self-contained HTML page (headings, bold, tables)."""
    body, table = [], False
    for line in markdown.splitlines():
        if line.startswith("|"):
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if set("".join(cells)) <= set("-"):
                continue
            tag = "th" if not table else "td"
            body += ["<table>"] if not table else []
            body.append("<tr>" + "".join(f"<{tag}>{html.escape(c)}</{tag}>" for c in cells) + "</tr>")
            table = True
            continue
        if table:
            body.append("</table>")
            table = False
        if line == MARK:
            body.append(MARK)
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            body.append(f"<h{level}>{html.escape(line.lstrip('#').strip())}</h{level}>")
        elif line:
            text = html.escape(line)
            body.append("<p>" + re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text) + "</p>")
    body += ["</table>"] if table else []
    title = html.escape(markdown.splitlines()[0].lstrip("# "))
    return (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        "<style>body{font-family:sans-serif;max-width:60rem;margin:2rem auto}table{border-collapse:collapse}"
        "td,th{border:1px solid #767676;padding:.3rem .6rem;text-align:left}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def write_feedback(
    rows: list[Row],
    folder,
    notebooks_dir: Path = NOTEBOOKS_DIR,
    hints: bool = True,
    worth: dict[str, float] | None = None,
) -> list[Path]:
    """<learner>.md and <learner>.html in `folder` for each learner (a notebook named alone: its file
    name stands for the learner); each file written atomically. The paths written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    known = exercises(notebooks_dir)
    learners: dict[str, list[Row]] = {}
    for row in rows:
        learners.setdefault(row.learner or Path(row.learner_file).stem, []).append(row)
    names: dict[str, str] = {}  # learner -> file name (two ids that spell the same get -2, -3, ...)
    for learner in learners:
        base = re.sub(r"[^A-Za-z0-9_.-]+", "_", learner).strip(".") or "learner"
        name, n = base, 1
        while name in names.values():
            n += 1
            name = f"{base}-{n}"
        names[learner] = name
    paths = [folder / (names[learner] + suffix) for learner in learners for suffix in (".md", ".html")]
    foreign = [p for p in paths if p.exists() and MARK not in p.read_text(encoding="utf-8", errors="replace")]
    if foreign:  # checked before anything is written: a file the kit did not write is never touched
        raise ValueError(f"{foreign[0]} exists and is not a feedback page attnkit wrote: choose another folder")
    for learner, learner_rows in learners.items():
        markdown = page(learner, learner_rows, known, hints, worth)
        for suffix, text in ((".md", markdown), (".html", as_html(markdown))):
            atomic_write(folder / (names[learner] + suffix), text.encode("utf-8"))
    return paths
