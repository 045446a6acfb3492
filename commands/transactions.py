"""The transactions command family (being written)."""
