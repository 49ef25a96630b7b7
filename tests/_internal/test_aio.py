"""Daemon worker threads for blocking calls."""

from __future__ import annotations

import asyncio
import threading

import pytest

from miniagent._internal.aio import iterate_in_thread, run_in_daemon_thread


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



async def test_an_on_done_that_raises_still_hands_the_result_back(
        caplog: pytest.LogCaptureFixture) -> None:
    """``on_done`` failing (a store closed, a database error) is logged; the waiter still gets
    the result, or the exception, of the call."""

    def broken_store(_result: object, _error: BaseException | None) -> None:
        raise RuntimeError("the store is closed")

    def boom() -> None:
        raise ValueError("no")

    assert await asyncio.wait_for(
        run_in_daemon_thread(lambda: "paid", on_done=broken_store), 10) == "paid"
    with pytest.raises(ValueError, match="no"):
        await asyncio.wait_for(run_in_daemon_thread(boom, on_done=broken_store), 10)
    logged = [r.exc_info[1] for r in caplog.records if r.exc_info]
    assert [str(e) for e in logged] == ["the store is closed"] * 2


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


def test_iterate_in_thread_hands_over_everything_through_a_small_buffer() -> None:
    async def numbers():  # type: ignore[no-untyped-def]
        for i in range(200):
            yield i

    assert list(iterate_in_thread(numbers, buffer=1)) == list(range(200))


def test_iterate_in_thread_raises_what_the_iteration_raised_after_its_items() -> None:
    async def failing():  # type: ignore[no-untyped-def]
        yield 1
        yield 2
        raise ValueError("broken")

    got: list[int] = []
    with pytest.raises(ValueError, match="broken"):
        for item in iterate_in_thread(failing, buffer=1):
            got.append(item)
    assert got == [1, 2]


def test_leaving_iterate_in_thread_early_cancels_the_iteration() -> None:
    cancelled = threading.Event()

    async def endless():  # type: ignore[no-untyped-def]
        try:
            i = 0
            while True:
                yield i
                i += 1
                await asyncio.sleep(0)
        except (asyncio.CancelledError, GeneratorExit):
            cancelled.set()
            raise

    for item in iterate_in_thread(endless, buffer=2):
        if item == 5:
            break
    assert cancelled.is_set()  # the break returned after the iteration stopped
