"""Where the kit keeps its files, found through importlib.resources so that an installed wheel
finds them wherever it lies (never by walking up from the source tree):

    attnkit/data        the committed checkpoints, results and test sets
    attnkit/notebooks   the course notebooks

In the repository both are symlinks to the top-level data/ and notebooks/, which stay what
`make data` writes and what the tests run; setuptools follows them when it builds the wheel or
sdist, so the installed package carries real folders (pyproject.toml's package-data).
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path


def package_folder(name: str) -> Path:
    """attnkit/<name> as a real path (resolved: in a clone, the top-level folder it links to)."""
    folder = files("attnkit") / name
    if not isinstance(folder, Path):  # a zipped install: the notebooks must be real files to open
        raise RuntimeError(
            f"attnkit is installed where its files are not on disk ({folder}); "
            "install it unpacked (pip install attnkit)"
        )
    return folder.resolve()


def data_dir() -> Path:
    """The committed checkpoints and results; ATTNKIT_DATA_DIR points elsewhere (tests swap in
    broken models)."""
    return Path(os.environ.get("ATTNKIT_DATA_DIR") or package_folder("data"))


def notebooks_dir() -> Path:
    """The course notebooks (the complete edition: every solution in place)."""
    return package_folder("notebooks")
