"""What the learner sees: figures, widgets and the exercise checkers of the notebooks."""
