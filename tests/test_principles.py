"""One test (at least) per principle of DESIGN section 1, on a real Agent."""

from __future__ import annotations

import asyncio
import json

import pytest
from agentscope.message import HintBlock, ToolResultBlock
from scripted import (
    ScriptedModel,
    calls,
    decisions,
    make_agent,
    payload_bytes,
    run,
    text,
    tool_messages,
)

from agentscope_harness import (
    DependencyDown,
    Harness,
    HarnessConfig,
    HarnessConfigError,
    HookContext,
    HookRejectSignal,
    Ledger,
    Principal,
    TerminalState,
    ToolPolicy,
    harness_hook,
)
from agentscope_harness.facts import GuardState
from agentscope_harness.run_state import current_run

RAN: list[str] = []


async def search(q: str) -> str:
    """Search the catalogue.

    Args:
        q (str): The query.
    """
    RAN.append(f"search:{q}")
    return f"3 products for {q}"


async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
    """
    RAN.append(f"refund:{order_id}")
    return f"refunded {order_id}"


async def lookup_order(order_id: str, user_id: str) -> str:
    """Look up an order of a user.

    Args:
        order_id (str): The order.
        user_id (str): The owner.
    """
    RAN.append(f"lookup:{order_id}:{user_id}")
    return f"order {order_id} of {user_id}: shipped"


async def inventory(sku: str) -> str:
    """Check the inventory service.

    Args:
        sku (str): The product.
    """
    RAN.append(f"inventory:{sku}")
    raise DependencyDown("inventory service")


async def submit_answer(answer: str) -> str:
    """Deliver the final answer.

    Args:
        answer (str): The answer.
    """
    RAN.append("submit")
    return "delivered"


@pytest.fixture(autouse=True)
def _reset_ran() -> None:
    RAN.clear()


def _is_prefix(prev: list, nxt: list) -> bool:
    """``prev`` is a byte-identical prefix of ``nxt`` (the last message of
    ``prev`` may have grown: an assistant turn gets its tool calls)."""
    a = [json.dumps(m, sort_keys=True) for m in prev]
    b = [json.dumps(m, sort_keys=True) for m in nxt]
    return len(a) <= len(b) and a == b[: len(a)]


# 1. Facts, not phases -------------------------------------------------------

def test_guard_state_has_no_phase_field() -> None:
    fields = set(GuardState.__dataclass_fields__)
    assert not {f for f in fields if "phase" in f or f == "state"}
    assert {"called_tools", "succeeded", "progress_marks", "ledger_used", "terminal"} <= fields


async def test_custom_hook_decides_from_facts_written_by_earlier_calls() -> None:
    @harness_hook("pre_tool_call", priority=25, name="one_search_then_refund", kind="safety")
    def gate(ctx: HookContext) -> None:
        if ctx.tool.name == "refund" and not ctx.facts.called_tools["search"]:
            raise HookRejectSignal("Search first.", code="prerequisite_missing")

    harness = Harness(hooks=[gate])
    model = ScriptedModel([
        calls(("refund", {"order_id": "o1"})),
        calls(("search", {"q": "o1"})),
        calls(("refund", {"order_id": "o1"})),
        text("done"),
    ])
    agent = make_agent(model, [search, refund], harness.middlewares())
    await run(agent)
    assert RAN == ["search:o1", "refund:o1"]
    assert tool_messages(model.calls[1])[0] == "[harness:prerequisite_missing] Search first."


# 2. Hooks decide, adapters act ---------------------------------------------

async def test_refusal_is_a_denied_sentinel_and_the_tool_never_runs() -> None:
    @harness_hook("pre_tool_call", priority=25, name="no_refunds", kind="safety")
    def no_refunds(ctx: HookContext) -> None:
        if ctx.tool.name == "refund":
            raise HookRejectSignal("Refunds are not processed today; tell the user.")

    harness = Harness(hooks=[no_refunds])
    model = ScriptedModel([calls(("refund", {"order_id": "o9"})), text("Sorry, no refunds today.")])
    agent = make_agent(model, [refund], harness.middlewares())
    _, final = await run(agent)
    assert RAN == []
    assert tool_messages(model.calls[1]) == [
        "[harness:policy_refused] Refunds are not processed today; tell the user.",
    ]
    result = next(b for b in agent.state.context[-1].content if isinstance(b, ToolResultBlock))
    assert result.state == "denied"
    report = harness.last_report(agent)
    assert report.refusals == {"policy_refused": 1}
    assert report.refusals_by_hook == {"no_refunds": 1}
    assert final.get_text_content() == "Sorry, no refunds today."


async def test_hint_from_a_hook_reaches_the_model_before_its_call() -> None:
    @harness_hook("pre_think", priority=50, name="greeter")
    def greeter(ctx: HookContext) -> None:
        if ctx.run.model_calls == 0:
            ctx.hint("Be brief.")

    harness = Harness(hooks=[greeter])
    model = ScriptedModel([text("ok")])
    agent = make_agent(model, [search], harness.middlewares())
    await run(agent)
    sent = model.calls[0]["formatted"]
    assert sent[-1]["role"] == "user"
    assert "Be brief." in json.dumps(sent[-1])
    hints = [b for b in agent.state.context[-1].content if isinstance(b, HintBlock)]
    assert len(hints) == 1 and "Be brief." in hints[0].hint


# 3 + 4. The tool table never changes; every payload extends the last --------

async def test_prefix_property_across_refusals_hints_and_nudges() -> None:
    harness = Harness(HarnessConfig(
        tools={
            "search": ToolPolicy(role="retrieval", ledgers=["retrieval"]),
            "refund": ToolPolicy(role="mutation", requires=[]),
            "submit_answer": ToolPolicy(role="finish", requires_facts=["retrieved"]),
        },
        ledgers={"retrieval": Ledger(cap=2, soft_at=1)},
        stall_rounds=1,
    ))
    model = ScriptedModel([
        calls(("submit_answer", {"answer": "x"})),          # not_ready
        calls(("search", {"q": "a"}), ("search", {"q": "b"})),
        calls(("search", {"q": "c"})),                      # quota_exhausted
        calls(("search", {"q": "a"})),                      # quota + duplicate
        text("I think we are done"),                        # terminal_enforcer round
        calls(("submit_answer", {"answer": "a and b"})),
        text("Here you go."),
    ])
    agent = make_agent(model, [search, refund, submit_answer], harness.middlewares())
    _, final = await run(agent)
    assert len(model.calls) == 6  # the finished answer needs no seventh call
    payloads = [c["formatted"] for c in model.calls]
    for i in range(1, len(payloads)):
        assert _is_prefix(payloads[i - 1], payloads[i]), f"payload {i} breaks the prefix"
    assert all(c["tools"] == model.calls[0]["tools"] for c in model.calls)
    system = {payload_bytes({"formatted": p[:1]}) for p in payloads}
    assert len(system) == 1
    report = harness.last_report(agent)
    assert report.terminal_state == TerminalState.COMPLETED
    assert report.refusals["not_ready"] == 1
    assert report.refusals["quota_exhausted"] >= 2
    assert final.get_text_content() == "a and b"  # the finished answer


# 5. Two kinds of gates ------------------------------------------------------

def test_safety_gate_cannot_declare_an_escape_key() -> None:
    with pytest.raises(HarnessConfigError, match="escape_key"):
        @harness_hook("pre_tool_call", kind="safety", escape_key="x")
        def bad(ctx: HookContext) -> None:  # pragma: no cover - never registered
            pass


def test_efficiency_gate_escape_key_defaults_to_its_name() -> None:
    @harness_hook("pre_tool_call", kind="efficiency", name="maybe_enough")
    def maybe(ctx: HookContext) -> None:  # pragma: no cover - not run
        pass

    assert maybe.__harness_hook__.escape_key == "maybe_enough"


@harness_hook("pre_tool_call", priority=36, name="too_many_searches", kind="efficiency")
def too_many_searches(ctx: HookContext) -> None:
    if ctx.tool.name == "search" and ctx.facts.called_tools["search"] >= 1:
        raise HookRejectSignal("You probably have enough.", code="enough_results")


async def test_escape_latch_counts_a_parallel_batch_once_and_stays_open() -> None:
    harness = Harness(hooks=[too_many_searches])
    model = ScriptedModel([
        calls(("search", {"q": "1"})),
        calls(("search", {"q": "2"}), ("search", {"q": "3"}), ("search", {"q": "4"})),  # 1 batch
        calls(("search", {"q": "5"})),                                                   # 2nd
        calls(("search", {"q": "6"})),                                                   # escapes
        calls(("search", {"q": "7"})),                                                   # latched
        text("done"),
    ])
    agent = make_agent(model, [search], harness.middlewares())
    await run(agent)
    assert RAN == ["search:1", "search:6", "search:7"]
    report = harness.last_report(agent)
    assert report.refusals == {"enough_results": 4}
    actions = [d.action for d in report.decisions if d.hook == "too_many_searches"]
    assert actions.count("allow_escape") == 1
    assert actions.count("refuse") == 4


async def test_safety_gate_never_escapes() -> None:
    @harness_hook("pre_tool_call", priority=25, name="never_refund", kind="safety")
    def never(ctx: HookContext) -> None:
        if ctx.tool.name == "refund":
            raise HookRejectSignal("No.", code="permission_denied")

    harness = Harness(hooks=[never])
    model = ScriptedModel(
        [calls(("refund", {"order_id": str(i)})) for i in range(5)] + [text("ok")],
    )
    agent = make_agent(model, [refund], harness.middlewares())
    await run(agent)
    assert RAN == []
    report = harness.last_report(agent)
    # refused twice: the run must conclude; insisting once more stops it
    assert report.refusals == {"permission_denied": 2, "run_concluded": 1}
    assert not any(d.action == "allow_escape" for d in report.decisions)
    assert report.reason == "refused:permission_denied"


# 6. One run, one slot, one reset --------------------------------------------

async def test_parallel_calls_share_one_slot_and_the_slot_is_dropped() -> None:
    harness = Harness()
    model = ScriptedModel([
        calls(*[("search", {"q": str(i)}) for i in range(6)]),
        text("done"),
    ])
    agent = make_agent(model, [search], harness.middlewares())
    _, _ = await run(agent)
    assert harness.last_report(agent).tool_calls == {"search": 6}
    assert len(harness.table) == 0
    assert current_run() is None


async def test_two_replies_of_one_agent_start_fresh() -> None:
    harness = Harness()
    model = ScriptedModel([
        calls(("search", {"q": "a"}), ("search", {"q": "b"})), text("one"),
        calls(("search", {"q": "c"})), text("two"),
    ])
    agent = make_agent(model, [search], harness.middlewares())
    await run(agent)
    first = harness.last_report(agent)
    await run(agent)
    second = harness.last_report(agent)
    assert first.run_id != second.run_id
    assert (first.tool_calls, second.tool_calls) == ({"search": 2}, {"search": 1})
    assert (first.model_calls, second.model_calls) == (2, 2)


# 7. Budgets and identity belong to the application --------------------------

async def test_tool_arguments_cannot_change_identity_or_raise_a_budget() -> None:
    harness = Harness(HarnessConfig(
        tools={
            "lookup_order": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"}),
            "search": ToolPolicy(role="retrieval", ledgers=["retrieval"]),
        },
        ledgers={"retrieval": Ledger(cap=1)},
    ))
    model = ScriptedModel([
        calls(("lookup_order", {"order_id": "o1", "user_id": "u-other"})),
        calls(("search", {"q": "a"})),
        calls(("search", {"q": "b", "cap": 99})),
        calls(("lookup_order", {"order_id": "o1", "user_id": "u-42"})),
        text("done"),
    ])
    agent = make_agent(model, [lookup_order, search], harness.middlewares())
    with harness.acting_for(Principal(user_id="u-42", tenant="acme")):
        await run(agent)
    assert RAN == ["search:a", "lookup:o1:u-42"]
    report = harness.last_report(agent)
    assert report.refusals == {"permission_denied": 1, "quota_exhausted": 1}
    assert report.principal["user_id"] == "u-42"


# 8. Errors are classified ---------------------------------------------------

async def test_dependency_down_is_classified_by_its_class_never_by_text() -> None:
    # uninstrumented: the exception's class is lost, and its text is data
    harness = Harness()
    model = ScriptedModel([calls(("inventory", {"sku": "s1"})), text("The inventory is down.")])
    agent = make_agent(model, [inventory], harness.middlewares())
    await run(agent)
    message = tool_messages(model.calls[1])[0]
    assert "[harness:dependency_down]" not in message
    assert harness.last_report(agent).reason != "dependency_down"
    # instrumented: the class is kept, and the sentinel is the harness's own
    harness = Harness()
    model = ScriptedModel([calls(("inventory", {"sku": "s1"})), text("The inventory is down.")])
    agent = make_agent(model, [inventory], harness.middlewares())
    harness.instrument(agent.toolkit)
    await run(agent)
    message = tool_messages(model.calls[1])[0]
    assert "[harness:dependency_down] inventory service is unavailable. Do not retry; tell the user." in message
    assert harness.last_report(agent).reason == "dependency_down"


async def test_instrumented_tool_keeps_its_error_class_in_metadata() -> None:
    harness = Harness()
    model = ScriptedModel([calls(("inventory", {"sku": "s1"})), text("down")])
    agent = make_agent(model, [inventory], harness.middlewares())
    harness.instrument(agent.toolkit)
    await run(agent)
    result = next(b for b in agent.state.context[-1].content if isinstance(b, ToolResultBlock))
    assert result.metadata["harness"]["error_class"] == "dependency_down"
    assert result.metadata["harness"]["exc_type"] == "DependencyDown"
    assert "[harness:dependency_down] inventory service is unavailable" in tool_messages(model.calls[1])[0]


def test_instrument_reaches_agentscope_private_middleware_list() -> None:
    """Fails loudly when AgentScope renames the private list we extend."""
    from agentscope.tool import Toolkit
    from scripted import tool

    kit = Toolkit(tools=[tool(search)])
    Harness().instrument(kit)
    Harness().instrument(kit)
    chain = kit.tool_groups[0].tools[0]._middlewares
    assert len(chain) == 1 and type(chain[0]).__name__ == "ErrorClassMiddleware"


# 9. Every decision is observable --------------------------------------------

async def test_decisions_are_events_report_entries_and_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    harness = Harness(HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval", ledgers=["r"])},
        ledgers={"r": Ledger(cap=0)},
    ))
    model = ScriptedModel([calls(("search", {"q": "a"})), text("nothing")])
    agent = make_agent(model, [search], harness.middlewares())
    with caplog.at_level("INFO", logger="agentscope_harness"):
        events, _ = await run(agent)
    streamed = decisions(events)
    assert any(d["action"] == "refuse" and d["code"] == "quota_exhausted" for d in streamed)
    report_events = [e for e in events if getattr(e, "name", None) == "harness.report"]
    assert len(report_events) == 1
    assert report_events[0].value["refusals"] == {"quota_exhausted": 1}
    report = harness.last_report(agent)
    assert [d.code for d in report.decisions if d.action == "refuse"] == ["quota_exhausted"]
    # consumers rely on the final Msg following ReplyEndEvent directly
    assert type(events[-1]).__name__ == "ReplyEndEvent"
    assert events.index(report_events[0]) < len(events) - 1
    assert any("quota_exhausted" in r.getMessage() for r in caplog.records)
    json.loads(report.to_json())


# 10. Ending is a contract ---------------------------------------------------

async def test_leaving_the_loop_without_the_finish_tool_is_not_success() -> None:
    harness = Harness(HarnessConfig(
        tools={"submit_answer": ToolPolicy(role="finish")}, max_enforce_retries=0,
    ))
    model = ScriptedModel([text("I'm done!")])
    agent = make_agent(model, [submit_answer], harness.middlewares())
    _, final = await run(agent)
    report = harness.last_report(agent)
    assert "I'm done!" not in final.get_text_content()  # it went around the finishing tool
    assert final.get_text_content().startswith("I could not complete this request")
    assert report.terminal_state == TerminalState.INCOMPLETE
    assert report.reason == "finish_tool_not_called"


async def test_finish_tool_success_completes_the_run() -> None:
    harness = Harness(HarnessConfig(tools={"submit_answer": ToolPolicy(role="finish")}))
    model = ScriptedModel([calls(("submit_answer", {"answer": "42"})), text("Delivered.")])
    agent = make_agent(model, [submit_answer], harness.middlewares())
    await run(agent)
    report = harness.last_report(agent)
    assert report.terminal_state == TerminalState.COMPLETED
    assert report.reason == "finished"


async def test_a_principal_bound_in_one_task_is_not_seen_by_another() -> None:
    harness = Harness()
    seen: dict[str, str | None] = {}

    @harness_hook("pre_think", name="who")
    def who(ctx: HookContext) -> None:
        seen[ctx.agent.name] = ctx.principal.user_id if ctx.principal else None

    harness = Harness(hooks=[who])

    async def as_user(name: str, user: str | None) -> None:
        agent = make_agent(ScriptedModel([text("hi")]), [search], harness.middlewares(), name=name)
        if user is None:
            await run(agent)
            return
        with harness.acting_for(Principal(user_id=user)):
            await asyncio.sleep(0)
            await run(agent)

    await asyncio.gather(as_user("a", "u-1"), as_user("b", None), as_user("c", "u-3"))
    assert seen == {"a": "u-1", "b": None, "c": "u-3"}


async def test_the_same_hint_is_given_and_recorded_once_in_a_row() -> None:
    given: list[bool] = []

    @harness_hook("pre_think", priority=50, name="nagger")
    def nagger(ctx: HookContext) -> None:
        given.append(ctx.hint("Please hurry."))

    harness = Harness(hooks=[nagger])
    model = ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("ok")])
    agent = make_agent(model, [search], harness.middlewares())
    await run(agent)
    assert given == [True, False, False]
    assert json.dumps(model.calls[-1]["formatted"]).count("Please hurry.") == 1
    hints = [d for d in harness.last_report(agent).decisions if d.hook == "nagger"]
    assert [d.action for d in hints] == ["hint"]
