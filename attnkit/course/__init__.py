"""The course around the notebooks: its editions (`editions`, `hints` for an edition without hints;
`repeats`: the student edition's cells that repeat the solved one's work), grading (`grading`, its
Linux `grading_server`, a class's `gradebook` and `classes` of per-learner folders), and what goes
back to learners and the LMS (`feedback`, `lms`)."""

import sys


def skip_the_iri_grammar() -> None:
    """Make `import nbformat` take 0.15 s instead of 1 s in a process of the kit's own (its command
    line, the site build, the test suite). nbformat validates with jsonschema, which imports
    rfc3987_syntax where it is installed (jupyter-events requires it) to check "iri" strings, and
    that package builds a parser for the whole IRI grammar as it is imported. No notebook field is
    an IRI: nbformat's schemas ask jsonschema for no such check. Call it before nbformat is imported;
    never in a learner's kernel, where the learner's own `import rfc3987_syntax` would then fail."""
    # None in sys.modules: `import` raises ImportError, which jsonschema expects of a package not installed
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
