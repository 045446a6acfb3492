"""Stopping asyncio tasks, for every package of the server: `cancel_and_wait`.

It lives in `store`, which knows nothing of asyncio otherwise, because `store` is the
one package that all of its users may import: `flusher` imports only `store`, and
`proxy.server` no durable layer (the import-linter contracts in pyproject.toml). It
imports nothing of ours.
"""

from __future__ import annotations

import asyncio
from typing import Any


async def cancel_and_wait(*tasks: asyncio.Future[Any] | None) -> None:
    """Cancel every task of `tasks` (None stands for no task), then await them in
    order, so that each has run its cleanup when this returns.

    A task's own end by cancellation is swallowed, as is a task already done. Any
    other exception a task ends with propagates, as `await task` would raise it: at
    once, the tasks after it (cancelled already) left unawaited. Callers that expect
    one catch it around the call.

    The caller's own cancellation is never swallowed: if the task running this is
    cancelled while it waits (its `cancelling()` count went up since the call
    began), CancelledError propagates, even when the awaited task swallowed the
    cancellation and ended normally. The count is compared, not tested against
    zero, so that cleanup running in a task that is already being cancelled (an
    `except CancelledError:` or `finally:` block) still waits for its tasks.
    """
    waiting = [task for task in tasks if task is not None]
    for task in waiting:
        task.cancel()
    current = asyncio.current_task()
    before = current.cancelling() if current is not None else 0
    for task in waiting:
        try:
            await task
        except asyncio.CancelledError:
            if current is not None and current.cancelling() > before:
                raise
        else:
            if current is not None and current.cancelling() > before:
                raise asyncio.CancelledError
