"""The course around the notebooks: the student edition (`editions`) and grading (`grading`)."""
