"""Prefix cache under control actions: refusals, hints, nudges, tier changes
and the conclude ladder must never make a payload anything but a
byte-identical extension of the previous one.

Three harnessed runs, each compared with the bare agent on the same script:
- control: every kind of refusal (prerequisite, identity, duplicate, not
  ready, quota), drift hints, ledger nudges, progress notices and two model
  tier changes, then a completed delivery;
- stubborn: the same tool call forever (hints, the duplicate refusal, the
  conclude constraint on ``tool_choice``, the stop);
- dependency down: a tool whose database is down, called forever.
"""

from __future__ import annotations

from typing import Any

from agentscope_harness import CostPolicy, Ledger

from ._common import Tools, full_policy, harness, make_agent, payload_stats, reply
from ._model import BenchModel, call, say
from ._report import Figure, Section

MAX_CALLS = 80


def control_script() -> list[Any]:
    return [
        call("cancel_order", order_id="7", user_id="u-1"),   # prerequisite_missing
        call("lookup_order", order_id="7", user_id="u-2"),   # permission_denied
        call("lookup_order", order_id="7", user_id="u-1"),
        call("lookup_order", order_id="7", user_id="u-1"),   # duplicate_call
        call("submit_answer", answer="draft"),                # not_ready
        call("search", q="kettle a"),                         # progress notice
        call("search", q="kettle b"),
        call("search", q="kettle c"),                         # soft ledger nudge
        call("search", q="kettle d"),                         # ledger used up nudge, loop hint
        call("search", q="kettle e"),                         # quota_exhausted
        call("cancel_order", order_id="7", user_id="u-1"),
        call("submit_answer", answer="Order 7 was cancelled."),
        say("Order 7 was cancelled."),
    ]


def control_policy(model: BenchModel) -> Any:
    # $0.10 a call, all of it the 10 output tokens: the requests' own estimates (checked
    # against the cap before each call) cost nothing, so the ladder is what is measured
    prices = dict.fromkeys(("bench-model", "bench-lite", "bench-minimal"), (0.0, 10_000.0))
    return full_policy(
        ledgers={"retrieval": Ledger(cap=4, soft_at=3), "web": Ledger(cap=10)},
        cost=CostPolicy(
            cap_usd=1.45, prices=prices,
            tier_models={"lite": model.twin("bench-lite"), "minimal": model.twin("bench-minimal")},
        ),
        stall_rounds=2,
    )


SCENARIOS = {
    "control": (control_script, False),
    "stubborn": (lambda: [call("search", q="kettle")], True),
    "dependency down": (lambda: [call("inventory", sku="k-1")], True),
}


async def scenario(name: str, harnessed: bool) -> dict[str, Any]:
    make_script, repeat = SCENARIOS[name]
    model = BenchModel(make_script(), repeat=repeat, keep_payloads=True, max_calls=MAX_CALLS)
    h = None
    if harnessed:
        h = harness(control_policy(model) if name == "control" else full_policy())
    agent = make_agent(model, Tools(), h, max_iters=None)
    await reply(agent, h)
    stats = payload_stats(model)
    out: dict[str, Any] = {"stats": stats, "models": sorted(set(model.served_by))}
    if h is not None:
        report = h.last_report(agent)
        actions: dict[str, int] = {}
        for d in report.decisions:
            if d.action in ("refuse", "hint", "swap_model", "constrain", "terminal", "fallback"):
                actions[d.action] = actions.get(d.action, 0) + 1
        out.update(actions=actions, report=report)
    return out


async def run(size: str = "full") -> Section:
    section = Section("Prefix cache under control actions")
    total_h = total_b = 0
    for name in SCENARIOS:
        bare = await scenario(name, False)
        h = await scenario(name, True)
        sh, sb = h["stats"], bare["stats"]
        total_h += sh.breaks
        total_b += sb.breaks
        acts = ", ".join(f"{k} {v}" for k, v in sorted(h["actions"].items()))
        section.details.append(
            f"  {name}: {sh.calls} calls, breaks {sh.breaks} (bare {sb.breaks}); control actions: {acts}; "
            f"models {h['models']}; tool_choice changes {sh.tool_choice_changes}; "
            f"tool schemas changed {sh.tools_changed}x",
        )
        section.data[name] = h
    section.figures.append(Figure(
        "prefix", "prefix breaks from control actions", total_h, total_b, goal="0",
        met=total_h == 0, show_ratio=False, note="refusals, hints, nudges, tier changes, conclude",
    ))
    return section
