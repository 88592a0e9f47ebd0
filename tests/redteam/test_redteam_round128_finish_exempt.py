"""Round 128 b. Round 127's finishing-tool exemption from ``max_tool_calls`` lets a whole
batch of finishing calls (each with its side effect) run past the cap.

README, hook 9 `spend_gate`: "one call on `max_tool_calls` (a finishing tool's
call is neither refused by nor counted on it: it is how the model answers with
what it has, as AgentScope's structured-output call is)"; `max_tool_calls`:
"run-wide"; "Stops when it should: ... call caps"; the cap's refusal tells the
model "Answer with what you have".

Attack: `max_tool_calls=2`; the finishing tool `send_reply` emails the answer
to the customer (its body has an effect) and its `verify` rejects the answer
(no order number). The model uses up the cap with two lookups, then sends 10
`send_reply` calls in one batch, and keeps doing so.

What happens: every finishing call is exempt, so all 10 of the batch are
admitted and run (10 emails) in a run whose cap is 2; over the run 60 bodies
run before the stall ladder stops it. A run answers once: AgentScope's
structured-output call is one per round and its body has no effect. Only the
answer can justify the exemption: the first finishing call of a batch (or
round); the others are ordinary calls on the cap (refused `quota_exhausted`).
"""
from __future__ import annotations

import pytest
from agentscope.message import UserMsg
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, drain, make_agent, text, tool

pytestmark = pytest.mark.asyncio
SENT: list[str] = []
PER_ROUND = 10


async def send_reply(answer: str) -> str:
    """Email the final answer to the customer.

    Args:
        answer (str): The answer.
    """
    SENT.append(answer)
    return answer


async def lookup(q: str) -> str:
    """Look an order up.

    Args:
        q (str): The query.
    """
    return f"found {q}: shipped"


async def test_a_batch_of_finishing_calls_runs_past_max_tool_calls() -> None:
    SENT.clear()
    h = Harness(HarnessConfig(max_tool_calls=2, tools={
        "send_reply": ToolPolicy(role="finish", verify=lambda result: "the answer lacks an order number"),
        "lookup": ToolPolicy(role="retrieval")}), load_entry_points=False, environ={})
    script = [calls(("lookup", {"q": "order"})), calls(("lookup", {"q": "shipping"}))]
    script += [calls(*[("send_reply", {"answer": f"Your order shipped (draft {r}.{i}, v{r * 13 + i})."})
                       for i in range(PER_ROUND)]) for r in range(40)]
    model = ScriptedModel(script + [text("x")] * 5)
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(send_reply), tool(lookup)])), h.middlewares())
    with h.acting_for(ALICE):
        await drain(agent, UserMsg("user", "where is my order?"))
    report = h.last_report(agent)
    rounds = {answer.split("draft ")[1].split(".")[0] for answer in SENT}
    assert len(SENT) == len(rounds), (  # one answer a round past the cap, the others refused
        f"max_tool_calls=2: {len(SENT)} finishing calls ran (each an email to the customer) in "
        f"{len(model.calls)} model calls; report {report.terminal_state.value}/{report.reason}, "
        f"tool_calls={report.tool_calls}")
