"""The sets command family (being written)."""
