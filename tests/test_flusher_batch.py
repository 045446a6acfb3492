"""`Flusher.batch_started`: a batch's encoding is scheduled on the loop `Flusher.start`
ran in, without asking `asyncio.get_running_loop()` (on Python 3.11 each call is a
getpid() system call); off that loop's thread, or with no loop running, as before."""

from __future__ import annotations

import asyncio
import threading

import pytest

from flusher.flusher import Flusher
from flusher.memory import MemoryObjectStore
from tests.test_durable_log import FakeClock, set_record


def test_a_batch_is_encoded_at_the_end_of_the_pass_without_asking_for_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def body() -> None:
        f = Flusher(MemoryObjectStore(), 0, clock=FakeClock())
        f.start()
        asked: list[int] = []
        real = asyncio.get_running_loop

        def counting() -> asyncio.AbstractEventLoop:
            asked.append(1)
            return real()

        monkeypatch.setattr(asyncio, "get_running_loop", counting)
        f.append(set_record(1))
        f.append(set_record(2))
        assert not f.pending  # not yet: at the end of this pass of the loop
        await asyncio.sleep(0)
        assert [(first, last) for first, last, _t, _d in f.pending] == [(1, 2)]
        assert asked == []
        monkeypatch.undo()
        await f.stop()

    asyncio.run(body())


def test_off_the_loops_thread_or_without_a_loop_a_batch_is_encoded_at_once() -> None:
    f = Flusher(MemoryObjectStore(), 0, clock=FakeClock())
    f.append(set_record(1))  # never started, no loop: at once
    assert [(first, last) for first, last, _t, _d in f.pending] == [(1, 1)]

    async def body() -> None:
        f.start()
        done = threading.Event()

        def other_thread() -> None:
            f.append(set_record(2))  # the loop runs, but in another thread
            done.set()

        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
        assert done.is_set()
        assert [(first, last) for first, last, _t, _d in f.pending] == [(1, 1), (2, 2)]
        await f.stop()

    asyncio.run(body())
