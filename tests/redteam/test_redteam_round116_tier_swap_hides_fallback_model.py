"""Round 116 (red team on round 115). A run on the lite tier whose lite model fails: AgentScope's own
``ModelConfig(fallback_model=...)`` attempt is sent to the failing lite model
again (the harness sets ``current_model`` to the tier model on every call that
passes its middleware, the fallback's included). The backup never answers; the
reply fails ``model_error``. On the full tier the same failure falls over to the
backup (round 11: "AgentScope falls over to the fallback model (through the
harness's middleware again), which answers").

README, "Combining": the tier swap "happens inside on_model_call for its own
budget"; the budget status line: "now on the lite model when a tier_models model
serves the tier". The fallback model is the agent's, not the tier's."""
from __future__ import annotations

import pytest
from agentscope.agent import ModelConfig
from agentscope.message import UserMsg

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from tests.scripted import ScriptedModel, calls, make_agent, search, text

pytestmark = pytest.mark.asyncio


async def test_lite_model_down_falls_over_to_the_agents_fallback() -> None:
    lite = ScriptedModel([RuntimeError("lite provider down")] * 4, model="lite")
    backup = ScriptedModel([text("Answered by the backup.")], model="backup")
    cost = CostPolicy(cap_usd=100.0, prices={"scripted": (0.0, 1e6), "lite": (1.0, 1.0), "backup": (1.0, 1.0)},
                      tier_models={"lite": lite})
    h = Harness(HarnessConfig(cost=cost), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("search", {"q": "a"}), inp=1, out=55), text("never")])
    agent = make_agent(model, [search], h.middlewares(),
                       model_config=ModelConfig(max_retries=0, fallback_model=backup))
    final, exc = None, None
    try:
        async for item in agent.reply_stream(UserMsg("user", "go"), yield_final_msg=True):
            final = item
    except Exception as e:  # the provider's exception raised to the caller
        exc = e
    report = h.last_report(agent)
    assert final is not None and final.get_text_content() == "Answered by the backup."
    assert len(backup.calls) == 1 and exc is None, (
        f"lite calls {len(lite.calls)}, backup calls {len(backup.calls)}, exc {exc!r}, "
        f"report {report.terminal_state.value}/{report.reason}")
