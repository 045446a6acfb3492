"""The keys command family (being written)."""
