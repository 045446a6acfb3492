"""The lists command family (being written)."""
