"""Red team, round 35: the round-34 fixes, attacked from the user's side.

1. progress (``facts._VOLATILE_SPAN`` now leaves out volatile tokens after
   ``:`` or ``-`` too): new information written right after ``:`` or ``-``
   (prices, order numbers, SKUs, dates, versions, colours, times) in a
   productive run; a device scan whose only news is an all-digit MAC address
   (its later bytes now read as a time of day); volatile tokens still
   spelled so that they count (a UUID after ``_``, a ``1m17s`` duration);
2. ``truncate_result`` and an error's first error line: a line over 500
   characters straddling the cut, a line wholly in the tail, multibyte
   text, an error with no error line;
3. the ``every_call`` status line and "the same hint never twice in a row":
   the conclude rung after the drift hint; a second stall after progress
   came back (its drift hint);
4. "always allow" rules attributed to the permission context: a third
   principal judged while another's judgement hides the rules (shared
   context, both ways: a stranger served by another's rule, a principal
   denied his own); a session's permission context copied in this process.

A test marked ``xfail(strict=True)`` is an attack that succeeds today (the
promise named in its reason is broken); the others are regression guards.
Real ``Agent``s, real tools in real ``Toolkit``s.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from agentscope.event import ConfirmResult, UserConfirmResultEvent
from agentscope.message import UserMsg
from agentscope.permission import PermissionContext
from agentscope.state import AgentState
from agentscope.tool import Toolkit
from hookkit import Ran, harnessed, refunding, submit
from scripted import ALICE, BOB, ScriptedModel, calls, drain, make_agent, run, text, tool_messages
from test_redteam_round28 import _parked
from test_redteam_round32 import CAROL
from test_redteam_round34 import _asked, _Flaky, _rule

from agentscope_harness import (
    Harness,
    HarnessConfig,
    TerminalState,
    ToolPolicy,
)

# ============================================================== 1. progress


def _statuses(render: Any, n: int = 12, config: HarnessConfig | None = None) -> tuple[Any, Any]:
    reports: list[Any] = []
    cfg = config or HarnessConfig()
    cfg.on_report = reports.append
    i = iter(range(1, 1000))

    async def status(check: int) -> str:
        """Check the status.

        Args:
            check (int): Which check.
        """
        return render(next(i))

    script = [calls(("status", {"check": k})) for k in range(n)] + [text("Done.")]
    _, model, agent = harnessed(cfg, script, [status])
    return reports, (model, agent)


async def _report(render: Any, n: int = 12) -> Any:
    reports, (_, agent) = _statuses(render, n)
    await run(agent, "go")
    return reports[0]


def _record(i: int) -> str:
    """A short record whose news sits right after ':' or '-'."""
    return (f"Order record: order-{12340 + i} sku-abc{i:03d}f price:{12 + i} id:{40 + i} "
            f"shipped 2024-05-{i:02d} v1.{i}-3 colour:#a{i:02d}f0c slot 10:{i:02d}")


async def test_new_information_written_after_colons_and_dashes_is_progress() -> None:
    """Regression guard: twelve records whose every value is new, each
    written right after ':' or '-': never stalled, never hinted."""
    report = await _report(_record)
    assert report.terminal_state == TerminalState.COMPLETED, report.reason
    assert not [d for d in report.decisions if d.hook == "drift_detector"]


def _mac(i: int) -> str:
    return (f"Scan of the lab network: new device found, vendor VMware, "
            f"mac 00:50:56:{10 + i}:{20 + i}:{30 + i}, state up.")


async def test_a_scan_finding_a_new_device_each_time_is_progress() -> None:
    report = await _report(_mac)
    assert report.terminal_state == TerminalState.COMPLETED, report.reason


BASE = "Status: all systems nominal, queue empty, no alerts raised. "


@pytest.mark.parametrize("render", [
    lambda i: BASE + f"event run_{uuid.UUID(int=i * 0x9E3779B97F4A7C15_1234567)} done",
    lambda i: BASE + f"poll took 1m{10 + i}s, alerts none",
], ids=["uuid_after_underscore", "minutes_seconds"])
async def test_remaining_volatile_spellings_are_no_progress(render: Any) -> None:
    report = await _report(render)
    assert report.terminal_state == TerminalState.INCOMPLETE and report.reason == "stalled", report.reason


async def test_a_productive_30_round_run_with_colon_and_dash_news_is_never_stopped() -> None:
    """Regression guard: thirty records of new values after ':' and '-',
    each also carrying ``job-<uuid>`` and ``latency:NNms`` noise, with
    status lines before every call: completed by the finishing tool."""
    reports: list[Any] = []
    n = iter(range(1, 1000))

    async def search(q: str) -> str:
        """Search.

        Args:
            q (str): The query.
        """
        i = next(n)
        return f"job-{uuid.uuid4()} latency:{i + 3}ms " + _record(i) + f" buyer:{WORDS[i % len(WORDS)]}{i}"

    cfg = HarnessConfig(tools={"search": ToolPolicy(role="retrieval"), "submit": ToolPolicy(role="finish")},
                        disclose_budget="every_call", max_model_calls=40, on_report=reports.append)
    script = [calls(("search", {"q": f"topic {i}"})) for i in range(30)]
    script += [calls(("submit", {"answer": "Thirty records."})), text("unused")]
    _, _, agent = harnessed(cfg, script, [search, submit])
    await run(agent, "research")
    report = reports[0]
    assert report.terminal_state == TerminalState.COMPLETED, report.reason
    assert not [d for d in report.decisions if d.hook == "drift_detector"]


WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet".split()

# ============================================================ 2. truncation


async def _read_error(message: str, max_tokens: int = 50) -> str:
    async def build(step: str) -> str:
        """Build one step.

        Args:
            step (str): The step.
        """
        raise RuntimeError(message)

    h = Harness(HarnessConfig(result_max_tokens=max_tokens), load_entry_points=False)
    _, model, agent = harnessed(None, [calls(("build", {"step": "a"})), text("failed")], [build], harness=h)
    await run(agent, "build it")
    return tool_messages(model.calls[-1])[-1]


LONG_LINE = ("ValueError: the order could not be placed: " + "constraint check; " * 40
             + "cause: the billing postcode does not match the card")


@pytest.mark.xfail(strict=True, reason=(
    "a limit the README states (hook #15: the first error line is kept, its first 500 characters): "
    "a first error line of ~770 characters straddling the cut is given cut at 500, so the model "
    "never reads its cause (context_shaping.truncate_result: first.group(0)[:500])"))
async def test_a_long_first_error_line_straddling_the_cut_is_kept_whole() -> None:
    read = await _read_error("compiling module\n" + "ok " * 35 + "\n" + LONG_LINE + "\n" + "cleanup " * 200)
    assert "omitted" in read
    assert "cause: the billing postcode does not match the card" in read, read


async def test_a_first_error_line_in_the_tail_is_read_once() -> None:
    """Regression guard: an error line the tail keeps whole is not repeated."""
    line = "ValueError: payment declined"
    read = await _read_error("compiling module\n" + "ok " * 200 + "\n" + line)
    assert "omitted" in read and read.count(line) == 1


async def test_a_multibyte_first_error_line_straddling_the_cut_is_kept_whole() -> None:
    """Regression guard: an error line in Chinese and emoji across the cut."""
    line = "ValueError: 付款被拒绝，因为账单邮编与卡片不符 💳🚫 请检查地址"
    read = await _read_error("编译模块\n" + "好 " * 60 + line + "\n" + "清理 " * 200)
    assert "omitted" in read and line in read


async def test_an_error_with_no_error_line_gets_only_head_and_tail() -> None:
    """Regression guard: nothing to keep, nothing added after the marker."""
    read = await _read_error("step one\n" + "ok " * 100 + "\nMIDDLE permission denied by the host\n"
                             + "cleanup " * 100)
    assert "omitted" in read and "MIDDLE" not in read


# ====================================================== 3. hints, every call


def _fresh(i: int) -> str:
    return " ".join(f"{w}{i}x{j}" for j, w in enumerate(WORDS * 3))


async def test_every_call_status_line_still_lets_the_conclude_rung_through() -> None:
    """Regression guard: after the drift hint, the conclude hint (another
    hint) reaches the model before the run is constrained and stopped."""
    reports, (model, agent) = _statuses(
        lambda i: "Nothing changed.", n=12,
        config=HarnessConfig(disclose_budget="every_call", max_model_calls=30))
    await run(agent, "watch")
    told = json.dumps(model.calls[-1]["formatted"], ensure_ascii=False)
    assert reports[0].reason == "stalled"
    assert told.count("Change approach") == 1 and told.count("Conclude now with what you have") == 1
    assert told.count("[harness:budget]") == len(model.calls)


@pytest.mark.parametrize("disclose", ["every_call", "changes"])
async def test_a_second_stall_after_progress_gets_its_own_drift_hint(disclose: str) -> None:
    fresh = {1, 6}
    reports, (model, agent) = _statuses(
        lambda i: _fresh(i) if i in fresh else "Nothing changed.", n=16,
        config=HarnessConfig(disclose_budget=disclose, max_model_calls=30))
    await run(agent, "watch")
    told = json.dumps(model.calls[-1]["formatted"], ensure_ascii=False)
    assert reports[0].reason == "stalled"
    assert told.count("Change approach") == 2, told.count("Change approach")


# ================================================= 4. whose "always allow"


async def _gives_rule(h: Harness, agent: Any, who: Any) -> None:
    ask = await _parked(h, agent, who)
    confirm = ConfirmResult(confirmed=True, tool_call=ask.tool_calls[0], rules=[_rule()])
    with h.acting_for(who):
        await drain(agent, UserConfirmResultEvent(reply_id=ask.reply_id, confirm_results=[confirm]))


async def test_carol_judged_while_bobs_judgement_hides_alices_rule_is_asked() -> None:
    """Regression guard: while Bob's refund is judged (Alice's rule hidden),
    Carol's refund on another desk sharing the context does not run on
    Bob's rule."""
    shared = PermissionContext()
    h = Harness(HarnessConfig(), load_entry_points=False)
    ran = Ran()
    gate, entered = asyncio.Event(), asyncio.Event()

    def desk(script: list[Any], name: str) -> Any:
        return make_agent(ScriptedModel(script), h.instrument(Toolkit(tools=[_Flaky(ran, gate, entered)])),
                          h.middlewares(), name=name, state=AgentState(permission_context=shared))

    alices = desk([calls(("refund", {"order_id": "o-1"})), text("ok")], "alices")
    bobs = desk([calls(("refund", {"order_id": "o-1"})), text("ok"),
                 calls(("refund", {"order_id": "o-slow"})), text("ok")], "bobs")
    carols = desk([calls(("refund", {"order_id": "o-666"})), text("ok")], "carols")
    await _gives_rule(h, alices, ALICE)
    await _gives_rule(h, bobs, BOB)
    assert len(shared.allow_rules["refund"]) == 2
    with h.acting_for(BOB):
        slow = asyncio.create_task(drain(bobs, UserMsg("user", "refund o-slow")))
    try:
        await asyncio.wait_for(entered.wait(), 2)
        with h.acting_for(CAROL):
            events = await asyncio.wait_for(drain(carols, UserMsg("user", "refund o-666")), 5)
    finally:
        gate.set()
        await asyncio.gather(slow, return_exceptions=True)
    assert {"order_id": "o-666"} not in ran.of("refund"), ran
    assert _asked(events)


def _desks(h: Harness, ran: Ran, gate: Any, entered: Any) -> Any:
    shared = PermissionContext()

    def desk(script: list[Any], name: str) -> Any:
        return make_agent(ScriptedModel(script), h.instrument(Toolkit(tools=[_Flaky(ran, gate, entered)])),
                          h.middlewares(), name=name, state=AgentState(permission_context=shared))

    return desk


@pytest.mark.xfail(strict=True, reason=(
    "a limit the README states ('Security', Human in the loop: calls of principals judged at the "
    "same moment on one shared permission context are judged without each other's rules, asked "
    "more, never less): while Carol's refund is judged, Bob's is asked although his own 'always "
    "allow' covers it (approvals.ApprovalBook.only_rules_of)"))
async def test_bobs_own_rule_serves_him_while_carols_judgement_hides_it() -> None:
    h = Harness(HarnessConfig(), load_entry_points=False)
    ran = Ran()
    gate, entered = asyncio.Event(), asyncio.Event()
    desk = _desks(h, ran, gate, entered)
    alices = desk([calls(("refund", {"order_id": "o-1"})), text("ok")], "alices")
    bobs = desk([calls(("refund", {"order_id": "o-1"})), text("ok"),
                 calls(("refund", {"order_id": "o-77"})), text("ok")], "bobs")
    carols = desk([calls(("refund", {"order_id": "o-slow"})), text("ok")], "carols")
    await _gives_rule(h, alices, ALICE)
    await _gives_rule(h, bobs, BOB)
    with h.acting_for(CAROL):
        slow = asyncio.create_task(drain(carols, UserMsg("user", "refund o-slow")))
    try:
        await asyncio.wait_for(entered.wait(), 2)
        with h.acting_for(BOB):
            events = await asyncio.wait_for(drain(bobs, UserMsg("user", "refund o-77")), 5)
    finally:
        gate.set()
        await asyncio.gather(slow, return_exceptions=True)
    assert {"order_id": "o-77"} in ran.of("refund"), ran
    assert not _asked(events)


async def test_carol_alone_is_asked_beside_alices_and_bobs_rules() -> None:
    """Control of the one above: judged on her own, Carol is asked."""
    shared = PermissionContext()
    h = Harness(HarnessConfig(), load_entry_points=False)
    ran = Ran()

    def desk(script: list[Any], name: str) -> Any:
        return make_agent(ScriptedModel(script), h.instrument(Toolkit(tools=[refunding(ran)])),
                          h.middlewares(), name=name, state=AgentState(permission_context=shared))

    alices = desk([calls(("refund", {"order_id": "o-1"})), text("ok")], "alices")
    bobs = desk([calls(("refund", {"order_id": "o-1"})), text("ok")], "bobs")
    carols = desk([calls(("refund", {"order_id": "o-666"})), text("ok")], "carols")
    await _gives_rule(h, alices, ALICE)
    await _gives_rule(h, bobs, BOB)
    with h.acting_for(CAROL):
        events = await drain(carols, UserMsg("user", "refund o-666"))
    assert {"order_id": "o-666"} not in ran.of("refund") and _asked(events)


@pytest.mark.xfail(strict=True, reason=(
    "a limit the README states ('Security', Human in the loop: a permission context copied or "
    "restored carries its rules unattributed, serving every principal as the application's own "
    "rules do): the application copies a session's context (model_copy) into a new agent, and "
    "Bob's refund there runs on Alice's copied rule"))
async def test_alices_rule_copied_with_the_session_in_this_process_does_not_serve_bob() -> None:
    h = Harness(HarnessConfig(), load_entry_points=False)
    ran = Ran()
    first = make_agent(ScriptedModel([calls(("refund", {"order_id": "o-1"})), text("ok")]),
                       h.instrument(Toolkit(tools=[refunding(ran)])), h.middlewares(), name="first")
    await _gives_rule(h, first, ALICE)
    copied = first.state.permission_context.model_copy(deep=True)
    second = make_agent(ScriptedModel([calls(("refund", {"order_id": "o-999"})), text("ok")]),
                        h.instrument(Toolkit(tools=[refunding(ran)])), h.middlewares(), name="second",
                        state=AgentState(permission_context=copied))
    with h.acting_for(BOB):
        events = await drain(second, UserMsg("user", "refund o-999"))
    assert ran.of("refund") == [{"order_id": "o-1"}], ran
    assert _asked(events)
