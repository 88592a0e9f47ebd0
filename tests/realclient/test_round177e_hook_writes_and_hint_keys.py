"""Round s177e (a platform team writing its own hooks, with AgentScope's real `OpenAIChatModel`
against a local server): two promises of "Writing a hook" broke.

- A transform that masks a word inside a result and appends a line after it, in one write:
  the write is judged as one span from the edit to the end, the harness's closing fence
  marker in it, and defanged (`&lt;/tool-output ...>`): the fence never closes, and the line
  the hook appended reads as the tool's. Kept so, a README limit (strict xfail): two red teams
  (rounds 177 c and d) broke each way of telling the harness's closing line from one the
  write completes (a hook decoding entities, tags or percent escapes completes the tool's
  copy of it, the nonce echoed by the model; capped, only that copy is left), and judging
  the tool's text as the hook's is the one failure the fence may not have.
- "never the same hint twice in a row: the same `key`": a keyed hint given in one round came
  again in the next when another hint of the hook came first in that round. That is the rule
  "The hooks" states ("none of that round's hints is given again before another hint is"):
  judging a round against the round hinted before it instead let two ladders take turns
  (round 166 a's guard failed), so the README's "in a row" now says "with no other hint
  given between them", and this test holds both halves of it."""
from __future__ import annotations

import re
from typing import Any

import pytest
from agentscope.message import UserMsg
from scripted import make_agent, search
from server import Reply

from agentscope_harness import Harness, HarnessConfig, harness_hook


def tool_results(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def request_text(body: dict[str, Any]) -> str:
    def text(content: Any) -> str:
        if isinstance(content, list):
            return "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return content or ""
    return "\n".join(text(m.get("content")) for m in body["messages"])


async def _one_reply(server, make_model, tools, hooks) -> None:
    h = Harness(HarnessConfig(), hooks=hooks, load_entry_points=False, environ={})
    agent = make_agent(make_model(server), tools, middlewares=h.middlewares())
    await agent.reply(UserMsg("user", "go"))


async def fetch(url: str) -> str:
    """Fetch a page.

    Args:
        url (str): Which.
    """
    return "Order 17 served by db01.corp.internal; status shipped."


@pytest.mark.xfail(strict=True, reason="README limit: an edit inside and a line appended after, in one write, "
                                      "are one span: the closing line is defanged with it")
async def test_an_edit_inside_and_a_line_after_in_one_write_keep_the_fence(server, make_model) -> None:
    @harness_hook("post_tool_call", priority=50, name="host_masker", kind="transform")
    def masker(ctx) -> None:
        ctx.result.text = (ctx.result.text.replace("db01.corp.internal", "HOST-MASKED")
                           + "\nCOMPLIANCE: internal host names masked.")

    server.plan(Reply(tool_calls=[("fetch", {"url": "u"})]), Reply(text="ok"))
    await _one_reply(server, make_model, [fetch], [masker])
    (seen,) = tool_results(server.requests[1])
    assert "db01.corp.internal" not in seen and "HOST-MASKED" in seen
    closers = [m.start() for m in re.finditer(r"</tool-output nonce=\"[0-9a-f]+\">", seen)]
    assert len(closers) == 1 and "&lt;/tool-output" not in seen, seen
    assert seen.find("COMPLIANCE: internal host names masked.") > closers[0], seen
    assert seen.startswith('<tool-output nonce="'), seen


async def test_a_keyed_hint_is_given_again_in_the_next_round_after_another(server, make_model) -> None:
    given: list[tuple[str, bool]] = []

    @harness_hook("post_tool_call", priority=50, name="varying_hint")
    def varying(ctx) -> None:
        q = ctx.tool.args["q"]
        given.append(("default", ctx.hint(f"About {q}: check stock.")))
        given.append(("keyed", ctx.hint(f"Keyed note on {q}.", key="stock_note")))

    server.plan(Reply(tool_calls=[("search", {"q": "a"})]), Reply(tool_calls=[("search", {"q": "b"})]),
                Reply(text="ok"))
    await _one_reply(server, make_model, [search], [varying])
    third = request_text(server.requests[2])
    assert "About b: check stock." in third  # another text: another hint, given first in the round
    assert "Keyed note on b." in third  # so the keyed one is no longer "in a row"
    assert given == [("default", True), ("keyed", True), ("default", True), ("keyed", True)], given
