"""attnkit: a course kit on transformer attention."""
