"""drift.py: drift_result_tracker and drift_detector (hint, then
force_conclude; never the same hint twice in a row)."""

from __future__ import annotations

from itertools import count

from hookkit import Ran, drive, harnessed, hint_texts, results, shop_tools
from scripted import calls, text

from agentscope_harness import HarnessConfig, ToolPolicy

DRIFT = "brought nothing new"
CONCLUDE = "Nothing new has come from the last"


def failing_tool(ran: Ran):
    async def ping(n: int) -> str:
        """Ping a flaky service.

        Args:
            n (int): The attempt.
        """
        ran.append(("ping", {"n": n}))
        raise RuntimeError("no answer")

    return ping


def counts(call, needle: str) -> int:
    return sum(needle in h for h in hint_texts(call))


async def test_stall_rounds_hint_then_force_conclude_then_stop():
    ran = Ran()
    n = count()
    h, model, agent = harnessed(
        HarnessConfig(stall_rounds=2, breaker_failures=100),
        [lambda rec: calls(("ping", {"n": next(n)}))], [failing_tool(ran)], repeat=True,
    )
    _, final, report = await drive(h, agent)
    # rounds 1-3 bring nothing: the hint is given before call 4
    assert [counts(c, DRIFT) for c in model.calls] == [0, 0, 0, 1, 1, 1]
    # twice stall_rounds: constrain (no finish tool: tool_choice "none")
    assert [counts(c, CONCLUDE) for c in model.calls] == [0, 0, 0, 0, 0, 1]
    assert [c["tool_choice"].mode if c["tool_choice"] else None for c in model.calls] == [
        None, None, None, None, None, "none",
    ]
    # a model ignoring the constraint is stopped
    assert len(model.calls) == 6
    assert report.terminal_state.value == "incomplete"
    assert report.reason == "stalled"
    assert report.refusals == {"run_concluded": 1}
    assert len(ran) == 5
    assert "[harness:" not in final.get_text_content()
    assert [d.action for d in report.decisions if d.hook == "drift_detector"].count("constrain") == 1


async def test_hints_sit_after_the_tool_results_they_follow():
    ran = Ran()
    n = count()
    h, model, agent = harnessed(
        HarnessConfig(stall_rounds=1, breaker_failures=100),
        [lambda rec: calls(("ping", {"n": next(n)}))], [failing_tool(ran)], repeat=True,
    )
    await drive(h, agent)
    for call in model.calls:
        roles = [m["role"] for m in call["formatted"]]
        for i, m in enumerate(call["formatted"]):
            if m["role"] == "assistant" and m.get("tool_calls"):
                # an assistant tool-call turn is followed by its tool results
                assert roles[i + 1] == "tool", roles


def reader(ran: Ran):
    async def read(page: int) -> str:
        """Read a page of the manual.

        Args:
            page (int): The page.
        """
        ran.append(("read", {"page": page}))
        return f"Page {page}: " + " ".join(f"w{page}x{j}" for j in range(12))

    return read


async def test_new_information_every_round_never_triggers_drift():
    ran = Ran()
    h, model, agent = harnessed(
        HarnessConfig(stall_rounds=1, loop_window=10, loop_threshold=10),
        [calls(("read", {"page": i})) for i in range(6)] + [text("done")],
        [reader(ran)],
    )
    _, _, report = await drive(h, agent)
    assert all(hint_texts(c) == [] for c in model.calls)
    assert not any(d.hook == "drift_detector" for d in report.decisions)
    assert report.terminal_state.value == "completed"


async def test_new_arguments_alone_are_not_progress():
    # the result only says the query back: nothing new, however the query varies
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        HarnessConfig(stall_rounds=2, loop_window=10, loop_threshold=10),
        [calls(("select", {"pick": f"p{i}"})) for i in range(8)] + [text("done")],
        [t["select"]],
    )
    _, _, report = await drive(h, agent)
    # round 1 was new; rounds 2 and 3 said the same: the hint before call 5
    assert [counts(c, DRIFT) for c in model.calls] == [0, 0, 0, 0, 1, 1, 1]
    assert [counts(c, CONCLUDE) for c in model.calls] == [0] * 6 + [1]
    assert model.calls[6]["tool_choice"].mode == "none"
    assert len(model.calls) == 7  # the model ignores it: stopped
    assert report.terminal_state.value == "incomplete"
    assert report.reason == "stalled"


async def test_progress_resets_the_counter_edge_triggered():
    ran = Ran()
    t = shop_tools(ran)
    ping = failing_tool(ran)
    script = [
        calls(("ping", {"n": 1})), calls(("ping", {"n": 2})),  # nothing new
        calls(("select", {"pick": "red"})),                     # a new fact
        calls(("ping", {"n": 3})), text("done"),
    ]
    h, model, agent = harnessed(
        HarnessConfig(stall_rounds=3, breaker_failures=100), script, [t["select"], ping],
    )
    _, _, report = await drive(h, agent)
    assert not any(DRIFT in h_ for c in model.calls for h_ in hint_texts(c))


async def test_an_identical_repeat_is_not_progress():
    ran = Ran()
    t = shop_tools(ran)
    h, model, agent = harnessed(
        HarnessConfig(
            tools={"search": ToolPolicy(role="retrieval")}, stall_rounds=2,
            escape_after_rejects=1, loop_window=10, loop_threshold=10,
        ),
        [calls(("search", {"q": "x"}))] * 4 + [text("done")],
        [t["search"]],
    )
    await drive(h, agent)
    msgs = results(model)
    assert msgs[1].startswith("[harness:duplicate_call]")
    assert "3 products for x" in msgs[2]  # escaped: ran again, but learnt nothing new
    assert len(ran) == 3
    assert counts(model.calls[4], DRIFT) == 1
