"""Termination: models that never give up, and one that works to the end.

- stubborn: the same tool call forever, whatever it is told. Bare
  AgentScope stops it at ``max_iters`` (default 50, plus the forced final
  round); the harness must stop it within 8 model calls.
- dependency down: the tool's database is down (the tool raises
  ``DependencyDown``) and the model calls it again and again, with the same
  or with new arguments. After the first ``dependency_down`` the harness must
  not invoke the tool again in the run.
- stuck patterns, with a model that obeys ``tool_choice`` as a compliant
  provider does (otherwise it plays its script): a spent ledger of N and
  new queries (goal: N + 3 model calls; made to conclude, it delivers with
  the finishing tool), an ignored ``permission_denied`` with new order ids
  (goal: 4; the finishing tool waits for a fact never reached, so it is
  stopped ``refused:permission_denied``), two retrieval tools alternated
  with fresh arguments whose results bring nothing new (goal: 16,
  ``incomplete``), the same call forever (goal: 8).
- productive: every round brings new content, then the finishing tool
  (goal: never stopped, ``completed``, no ``tool_choice`` narrowed).

Both agents use AgentScope's default ``ReActConfig``. Tokens are the input
tokens of what the model was sent (the payloads, 4 characters a token) plus
10 output tokens a call.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from agentscope.model import ChatResponse

from agentscope_harness import Ledger

from ._common import Tools, full_policy, harness, make_agent, payload_stats, reply
from ._model import BenchModel, call, say
from ._report import Figure, Section

GOAL_CALLS = 8
GOAL_DENIED = 4
GOAL_WANDER = 16
MAX_CALLS = 200
SIZES = {"full": {"ledger": 8, "productive": 30}, "quick": {"ledger": 4, "productive": 10}}

FORCED_ANSWER = "Here is the best answer I can give from what I found."


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


# ------------------------------------------------------------ stuck patterns


class ObedientModel(BenchModel):
    """Plays its script, but obeys ``tool_choice`` as a compliant provider
    does: a tool name makes it call that tool (the finishing tool, with an
    answer); ``"none"`` makes it answer in text."""

    async def _call_api(self, model_name: str, messages: list, tools: Any = None,
                        tool_choice: Any = None, **kwargs: Any) -> ChatResponse:
        scripted = await super()._call_api(model_name, messages, tools, tool_choice, **kwargs)
        mode = getattr(tool_choice, "mode", None)
        if mode == "none":
            return say(FORCED_ANSWER)
        if mode not in (None, "auto", "required"):
            return call(mode, answer=FORCED_ANSWER)
        return scripted


class FreshTools(Tools):
    """``search`` returns new content on every call: a productive run."""

    def functions(self) -> list[Any]:
        out = super().functions()
        log = self.log
        words = [f"w{i}" for i in range(5_000)]

        async def search(q: str) -> str:
            """Search the catalogue.

            Args:
                q (str): The query.
            """
            log.append(("search", {"q": q}))
            rng = random.Random(len(log))
            return " ".join(rng.choice(words) for _ in range(60))

        return [search, *out[1:]]


Step = Callable[[int], ChatResponse]


async def pattern(
    harnessed: bool, steps: list[Step], tools: Tools | None = None, config: Any = None,
    finish_after: int | None = None,
) -> dict[str, Any]:
    """One run of an obedient model playing ``steps`` in turn (forever, or
    ``finish_after`` calls then the finishing tool); what it cost."""
    tools = tools or Tools()
    h = harness(config or full_policy()) if harnessed else None

    def step(n: int) -> ChatResponse:
        if finish_after is not None and n > finish_after:
            return call("submit_answer", answer="done") if n == finish_after + 1 else say("Done.")
        return steps[(n - 1) % len(steps)](n)

    model = ObedientModel([step], repeat=True, keep_payloads=True, max_calls=MAX_CALLS)
    agent = make_agent(model, tools, h, max_iters=None)
    final = await reply(agent, h)
    report = h.last_report(agent) if h is not None else None
    stats = payload_stats(model)
    narrowed = [i + 1 for i, c in enumerate(model.tool_choices) if c is not None]
    return {
        "model_calls": model.n_calls,
        "tokens": stats.input_tokens + 10 * model.n_calls,
        "state": report.terminal_state.value if report else None,
        "reason": report.reason if report else None,
        "narrowed": narrowed,
        "answer": final.get_text_content() or "",
    }


def _search(n: int) -> ChatResponse:
    return call("search", q=f"kettle {n}")


def _fetch(n: int) -> ChatResponse:
    return call("fetch", url=f"https://shop.example/p/{n}")


def _lookup(n: int) -> ChatResponse:
    return call("lookup_order", order_id=f"A-{n}", user_id="u-2")  # the signed-in user is u-1


def _same(n: int) -> ChatResponse:
    return call("search", q="kettle")


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

    n_ledger, n_rounds = SIZES[size]["ledger"], SIZES[size]["productive"]
    ledger = full_policy(ledgers={"retrieval": Ledger(cap=n_ledger), "web": Ledger(cap=10_000)})
    cases: list[tuple[str, str, dict[str, Any], int | None, Callable[[dict[str, Any]], bool]]] = [
        ("spent_ledger", f"ledger of {n_ledger} spent, new queries: model calls",
         {"steps": [_search], "tools": FreshTools(), "config": ledger}, n_ledger + 3,
         lambda r: r["state"] == "completed" and r["answer"] == FORCED_ANSWER),
        ("permission_denied", "permission_denied ignored, new ids: model calls",
         {"steps": [_lookup]}, GOAL_DENIED, lambda r: r["reason"] == "refused:permission_denied"),
        ("wander", "two-tool wander, nothing new: model calls",
         {"steps": [_search, _fetch], "tools": Tools(result_chars=600, novel=False)}, GOAL_WANDER,
         lambda r: r["state"] == "incomplete"),
        ("same_call", "same call forever (obeys tool_choice): model calls",
         {"steps": [_same]}, GOAL_CALLS, lambda r: r["state"] == "incomplete"),
        ("productive", f"productive {n_rounds} rounds then finish: model calls",
         {"steps": [_search], "tools": FreshTools(), "finish_after": n_rounds}, None,
         lambda r: r["state"] == "completed" and not r["narrowed"]),
    ]
    for key, label, kw, goal, honest in cases:
        bare = await pattern(False, **{**kw, "config": None, "tools": _fresh(kw.get("tools"))})
        hr = await pattern(True, **kw)
        if goal is None:  # never stopped: as many calls as the work takes
            goal_text, met = f"= {n_rounds + 1} calls, completed", hr["model_calls"] == n_rounds + 1
        else:
            goal_text, met = f"<= {goal} calls", hr["model_calls"] <= goal
        section.figures.append(Figure(
            "termination", label, hr["model_calls"], bare["model_calls"],
            goal=goal_text, met=met and honest(hr),
            note=(f"tokens {hr['tokens']:,} vs {bare['tokens']:,}; ends {hr['state']} ({hr['reason']}); "
                  f"tool_choice narrowed at calls {hr['narrowed'] or '-'}"),
        ))
        section.data[key] = hr
        section.data[f"{key}_bare"] = bare
    return section


def _fresh(tools: Tools | None) -> Tools | None:
    """A new instance of the same tool set for the bare run."""
    return type(tools)(tools.result_chars) if tools is not None else None
