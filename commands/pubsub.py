"""The pubsub command family (being written)."""
