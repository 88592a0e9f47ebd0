"""Termination: a model that never gives up.

- stubborn: the same tool call forever, whatever it is told. Bare
  AgentScope stops it at ``max_iters`` (default 50, plus the forced final
  round); the harness must stop it within 8 model calls.
- dependency down: the tool's database is down (the tool raises
  ``DependencyDown``) and the model calls it again and again, with the same
  or with new arguments. After the first ``dependency_down`` the harness must
  not invoke the tool again in the run.

Both agents use AgentScope's default ``ReActConfig``.
"""

from __future__ import annotations

from typing import Any

from ._common import Tools, full_policy, harness, make_agent, reply
from ._model import BenchModel, call
from ._report import Figure, Section

GOAL_CALLS = 8
MAX_CALLS = 200


async def stubborn(harnessed: bool) -> dict[str, Any]:
    tools = Tools()
    h = harness(full_policy()) if harnessed else None
    model = BenchModel([call("search", q="kettle")], repeat=True, max_calls=MAX_CALLS)
    agent = make_agent(model, tools, h, max_iters=None)
    final = await reply(agent, h)
    report = h.last_report(agent) if h is not None else None
    return {
        "model_calls": model.n_calls, "invocations": tools.invocations("search"),
        "answer": final.get_text_content() or "",
        "state": report.terminal_state.value if report else None,
        "reason": report.reason if report else None,
    }


async def dependency_down(harnessed: bool, vary_args: bool) -> dict[str, Any]:
    tools = Tools()
    h = harness(full_policy()) if harnessed else None
    step = (lambda n: call("inventory", sku=f"k-{n}")) if vary_args else call("inventory", sku="k-1")
    model = BenchModel([step], repeat=True, max_calls=MAX_CALLS)
    agent = make_agent(model, tools, h, max_iters=None)
    await reply(agent, h)
    report = h.last_report(agent) if h is not None else None
    invoked = tools.invocations("inventory")
    return {
        "model_calls": model.n_calls, "invocations": invoked, "after_first": max(invoked - 1, 0),
        "state": report.terminal_state.value if report else None,
        "reason": report.reason if report else None,
    }


async def run(size: str = "full") -> Section:
    section = Section("Termination")
    sb, sh = await stubborn(False), await stubborn(True)
    section.figures.append(Figure(
        "termination", "stubborn model: model calls until stopped", sh["model_calls"], sb["model_calls"],
        goal=f"<= {GOAL_CALLS} calls", met=sh["model_calls"] <= GOAL_CALLS,
        note=f"harnessed run ends {sh['state']} ({sh['reason']})",
    ))
    section.details.append(
        f"  stubborn: tool invocations bare {sb['invocations']}, harnessed {sh['invocations']}; "
        f"harnessed answer: {sh['answer'][:70]!r}",
    )
    worst = 0
    for vary in (False, True):
        db, dh = await dependency_down(False, vary), await dependency_down(True, vary)
        worst = max(worst, dh["after_first"])
        label = "new args each call" if vary else "same call"
        section.figures.append(Figure(
            "termination", f"dependency down, {label}: tool runs after the 1st",
            dh["after_first"], db["after_first"], goal="0", met=dh["after_first"] == 0, show_ratio=False,
            note=f"model calls {dh['model_calls']} vs {db['model_calls']}; ends {dh['state']} ({dh['reason']})",
        ))
    section.data = {"stubborn": sh, "stubborn_bare": sb, "dependency_after_first": worst}
    return section
