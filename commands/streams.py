"""The streams command family (being written)."""
