"""Round 127 c, real client: ``max_tool_calls`` refuses the finishing tool.

README (the ladder, "Stops when it should"): a model that is told to conclude
is narrowed to the finishing tool; ``force_conclude`` "narrows tool_choice ...
(the finishing tool ...)" (DESIGN §5: "so even a model that ignores every hint
ends within two rounds"); the ``quota_exhausted`` sentinel tells the model
"Answer with what you have"; in a run with a finishing tool only that tool
delivers ("What the caller receives": `completed` (`finished`) when "the
finishing tool succeeded"). A structured reply's own concluding tool
(``GenerateStructuredOutput``) is not charged to ``max_tool_calls``.

Attack (AgentScope's real OpenAIChatModel, streamed SSE): ``max_tool_calls=2``,
the model searches twice and then does exactly what it is told, answering
with what it has through the finishing tool ``deliver``, every round.

What happens: ``deliver`` is charged to ``max_tool_calls`` and refused
(``quota_exhausted`` "Answer with what you have") every time; the harness
later narrows ``tool_choice`` to ``deliver`` (forcing the very call it
refuses), spends 9 model calls, and ends ``incomplete``
(``refused:quota_exhausted``): the user never gets the answer the model
delivered 7 times. A finishing call is the model's way to answer with what
it has; it should not be refused by the tool-call cap (or, at least, the
run should not force a call it refuses).
"""
from __future__ import annotations

import pytest
from agentscope.agent import Agent, InjectionConfig
from agentscope.message import Msg, UserMsg
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.tool import FunctionTool, Toolkit
from scripted import ALICE
from side_kit import model
from sse_kit import SSE, call_answer

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy

pytestmark = pytest.mark.asyncio
ALLOW = PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")
ANSWER = "The red mug costs 12 EUR and ships tomorrow."


async def test_the_finishing_tool_is_not_refused_by_max_tool_calls() -> None:
    ran: list[str] = []

    async def search(q: str) -> str:
        """Search the shop.

        Args:
            q (str): The query.
        """
        ran.append(f"search:{q}")
        return f"found {q}: red mug, 12 EUR, ships tomorrow"

    async def deliver(answer: str) -> str:
        """Deliver the final answer to the user.

        Args:
            answer (str): The answer.
        """
        ran.append("deliver")
        return answer

    srv = await SSE().start()
    m = None
    try:
        srv.script += [(call_answer("search", {"q": "red mug"}), "done"),
                       (call_answer("search", {"q": "mug shipping"}), "done")]
        srv.script += [(call_answer("deliver", {"answer": ANSWER}), "done") for _ in range(12)]
        h = Harness(HarnessConfig(max_tool_calls=2, tools={"search": ToolPolicy(role="retrieval"),
                                                           "deliver": ToolPolicy(role="finish")}),
                    load_entry_points=False, environ={})
        m = model(srv, "gpt-main")
        toolkit = h.instrument(Toolkit(tools=[FunctionTool(f, permission=ALLOW) for f in (search, deliver)]))
        agent = Agent(name="shop", system_prompt="You help with orders.", model=m, toolkit=toolkit,
                      middlewares=h.middlewares(), injection_config=InjectionConfig(inject_runtime_state=False))
        final = None
        with h.acting_for(ALICE):
            async for item in agent.reply_stream(UserMsg("user", "how much is the red mug?"), yield_final_msg=True):
                if isinstance(item, Msg):
                    final = item
        report = h.last_report(agent)
        forced = [b.get("tool_choice") for b in srv.requests if b.get("tool_choice")]
        told = [msg["content"] for b in srv.requests[-1:] for msg in b["messages"] if msg["role"] == "tool"]
        detail = (len(srv.requests), ran, report.terminal_state, report.reason, report.refusals, forced,
                  told[-1][:100] if told else None, (final.get_text_content() or "")[:120])
        # the model concluded as told, through the only tool that delivers: the answer reaches the user
        assert "deliver" in ran, detail
        assert final.get_text_content() == ANSWER, detail
        assert (report.terminal_state, report.reason) == (TerminalState.COMPLETED, "finished"), detail
    finally:
        if m is not None:
            await m.client.close()
        await srv.close()
