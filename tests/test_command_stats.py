"""A command's latency histogram (`CommandStats.hist`): the dispatcher counts a run of
calls in one bucket apart (`run_calls`) and the histogram read includes it."""

from __future__ import annotations

from commands.registry import HIST_BUCKETS, CommandStats
from tests.helpers import make_session, run


def test_runs_of_one_bucket_are_counted() -> None:
    st = CommandStats()
    for b in [3, 3, 3, 5, 3, 0, 0, 64]:
        if b == st.run_bucket:
            st.run_calls += 1
        else:
            st.new_run(b)
    assert st.run_calls == 1  # the last call, not yet in the counts
    want = [0] * HIST_BUCKETS
    for b, n in {3: 4, 5: 1, 0: 2, 64: 1}.items():
        want[b] = n
    assert st.hist == want
    assert st.run_calls == 0  # read: in the counts now
    st.hist[3] -= 1  # a blocked command run again (proxy.server) takes one back
    assert sum(st.hist) == 7
    st.reset()
    assert st.hist == [0] * HIST_BUCKETS


def test_the_dispatcher_fills_the_histogram() -> None:
    s, _ = make_session()
    for _ in range(50):
        run(s, "INCR", "c")
    run(s, "GET", "c")
    stats = s.server.command_stats
    assert sum(stats["incr"].hist) == 50 == stats["incr"].calls
    assert sum(stats["get"].hist) == 1
    reply = run(s, "LATENCY", "HISTOGRAM", "incr")
    assert reply[b"incr"][b"calls"] == 50
