"""Round 178 (issue 16 item 3, garbage collection at 500 concurrent replies): the harness's
share of collection time was 5 points above bare. Under many concurrent replies a round's
objects live across the model's answer, while the other replies allocate; whatever a round
keeps until its next one is promoted to the oldest generation, and every 25 % of the heap
promoted there makes one more full collection (each walks the whole heap). The harnessed
reply promoted 82 objects a round where bare AgentScope promotes 44 (500 replies; 77 against
37, 2.06x, in this test's 300): five full collections at 500 replies where bare makes three.
Now 69 (64 here, 1.70x): four.

Among them, made anew every round and kept until the next: the prefix observer's three
arrays of chunk keys (a run now keeps one set, refilled), the round's stream filter (a run
now keeps one, started afresh) and its streams (dropped now at the model call's end, once
every block ended), the permission check's timer (armed now only for a check
that waits), a stream redactor's two empty lists at each flush, the text an ``on_acting``
streams (tuples of text now, which the collector stops tracking), and empty containers a
read made (now read through ``made``).

Counted, not timed: the replies run with full collections held off, and after each
collection of the middle generation the objects newly in the oldest are counted (what a
bare reply promotes is the yardstick)."""
from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from benchmarks._common import Tools, full_policy, harness, make_agent, reply
from benchmarks._model import BenchModel
from benchmarks.overhead import overhead_script

pytestmark = pytest.mark.asyncio

REPLIES = 300
ROUNDS = 8


class Promotions:
    """A ``gc.callbacks`` entry: after each collection of generation 1,
    the objects found in generation 2 that were not there after the last."""

    def __init__(self) -> None:
        self.count = 0
        self._seen: set[int] = set()

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase != "stop" or info["generation"] != 1:
            return
        now = {id(o) for o in gc.get_objects(generation=2)}
        self.count += len(now - self._seen)
        self._seen = now


@contextmanager
def counting() -> Iterator[Promotions]:
    """Everything alive now set aside (``gc.freeze``), full collections
    held off (each would empty generation 2), promotions counted."""
    promotions = Promotions()
    threshold = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(threshold[0], threshold[1], 10**9)
    gc.callbacks.append(promotions)
    try:
        yield promotions
    finally:
        gc.callbacks.remove(promotions)
        gc.set_threshold(*threshold)
        gc.unfreeze()


async def _promoted_per_round(harnessed: bool) -> float:
    h = harness(full_policy()) if harnessed else None
    await asyncio.gather(*(reply(make_agent(BenchModel(overhead_script(ROUNDS)), Tools(), h), h) for _ in range(2)))
    agents = [make_agent(BenchModel(overhead_script(ROUNDS)), Tools(), h) for _ in range(REPLIES)]
    with counting() as promotions:
        await asyncio.gather(*(reply(agent, h) for agent in agents))
    return promotions.count / sum(agent.model.n_calls for agent in agents)


async def test_a_harnessed_round_promotes_less_than_1_85_times_what_bare_promotes() -> None:
    bare = await _promoted_per_round(harnessed=False)
    harnessed = await _promoted_per_round(harnessed=True)
    assert bare > 20, bare  # the yardstick counts (AgentScope's own round promotes dozens)
    assert harnessed < 1.85 * bare, (
        f"a harnessed round promotes {harnessed:.1f} objects to the oldest generation, bare {bare:.1f}: "
        f"{harnessed / bare:.2f}x (2.06x before round 178)"
    )
