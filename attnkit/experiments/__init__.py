"""Long runs that write the committed result files in data/, called by `python -m attnkit`."""
