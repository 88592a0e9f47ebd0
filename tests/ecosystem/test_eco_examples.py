"""The examples run as documented: offline quick start, sub-agent, a hook
pack through the entry point, the real-model example without a key."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from scripted import ScriptedModel, calls, make_agent, run, text, tool_messages

from agentscope_harness import Harness, HarnessConfig, Principal, ToolPolicy
from agentscope_harness.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PACK = EXAMPLES / "custom_hook_pack"


def load(name: str) -> dict:
    return runpy.run_path(str(EXAMPLES / name), run_name="example")


async def test_quickstart_runs_offline_and_stops_the_stubborn_model(capsys):
    await load("quickstart.py")["main"]()
    out = capsys.readouterr().out
    assert "terminal state: incomplete (stalled)" in out
    assert "'duplicate_call': 2" in out


async def test_sub_agent_shares_the_parents_budget_and_deadline(capsys, caplog):
    ns = load("sub_agent.py")
    with caplog.at_level("WARNING", logger="agentscope_harness"):
        await ns["main"]()
    assert not caplog.records, [r.getMessage() for r in caplog.records]  # instrumented as the README asks
    harness = ns["harness"]
    parent = harness.reports[-1]
    assert parent.agent == "concierge"
    [child] = parent.children
    assert child.agent == "specialist"
    assert child.terminal_state.value == "completed"
    assert child.tool_calls == {"search_reviews": 1}
    # the child's cost is charged to the parent as well, and its calls count there
    assert parent.spent_usd == pytest.approx(0.00255 + 0.004 + child.spent_usd)
    assert child.spent_usd == pytest.approx(0.000465)
    assert parent.model_calls == 4 and child.model_calls == 2
    # the parent's deadline reached the tool that runs the child
    assert 0 < ns["seen_deadlines"][0] <= 30
    assert child.deadline_left_s is not None
    assert "child specialist: completed" in capsys.readouterr().out


def test_real_model_example_skips_cleanly_without_a_key():
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENAI_API_KEY", "DASHSCOPE_API_KEY")}
    proc = subprocess.run([sys.executable, str(EXAMPLES / "real_model.py")],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0
    assert proc.stdout.startswith("skipped: set DASHSCOPE_API_KEY or OPENAI_API_KEY")


# ---------------------------------------------------------------- hook pack


@pytest.fixture
def pack(monkeypatch):
    monkeypatch.syspath_prepend(str(PACK))
    import harness_shop_policies

    harness_shop_policies.AUDIT.clear()
    return harness_shop_policies


def test_hook_pack_declares_the_entry_point():
    meta = tomllib.loads((PACK / "pyproject.toml").read_text())
    group = meta["project"]["entry-points"]["agentscope_harness.hooks"]
    assert group == {"shop_policies": "harness_shop_policies:HOOKS"}


async def test_hook_pack_hooks_passed_explicitly_refuse_and_audit(pack):
    refunded: list[tuple[str, float]] = []

    async def refund(order_id: str, amount_usd: float) -> str:
        """Refund an order.

        Args:
            order_id (str): The order.
            amount_usd (float): How much to refund.
        """
        refunded.append((order_id, amount_usd))
        return f"refunded ${amount_usd} on {order_id}"

    harness = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation")}),
                      hooks=pack.HOOKS, load_entry_points=False)
    assert {"refund_limit", "refund_audit"} <= {s.name for s in harness.hooks}
    model = ScriptedModel([
        calls(("refund", {"order_id": "A-1", "amount_usd": 350})),
        calls(("refund", {"order_id": "A-2", "amount_usd": 40})),
        text("One refund done; a colleague will follow up on the other."),
    ])
    agent = make_agent(model, [refund], harness.middlewares())
    with harness.acting_for(Principal(user_id="u-42")):
        await run(agent, "refund A-1 and A-2")

    assert refunded == [("A-2", 40)]
    told = tool_messages(model.calls[1])[-1]
    assert told.startswith("[harness:policy_refused] Refunds above $200 need a human agent")
    assert pack.AUDIT == [{"user": "u-42", "order_id": "A-2", "amount_usd": 40}]
    report = harness.last_report(agent)
    assert report.refusals_by_hook == {"refund_limit": 1}
    assert [d.detail for d in report.decisions if d.action == "audit"] == ["refund A-2 $40"]


def test_hook_pack_is_found_through_the_entry_point(pack, tmp_path, monkeypatch, capsys):
    # what `pip install ./examples/custom_hook_pack` leaves behind, minus the copy
    dist = tmp_path / "harness_shop_policies-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: harness-shop-policies\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text(
        "[agentscope_harness.hooks]\nshop_policies = harness_shop_policies:HOOKS\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))

    names = {s.name: s for s in Harness().all_hooks}
    assert names["refund_limit"].module == "harness_shop_policies"
    assert len(names) == 27
    assert "refund_limit" not in {s.name for s in Harness(load_entry_points=False).all_hooks}

    assert main(["hooks"]) == 0
    out = capsys.readouterr().out
    assert "refund_limit" in out and "harness_shop_policies" in out
    assert "27 hooks, 27 enabled" in out


def test_example_policy_file_is_valid_and_matches_the_demo(capsys):
    from agentscope_harness.cli import load_config
    from agentscope_harness.demo import shop_config

    assert main(["check-config", str(EXAMPLES / "shop_policy.yaml")]) == 0
    assert "4 tool policies, 1 ledger" in capsys.readouterr().out
    config = load_config(EXAMPLES / "shop_policy.yaml")
    assert config.tools == shop_config().tools
    assert config.cost.daily_quota_usd == 2.0
