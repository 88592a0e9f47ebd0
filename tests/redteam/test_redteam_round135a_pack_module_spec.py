"""Scenario round 135 (a): a hook pack installed through the entry-point group
``agentscope_harness.hooks`` as a module, whose safety gate is a ``HookSpec``
built by hand.

README, "Writing a hook": "Hook packs are found through the entry-point group
``agentscope_harness.hooks`` (a hook, a list of hooks or a module)"; "a ``HookSpec``
built by hand is checked as a declared one" (``HookSpec`` is exported from
``agentscope_harness``, so a hand-built spec is a hook). DESIGN §3: "Hook packs
installed as packages are found through the entry-point group".

Attack: a real installed distribution (a ``.dist-info`` with ``entry_points.txt`` on
``sys.path``) whose entry point names the module. The module holds a decorated
observer and a hand-built safety ``HookSpec`` refusing refunds.
Happened: the module is collected by scanning for ``__harness_hook__`` attributes,
which a ``HookSpec`` does not have: the safety gate is silently dropped (no error,
not in ``harness.hooks``), and the refund it exists to refuse runs. Given as a
list entry point (``mypack:HOOKS``) the very same spec is found.

Real Agent, real tool in a real instrumented Toolkit, scripted model.
"""

from __future__ import annotations

import sys
import textwrap

import pytest

from agentscope_harness import Harness, HarnessConfig
from tests.scripted import ScriptedModel, calls, make_agent, run, text, tool, tool_messages

RAN: list[str] = []

PACK = textwrap.dedent('''
    from agentscope_harness import HookRejectSignal, HookSpec, harness_hook

    @harness_hook("post_tool_call", priority=60, name="refund_audit_s135a")
    def refund_audit(ctx):
        pass

    def _no_refunds(ctx):
        if ctx.tool.name == "refund":
            raise HookRejectSignal("Refunds need a human agent.", code="policy_refused")

    no_refunds = HookSpec(_no_refunds, "pre_tool_call", 25, "no_refunds_s135a", "safety", None,
                          __name__, False, fail_closed=True)
    HOOKS = [refund_audit, no_refunds]
''')


async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
    """
    RAN.append(order_id)
    return f"refunded {order_id}"


def _install(tmp_path, monkeypatch, target: str) -> None:
    name = "s135a_shop_pack_" + target.replace(":", "_").replace(".", "_")
    (tmp_path / f"{name}.py").write_text(PACK)
    dist = tmp_path / f"{name}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    value = name + target
    (dist / "entry_points.txt").write_text(f"[agentscope_harness.hooks]\nshop = {value}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for mod in [m for m in sys.modules if m.startswith("s135a_shop_pack_")]:
        sys.modules.pop(mod)


async def _refund_runs(harness: Harness) -> tuple[list[str], str]:
    RAN.clear()
    model = ScriptedModel([calls(("refund", {"order_id": "A-1"})), text("ok")])
    agent = make_agent(model, harness.instrument(make_agent(model, [tool(refund)]).toolkit), harness.middlewares())
    await run(agent)
    return list(RAN), tool_messages(model.calls[1])[-1]


@pytest.mark.asyncio
async def test_control_pack_as_list_entry_point(tmp_path, monkeypatch) -> None:  # holds
    _install(tmp_path, monkeypatch, ":HOOKS")
    harness = Harness(HarnessConfig())
    assert "no_refunds_s135a" in {s.name for s in harness.hooks}
    ran, read = await _refund_runs(harness)
    assert ran == [] and read.startswith("[harness:policy_refused]"), read


@pytest.mark.asyncio
async def test_pack_as_module_entry_point_keeps_its_safety_gate(tmp_path, monkeypatch) -> None:
    _install(tmp_path, monkeypatch, "")
    harness = Harness(HarnessConfig())
    names = {s.name for s in harness.hooks}
    assert "refund_audit_s135a" in names  # the decorated hook of the module is found
    ran, read = await _refund_runs(harness)
    assert ran == [], f"the pack's safety gate was dropped: the refund ran ({read!r})"
    assert "no_refunds_s135a" in names
