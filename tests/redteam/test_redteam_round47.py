"""Red team, round 47: human approvals beside other calls of a batch, and
the correction of a claim.

1. the correction of an unsupported claim names the step that did not
   succeed (its values), and says what did: "refund did not succeed" denied
   a refund that had run, and a retry would repeat it;
2. a hook's question (a ledger's extension) no longer hides the policy's
   ``ask_when``: both are asked, both reported;
3. a finishing tool beside a call parked for a human: the answer is not
   delivered before the human decides; a call parked while the answer is
   under way is not asked about;
4. operations: the CLI on malformed logs and policy files (a clear
   ``error:``, exit 2, no traceback), a candidate policy's argument names
   checked at ``instrument``, an async ``on_report`` bounded;
5. (round 49, on these fixes) AgentScope's own ASK beside a finish under
   way, a finish of a batch whose call was parked (then denied), a
   correction over two patterns and two tools, the CLI on huge integers and
   lone surrogates, ``ask_when`` beside a hook's question in shadow mode;
   (round 50) a slow async ``on_report`` under ``asyncio.run`` per request,
   a finishing tool AgentScope asks about.

Real ``Agent``s, real tools in real ``Toolkit``s.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import Msg, UserMsg
from agentscope.tool import FunctionTool
from scripted import ScriptedModel, calls, confirm, make_agent, run, text, tool

from agentscope_harness import Harness, HarnessConfig, Ledger, Principal, TerminalState, ToolPolicy
from agentscope_harness.cli import main
from agentscope_harness.errors import HarnessConfigError

ALICE = Principal(user_id="alice", tenant="acme")
REFUNDED: list[tuple[str, float]] = []


async def refund(user_id: str, order_id: str, amount: float) -> str:
    """Refund an order.

    Args:
        user_id (str): The customer.
        order_id (str): The order.
        amount (float): USD.
    """
    REFUNDED.append((order_id, amount))
    return f"refunded {amount} on {order_id}"


async def submit_answer(answer: str) -> str:
    """Give the user the final answer.

    Args:
        answer (str): The answer.
    """
    return answer


def _over_50(args: dict[str, Any]) -> str | None:
    return "refunds over $50 need a human" if args["amount"] > 50 else None


def _refund(order: str, amount: float) -> tuple[str, dict[str, Any]]:
    return ("refund", {"user_id": "alice", "order_id": order, "amount": amount})


async def _reply(h: Harness, agent: Any, message: Any) -> tuple[list[Any], Msg | None]:
    with h.acting_for(ALICE):
        return await run(agent, inputs=message)


def _asked(events: list[Any]) -> RequireUserConfirmEvent:
    return next(e for e in events if isinstance(e, RequireUserConfirmEvent))


# ====================================================== 1. a truthful correction


async def test_a_correction_names_the_step_that_failed_and_keeps_the_one_that_ran() -> None:
    """README 'Tells the truth'. o-2's refund ran, o-1's was denied by the
    human; the model said both were done. The user was told "refund did
    not succeed", which denied o-2's."""
    REFUNDED.clear()
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(
        role="mutation", identity_args={"user_id": "user_id"}, ask_when=_over_50,
        claims=[r"refunded (?:order )?(?P<order_id>o-\d+)"],
    )}), load_entry_points=False)
    model = ScriptedModel([calls(_refund("o-1", 80.0), _refund("o-2", 20.0)),
                           text("I refunded o-1 and I refunded o-2.")])
    agent = make_agent(model, [refund], h.middlewares())
    events, _ = await _reply(h, agent, UserMsg("user", "refund both"))
    ask = _asked(events)
    _, final = await _reply(h, agent, confirm(ask, ask.tool_calls[0], confirmed=False))
    assert REFUNDED == [("o-2", 20.0)]
    answer = final.get_text_content()
    assert "refund (order_id o-1) did not succeed" in answer
    assert "What did succeed: refund (order_id o-2)" in answer
    assert h.last_report(agent).unsupported_claims == ["refund"]


# ========================================= 2. a ledger's question and ask_when


async def test_a_ledgers_question_does_not_hide_the_policys_own() -> None:
    """README 'Ask a human': ``ask_when`` parks the call and the run reports
    that reason. The ledger's extension question alone was asked about an
    $8,000 refund: approving the quota ran it unflagged."""
    REFUNDED.clear()
    h = Harness(HarnessConfig(
        tools={"refund": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"},
                                    ask_when=_over_50, ledgers=["refunds"])},
        ledgers={"refunds": Ledger(cap=1, on_exhausted="ask", extend_by=1)},
    ), load_entry_points=False)
    model = ScriptedModel([calls(_refund("o-1", 20.0)), calls(_refund("o-2", 8000.0)), text("Done.")])
    agent = make_agent(model, [refund], h.middlewares())
    await _reply(h, agent, UserMsg("user", "refund both"))
    report = h.last_report(agent)
    assert report.terminal_state is TerminalState.WAITING_INPUT
    assert "quota (1/1) is used up" in report.reason and "refunds over $50 need a human" in report.reason


# ============================================ 3. a finish beside a parked call


async def test_the_answer_is_not_delivered_beside_a_call_waiting_for_a_human() -> None:
    """README 'Tells the truth', 'A call a gate refuses is never asked
    about'. The finishing tool, in the batch of a refund parked for a human,
    ended the run ``completed``; the human approved a refund that was then
    refused (``run_concluded``) and never made. Now the finish waits
    (``not_ready``): the approved refund runs, then the answer is given."""
    REFUNDED.clear()
    h = Harness(HarnessConfig(tools={
        "refund": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"}, ask_when=_over_50),
        "submit_answer": ToolPolicy(role="finish"),
    }), load_entry_points=False)
    model = ScriptedModel([
        calls(_refund("o-1", 80.0), ("submit_answer", {"answer": "Your refund of o-1 is on its way."})),
        calls(("submit_answer", {"answer": "o-1 is refunded."})),
    ])
    agent = make_agent(model, [refund, submit_answer], h.middlewares())
    events, _ = await _reply(h, agent, UserMsg("user", "refund o-1"))
    ask = _asked(events)
    assert [c.name for c in ask.tool_calls] == ["refund"]
    assert h.last_report(agent).terminal_state is TerminalState.WAITING_INPUT
    _, final = await _reply(h, agent, confirm(ask, ask.tool_calls[0]))
    report = h.last_report(agent)
    assert REFUNDED == [("o-1", 80.0)]
    assert (report.terminal_state, final.get_text_content()) == (TerminalState.COMPLETED, "o-1 is refunded.")


async def test_a_call_parked_while_the_answer_is_under_way_is_not_asked_about() -> None:
    """The other order: the finishing tool is admitted first and delivers;
    the refund judged after it would be asked about and never run. It is
    refused instead, and nobody is asked."""
    REFUNDED.clear()

    async def slow_submit(answer: str) -> str:
        """Give the user the final answer.

        Args:
            answer (str): The answer.
        """
        import asyncio

        await asyncio.sleep(0.05)
        return answer

    async def slow_refund(user_id: str, order_id: str, amount: float) -> str:
        """Refund an order.

        Args:
            user_id (str): The customer.
            order_id (str): The order.
            amount (float): USD.
        """
        return await refund(user_id, order_id, amount)

    async def late(args: dict[str, Any]) -> str | None:
        import asyncio

        await asyncio.sleep(0.01)  # judged after the finish was admitted
        return _over_50(args)

    h = Harness(HarnessConfig(tools={
        "slow_refund": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"}, ask_when=late),
        "slow_submit": ToolPolicy(role="finish"),
    }), load_entry_points=False)
    model = ScriptedModel([calls(("slow_submit", {"answer": "Done."}),
                                 ("slow_refund", {"user_id": "alice", "order_id": "o-1", "amount": 80.0}))])
    agent = make_agent(model, [slow_refund, slow_submit], h.middlewares())
    events, final = await _reply(h, agent, UserMsg("user", "refund o-1"))
    assert not any(isinstance(e, RequireUserConfirmEvent) for e in events)
    report = h.last_report(agent)
    assert report.terminal_state is TerminalState.COMPLETED and REFUNDED == []
    assert report.refusals.get("run_concluded") == 1


# ============================================================ 4. operations


@pytest.mark.parametrize(("name", "content"), [
    ("latin1.jsonl", "{\"run_id\": \"caf\xe9\"}\n".encode("latin-1")),
    ("strings.jsonl", json.dumps({"run_id": "a", "candidate_differences": ["x"]}).encode()),
    ("object.jsonl", json.dumps({"run_id": "a", "candidate_differences": {"point": "p"}}).encode()),
    ("children.jsonl", json.dumps({"run_id": "a", "children": 3}).encode()),
    ("deep.jsonl", ("[" * 100_000 + "]" * 100_000).encode()),
])
def test_diff_policy_names_a_malformed_log_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: bytes,
) -> None:
    """The CLI's promise: bad input gets a one-line ``error:`` and exit 2
    (1 is for the unexpected). Five kinds of line raised a traceback."""
    log = tmp_path / name
    log.write_bytes(content)
    assert main(["diff-policy", str(log)]) == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
@pytest.mark.parametrize("command", ["check-config", "hooks"])
def test_a_policy_file_not_in_utf8_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str, command: str,
) -> None:
    """A latin-1 policy (a fallback text with "é") raised ``UnicodeDecodeError``."""
    policy = tmp_path / f"policy{suffix}"
    text = '{"fallback_text": "d\xe9sol\xe9 ({reason})"}' if suffix == ".json" else 'fallback_text: "d\xe9sol\xe9 ({reason})"'
    policy.write_bytes(text.encode("latin-1"))
    args = [command, str(policy)] if command == "check-config" else [command, "--config", str(policy)]
    assert main(args) == 2
    assert "not valid UTF-8" in capsys.readouterr().err


def test_a_candidate_policys_undeclared_identity_arg_fails_at_instrument() -> None:
    """README: an ``identity_args`` name the tool's schema does not declare
    makes ``instrument`` raise. The live config's did; a candidate's passed,
    and the candidate then "refused" every call (``policy_error``)."""
    live = HarnessConfig(tools={"refund": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"})})
    typo = HarnessConfig(tools={"refund": ToolPolicy(role="mutation", identity_args={"customer_id": "user_id"})})
    h = Harness(live, candidate=typo, load_entry_points=False)
    from agentscope.tool import Toolkit
    from scripted import tool

    with pytest.raises(HarnessConfigError, match=r"candidate policy: tools\.refund\.identity_args"):
        h.instrument(Toolkit(tools=[tool(refund)]))


async def test_a_hanging_report_sink_does_not_hold_the_reply() -> None:
    """``deadline_s`` bounds each reply: an async ``on_report`` sleeping 3 s
    held the reply 3 s past a 1 s deadline. It is bounded as an async hook
    is (``hook_timeout_s``), the failure logged, the report kept."""

    async def sink(report: Any) -> None:
        await asyncio.sleep(3)

    h = Harness(HarnessConfig(deadline_s=1.0, hook_timeout_s=0.3, on_report=sink), load_entry_points=False)
    agent = make_agent(ScriptedModel([text("answer")]), [refund], h.middlewares())
    started = time.monotonic()
    _, final = await _reply(h, agent, UserMsg("user", "hi"))
    assert time.monotonic() - started < 2.0
    assert final.get_text_content() == "answer" and h.last_report(agent).terminal_state is TerminalState.COMPLETED


# ============================================================ 5. round 49


def _finish_and_refund(**refund_policy: Any) -> Harness:
    return Harness(HarnessConfig(tools={
        "refund": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"}, **refund_policy),
        "submit_answer": ToolPolicy(role="finish"),
    }), load_entry_points=False)


async def test_agentscopes_own_ask_beside_a_finish_under_way_is_not_asked() -> None:
    """Round 49: the refund is a ``FunctionTool`` AgentScope itself asks
    about; the finish of its batch was admitted first. The human was asked,
    approved, and the refund was never made."""
    REFUNDED.clear()

    async def delivering(answer: str) -> str:
        """Give the user the final answer.

        Args:
            answer (str): The answer.
        """
        await asyncio.sleep(0.05)  # still delivering while the refund is judged
        return answer

    h = Harness(HarnessConfig(tools={
        "refund": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"}),
        "delivering": ToolPolicy(role="finish"),
    }), load_entry_points=False)
    model = ScriptedModel([calls(("delivering", {"answer": "Done."}), _refund("o-1", 80.0))])
    agent = make_agent(model, [FunctionTool(refund), tool(delivering)], h.middlewares())
    events, _ = await _reply(h, agent, UserMsg("user", "refund o-1"))
    assert not any(isinstance(e, RequireUserConfirmEvent) for e in events)
    assert h.last_report(agent).refusals.get("run_concluded") == 1 and REFUNDED == []


async def test_a_finish_written_beside_a_parked_call_waits_even_after_a_denial() -> None:
    """Round 49: the refund (not concurrency-safe) parks and AgentScope
    holds the rest of the batch; the human denies it, and the finish written
    before anyone decided was then delivered. It is refused (``not_ready``):
    the model answers again, knowing the denial."""
    REFUNDED.clear()
    h = _finish_and_refund(ask_when=_over_50)
    model = ScriptedModel([
        calls(_refund("o-1", 80.0), ("submit_answer", {"answer": "Your refund is on its way."})),
        calls(("submit_answer", {"answer": "The refund of o-1 was declined."})),
    ])
    agent = make_agent(model, [tool(refund, is_concurrency_safe=False), tool(submit_answer)], h.middlewares())
    events, _ = await _reply(h, agent, UserMsg("user", "refund o-1"))
    ask = _asked(events)
    _, final = await _reply(h, agent, confirm(ask, ask.tool_calls[0], confirmed=False))
    assert final.get_text_content() == "The refund of o-1 was declined."
    assert h.last_report(agent).refusals.get("not_ready") == 1 and len(model.calls) == 2


async def test_a_correction_covers_every_pattern_and_every_claimed_tool() -> None:
    """Round 49: the audit stopped at a tool's first unsupported pattern and
    named no other tool's success: o-3's claim went uncorrected, o-2's
    cancellation unmentioned (a retry would repeat it)."""

    async def cancel(order_id: str) -> str:
        """Cancel an order.

        Args:
            order_id (str): The order.
        """
        return f"cancelled {order_id}"

    h = Harness(HarnessConfig(tools={
        "refund": ToolPolicy(role="mutation", claims=[r"refunded (?P<order_id>o-\d+)",
                                                      r"refund of (?P<order_id>o-\d+) is done"]),
        "cancel": ToolPolicy(role="mutation", claims=[r"cancelled (?P<order_id>o-\d+)"]),
    }), load_entry_points=False)
    model = ScriptedModel([calls(("cancel", {"order_id": "o-2"})),
                           text("I cancelled o-2, refunded o-1, and the refund of o-3 is done.")])
    agent = make_agent(model, [refund, cancel], h.middlewares())
    _, final = await _reply(h, agent, UserMsg("user", "sort it out"))
    answer = final.get_text_content()
    assert "refund (order_id o-1), refund (order_id o-3) did not succeed" in answer
    assert "What did succeed: cancel (order_id o-2)" in answer


def test_a_report_sink_slower_than_the_time_left_loses_no_report_under_asyncio_run() -> None:
    """Round 50: delivering a slow async ``on_report`` in the background
    (round 49) lost every report of a worker running each request in its
    own ``asyncio.run`` (the loop's close cancelled it). It is awaited before
    the reply returns, bounded by ``hook_timeout_s``, not by the deadline."""
    got: list[Any] = []

    async def sink(report: Any) -> None:
        await asyncio.sleep(0.3)
        got.append(report.run_id)

    h = Harness(HarnessConfig(deadline_s=0.2, on_report=sink), load_entry_points=False)
    agent = make_agent(ScriptedModel([text("one"), text("two")]), [refund], h.middlewares())
    for prompt in ("first", "second"):
        asyncio.run(_reply(h, agent, UserMsg("user", prompt)))
    assert got == [r.run_id for r in h.reports]


async def test_a_finishing_tool_agentscope_asks_about_runs_once_approved() -> None:
    """Round 50: a finishing tool AgentScope itself asks about (a plain
    ``FunctionTool``) was refused ``not_ready`` after the human approved it
    (its own batch was parked), and asked again forever."""
    sent: list[str] = []

    async def send_email(body: str) -> str:
        """Send the answer by email.

        Args:
            body (str): The answer.
        """
        sent.append(body)
        return body

    h = Harness(HarnessConfig(tools={"send_email": ToolPolicy(role="finish")}), load_entry_points=False)
    model = ScriptedModel([calls(("send_email", {"body": "Your order shipped."}))])
    agent = make_agent(model, [FunctionTool(send_email)], h.middlewares())
    events, _ = await _reply(h, agent, UserMsg("user", "email me"))
    ask = _asked(events)
    await _reply(h, agent, confirm(ask, ask.tool_calls[0]))
    report = h.last_report(agent)
    assert sent == ["Your order shipped."] and report.terminal_state is TerminalState.COMPLETED
    assert len(model.calls) == 1


@pytest.mark.parametrize(("command", "name", "content"), [
    ("diff-policy", "big.jsonl", '{"run_id": ' + "9" * 5000 + "}"),
    ("diff-policy", "surrogate.jsonl", json.dumps({"run_id": "a", "candidate_differences": [
        {"point": "pre_tool_call", "tool": "\ud800", "live": "allow", "candidate": "refuse", "code": "x"}]})),
    ("check-config", "big.json", '{"max_tool_calls": ' + "9" * 5000 + "}"),
])
def test_the_cli_names_huge_integers_and_prints_lone_surrogates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, name: str, content: str,
) -> None:
    """Round 49: an integer past Python's digit limit (``ValueError``) and a
    lone surrogate in a printed cell (``UnicodeEncodeError``) gave tracebacks."""
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    code = main([command, str(path)])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert code == (0 if "surrogate" in name else 2)


async def test_shadow_mode_records_ask_when_beside_a_hooks_question() -> None:
    """Round 49: in shadow mode nothing parks, and ``ask_when``'s own reason
    was recorded only when no hook had asked: it was nowhere in the report."""
    from agentscope_harness import HookContext, harness_hook

    @harness_hook("pre_tool_call", priority=60, name="kyc_check")
    def kyc_check(ctx: HookContext) -> None:
        ctx.ask("new customer: KYC review")

    h = Harness(HarnessConfig(mode="shadow", tools={"refund": ToolPolicy(
        role="mutation", identity_args={"user_id": "user_id"}, ask_when=_over_50)}),
        hooks=[kyc_check], load_entry_points=False)
    agent = make_agent(ScriptedModel([calls(_refund("o-1", 80.0)), text("Done.")]), [refund], h.middlewares())
    await _reply(h, agent, UserMsg("user", "refund o-1"))
    asks = [(d.hook, d.detail) for d in h.last_report(agent).decisions if d.action == "ask"]
    assert ("ask_when", "refunds over $50 need a human") in asks and ("kyc_check", "new customer: KYC review") in asks
