"""The heap policy on a simulated clock: what survives a collection leaves the cyclic
collector's later walks, and a cycle that dies frozen is still collected once
FULL_COLLECTION_EVERY passes."""

from __future__ import annotations

import asyncio
import gc
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
    # Only the tests' own collections run: no automatic one at an allocation of theirs.
    gc.disable()
    gc.collect()
    heap = Heap(clock)
    heap.install()
    yield heap
    heap.uninstall()
    gc.unfreeze()
    gc.collect()
    gc.enable()


def cycle() -> tuple[Node, weakref.ref[Node]]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return a, weakref.ref(b)


def walked() -> set[int]:
    return {id(o) for o in gc.get_objects()}


def test_what_survives_a_young_collection_is_out_of_the_later_walks(heap: Heap) -> None:
    kept = [Node() for _ in range(1000)]
    assert id(kept[0]) in walked()
    gc.collect(0)
    after = walked()
    assert not any(id(node) in after for node in kept)


def test_without_the_heap_survivors_stay_in_the_walks() -> None:
    kept = [Node() for _ in range(1000)]
    gc.collect(0)
    after = walked()
    assert all(id(node) in after for node in kept)


def test_a_frozen_cycle_waits_for_the_full_collection_then_goes(heap: Heap, clock: Clock) -> None:
    head, tail = cycle()
    gc.collect(0)
    del head
    gc.collect()
    assert tail() is not None  # frozen: the collector does not see it
    clock.now += FULL_COLLECTION_EVERY - 1
    heap.settle()
    assert tail() is not None and heap.full_collections == 0
    clock.now += 1
    heap.settle()
    assert tail() is None and heap.full_collections == 1
    # What survived the full collection is frozen again.
    assert id(heap) not in walked()


def test_a_cycle_that_dies_before_a_collection_is_collected_as_usual(heap: Heap) -> None:
    gc.collect(0)
    head, tail = cycle()
    del head
    gc.collect(0)
    assert tail() is None


async def test_the_heap_is_kept_while_nothing_renders(heap: Heap, clock: Clock) -> None:
    head, tail = cycle()
    gc.collect(0)
    del head
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        if len(slept) == 2:
            raise asyncio.CancelledError
        slept.append(seconds)
        clock.now += seconds

    with pytest.raises(asyncio.CancelledError):
        await heap.keep(sleep)
    assert slept == [FULL_COLLECTION_EVERY, FULL_COLLECTION_EVERY]
    assert heap.full_collections == 2 and tail() is None
