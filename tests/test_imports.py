"""`import attnkit`, the command line's help and the grader's own process (`attnkit grade`: its checking
processes import torch, the process that runs them never does: 1.5 s saved per grading run) load no
torch (the package's names that need it are imported on first use); the command line reads notebooks
without jsonschema's IRI grammar (0.9 s)."""

import subprocess
import sys

import pytest

PROBE = """
import sys, contextlib, io
import attnkit, attnkit.__main__
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        attnkit.__main__.main(["student", "--help"])
    except SystemExit as e:
        assert e.code == 0, e.code
assert "student" in out.getvalue(), out.getvalue()
print("torch" in sys.modules)
import nbformat
print(sys.modules.get("rfc3987_syntax", "absent"))  # None: blocked (attnkit.course.skip_the_iri_grammar)
import attnkit.course.gradebook, attnkit.course.feedback, attnkit.course.lms, attnkit.course.classes  # `attnkit grade`
print("torch" in sys.modules)
attnkit.MultiHeadAttention  # the lazy name still resolves, and then torch is loaded
print("torch" in sys.modules)
"""


def test_import_student_help_and_the_grader_do_not_load_torch_nor_the_iri_grammar():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "None", "False", "True"]


def test_lazy_names_are_the_real_ones_and_unknown_names_fail():
    import attnkit
    from attnkit.core.attention import MultiHeadAttention
    from attnkit.core.hooks import ActivationCache

    assert attnkit.MultiHeadAttention is MultiHeadAttention
    assert attnkit.ActivationCache is ActivationCache
    assert set(attnkit.__all__) <= set(dir(attnkit))
    with pytest.raises(AttributeError, match="no_such_name"):
        attnkit.no_such_name  # noqa: B018
