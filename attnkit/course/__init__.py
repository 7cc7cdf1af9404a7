"""The course around the notebooks: the student edition (`editions`) and grading (`grading`)."""

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
