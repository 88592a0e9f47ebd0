"""Round 107 (d): AgentScope's context compression (``ContextConfig``: a small model context,
the default trigger) moves a tool result out of the context into its summary.
The harness still holds that result as "in the context": the same call made
again is refused ``duplicate_call`` with "reuse its earlier result (ref: ...)",
a result the model can no longer read. The model spends rounds on refusals
(two, until the efficiency latch opens) and is told to reuse what it does
not have.

README, hook 11 ``repeat_call_gate``: "Identical call ... that already
succeeded, *its result still in context* (a pruned result may be fetched
again) ...: ``duplicate_call`` with a ref (E)." Cause:
``hooks/repetition.repeat_call_gate`` only counts the harness's own pruning
(``run.results.pruned``) as taking a result out of the context; AgentScope's
compression (``Agent._compress_context_impl`` replacing ``state.context``)
is never marked, though ``model_guard.compress`` guards that very call.

Real ``Agent`` with AgentScope's own compression, real tools in a real,
instrumented ``Toolkit``."""

from __future__ import annotations

import pytest
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool, tool_messages

pytestmark = pytest.mark.asyncio

SUMMARY = {"task_overview": "t", "current_state": "c", "important_discoveries": "d", "next_steps": "n",
           "context_to_preserve": "p"}
RAN: list[str] = []


async def lookup(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id (str): The order.
    """
    RAN.append(order_id)
    return f"order {order_id}: paid. " + " ".join(f"line{i} item{i} widget" for i in range(330))


async def note(topic: str) -> str:
    """Take a note.

    Args:
        topic (str): The topic.
    """
    return f"note {topic}: " + " ".join(f"fact{i} detail{i} thing" for i in range(250))


async def test_a_result_compression_took_out_of_the_context_may_be_fetched_again() -> None:
    RAN.clear()
    model = ScriptedModel([calls(("lookup", {"order_id": "A-1"})),
                           calls(("note", {"topic": "x"})),
                           calls(("generate_structured_output", SUMMARY)),  # AgentScope's compression
                           calls(("lookup", {"order_id": "A-1"})),  # the result is gone: fetch it again
                           text("Order A-1 is paid."), text("Order A-1 is paid.")], model="m")
    model.context_size = 4000  # trigger 0.8 -> compression once the two results are in
    harness = Harness(HarnessConfig(), load_entry_points=False, environ={})
    toolkit = harness.instrument(Toolkit(tools=[tool(lookup), tool(note)]))
    agent = make_agent(model, toolkit, harness.middlewares())
    with harness.acting_for(ALICE):
        _, final = await run(agent, "is order A-1 paid?")
    report = harness.last_report(agent)
    assert agent.state.summary, "AgentScope compressed the context"
    # the request that made the second lookup: the first result is no longer in it
    second_lookup_request = model.calls[3]
    assert not any("order A-1: paid" in m for m in tool_messages(second_lookup_request))
    # what the model read after its second lookup
    after = tool_messages(model.calls[4])
    assert not any("[harness:duplicate_call]" in m for m in after), after
    assert RAN == ["A-1", "A-1"], RAN
    assert report.refusals.get("duplicate_call", 0) == 0, report.refusals
