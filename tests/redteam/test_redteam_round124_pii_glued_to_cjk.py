"""Round 124 (red team on round 123). Personal data written against CJK text (no spaces, as Chinese and Japanese write) is missed.

README "Personal data": detectors `email`, `phone`, `ipv4`... rewrite what a tool returns
(`ToolPolicy.pii`); the only stated limit is names and addresses. Chinese puts no space
between words: "请联系alice@example.com获取发票" or "电话+86 138 1234 5678". The detectors'
left/right guards are ``\\w`` which in Python's `re` matches every CJK ideograph, so a value
glued to one is read as part of a word and reaches the model whole. The same values with
spaces around them (control) are rewritten. Cause: pii.DETECTORS lookbehind/lookahead
``(?<![\\w...])`` / ``(?![\\w...])`` are Unicode-wide, not ASCII.
"""

from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool_messages

pytestmark = pytest.mark.asyncio

CASES = {
    "email": ("请联系", "alice@example.com", "获取发票"),
    "phone": ("客户电话", "+86 138 1234 5678", "已确认"),
    "ipv4": ("服务器地址", "203.0.113.77", "已封禁"),
}
CURRENT: dict[str, object] = {}


async def get_note(note_id: str) -> str:
    """Fetch a support note.

    Args:
        note_id (str): The note.
    """
    before, value, after = CURRENT["case"]
    sep = CURRENT["sep"]
    return f"工单 {note_id}：{before}{sep}{value}{sep}{after}。"


async def _read(kind: str, sep: str) -> str:
    CURRENT.update(case=CASES[kind], sep=sep)
    h = Harness(HarnessConfig(tools={"get_note": ToolPolicy(role="lookup", pii={kind: "redact"})}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("get_note", {"note_id": "n-1"})), text("ok")])
    agent = make_agent(model, [get_note], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        await run(agent, "show n-1")
    return tool_messages(model.calls[-1])[-1]


@pytest.mark.parametrize("kind", sorted(CASES))
async def test_control_spaced(kind: str) -> None:
    read = await _read(kind, " ")
    assert CASES[kind][1] not in read, read


@pytest.mark.parametrize("kind", sorted(CASES))
async def test_glued_to_cjk(kind: str) -> None:
    read = await _read(kind, "")
    assert "n-1" in read
    assert CASES[kind][1] not in read, f"{kind} reached the model whole: {read!r}"
