"""The stream value type and its ops (being written)."""
