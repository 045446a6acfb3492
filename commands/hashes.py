"""The hashes command family (being written)."""
