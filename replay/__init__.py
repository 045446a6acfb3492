"""Rebuilding a store from a checkpoint plus the segments after it, with
verification and progress (`replay.replay.recover`)."""
