"""Red team round 164 a: the refusal ladder in shadow mode.

README "Shadow mode": "The user gets the model's answer; the report ends as
enforcing would have ended the run (a cap, ..., a stall, ...)". The refusal
ladder (``escalate_refusals``: a refusal met again -> constrained -> stopped,
``refused:<code>``) never climbs in shadow mode: ``HookRunner._rejected``
returned before ``facts.refused.append`` when ``shadow``, so the ladder read
nothing. The same model, the same calls: enforce ends
``incomplete``/``refused:permission_denied``; shadow reported
``completed``/``answered``. Now the report says what enforcing would have
ended with, while the user still gets the model's answer. Real Agent, real
tools in a real Toolkit.
"""

from __future__ import annotations

from typing import Any

from agentscope.tool import Toolkit
from scripted import ScriptedModel, calls, make_agent, run, text, tool

from agentscope_harness import Harness, HarnessConfig, Principal, ToolPolicy

U42 = Principal(user_id="u-42")


async def search(q: str) -> str:
    """Search.

    Args:
        q (str): q.
    """
    return f"results for {q}: " + " ".join(f"n{q}{j}" for j in range(20))


async def lookup_order(order_id: str, user_id: str) -> str:
    """Look up an order.

    Args:
        order_id (str): The order.
        user_id (str): Its owner.
    """
    return f"order {order_id}: paid"


def _script() -> list[Any]:
    # another user's order beside new work, every round (round 57's pattern)
    return [calls(("lookup_order", {"order_id": f"o{n}", "user_id": f"u-{n + 100}"}),
                  ("search", {"q": f"z{n}"})) for n in range(5)] + [text("done")]


async def _reply(mode: str) -> tuple[Any, str, list[Any]]:
    cfg = HarnessConfig(mode=mode, tools={
        "search": ToolPolicy(role="retrieval"),
        "lookup_order": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"}),
    })
    h = Harness(cfg, load_entry_points=False)
    model = ScriptedModel(_script())
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(search), tool(lookup_order)])),
                       middlewares=h.middlewares())
    with h.acting_for(U42):
        _, final = await run(agent, "show me order o1")
    return h.last_report(agent), final.get_text_content() or "", model.calls


async def test_enforce_stops_the_ladder() -> None:
    report, final, made = await _reply("enforce")
    assert (report.terminal_state.value, report.reason) == ("incomplete", "refused:permission_denied")
    assert len(made) < 6 and "done" not in final


async def test_a_shadow_report_ends_as_the_refusal_ladder_would() -> None:
    report, final, made = await _reply("shadow")
    assert (report.terminal_state.value, report.reason) == ("incomplete", "refused:permission_denied")
    assert len(made) == 6 and final == "done"  # the user gets the model's answer: nothing was enforced
    assert all(d.enforced is False for d in report.decisions if d.action in ("refuse", "constrain", "stop"))
    # README: `refusals` counts only the refusals enforced; the would-be ones are `refuse` decisions
    assert report.refusals == {}
    refused = [d.code for d in report.decisions if d.action == "refuse"]
    assert refused[:2] == ["permission_denied"] * 2  # then, past the end enforcing made, every call
    assert set(refused[2:]) == {"permission_denied", "run_concluded"}
