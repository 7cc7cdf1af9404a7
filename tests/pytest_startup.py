"""A pytest plugin loaded before every other (`-p pytest_startup` in pyproject.toml's addopts): nbval
imports nbformat as pytest loads it, so this is the one place early enough to spare every pytest
process the 0.9 s of jsonschema's IRI grammar (attnkit.course.skip_the_iri_grammar says why)."""

from attnkit.course import skip_the_iri_grammar

skip_the_iri_grammar()
