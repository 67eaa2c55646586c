"""The gate every attempt passes as it is written, on simulated time (`tests.work.virtual`)."""

from __future__ import annotations

import asyncio

import pytest

from exporter.transport.gate import Gate
from exporter.transport.iface import CallDropped, CallSkipped
from tests.work.virtual import VirtualLoop, simulate


def test_a_turn_after_the_deadline_is_dropped_at_once_and_the_pause_then_waited_out() -> None:
    async def main(loop: VirtualLoop) -> tuple[float, float]:
        gate = Gate(1.0, loop.time)
        gate.pause(60)
        began = loop.time()
        with pytest.raises(CallDropped):
            await gate.admit(deadline=began + 5)
        dropped_after = loop.time() - began
        await gate.admit(deadline=began + 61)
        return dropped_after, loop.time() - began

    dropped_after, written_after = simulate(main)
    assert dropped_after == 0.0
    assert written_after == pytest.approx(60.0)


def test_refused_credentials_skip_every_call_until_unblocked() -> None:
    async def main(loop: VirtualLoop) -> int:
        gate = Gate(10.0, loop.time)
        gate.block()
        with pytest.raises(CallSkipped):
            await gate.admit()
        waiting = asyncio.ensure_future(gate.unblocked())
        await asyncio.sleep(1)
        assert not waiting.done()
        gate.unblock()
        await waiting
        await gate.admit()
        return gate.sent

    assert simulate(main) == 1


def test_a_gate_rebuilt_by_a_reload_goes_on_from_the_last_second_of_writes() -> None:
    # Without carry, the rebuilt target's first second could add the whole budget again.
    async def main(loop: VirtualLoop) -> float:
        old = Gate(10.0, loop.time)
        for _ in range(10):
            await old.admit()
        began = loop.time()
        new = Gate(10.0, loop.time)
        new.carry(old)
        for _ in range(10):
            await new.admit()
        return loop.time() - began

    assert simulate(main) >= 0.9
