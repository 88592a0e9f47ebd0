"""Round 122 red team: round 121 dropped a result's metadata nested too deep to clean
(``outputs.readable_metadata``), but what the *model* writes is still walked recursively
with no guard:

* a finishing tool's arguments nested 350 deep: ``HarnessToolAdapter._delivered``
  (the finishing tool receives its strings redacted) runs ``thawed`` and
  ``outputs.cleaned_args`` (three frames a level) -> ``RecursionError``;
* any tool's arguments nested 700 deep: the harness's permission middleware makes
  AgentScope ``deepcopy`` the call in ``Agent._check_permission`` (it copies only when a
  permission middleware is registered) -> ``RecursionError``.

The harnessed reply raises (an ``ExceptionGroup`` out of ``reply_stream``); the bare agent,
same model script, same tool, answers "done". A model (or an injection it read) writing
deep JSON costs the caller the whole reply, not that call. (A structured output is held to
~255 levels by pydantic before the harness walks it: that held.)

README, Security: "metadata nested too deeply to walk, past Python's recursion limit, is
dropped, never kept uncleaned"; hook 14 content_filter: "Fails closed" (what cannot be
cleaned is withheld and the run goes on, as tests/redteam/test_redteam_round121_deep_metadata.py
holds for a result).
"""
from __future__ import annotations

from typing import Any

import pytest

from agentscope_harness import HarnessConfig, ToolPolicy
from tests.perf.loopkit import measure
from tests.scripted import calls, text

pytestmark = pytest.mark.asyncio


def nested(depth: int) -> Any:
    doc: Any = "leaf"
    for _ in range(depth):
        doc = {"c": doc}
    return doc


async def save(doc: dict) -> str:
    """Save a JSON document.

    Args:
        doc (dict): The document.
    """
    return "saved"


LIMIT = pytest.mark.xfail(strict=True, reason="README limit: arguments nested past ~300 levels exhaust the stack in "
                          "AgentScope's own copy of them for permission middlewares (Agent._check_permission)")


@pytest.mark.parametrize(("role", "depth"), [("finish", 350), pytest.param("mutation", 700, marks=LIMIT)])
async def test_deeply_nested_arguments_cost_the_call_not_the_reply(role: str, depth: int) -> None:
    script = [calls(("save", {"doc": nested(depth)})), text("done"), text("done"), text("done")]
    config = HarnessConfig(tools={"save": ToolPolicy(role=role)})
    bare = await measure(script, [save], "save it", config, harnessed=False, model="m")
    assert bare.result == "done"
    try:
        await measure(script, [save], "save it", config, harnessed=True, model="m")
    except BaseException as exc:
        pytest.fail(f"the harnessed reply raised {type(exc).__name__}: {exc!r}"[:300])
