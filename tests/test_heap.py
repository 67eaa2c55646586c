"""The heap policy: what survives a collection leaves the cyclic collector's later walks, and a
cycle that dies frozen is still collected within a period, with the automatic collector on
and other threads collecting meanwhile."""

from __future__ import annotations

import asyncio
import gc
import itertools
import threading
import time
import weakref
from collections.abc import Iterator

import pytest

from exporter.heap import FULL_COLLECTION_EVERY, Heap


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def heap(clock: Clock) -> Iterator[Heap]:
    gc.collect()
    callbacks = list(gc.callbacks)
    heap = Heap(clock=clock)
    heap.install()
    yield heap
    gc.callbacks[:] = callbacks
    gc.unfreeze()
    gc.collect()


@pytest.fixture
def manual() -> Iterator[None]:
    """Only the test's own collections run: no automatic one at an allocation of its own."""
    gc.disable()
    yield
    gc.enable()


def cycle() -> tuple[Node, weakref.ref[Node]]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return a, weakref.ref(b)


def walked() -> set[int]:
    return {id(o) for o in gc.get_objects()}


def test_what_survives_a_young_collection_is_out_of_the_later_walks(
    manual: None, heap: Heap
) -> None:
    kept = [Node() for _ in range(1000)]
    assert id(kept[0]) in walked()
    gc.collect(0)
    after = walked()
    assert not any(id(node) in after for node in kept)


def test_without_the_heap_survivors_stay_in_the_walks(manual: None) -> None:
    kept = [Node() for _ in range(1000)]
    gc.collect(0)
    after = walked()
    assert all(id(node) in after for node in kept)


def test_a_frozen_cycle_waits_for_the_full_collection_then_goes(
    manual: None, heap: Heap, clock: Clock
) -> None:
    head, tail = cycle()
    gc.collect(0)
    del head
    gc.collect()
    assert tail() is not None  # frozen: a collection of its own does not see it
    clock.now += FULL_COLLECTION_EVERY - 1
    heap.settle()
    assert tail() is not None  # not a period yet: no full collection
    clock.now += 1
    heap.settle()
    assert tail() is None
    # What survived the full collection is frozen again.
    assert id(heap) not in walked()


def test_a_cycle_that_dies_before_a_collection_is_collected_as_usual(
    manual: None, heap: Heap
) -> None:
    gc.collect(0)
    head, tail = cycle()
    del head
    gc.collect(0)
    assert tail() is None


def churning() -> tuple[threading.Event, threading.Thread]:
    """A thread that allocates containers without pause: automatic young collections on it,
    at any moment of the test's own thread."""
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            [[] for _ in range(500)]

    thread = threading.Thread(target=churn, daemon=True)
    thread.start()
    return stop, thread


def test_a_young_collection_before_the_full_one_starts_takes_nothing_from_it(
    manual: None, heap: Heap, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever collection another thread runs between the request and the walk (here, this
    thread's own young one, run first by each gc.collect), the full collection still walks the
    frozen objects."""
    head, tail = cycle()
    gc.collect(0)
    del head
    collect = gc.collect
    monkeypatch.setattr(gc, "collect", lambda generation=2: (collect(0), collect(generation))[1])
    heap.collect()
    assert tail() is None


class Timed(Heap):
    """A heap that notes when each full collection started and ended."""

    def __init__(self, period: float) -> None:
        super().__init__(period)
        self.spans: list[tuple[float, float]] = []

    def collect(self) -> int:
        started = time.monotonic()
        found = super().collect()
        self.spans.append((started, time.monotonic()))
        return found


async def test_cycles_dying_under_churn_are_freed_within_the_period() -> None:
    """The real automatic collector (a young collection every 100 allocations, on this thread
    and on a churning one), a keeper with a 0.1 s period, and cycles that survive collections
    (so are frozen) before they die: each is gone once a full collection that started after
    its death is over, and those start once a period. Four periods, ~20 cycles each: the
    churning thread spins for as long as they last."""
    period = 0.1
    thresholds = gc.get_threshold()
    gc.set_threshold(100, *thresholds[1:])
    heap, callbacks = Timed(period), list(gc.callbacks)
    heap.install()
    errors: list[Exception] = []
    keeper = asyncio.create_task(heap.keep(errors.append))
    stop, thread = churning()
    died: list[tuple[float, weakref.ref[Node]]] = []
    outlived = 0
    try:
        while len(heap.spans) < 4:
            head, tail = cycle()
            await asyncio.sleep(0.005)  # the loop allocates: collections while it lives
            del head
            died.append((time.monotonic(), tail))
            outlived += sum(ref() is not None for _, ref in died[:-1])
            for at, ref in died:
                if any(at < started for started, _ in heap.spans):
                    assert ref() is None, "a full collection since it died left it"
    finally:
        stop.set()
        thread.join()
        keeper.cancel()
        gc.callbacks[:] = callbacks
        gc.set_threshold(*thresholds)
        gc.unfreeze()
    assert outlived, "no cycle outlived a collection frozen: the test shows nothing"
    starts = [started for started, _ in heap.spans]
    longest = max(ended - started for started, ended in heap.spans)
    assert max(b - a for a, b in itertools.pairwise(starts)) < period + longest + 0.5
    assert not errors


async def test_a_round_that_raises_is_told_and_the_keeper_goes_on(clock: Clock) -> None:
    class Failing(Heap):
        settled = 0

        def settle(self) -> None:
            self.settled += 1
            if self.settled == 1:
                raise MemoryError("once")
            super().settle()

    heap = Failing(clock=clock)
    errors: list[Exception] = []
    rounds: list[float] = []

    async def sleep(seconds: float) -> None:
        if len(rounds) == 3:
            raise asyncio.CancelledError
        rounds.append(seconds)
        clock.now += seconds

    with pytest.raises(asyncio.CancelledError):
        await heap.keep(errors.append, sleep)
    assert rounds == [FULL_COLLECTION_EVERY] * 3
    assert [str(e) for e in errors] == ["once"] and heap.settled == 3
