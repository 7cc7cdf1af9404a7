"""What the learner sees: figures, widgets and the explorers (the exercise checkers live in attnkit/exercises)."""
