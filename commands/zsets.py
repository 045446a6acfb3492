"""The zsets command family (being written)."""
