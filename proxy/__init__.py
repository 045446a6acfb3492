"""The network edge: asyncio listener, connections, the RESP2/RESP3 codec (hiredis'
parser), pipelining, backpressure, the auth gate, graceful shutdown and the
command-line entry point. Knows nothing of data types or storage."""
