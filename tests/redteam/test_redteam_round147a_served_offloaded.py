"""Round 147 a: a result a cache before the harness's serves in `on_acting` is split by
AgentScope before the harness shapes it. Over the context's `tool_result_limit`,
AgentScope keeps a head in the context and hands the rest to the agent's offloader (a
workspace file), telling the model where it is ("You can refer to the file in '…'").
The harness shapes the kept head at the result's end (`lifecycle._served`); the
offloaded rest is never shaped: it is written raw (personal data the tool's `pii`
masks, a provider key) and the model reads it from there. A tool's own result is shaped
in the harness's `on_acting`, before AgentScope splits it: its offloaded rest is shaped.

README "Combining with AgentScope's built-in middlewares": "A result a middleware of
yours before the harness's serves in `on_acting` without the tool (a cache) is shaped
as the tool's would be (redacted, its `pii` applied, fenced, withheld for what it says)
as it enters the context". README "Security": personal data "as each tool's `pii`".

Attack: `ResultCache` (tests/scripted.py) first serves `lookup` (`pii={"email": "mask"}`)
with a long customer list; the agent has an offloader and `tool_result_limit=200`, and a
`read_offloaded` tool (a workspace reader). The model then reads the offloaded file.
Seen: the served case's offloaded file and the model's next request carry the customers'
e-mail addresses unmasked (the reader has no `pii` of the lookup). Control (the tool
itself answers, same text): the offloaded file holds masked addresses only.
Should: the served result's offloaded part is shaped as the tool's own is. A README limit
(strict xfail): AgentScope splits and offloads the served response before its end event,
the harness's first sight of it; put such a cache after the harness's middlewares.
"""
from __future__ import annotations

import json
from typing import Any

import pytest
from agentscope.agent import ContextConfig
from agentscope.message import ToolResultBlock
from agentscope.tool import Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ResultCache, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

EMAILS = [f"customer.number{i}@example.org" for i in range(40)]
LIST = "Customers:\n" + "\n".join(f"- account {i}: {e}, tier gold, since 2019" for i, e in enumerate(EMAILS))
FILES: dict[str, str] = {}


class Offloads:
    """A workspace offloader (AgentScope's `Offloader` protocol), kept in memory."""

    async def offload_tool_result(self, session_id: str, tool_result: ToolResultBlock) -> str:
        output = tool_result.output
        body = output if isinstance(output, str) else "".join(getattr(b, "text", "") for b in output)
        path = f"sessions/{session_id}/tool_result-{len(FILES) + 1}.txt"
        FILES[path] = body
        return path

    async def offload_context(self, session_id: str, msgs: list[Any]) -> str:
        return "unused"

    async def offload_data_block(self, block: Any) -> Any:
        return block


async def lookup(q: str) -> str:
    """Look up customers.

    Args:
        q (str): The query.
    """
    return LIST


async def read_offloaded(path: str) -> str:
    """Read a file the context offloaded.

    Args:
        path (str): The file's path.
    """
    return FILES.get(path, "no such file")


def _reads_the_file(_: Any) -> Any:
    return calls(("read_offloaded", {"path": next(iter(FILES), "none")}))


LIMIT = pytest.mark.xfail(strict=True, reason="README limit: AgentScope offloads a served result's rest before "
                                              "any harness layer sees it")


@pytest.mark.parametrize("cached", ["no", pytest.param("before", marks=LIMIT), "after"],
                         ids=["tool_itself", "served_by_cache", "served_by_cache_after_the_harness"])
async def test_the_offloaded_part_of_a_served_result_is_shaped(cached: str) -> None:
    FILES.clear()
    h = Harness(HarnessConfig(tools={"lookup": ToolPolicy(role="retrieval", pii={"email": "mask"})}),
                load_entry_points=False, environ={})
    script = [calls(("lookup", {"q": "gold customers"})), None, text("Here they are.")]
    model = ScriptedModel(lambda m: _reads_the_file(m) if len(model.calls) == 2 else script[len(model.calls) - 1])
    cache = [ResultCache({"lookup": LIST})]
    middlewares = {"no": h.middlewares(), "before": [*cache, *h.middlewares()], "after": [*h.middlewares(), *cache]}
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(lookup), tool(read_offloaded)])),
                       middlewares[cached], context_config=ContextConfig(tool_result_limit=200),
                       offloader=Offloads())
    with h.acting_for(ALICE):
        await run(agent, "list the gold customers")
    assert FILES, "nothing was offloaded"
    offloaded = "\n".join(FILES.values())
    told = json.dumps(model.calls[-1].formatted)
    read = [e for e in EMAILS if e in told]
    assert read == [], f"the model read {len(read)} addresses the lookup's pii masks, e.g. {read[:2]}"
    raw = [e for e in EMAILS if e in offloaded]
    assert raw == [], f"{len(raw)} addresses offloaded unmasked, e.g. {raw[:2]}"
