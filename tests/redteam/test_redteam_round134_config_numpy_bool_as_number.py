"""Round 134 (a): a NumPy boolean passes as a number in a number field.

README, Configuration: "A config that would silently disable a limit is invalid
too: ... a boolean in a number field (``Ledger(cap=True)`` would be a cap of 1)".

Attack: the same booleans as NumPy gives them (``np.bool_``: what ``df.flag.any()``
or ``arr.all()`` returns when a config is computed from data). ``_no_bool_as_number``
tests ``type(value) is bool`` only, so ``Ledger(cap=np.True_)`` is a cap of 1,
``HarnessConfig(max_tool_calls=np.False_)`` a cap of 0 and
``CostPolicy(tiers=(0.5, 0.2, np.False_))`` a fallback rung at 0 (the very case the
validator's comment says it refuses for ``False``). A real run shows the typo's
cap binding at 1."""

from __future__ import annotations

import pytest
from agentscope.tool import Toolkit
from pydantic import ValidationError

from agentscope_harness import CostPolicy, Harness, HarnessConfig, Ledger, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run, text, tool

np = pytest.importorskip("numpy", reason="the attack is a NumPy boolean")

pytestmark = pytest.mark.asyncio

SEARCHED: list[str] = []


async def search(q: str) -> str:
    """Search.

    Args:
        q (str): The query.
    """
    SEARCHED.append(q)
    return f"page about {q}"


async def test_python_bool_is_refused_control() -> None:
    with pytest.raises(ValidationError):
        Ledger(cap=True)


@pytest.mark.parametrize("build", [
    lambda: Ledger(cap=np.True_),
    lambda: HarnessConfig(max_tool_calls=np.False_),
    lambda: CostPolicy(tiers=(0.5, 0.2, np.False_)),
], ids=["ledger_cap", "max_tool_calls", "tiers"])
async def test_numpy_bool_in_a_number_field_is_refused(build) -> None:
    with pytest.raises(ValidationError):
        print("built:", build())


async def test_numpy_bool_cap_runs_as_a_cap_of_one() -> None:
    SEARCHED.clear()
    try:
        ledger = Ledger(cap=np.True_)
    except ValidationError:
        return
    h = Harness(HarnessConfig(tools={"search": ToolPolicy(role="retrieval", ledgers=["web"])},
                              ledgers={"web": ledger}), load_entry_points=False, environ={})
    model = ScriptedModel([*(calls(("search", {"q": q})) for q in ("a", "b")), text("Done.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(search)])), h.middlewares())
    await run(agent, "research")
    assert False, f"Ledger(cap=np.True_) built as cap {ledger.cap}; search ran {SEARCHED}"
