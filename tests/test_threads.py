"""Daemon worker threads for blocking calls."""

from __future__ import annotations

import asyncio
import threading

import pytest

from miniagent.threads import run_in_daemon_thread


async def test_results_and_exceptions_come_back() -> None:
    assert await run_in_daemon_thread(lambda a, b: a + b, 2, 3) == 5

    def boom() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        await run_in_daemon_thread(boom)


async def test_calls_run_concurrently_and_a_hung_one_blocks_nobody() -> None:
    release = threading.Event()
    hung = asyncio.ensure_future(run_in_daemon_thread(release.wait, 30))
    barrier = threading.Barrier(20, timeout=10)  # needs 20 threads at once, or it breaks
    results = await asyncio.gather(*(run_in_daemon_thread(barrier.wait) for _ in range(20)))
    assert sorted(results) == list(range(20))
    assert not hung.done()
    release.set()
    assert await hung is True


async def test_a_cancelled_wait_leaves_the_thread_harmless() -> None:
    release = threading.Event()
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(run_in_daemon_thread(release.wait, 30), 0.05)
    release.set()  # the worker finishes later; its result is dropped without error
    assert await run_in_daemon_thread(lambda: "next") == "next"


def test_a_forked_child_gets_fresh_workers() -> None:
    import os

    assert asyncio.run(run_in_daemon_thread(lambda: 1)) == 1  # the parent has a worker now
    pid = os.fork()
    if pid == 0:  # the child: a call must run although the parent's threads did not follow
        ok = False
        try:
            ok = asyncio.run(asyncio.wait_for(run_in_daemon_thread(lambda: 7), 10)) == 7
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
