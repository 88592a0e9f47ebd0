"""Round 158 a: _go_folded folds the dotless i (ı) with i, which Go's encoding/json does not."""
from __future__ import annotations

from typing import Any

from agentscope.event import RequireExternalExecutionEvent
from agentscope.message import UserMsg
from agentscope.permission import PermissionDecision
from agentscope.tool import ToolBase, Toolkit
from scripted import ALLOW, make_agent

from agentscope_harness import Harness, HarnessConfig, Principal
from agentscope_harness.client_arguments import read_one_way
from agentscope_harness.testing import ScriptedModel, calls, text


def glossary_tool() -> ToolBase:
    class SaveGlossary(ToolBase):
        name = "save_glossary"
        description = "Save a Turkish-English glossary on the user's device (a Go app)."
        input_schema = {"type": "object", "properties": {"terms": {"type": "object",
                        "additionalProperties": {"type": "string"}}}, "required": ["terms"]}
        is_concurrency_safe = False
        is_read_only = False
        is_external_tool = True

        async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> PermissionDecision:
            return ALLOW

    return SaveGlossary()


ARGS = '{"terms": {"ılık": "lukewarm", "ilik": "bone marrow"}}'


def test_read_one_way_keeps_two_turkish_words_apart():
    """Unit form of the test below."""
    assert read_one_way(ARGS, {"terms": {"ılık": "lukewarm", "ilik": "bone marrow"}})


async def test_distinct_turkish_keys_refused_as_a_repeated_key():
    """README "Every call is gated": refused are calls a JSON reader could read otherwise,
    "a key repeated, also in another case as Go's reader matches keys (it folds `ı` as `i`, ...)".
    Go does not: unicode.SimpleFold's caseOrbit holds {0x0131, 0x0131} and {0x0130, 0x0130}
    (Go's own letter_test: "ı" and "İ" are orbits of one: "has lower/upper but no case fold"),
    so encoding/json's foldName leaves ı alone; _least_of_case follows Python's 'ı'.upper()
    == 'I' instead. Attack (a legit call): a Go client-run tool saving a glossary map whose
    keys are the Turkish words "ılık" (lukewarm) and "ilik" (bone marrow): every reader,
    Go's included, reads two keys. Happened: refused bad_arguments ("a repeated key"),
    never handed to the client; the model is told to send it again, and cannot."""
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    m = ScriptedModel([calls(("save_glossary", ARGS)), text("x")])
    agent = make_agent(m, h.instrument(Toolkit(tools=[glossary_tool()])), h.middlewares())
    handed: list[str] = []
    with h.acting_for(Principal(user_id="u-1")):
        async for item in agent.reply_stream(UserMsg("user", "hi")):
            if isinstance(item, RequireExternalExecutionEvent):
                handed += [c.input for c in item.tool_calls]
                break
    assert handed == [ARGS], (handed, h.last_report(agent) and h.last_report(agent).refusals)
