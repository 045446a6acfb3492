"""The network edge: asyncio listeners (plain TCP and TLS), connections, the RESP2/RESP3
codec (hiredis' parser), pipelining, backpressure and buffer limits, the auth gate,
graceful shutdown and the command-line entry point. Knows nothing of data types or
storage."""
