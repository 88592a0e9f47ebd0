"""Red team, round 95 (stopping). A model constrained to conclude keeps
calling the finishing tool, and the call never delivers: its ``verify``
fails every time (``verification_failed``), or the tool itself fails. Each
call carries a new answer, so neither ``repeated_failure`` (the same call)
nor the refusal ladder (gates only) sees a repetition; the drift ladder
constrains (``stalled``), which narrows ``tool_choice`` to that very tool,
and ``terminal_enforcer`` stops only a model that calls *other* tools. No
rung ever stops the run: it goes on to AgentScope's own iteration cap (51
model calls, as bare AgentScope), ending with AgentScope's line "The maximum
reasoning-acting iterations are exceeded." while the report says
``stalled``. README: "one ladder *hint -> constrain -> stop* that only
climbs", "A model that ignores a refusal is made to conclude on its next
call and stopped if it keeps going"; a stopped run's user gets the fallback
answer."""

from __future__ import annotations

import pytest
from scripted import ALICE, ScriptedModel, calls, make_agent, run

from agentscope_harness import Harness, HarnessConfig, TerminalState, ToolPolicy

FALLBACK_START = "I could not complete this request"


async def submit_answer(answer: str) -> str:
    """Deliver the answer to the user.

    Args:
        answer (str): The answer.
    """
    return "delivered"


async def broken_submit(answer: str) -> str:
    """Deliver the answer to the user.

    Args:
        answer (str): The answer.
    """
    raise ValueError("the answer store rejected it")


CASES = {
    "verify_always_fails": (submit_answer, ToolPolicy(role="finish", verify=lambda result: "Cite a source.")),
    "finishing_tool_always_fails": (broken_submit, ToolPolicy(role="finish")),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_a_finishing_tool_that_never_delivers_is_stopped_by_the_ladder(case: str) -> None:
    fn, policy = CASES[case]
    h = Harness(HarnessConfig(tools={fn.__name__: policy}), load_entry_points=False)
    model = ScriptedModel(lambda turn: calls((fn.__name__, {"answer": f"attempt {len(model.calls)}"})))
    agent = make_agent(model, [fn], h.middlewares())  # AgentScope's default iteration cap (50)
    with h.acting_for(ALICE):
        _, final = await run(agent, "what is the answer?")
    report = h.last_report(agent)
    assert report.terminal_state is TerminalState.INCOMPLETE
    # the ladder stops it (stall constrains at 6 rounds): nowhere near AgentScope's cap
    assert report.reason == "stalled"  # not AgentScope's max_iters: the ladder's own end
    assert len(model.calls) <= 10, (
        f"{case}: {len(model.calls)} model calls, reason {report.reason!r}: the harness never stopped it")
    assert (final.get_text_content() or "").startswith(FALLBACK_START), final.get_text_content()
