"""Round 166 a: a sub-agent's model calls split one round's hints; two ladders take turns again.

README "The hooks" (after the table): "the same hint is never given twice in a row (two
ladders hinting in one round do not take turns: none of that round's hints is given
again before another hint is)".

``GuardState.remember_hint`` tells rounds apart by ``run.root.model_calls``; a
sub-agent's model calls count on the root too (``add_model_call``). Attack: each round
the lead asks a supplier sub-agent (one model call) and checks stock; drift_detector
hints "change approach" at post_reflect (before the batch), a user's post_tool_call hook
hints "backordered" on the stock result (after the sub-agent's call). The second hint
is taken as a new round's: ``last_hints`` forgets the drift hint, so both are given
again in every round of the stall (take turns). Without the sub-agent in the batch each
is given once.
"""

from __future__ import annotations

import asyncio
import itertools

from agentscope.message import UserMsg
from hookkit import Ran, drive, harnessed, hint_texts
from scripted import ScriptedModel, calls, make_agent, text

from agentscope_harness import Harness, HarnessConfig, ToolPolicy, harness_hook


@harness_hook("post_tool_call", priority=60, name="backorder_hint")
def backorder_hint(ctx) -> None:
    if ctx.tool.name == "check_stock" and "backordered" in ctx.result.text:
        ctx.hint("The item is backordered: offer the user an alternative.", key="backordered")


async def _go(with_sub: bool):
    ran = Ran()
    h = Harness(HarnessConfig(tools={"check_stock": ToolPolicy(role="lookup")}, stall_rounds=3,
                              loop_threshold=30, loop_window=30, require_finish_tool=False),
                hooks=(backorder_hint,), load_entry_points=False)
    supplier = make_agent(ScriptedModel([text("No date from the supplier yet.")], repeat=True), [],
                          middlewares=h.middlewares(), name="supplier")

    def asking(name: str):
        async def ask(sku: str) -> str:
            """Ask a supplier agent.

            Args:
                sku (str): The item.
            """
            ran.append((name, {"sku": sku}))
            return (await supplier.reply(UserMsg("lead", f"when is {sku} back?"))).get_text_content() or ""

        ask.__name__ = name
        return ask

    suppliers = [asking(f"ask_supplier_{c}") for c in "abcdefgh"]  # no repeating pattern: drift, not cycling

    async def check_stock(sku: str) -> str:
        """Check stock.

        Args:
            sku (str): The item.
        """
        await asyncio.sleep(0.05)  # after the supplier answered
        ran.append(("check_stock", {"sku": sku}))
        return f"{sku}: backordered, no date"

    def batch(i: int):
        both = [(f"ask_supplier_{'abcdefgh'[i]}", {"sku": "m1"})] if with_sub else []
        return calls(*both, ("check_stock", {"sku": "m1"}))

    script = [batch(i) for i in range(8)] + [text("It is backordered.")]
    h, model, agent = harnessed(None, script, [*suppliers, check_stock], harness=h)
    _, final, report = await drive(h, agent)
    per_call = [hint_texts(c) for c in model.calls]
    return per_call, report


def _given(per_call, word):
    counts = [sum(word in t for t in hints) for hints in per_call]
    return [b - a for a, b in itertools.pairwise(counts)]


async def test_control_without_a_sub_agent_each_hint_is_given_once() -> None:
    per_call, report = await _go(with_sub=False)
    drift = _given(per_call, "Change approach")
    assert sum(drift) == 1, drift


async def test_a_sub_agent_in_the_batch_does_not_make_two_ladders_take_turns() -> None:
    per_call, report = await _go(with_sub=True)
    drift = _given(per_call, "Change approach")
    back = _given(per_call, "backordered")
    # the break: with the supplier's model call in each batch, both hints come back every round
    assert sum(drift) == 1 and not any(x and y for x, y in itertools.pairwise(drift)), (drift, back, report.reason)
