"""Round 121 (event loop on crafted input). The final answer's ``claims`` audit compares
every claim the answer makes with every successful call of its tool
(``hooks/safety._audit_claims``: ``supported = [_supported(m, calls) for m in matches]``;
``_supported`` -> ``any(all(_same_value(...)) for args in calls)``, each comparison
re-reading both values: ``_as_read``, ``_number``, ``_numbers``), in one synchronous hook
call. Claims x successes: an agent that cancelled 800 orders (40 rounds of 20) and reports
each one ("Order o-799 was cancelled. ...", a 20 KB honest answer, every claim supported)
holds the event loop ~0.5-1 s in one step; a 1 MB answer of 35,000 claims against 20
successes holds it ~1.4 s (bare agent: a few ms).

README Security: "the loop gets a turn after every millisecond of work"; the issue's goal:
no single block over 5 ms for 1 MB inputs. Not among the README's stated limits (metadata
cleaned in one step, a streamed answer's unbroken 1 MB token). Same measure as
tests/perf/test_round116_*.py (harnessed against bare, same script).
"""
from __future__ import annotations

import pytest

from agentscope_harness import HarnessConfig, ToolPolicy
from tests.perf.loopkit import loop_gaps
from tests.scripted import calls, text

pytestmark = pytest.mark.asyncio

ROUNDS, PER = 40, 20
IDS = [f"o-{i}" for i in range(ROUNDS * PER)]
CLAIM = r"[Oo]rder (?P<order_id>[\w-]+) (?:was |has been )?cancell?ed"  # README's example pattern


async def cancel_order(order_id: str) -> str:
    """Cancel an order.

    Args:
        order_id (str): The order.
    """
    return f"order {order_id} cancelled"


async def test_an_answer_listing_many_done_steps_is_audited_without_holding_the_loop() -> None:
    script = [calls(*[("cancel_order", {"order_id": IDS[r * PER + i]}) for i in range(PER)]) for r in range(ROUNDS)]
    answer = "All done. " + " ".join(f"Order {i} was cancelled." for i in reversed(IDS))  # newest first
    script.append(text(answer))
    gap, bare, (model, bare_model), (final, bare_final) = await loop_gaps(
        script, [cancel_order], "cancel all my open orders",
        HarnessConfig(max_model_calls=100, tools={"cancel_order": ToolPolicy(role="mutation", claims=[CLAIM])}),
        model="m")
    assert len(model.calls) == ROUNDS + 1 and len(bare_model.calls) == ROUNDS + 1
    assert final == answer == bare_final  # every claim is supported: the answer stands
    print(f"\nlongest loop block: harnessed {gap * 1000:.1f} ms, bare {bare * 1000:.1f} ms")
    assert gap < 2 * bare + 0.05, (  # it was 0.57 s against 0.10 s; load scales both
        f"the event loop was held {gap * 1000:.0f} ms in one step (bare agent, same script: {bare * 1000:.1f} ms)")
