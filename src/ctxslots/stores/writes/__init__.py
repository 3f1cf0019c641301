"""writes."""
