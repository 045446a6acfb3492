"""Rebuilding a store from a checkpoint plus the segments after it, with
verification and progress. (Built in the durable-stream issue; empty until then.)"""
