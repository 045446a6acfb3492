"""store.tasks.cancel_and_wait: cancels, waits, swallows the tasks' own cancellation
and never the caller's."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from store.tasks import cancel_and_wait

T = TypeVar("T")


async def _forever(log: list[str], name: str) -> None:
    try:
        await asyncio.Event().wait()
    finally:
        log.append(name)


async def _slow_to_stop(release: asyncio.Event, log: list[str]) -> None:
    """Ends cancelled, once `release` is set (cleanup that takes a while)."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        await release.wait()
        log.append("cleaned")
        raise


async def _started(coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    task = asyncio.create_task(coro)
    await asyncio.sleep(0)
    return task


async def _cancelled_while_waiting(coro: Coroutine[Any, Any, None], release: asyncio.Event) -> None:
    """Runs `coro` in a task, cancels that task while it waits for the inner task,
    lets the inner task end (`release`) and checks the outer task ended cancelled."""
    outer = await _started(coro)
    outer.cancel()
    await asyncio.sleep(0)
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert outer.cancelled()


def test_cancels_awaits_and_swallows_the_tasks_cancellation() -> None:
    async def body() -> None:
        log: list[str] = []
        a = asyncio.create_task(_forever(log, "a"))
        b = await _started(_forever(log, "b"))
        await cancel_and_wait(a, b)
        assert a.cancelled() and b.cancelled()
        assert log == ["a", "b"]

    asyncio.run(body())


def test_a_task_that_never_started_is_cancelled_too() -> None:
    async def body() -> None:
        log: list[str] = []
        a = asyncio.create_task(_forever(log, "a"))
        await cancel_and_wait(a)
        assert a.cancelled() and log == []

    asyncio.run(body())


def test_none_and_tasks_already_done() -> None:
    async def body() -> None:
        async def value() -> int:
            return 1

        done = asyncio.create_task(value())
        gone = await _started(asyncio.Event().wait())
        gone.cancel()
        await asyncio.sleep(0)
        assert done.done() and gone.cancelled()
        await cancel_and_wait(None, done, gone, None)
        await cancel_and_wait()
        await cancel_and_wait(None)
        assert done.result() == 1

    asyncio.run(body())


def test_another_exception_at_the_tasks_end_propagates() -> None:
    async def body() -> None:
        async def fails() -> None:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                raise ValueError("at the end") from None

        task = await _started(fails())
        with pytest.raises(ValueError, match="at the end"):
            await cancel_and_wait(task)

    asyncio.run(body())


def test_the_callers_own_cancellation_propagates() -> None:
    async def body() -> None:
        log: list[str] = []
        release = asyncio.Event()
        inner = await _started(_slow_to_stop(release, log))

        async def stopper() -> None:
            await cancel_and_wait(inner)
            log.append("after")

        await _cancelled_while_waiting(stopper(), release)
        assert inner.cancelled()
        assert log == ["cleaned"]

    asyncio.run(body())


def test_the_callers_cancellation_propagates_when_the_task_ends_normally() -> None:
    async def body() -> None:
        release = asyncio.Event()

        async def swallows() -> str:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                await release.wait()
            return "swallowed"

        inner = await _started(swallows())
        after: list[str] = []

        async def stopper() -> None:
            await cancel_and_wait(inner)
            after.append("after")

        await _cancelled_while_waiting(stopper(), release)
        assert inner.result() == "swallowed"
        assert after == []

    asyncio.run(body())


def test_a_timeout_around_it_still_fires() -> None:
    async def body() -> None:
        log: list[str] = []
        release = asyncio.Event()
        inner = await _started(_slow_to_stop(release, log))
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01):
                await cancel_and_wait(inner)
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await inner

    asyncio.run(body())


def test_cleanup_in_a_task_already_being_cancelled_still_waits() -> None:
    async def body() -> None:
        log: list[str] = []
        release = asyncio.Event()
        inner = await _started(_slow_to_stop(release, log))

        async def owner() -> None:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                await cancel_and_wait(inner)  # the owner's cleanup
                log.append("owner cleaned")
                raise

        await _cancelled_while_waiting(owner(), release)
        assert inner.cancelled()
        assert log == ["cleaned", "owner cleaned"]

    asyncio.run(body())
