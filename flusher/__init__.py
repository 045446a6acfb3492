"""Batching update records into compressed segments and writing them, with
checkpoints and the manifest, to object storage. (Built in the durable-stream
issue; empty until then.)"""
