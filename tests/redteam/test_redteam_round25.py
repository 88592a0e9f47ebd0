"""Red team, round 25: around the fixes of rounds 23-24.

1. client-executed results: a resume AgentScope rejects, ids of calls
   awaiting confirmation, results across events, the adapters alone;
2. approvals: what runs after ``approve_edit`` / a confirmation;
3. ``identity_args`` a tool does not declare: schemas with no properties,
   ``additionalProperties``, tools added after ``instrument``;
4. cached input pricing;
5. secrets in harness-written metadata, reports and logs;
6. ``outputs.JsonEscapes``: pieces vs whole, linear cost.

A test marked ``xfail(strict=True)`` is an attack that succeeds today (the
promise named in its reason is broken); the others are regression guards.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agentscope.event import (
    ExternalExecutionResultEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
)
from agentscope.message import ToolResultBlock, ToolResultState, UserMsg
from agentscope.tool import Toolkit
from hookkit import Ran, client_tool, refund_fn, refunding
from scripted import ALICE, BOB, ScriptedModel, calls, confirm, drain, make_agent, text, tool

from agentscope_harness import (
    Harness,
    HarnessConfig,
    Prerequisite,
    Principal,
    ToolPolicy,
)

KEY = "sk-ant-api03-" + "Abcdefghij" * 6



def _asked_of_client(events: list[Any]) -> Any:
    return next(e for e in events if isinstance(e, RequireExternalExecutionEvent)).tool_calls[0]



# ====================================================== 1/2. a resume AgentScope rejects


def _asking_refund(ran: Ran) -> tuple[Harness, Any]:
    """``refund`` with no permission of its own: AgentScope's engine asks."""
    h = Harness(HarnessConfig(), load_entry_points=False)
    model = ScriptedModel([calls(("refund", {"order_id": "o-1"})), text("done")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[refunding(ran)])), h.middlewares())
    return h, agent


async def _park_then_reject(h: Harness, agent: Any) -> tuple[Any, Any]:
    with h.acting_for(ALICE):
        events = await drain(agent, UserMsg("user", "refund o-1"))
        ask = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
        shown = ask.tool_calls[0]
        typo = shown.model_copy(update={"id": "call_typo"})
        with pytest.raises(ValueError):  # AgentScope: not waiting for that id
            await drain(agent, confirm(ask, typo))
    return ask, shown


async def test_control_an_edited_confirmation_is_refused() -> None:
    """Regression guard: without a rejected event first, an edited
    confirmation is ``approval_mismatch``."""
    ran = Ran()
    h, agent = _asking_refund(ran)
    with h.acting_for(ALICE):
        events = await drain(agent, UserMsg("user", "refund o-1"))
        ask = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
        edited = ask.tool_calls[0].model_copy(update={"input": json.dumps({"order_id": "o-999"})})
        await drain(agent, confirm(ask, edited))
    assert ran == []
    assert h.last_report(agent).refusals == {"approval_mismatch": 1}


async def test_a_rejected_resume_does_not_forget_what_the_human_was_shown() -> None:
    ran = Ran()
    h, agent = _asking_refund(ran)
    ask, shown = await _park_then_reject(h, agent)
    with h.acting_for(ALICE):
        edited = shown.model_copy(update={"input": json.dumps({"order_id": "o-999"})})
        await drain(agent, confirm(ask, edited))
    assert ran.of("refund") == [], ran
    assert h.last_report(agent).refusals.get("approval_mismatch") == 1


async def test_a_rejected_resume_does_not_let_another_caller_approve() -> None:
    ran = Ran()
    h, agent = _asking_refund(ran)
    ask, shown = await _park_then_reject(h, agent)
    with h.acting_for(BOB):
        await drain(agent, confirm(ask, shown))
    assert ran.of("refund") == [], ran


# ====================================================== 4. the daily quota of a resumed reply

PRICE_CFG = {"prices": {"scripted": (1000.0, 1.0)}, "daily_quota_usd": 1.0}  # a call: 100 in = $0.10


def _quota_shop(store: Any) -> tuple[Harness, Any]:
    from agentscope_harness import CostPolicy

    h = Harness(HarnessConfig(cost=CostPolicy(**PRICE_CFG), store=store), load_entry_points=False)
    return h, h.instrument(Toolkit(tools=[client_tool()]))


async def _parked_on_the_client(h: Harness, toolkit: Any) -> tuple[Any, Any, ScriptedModel]:
    model = ScriptedModel([calls(("client_lookup", {"order_id": "A-1"})), text("A-1 is paid.")])
    agent = make_agent(model, toolkit, h.middlewares())
    with h.acting_for(ALICE):
        call = _asked_of_client(await drain(agent, UserMsg("user", "status of A-1?")))
    return agent, call, model


def _result(agent: Any, call: Any) -> ExternalExecutionResultEvent:
    one = [ToolResultBlock(id=call.id, name=call.name, output="order A-1: paid", state=ToolResultState.SUCCESS)]
    return ExternalExecutionResultEvent(reply_id=agent.state.reply_id, execution_results=one)


async def test_control_a_resumed_reply_is_held_to_the_daily_quota() -> None:
    """Regression guard: Alice spent her quota elsewhere while the reply was
    parked: the resumed reply's next model call is not made."""
    from agentscope_harness.stores import MemoryStore

    store = MemoryStore()
    h, toolkit = _quota_shop(store)
    agent, call, model = await _parked_on_the_client(h, toolkit)
    await store.add_spend(ALICE.key, 1.0)  # her other sessions used the rest of the day
    with h.acting_for(ALICE):
        await drain(agent, _result(agent, call))
    assert len(model.calls) == 1
    assert h.last_report(agent).reason == "budget"


async def test_a_reply_restored_in_another_process_is_held_to_the_daily_quota() -> None:
    from agentscope.state import AgentState

    from agentscope_harness.stores import MemoryStore

    store = MemoryStore()
    h1, toolkit1 = _quota_shop(store)
    agent, call, model = await _parked_on_the_client(h1, toolkit1)
    await store.add_spend(ALICE.key, 1.0)
    h2, toolkit2 = _quota_shop(store)  # another worker, the same store
    state = AgentState.model_validate_json(agent.state.model_dump_json())
    agent2 = make_agent(model, toolkit2, h2.middlewares(), state=state)
    before = await store.get_spend(ALICE.key)
    with h2.acting_for(ALICE):
        await drain(agent2, _result(agent2, call))
    spent_after = await store.get_spend(ALICE.key)
    assert len(model.calls) == 1 or spent_after > before, (len(model.calls), before, spent_after)
    assert len(model.calls) == 1, "a model call past the daily quota"


async def test_a_rejected_resume_does_not_lift_the_daily_quota() -> None:
    from agentscope_harness.stores import MemoryStore

    store = MemoryStore()
    h, toolkit = _quota_shop(store)
    agent, call, model = await _parked_on_the_client(h, toolkit)
    await store.add_spend(ALICE.key, 1.0)
    with h.acting_for(ALICE):
        wrong = ToolResultBlock(id="call_typo", name="client_lookup", output="x", state=ToolResultState.SUCCESS)
        with pytest.raises(ValueError):
            await drain(agent, ExternalExecutionResultEvent(reply_id=agent.state.reply_id,
                                                             execution_results=[wrong]))
        await drain(agent, _result(agent, call))
    assert len(model.calls) == 1, "a model call past the daily quota"


# ====================================================== 4b. cached input on AgentScope's compression call

_SUMMARY_FIELDS = ("task_overview", "current_state", "important_discoveries", "next_steps",
                   "context_to_preserve")


async def _fetch(url: str) -> str:
    """Fetch a page.

    Args:
        url (str): The page.
    """
    return f"page {url} " + "lorem ipsum dolor " * 200


def _all_cached(resp: Any) -> Any:
    from agentscope.model import ChatUsage

    resp.usage = ChatUsage(input_tokens=1000, output_tokens=0, cache_input_tokens=1000, time=0.0)
    return resp


async def test_a_compression_call_served_from_the_cache_is_charged_at_the_cached_price() -> None:
    """Every response (the compression's too) reports 1,000 input tokens,
    all served from the prompt cache; cached input is free here."""
    from agentscope.agent import ContextConfig

    from agentscope_harness import CostPolicy
    from agentscope_harness.config import ModelPrice

    kinds: list[str] = []

    def step(turn: Any) -> Any:
        names = [t["function"]["name"] for t in turn.tools or []]
        if "generate_structured_output" in names:
            kinds.append("compression")
            return _all_cached(calls(("generate_structured_output", dict.fromkeys(_SUMMARY_FIELDS, "summary"))))
        kinds.append("reasoning")
        if turn.rounds >= 4:
            return _all_cached(text("done"))
        return _all_cached(calls(("fetch", {"url": f"u{turn.rounds}"})))

    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=5.0, prices={"scripted": ModelPrice(10.0, 0.0, 0.0)})),
                load_entry_points=False)
    model = ScriptedModel(step)
    model.context_size = 2500
    agent = make_agent(model, [tool(_fetch, name="fetch")], h.middlewares(),
                       context_config=ContextConfig(trigger_ratio=0.6, reserve_ratio=0.1))
    with h.acting_for(ALICE):
        await drain(agent, UserMsg("user", "read the pages"))
    report = h.last_report(agent)
    assert "compression" in kinds and "reasoning" in kinds, kinds
    assert report.spent_usd == pytest.approx(0.0), (report.spent_usd, kinds)


# ====================================================== 3. identity_args a tool does not declare


def _crm(ran: Ran, schema: dict[str, Any], name: str = "mcp__crm__lookup") -> Any:
    """An MCP-like tool (a ``ToolBase`` taking ``**kwargs``) that reads the
    customer from ``customer_id``, whatever its schema says."""
    from agentscope.message import TextBlock
    from agentscope.permission import PermissionBehavior, PermissionDecision
    from agentscope.tool import ToolBase, ToolChunk

    class CrmLookup(ToolBase):
        description = "Look up a customer's order in the CRM."
        input_schema = schema
        is_concurrency_safe = True
        is_read_only = True

        async def check_permissions(self, tool_input: Any, context: Any) -> Any:
            return PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")

        async def call(self, **kwargs: Any) -> Any:
            ran.append((name, dict(kwargs)))
            return ToolChunk(content=[TextBlock(text=f"order {kwargs.get('order_id')} of {kwargs.get('customer_id')}")],
                             state=ToolResultState.RUNNING)

    CrmLookup.name = name
    return CrmLookup()


def _identity_cfg(name: str = "mcp__crm__lookup") -> HarnessConfig:
    return HarnessConfig(tools={name: ToolPolicy(role="lookup", identity_args={"user_id": "user_id"})})


async def _crm_run(h: Harness, toolkit: Any) -> Any:
    from hookkit import drive

    model = ScriptedModel([calls(("mcp__crm__lookup", {"customer_id": "bob", "order_id": "B-7", "user_id": "u-42"})),
                           text("done")])
    return (await drive(h, make_agent(model, toolkit, h.middlewares()), ALICE))[2]


async def test_an_identity_argument_of_a_schema_replaced_without_properties_never_runs_for_another() -> None:
    """Regression guard: a schema replaced after registration by one with
    no 'properties' (``facts.declared_in`` reads nothing there) is refused by
    AgentScope itself when the toolkit is read again."""
    ran = Ran()
    h = Harness(_identity_cfg(), load_entry_points=False)
    crm = _crm(ran, {"type": "object", "properties": {"customer_id": {"type": "string"},
                                                      "order_id": {"type": "string"},
                                                      "user_id": {"type": "string"}}})
    toolkit = h.instrument(Toolkit(tools=[crm]))
    crm.input_schema = {"type": "object", "additionalProperties": True}  # the server's schema refreshed
    try:
        await _crm_run(h, toolkit)
    except ValueError:
        pass  # AgentScope: "Invalid input_schema"
    assert [args.get("customer_id") for _, args in ran] in ([], ["u-42"]), ran


async def test_an_identity_argument_beside_additional_properties_is_named_at_instrument() -> None:
    """Regression guard: declared properties plus ``additionalProperties``."""
    from agentscope_harness import HarnessConfigError

    h = Harness(_identity_cfg(), load_entry_points=False)
    schema = {"type": "object", "properties": {"customer_id": {"type": "string"}}, "additionalProperties": True}
    with pytest.raises(HarnessConfigError):
        h.instrument(Toolkit(tools=[_crm(Ran(), schema)]))


async def test_an_identity_argument_of_a_tool_added_after_instrument_is_refused_at_judge() -> None:
    """Regression guard: the tool joins the toolkit after ``instrument``."""
    ran = Ran()
    h = Harness(_identity_cfg(), load_entry_points=False)
    toolkit = h.instrument(Toolkit(tools=[]))
    schema = {"type": "object", "properties": {"customer_id": {"type": "string"}, "order_id": {"type": "string"},
                                               "user_id": {"type": "string"}}}
    tk_tool = _crm(ran, schema)
    await toolkit.add_tool(tk_tool)
    tk_tool.input_schema = {"type": "object", "properties": {"customer_id": {"type": "string"},
                                                             "order_id": {"type": "string"}},
                            "additionalProperties": True}  # the schema changed after it was added
    report = await _crm_run(h, toolkit)
    assert ran == [], ran
    assert report.refusals == {"policy_error": 1}, report.refusals


# ====================================================== 5. secrets and personal data in log lines

EMAIL = "alice.smith@example.com"


def _logged(caplog: pytest.LogCaptureFixture) -> str:
    import logging

    return "\n".join(r.getMessage() + (logging.Formatter().formatException(r.exc_info) if r.exc_info else "")
                     for r in caplog.records)


async def test_a_lapsed_lease_log_line_carries_no_email(caplog: pytest.LogCaptureFixture) -> None:
    import asyncio
    import logging

    from agentscope_harness import ConcurrencyLimit
    from agentscope_harness.stores import MemoryStore

    class LapsingStore(MemoryStore):
        async def lease_renew(self, key: str, lease_id: str, lease_s: float, *, deadline: float | None = None) -> bool:
            return False  # the slot lapsed (a loop stalled past lease_s)

    async def wait(seconds: float) -> str:
        """Wait.

        Args:
            seconds (float): How long.
        """
        await asyncio.sleep(seconds)
        return "waited"

    h = Harness(HarnessConfig(store=LapsingStore(), concurrency_limits=[
        ConcurrencyLimit(scope="principal", max_in_flight=2, lease_s=0.2)]), load_entry_points=False)
    model = ScriptedModel([calls(("wait", {"seconds": 0.3})), text("done")])
    agent = make_agent(model, [tool(wait)], h.middlewares())
    with caplog.at_level(logging.DEBUG, logger="agentscope_harness"), h.acting_for(
            Principal(user_id=EMAIL, tenant="acme")):
        await drain(agent, UserMsg("user", "wait"))
    logged = _logged(caplog)
    assert "lapsed before it was renewed" in logged
    assert EMAIL not in logged, logged


# ====================================================== 1b. a second result feeds another tool's breaker


def _pay_shop(ran: Ran) -> tuple[Harness, Any]:
    async def pay(order_id: str) -> str:
        """Pay an order.

        Args:
            order_id (str): The order.
        """
        ran.append(("pay", {"order_id": order_id}))
        return f"paid {order_id}"

    h = Harness(HarnessConfig(), load_entry_points=False)
    return h, h.instrument(Toolkit(tools=[client_tool(), tool(pay)]))


def _down(call_id: str, name: str) -> ToolResultBlock:
    return ToolResultBlock(id=call_id, name=name, output="upstream down", state=ToolResultState.ERROR,
                           metadata={"harness": {"error_class": "dependency_down"}})


async def _bob_pays(h: Harness, toolkit: Any) -> Any:
    model = ScriptedModel([calls(("pay", {"order_id": "B-1"})), text("Paid B-1.")], model="bob")
    bob = make_agent(model, toolkit, h.middlewares(), name="bob")
    with h.acting_for(BOB):
        await drain(bob, UserMsg("user", "pay B-1"))
    return h.last_report(bob)


async def test_control_a_clients_own_results_leave_other_tools_breakers_alone() -> None:
    """Regression guard: one result per call, its id the awaited call's."""
    ran = Ran()
    h, toolkit = _pay_shop(ran)
    model = ScriptedModel([calls(("client_lookup", {"order_id": "A-1"})), text("ok")])
    alice = make_agent(model, toolkit, h.middlewares())
    with h.acting_for(ALICE):
        call = _asked_of_client(await drain(alice, UserMsg("user", "status of A-1?")))
        await drain(alice, ExternalExecutionResultEvent(reply_id=alice.state.reply_id,
                                                         execution_results=[_down(call.id, "pay")]))
    report = await _bob_pays(h, toolkit)
    assert ran.of("pay") == [{"order_id": "B-1"}], report.refusals


async def test_a_clients_second_results_do_not_open_another_tools_breaker() -> None:
    ran = Ran()
    h, toolkit = _pay_shop(ran)
    model = ScriptedModel([calls(("client_lookup", {"order_id": "A-1"})), text("ok")])
    alice = make_agent(model, toolkit, h.middlewares())
    with h.acting_for(ALICE):
        call = _asked_of_client(await drain(alice, UserMsg("user", "status of A-1?")))
        results = [ToolResultBlock(id=call.id, name="client_lookup", output="order A-1: paid",
                                   state=ToolResultState.SUCCESS), *[_down(call.id, "pay")] * 3]
        await drain(alice, ExternalExecutionResultEvent(reply_id=alice.state.reply_id, execution_results=results))
    report = await _bob_pays(h, toolkit)
    assert ran.of("pay") == [{"order_id": "B-1"}], report.refusals


@pytest.mark.parametrize("facts", [["identity_verified"], None])  # None: the control, no facts at all
async def test_a_clients_result_metadata_does_not_reach_a_required_fact(facts: list[str] | None) -> None:
    ran = Ran()
    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation", requires_facts=["identity_verified"])}),
                load_entry_points=False)
    model = ScriptedModel([calls(("client_lookup", {"order_id": "A-1"})), calls(("refund", {"order_id": "A-1"})),
                           text("Refunded A-1.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[client_tool(), tool(refund_fn(ran))])), h.middlewares())
    with h.acting_for(ALICE):
        call = _asked_of_client(await drain(agent, UserMsg("user", "refund A-1")))
        metadata = {"harness": {"facts": facts}} if facts else {}
        forged = [ToolResultBlock(id=call.id, name="client_lookup", output="order A-1: paid",
                                  state=ToolResultState.SUCCESS, metadata=metadata)]
        await drain(agent, ExternalExecutionResultEvent(reply_id=agent.state.reply_id, execution_results=forged))
    assert ran.of("refund") == [], ran
    assert h.last_report(agent).refusals.get("not_ready") == 1


async def test_control_another_caller_cannot_approve_a_parked_call() -> None:
    """Regression guard (control of the rejected-resume attack): Bob's
    confirmation of Alice's parked refund runs nothing."""
    ran = Ran()
    h, agent = _asking_refund(ran)
    with h.acting_for(ALICE):
        events = await drain(agent, UserMsg("user", "refund o-1"))
        ask = next(e for e in events if isinstance(e, RequireUserConfirmEvent))
    with h.acting_for(BOB):
        await drain(agent, confirm(ask, ask.tool_calls[0]))
    assert ran == []


async def test_a_second_result_with_a_prerequisites_name_across_two_events_is_no_outcome() -> None:
    """Regression guard: two client calls answered in two events; the
    second event answers the first call again under ``verify_identity``'s
    name (rejected), then the second call twice: the refund's prerequisite
    never holds."""
    ran = Ran()

    async def refund(order_id: str) -> str:
        """Refund an order.

        Args:
            order_id (str): The order.
        """
        ran.append(("refund", {"order_id": order_id}))
        return f"refunded {order_id}"

    async def verify_identity(code: str) -> str:
        """Check the one-time code.

        Args:
            code (str): The code.
        """
        ran.append(("verify_identity", {"code": code}))
        return "identity verified"

    h = Harness(HarnessConfig(tools={"refund": ToolPolicy(role="mutation",
                                                         requires=[Prerequisite(tool="verify_identity")])}),
                load_entry_points=False)
    model = ScriptedModel([calls(("client_lookup", {"order_id": "A-1"}), ("client_lookup", {"order_id": "A-2"})),
                           calls(("refund", {"order_id": "A-1"})), text("Refunded A-1.")])
    toolkit = h.instrument(Toolkit(tools=[client_tool(concurrent=True), tool(verify_identity), tool(refund)]))
    agent = make_agent(model, toolkit, h.middlewares())
    with h.acting_for(ALICE):
        events = await drain(agent, UserMsg("user", "refund A-1"))
        asked = [c for e in events if isinstance(e, RequireExternalExecutionEvent) for c in e.tool_calls]
        assert len(asked) == 2
        first, second = asked

        def ok(call_id: str, name: str) -> ToolResultBlock:
            return ToolResultBlock(id=call_id, name=name, output="ok", state=ToolResultState.SUCCESS)

        await drain(agent, ExternalExecutionResultEvent(reply_id=agent.state.reply_id,
                                                         execution_results=[ok(first.id, "client_lookup")]))
        with pytest.raises(ValueError):  # AgentScope: the first call is not awaited any more
            await drain(agent, ExternalExecutionResultEvent(
                reply_id=agent.state.reply_id,
                execution_results=[ok(second.id, "client_lookup"), ok(first.id, "verify_identity")]))
        await drain(agent, ExternalExecutionResultEvent(
            reply_id=agent.state.reply_id,
            execution_results=[ok(second.id, "client_lookup"), ok(second.id, "verify_identity")]))
    assert ran.of("verify_identity") == [] and ran.of("refund") == [], ran
    assert h.last_report(agent).refusals.get("prerequisite_missing") == 1


# ====================================================== 6. JsonEscapes: pieces, whole, linear


def test_json_escapes_in_pieces_give_what_the_whole_gives() -> None:
    """Regression guard: random texts of escapes, quotes and whitespace of
    every kind, cut at random (empty pieces too)."""
    import random

    from agentscope_harness.outputs import JsonEscapes, canonical_escapes

    alphabet = ["\\", "\\", "\\", '"', " ", "\t", "\u2028", "\u00a0", "\x1c", "u", "d", "8", "3", "D", "c", "0",
                "x", "4", ",", "}", ":", "]", "a", "'", "\u201c", "/", "n"]
    rng = random.Random(25)
    for _ in range(20000):
        n = rng.randint(1, 16)
        whole = "".join(rng.choice(alphabet) for _ in range(n))
        cuts = sorted(rng.choices(range(n + 1), k=rng.randint(0, 6)))
        pieces = [whole[a:b] for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
        stream = JsonEscapes()
        got = "".join(stream.feed(p) for p in pieces) + stream.flush()
        assert got == "".join(canonical_escapes(whole)), (whole, pieces)


@pytest.mark.parametrize("pattern", ["quote_then_whitespace", "backslash_run", "run_quote_whitespace",
                                     "quotes_resolved_one_by_one", "surrogate_pairs_cut"])
def test_json_escapes_read_each_character_a_bounded_number_of_times(
    pattern: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression guard: the characters ``canonical_escapes`` is given over
    a stream of one-character-ish adversarial deltas stay within a constant
    times the stream's length (counted, not timed)."""
    from agentscope_harness import outputs

    n = 20000
    deltas = {
        "quote_then_whitespace": ['\\\\"'] + [" ", "\t", "\u2028", "\u00a0", ""] * (n // 5) + ["x"],
        "backslash_run": ["\\"] * n + ["x"],
        "run_quote_whitespace": ["\\"] * n + ['"'] + [" "] * n + ["}"],
        "quotes_resolved_one_by_one": ['\\\\" ', "x"] * (n // 2),
        "surrogate_pairs_cut": ["\\ud83d", "\\u", "de", "00"] * (n // 4),
    }[pattern]
    seen = [0]
    real = outputs.canonical_escapes

    def counting(text: str) -> tuple[str, str]:
        seen[0] += len(text)
        return real(text)

    monkeypatch.setattr(outputs, "canonical_escapes", counting)
    stream = outputs.JsonEscapes()
    for delta in deltas:
        stream.feed(delta)
    stream.flush()
    total = sum(len(d) for d in deltas)
    assert seen[0] <= 4 * total, (seen[0], total)
