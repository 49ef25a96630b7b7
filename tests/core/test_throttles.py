"""The process-wide limits themselves: first come first served, safe across loops and threads,
and a slot never lost to a waiter that gave up or was cancelled."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from miniagent.core.throttles import Endpoint, EndpointLimits, RateWindow, Slots
from miniagent.core.types import reporting_waits


async def test_waiters_are_served_in_arrival_order() -> None:
    slots, order = Slots(), []
    assert await slots.acquire(1)

    async def wait(i: int) -> None:
        await slots.acquire(1)
        order.append(i)
        slots.release()

    waiters = []
    for i in range(5):
        waiters.append(asyncio.ensure_future(wait(i)))
        while slots.queued < i + 1:  # queued in this order
            await asyncio.sleep(0)
    slots.release()
    await asyncio.gather(*waiters)
    assert order == [0, 1, 2, 3, 4]
    assert (slots.busy, slots.queued) == (0, 0)


async def test_a_cancelled_waiter_loses_no_slot_even_when_it_was_just_handed_one() -> None:
    slots = Slots()
    assert await slots.acquire(1)
    gone = asyncio.ensure_future(slots.acquire(1))
    while not slots.queued:
        await asyncio.sleep(0)
    slots.release()  # the slot goes to the waiter...
    gone.cancel()  # ...which is cancelled before it wakes up: it gives the slot back
    await asyncio.gather(gone, return_exceptions=True)
    assert slots.busy == 0
    assert slots.try_acquire(1)


async def test_a_waiter_gives_up_at_its_time_and_holds_nothing() -> None:
    slots = Slots()
    assert await slots.acquire(1)
    assert await slots.acquire(1, until=time.time() + 0.05) is False
    assert (slots.busy, slots.queued) == (1, 0)
    slots.release()
    assert await slots.acquire(1, until=time.time() + 0.05) is True


def test_a_slot_freed_on_one_loop_wakes_a_waiter_on_another() -> None:
    slots, woke = Slots(), threading.Event()
    holding = threading.Event()
    release = threading.Event()

    def holder() -> None:
        async def main() -> None:
            await slots.acquire(1)
            holding.set()
            while not release.is_set():  # bounded by the test's join
                await asyncio.sleep(0.01)
            slots.release()
        asyncio.run(main())

    def waiter() -> None:
        async def main() -> None:
            assert await slots.acquire(1, until=time.time() + 30)
            woke.set()
            slots.release()
        asyncio.run(main())

    first = threading.Thread(target=holder)
    first.start()
    assert holding.wait(10)
    second = threading.Thread(target=waiter)
    second.start()
    for _ in range(1000):
        if slots.queued:
            break
        time.sleep(0.01)
    assert slots.queued == 1 and not woke.is_set()
    release.set()
    first.join(10)
    second.join(10)
    assert woke.is_set() and slots.busy == 0


async def test_an_endpoint_reports_why_a_request_waits() -> None:
    shared, reported = Endpoint("m at http://127.0.0.1:1/v1"), []
    limits = EndpointLimits(max_concurrency=1)
    first = await shared.admit(limits)
    with reporting_waits(lambda what, why: reported.append((what, why))):
        second = asyncio.ensure_future(shared.admit(limits))
        while not shared.slots.queued:
            await asyncio.sleep(0)
    first.done()
    (await second).done()
    assert reported == [("model m at http://127.0.0.1:1/v1", "1 request in flight "
                         "(max_concurrency)")]
    assert shared.slots.busy == 0


async def test_a_slot_handed_over_after_the_waiters_time_is_given_back_not_used() -> None:
    # The slot comes free (from another thread) only once the waiter's time has passed, and
    # before its loop could run its timeout: it must not come back holding a slot it would
    # then use after its deadline.
    slots = Slots()
    assert slots.try_acquire(1)
    until = time.time() + 0.05
    waiting = asyncio.ensure_future(slots.acquire(1, until=until))
    while not slots.queued:
        await asyncio.sleep(0)
    while time.time() <= until:  # the loop is held past the waiter's time...
        time.sleep(0.01)
    freeing = threading.Thread(target=slots.release)  # ...while another thread frees the slot
    freeing.start()
    freeing.join(10)
    assert await waiting is False
    assert (slots.busy, slots.queued) == (0, 0)


def test_a_loop_closed_with_many_waiters_queued_loses_no_slot() -> None:
    # Waiters of a loop that closed without cancelling them can never take their slot: each
    # one handed a slot gives it back to the next, however many there are (no recursion).
    slots, waiting = Slots(), 3000
    assert slots.try_acquire(1)
    loop = asyncio.new_event_loop()

    async def queue_up() -> list[asyncio.Task[bool]]:
        tasks = [asyncio.ensure_future(slots.acquire(1)) for _ in range(waiting)]
        while slots.queued < waiting:
            await asyncio.sleep(0)
        return tasks

    tasks = loop.run_until_complete(queue_up())
    loop.set_exception_handler(lambda _loop, _context: None)  # "destroyed but pending"
    loop.close()  # the tasks are left pending: never cancelled, never resumed
    slots.release()
    assert (slots.busy, slots.queued) == (0, 0)
    assert slots.try_acquire(1)
    del tasks


async def test_a_waiter_whose_on_wait_raises_leaves_the_queue() -> None:
    slots = Slots()
    assert slots.try_acquire(1)

    def broken() -> None:
        raise RuntimeError("display broke")

    with pytest.raises(RuntimeError, match="display broke"):
        await slots.acquire(1, on_wait=broken)
    assert slots.queued == 0
    slots.release()  # the slot is not handed to a waiter nobody awaits any more
    assert (slots.busy, slots.queued) == (0, 0)
    assert slots.try_acquire(1)


async def test_a_rate_window_take_whose_on_wait_raises_keeps_no_reservation() -> None:
    window = RateWindow(60.0)
    await window.take(1, 1)  # the minute is full: the next take would wait

    def broken() -> None:
        raise RuntimeError("display broke")

    with pytest.raises(RuntimeError, match="display broke"):
        await window.take(1, 1, on_wait=broken)
    # the failed take reserved nothing: the next one is booked right after the first
    again = window.reserve(1, 2, time.monotonic())
    assert again.start <= time.monotonic()


async def test_waiters_that_gave_up_do_not_pile_up_behind_a_slot_held_for_long() -> None:
    # one call holds the only slot for the whole test; thousands of others queue and give up
    # at their deadline: what stays queued is bounded by those still waiting, not by all that
    # ever gave up
    slots = Slots()
    assert slots.try_acquire(1)
    still = asyncio.ensure_future(slots.acquire(1))  # one that waits on
    while not slots.queued:
        await asyncio.sleep(0)
    for _ in range(5000):
        assert await slots.acquire(1, until=time.time() - 1) is False
    assert slots.queued == 1
    assert len(slots._queue) <= 100
    slots.release()
    assert await still is True
    slots.release()
    assert (slots.busy, slots.queued) == (0, 0)
