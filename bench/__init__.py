"""`make bench`: TemporalStore side by side with redis-server (see bench/run.py)."""
