"""Round 118 (red team on rounds 116-117). Round 117 cuts a data block's name to its first 1,024 characters BEFORE redacting it
(``outputs.shaped_data``: ``text = text[:DATA_NAME_CHARS]`` then ``filter_result``).
A secret that straddles character 1,024 is cut first: what is left is no longer the
exact ``secret_values`` entry (nor a 20+ character ``sk-`` key), so its first part
reaches the model, the stored context and the user's stream unredacted. Before round
117 the whole name was redacted (the model read all of it, redacted); the text of a
result is redacted first (content_filter, priority 5) and cut after (truncate_result, 10).

The model reads the cut name in AgentScope's note on the image it drops ("The image
named '...' is removed to free up context space"); the context keeps it.

README hook 14 content_filter: "Redacts secrets (... exact `secret_values`)";
Security: secrets "are redacted from tool results, streams, ...".
"""
from __future__ import annotations

import pytest
from agentscope.message import Base64Source, DataBlock, TextBlock
from agentscope.tool import ToolChunk, Toolkit

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool

pytestmark = pytest.mark.asyncio

SECRET = "Zq8vRt-wallet-Passphrase-7731-Kestrel"  # a configured secret value, 37 characters
HEAD = SECRET[:24]                                # what survives the cut at 1,024
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
NAMES = {"within": "scan of the wallet " + SECRET,  # the control: redacted whole
         "across_cut": ("scan " * 400)[: 1_024 - len(HEAD)] + SECRET}  # the secret across character 1,024
NAME: list[str] = []


async def fetch_scan(doc: str) -> ToolChunk:
    """Fetch a scanned document.

    Args:
        doc (str): The document.
    """
    return ToolChunk(content=[TextBlock(text="scan attached"),
                              DataBlock(name=NAME[0], source=Base64Source(data=PNG, media_type="image/png")),
                              # five more: AgentScope drops the oldest (the first) and quotes its name to the model
                              *[DataBlock(name=f"page-{i}", source=Base64Source(data=PNG, media_type="image/png"))
                                for i in range(5)]])


@pytest.mark.parametrize("where", ["within", "across_cut"])  # control first
async def test_a_secret_across_the_names_cut_is_redacted_whole(where: str) -> None:
    NAME[:] = [NAMES[where]]
    assert where == "within" or NAMES[where][:1_024].endswith(HEAD)
    h = Harness(HarnessConfig(secret_values=[SECRET], tools={"fetch_scan": ToolPolicy(role="retrieval")}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("fetch_scan", {"doc": "d-1"})), text("done")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(fetch_scan)])), h.middlewares())
    with h.acting_for(ALICE):
        events, _ = await run(agent, "get the scan")
    seen_by_model = repr(model.calls[-1].formatted)
    streamed = repr(events)
    stored = repr(agent.state.context)
    leaks = {where: HEAD in s for where, s in
             (("model", seen_by_model), ("stream", streamed), ("context", stored))}
    assert not any(leaks.values()), f"the first {len(HEAD)} characters of a secret_values entry reached: {leaks}"
