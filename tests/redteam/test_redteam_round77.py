"""Red team, round 77 (parks resumed in another process; shadow mode at a
resume).

1. A park record carried a hand-picked few of the run's counts: resumed on
   another worker, a run's token caps started again (``max_input_tokens=1500``:
   2,800 billed, one more tool run), a continued budget forgot what it
   carried and the human's extension (spent past cap plus extension, the
   report listing none), and a ledger extension the human approved was
   refused (its offer was not kept). The record now carries everything a
   limit, a ladder or a report reads of the run (``park_record``): a resume
   elsewhere ends as the same resume in the parking process does.
2. Shadow mode refused a confirmed call at its resume (edited by the human,
   or confirmed by another caller) and said it enforced nothing.

Real ``Agent``s, real tools in real ``Toolkit``s, a SQLite file (and a real
Redis when ``HARNESS_TEST_REDIS_URL`` is set) shared by the two workers.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agentscope.event import RequireUserConfirmEvent
from agentscope.message import UserMsg
from agentscope.permission import PermissionBehavior, PermissionDecision
from agentscope.state import AgentState
from agentscope.tool import FunctionTool, Toolkit
from scripted import ALICE, BOB, ScriptedModel, calls, confirm, drain, make_agent, text, tool

from agentscope_harness import (
    CostPolicy,
    Harness,
    HarnessConfig,
    Ledger,
    ModelPrice,
    Prerequisite,
    Principal,
    TerminalState,
    ToolPolicy,
)
from agentscope_harness import park_record as records
from agentscope_harness.report import RunReport
from agentscope_harness.stores import RedisStore, SQLiteStore

ASK = PermissionDecision(behavior=PermissionBehavior.ASK, message="asks")
ACTED: list[tuple[str, Any]] = []
WORDS = "amber basil cedar delta ember fjord garnet harbor indigo juniper kestrel lagoon meadow nectar onyx".split()


async def pay_out(user_id: str, amount: int) -> str:
    """Pay out.

    Args:
        user_id (str): Who.
        amount (int): How much.
    """
    ACTED.append(("pay_out", amount))
    return f"paid {amount}"


async def lookup(q: str) -> str:
    """Look something up.

    Args:
        q (str): What.
    """
    ACTED.append(("lookup", q))
    return " ".join(random.Random(q).sample(WORDS, 10))


async def lookup_order(order_id: str) -> str:
    """Look up an order.

    Args:
        order_id (str): The order.
    """
    ACTED.append(("lookup_order", order_id))
    return f"order {order_id}: shipped"


async def cancel_order(order_id: str) -> str:
    """Cancel an order.

    Args:
        order_id (str): The order.
    """
    ACTED.append(("cancel_order", order_id))
    return f"order {order_id} cancelled"


async def flaky(q: str) -> str:
    """A lookup whose backend is down.

    Args:
        q (str): What.
    """
    ACTED.append(("flaky", q))
    raise RuntimeError("backend down")


async def search(q: str) -> str:
    """Search the catalogue.

    Args:
        q (str): Query.
    """
    ACTED.append(("search", q))
    return "no results for that query in the catalogue today"


async def deep(q: str) -> str:
    """Deep search (asks first).

    Args:
        q (str): Query.
    """
    ACTED.append(("deep", q))
    return "no results for that query in the catalogue today"


PAY_OUT = ToolPolicy(role="mutation", identity_args={"user_id": "user_id"},
                     ask_when=lambda args: "over 50" if args["amount"] > 50 else None)
PRICES = {"scripted": ModelPrice(1.0, 1.0)}
TOOLS = [pay_out, lookup, lookup_order, cancel_order, flaky, search, deep]


def _stores() -> list[str]:
    return ["sqlite", "redis"] if os.environ.get("HARNESS_TEST_REDIS_URL") else ["sqlite"]


def _store_of(kind: str, tmp_path: Path) -> Callable[[], Any]:
    if kind == "sqlite":
        return lambda: SQLiteStore(str(tmp_path / "shared.db"))
    prefix = f"t{uuid.uuid4().hex[:8]}"
    return lambda: RedisStore(os.environ["HARNESS_TEST_REDIS_URL"], prefix=prefix)


def _asked(items: list[Any]) -> Any:
    return next(i for i in items if isinstance(i, RequireUserConfirmEvent))


async def _resumed(
    config: Callable[[Any], HarnessConfig], script: list[Any], store_of: Callable[[], Any], elsewhere: bool,
    before: Callable[[Harness, Any], Any] | None = None,
) -> tuple[RunReport, list[tuple[str, Any]], ScriptedModel]:
    """Alice's reply (after ``before``, replies of the same agent) parks on a
    human's question and her yes resumes it: in the parking process, or
    (``elsewhere``) on another worker, a new Harness and Agent over the same
    store with the state restored. The resumed reply's report, what ran, the model."""
    ACTED.clear()
    model = ScriptedModel(script)
    here = Harness(config(store_of()), load_entry_points=False, environ={})
    agent = make_agent(model, here.instrument(Toolkit(tools=[tool(f) for f in TOOLS])),
                       middlewares=here.middlewares())
    with here.acting_for(ALICE):
        if before is not None:
            await before(here, agent)
        asked = _asked(await drain(agent, UserMsg("user", "go")))
    there = here
    if elsewhere:
        there = Harness(config(store_of()), load_entry_points=False, environ={})
        agent = make_agent(model, there.instrument(Toolkit(tools=[tool(f) for f in TOOLS])),
                           middlewares=there.middlewares(),
                           state=AgentState.model_validate_json(agent.state.model_dump_json()))
    with there.acting_for(ALICE):
        await drain(agent, confirm(asked, asked.tool_calls[0]))
    report = there.last_report(agent)
    assert report is not None
    return report, list(ACTED), model


def _outcome(report: RunReport, acted: list[Any], model: ScriptedModel) -> dict[str, Any]:
    return {
        "acted": acted, "end": (report.terminal_state.value, report.reason), "refusals": dict(report.refusals),
        "extensions": report.extensions, "input_tokens": report.input_tokens, "model_calls": report.model_calls,
        "billed_calls": len(model.usage), "spent_usd": round(report.spent_usd, 9),
    }


async def _same_either_way(kind: str, tmp_path: Path, config: Any, script: Callable[[], list[Any]],
                           before: Any = None) -> dict[str, Any]:
    here = _outcome(*await _resumed(config, script(), _store_of(kind, tmp_path / "a"), False, before))
    there = _outcome(*await _resumed(config, script(), _store_of(kind, tmp_path / "b"), True, before))
    assert there == here
    return here


@pytest.fixture(autouse=True)
def _dirs(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()


@pytest.mark.parametrize("kind", _stores())
async def test_a_token_cap_holds_across_a_resume_elsewhere(kind: str, tmp_path: Path) -> None:
    """Each model call bills 1,400 input tokens of a 1,500 cap: the run
    stops after the first, wherever its park is answered (on another
    worker it was billed 2,800 and ran one more tool)."""
    def config(store: Any) -> HarnessConfig:
        return HarnessConfig(store=store, cost=CostPolicy(prices=PRICES, max_input_tokens=1500),
                             tools={"pay_out": PAY_OUT})

    def script() -> list[Any]:
        return [calls(("pay_out", {"user_id": "u-42", "amount": 80}), inp=1400),
                calls(("lookup", {"q": "more"}), inp=1400), text("done", inp=1400), text("done", inp=1400)]

    outcome = await _same_either_way(kind, tmp_path, config, script)
    assert outcome["acted"] == [("pay_out", 80)]
    assert outcome["billed_calls"] == 1 and outcome["input_tokens"] == 1400
    assert outcome["end"] == ("incomplete", "budget")


@pytest.mark.parametrize("kind", _stores())
async def test_a_continued_extended_budget_holds_across_a_resume_elsewhere(kind: str, tmp_path: Path) -> None:
    """A budget parked, extended by the human and continued, then parked on
    a payout's question: answered on another worker, the run forgot what it
    carried and the extension (billed $0.0197 of $0.014, ``extensions=[]``)."""
    def config(store: Any) -> HarnessConfig:
        return HarnessConfig(store=store, cost=CostPolicy(cap_usd=0.010, prices=PRICES, on_exhausted="ask"),
                             tools={"pay_out": PAY_OUT})

    def script() -> list[Any]:
        return [calls(("lookup", {"q": "a"}), inp=4000), calls(("lookup", {"q": "b"}), inp=5600),
                calls(("pay_out", {"user_id": "u-42", "amount": 80}), inp=1000),
                *[calls(("lookup", {"q": q}), inp=1500) for q in "cdefghij"],
                text("done", inp=100), text("done", inp=100)]

    async def budget_parked_then_extended(harness: Harness, agent: Any) -> None:
        await drain(agent, UserMsg("user", "research"))
        report = harness.last_report(agent)
        assert report is not None and report.terminal_state.value == "waiting_input"
        harness.extend(agent, 0.004)

    outcome = await _same_either_way(kind, tmp_path, config, script, budget_parked_then_extended)
    assert outcome["extensions"] == [{"what": "usd", "by": 0.004, "approved_by": ALICE.user_id}]
    assert "0.0140" in outcome["end"][1] or outcome["end"][0] != "completed"


@pytest.mark.parametrize("kind", _stores())
async def test_an_approved_ledger_extension_runs_after_a_resume_elsewhere(kind: str, tmp_path: Path) -> None:
    """A ledger's ``on_exhausted="ask"`` park approved on another worker: the
    approved call was refused ``quota_exhausted`` (the offer shown was not
    kept), the human's yes silently lost."""
    def config(store: Any) -> HarnessConfig:
        return HarnessConfig(store=store, ledgers={"web": Ledger(cap=1, on_exhausted="ask", extend_by=1)},
                             tools={"lookup": ToolPolicy(role="retrieval", ledgers=["web"])})

    def script() -> list[Any]:
        return [calls(("lookup", {"q": "alpha"})), calls(("lookup", {"q": "beta"})), text("done"), text("done")]

    outcome = await _same_either_way(kind, tmp_path, config, script)
    assert outcome["acted"] == [("lookup", "alpha"), ("lookup", "beta")]
    assert outcome["extensions"] == [{"what": "ledger:web", "by": 1, "approved_by": ALICE.user_id}]
    assert outcome["refusals"] == {}


@pytest.mark.parametrize("kind", _stores())
async def test_a_prerequisite_met_before_the_park_is_met_after_a_resume_elsewhere(kind: str, tmp_path: Path) -> None:
    """The order looked up before the park: its cancellation, asked about
    and approved on another worker, runs there as it does here (the
    success its prerequisite reads is carried)."""
    def config(store: Any) -> HarnessConfig:
        return HarnessConfig(store=store, tools={
            "lookup_order": ToolPolicy(role="lookup"),
            "cancel_order": ToolPolicy(role="mutation", requires=[Prerequisite(tool="lookup_order",
                                                                                same_args=["order_id"])],
                                       ask_when=lambda args: "cancels an order"),
        })

    def script() -> list[Any]:
        return [calls(("lookup_order", {"order_id": "A-1"})), calls(("cancel_order", {"order_id": "A-1"})),
                text("Cancelled."), text("Cancelled.")]

    outcome = await _same_either_way(kind, tmp_path, config, script)
    assert outcome["acted"] == [("lookup_order", "A-1"), ("cancel_order", "A-1")]
    assert outcome["refusals"] == {}


async def test_a_park_record_reads_back_what_it_wrote(tmp_path: Path) -> None:
    """Every carried field survives JSON: the record of a run that counted,
    spent, refused, succeeded and was offered an extension reads back to
    the same record."""
    def config(store: Any) -> HarnessConfig:
        return HarnessConfig(store=store, ledgers={"web": Ledger(cap=1, on_exhausted="ask", extend_by=1)},
                             cost=CostPolicy(prices=PRICES),
                             tools={"lookup": ToolPolicy(role="retrieval", ledgers=["web"])})

    ACTED.clear()
    harness = Harness(config(SQLiteStore(str(tmp_path / "s.db"))), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup_order", {"order_id": "A-1"})), calls(("lookup", {"q": "a"})),
                           calls(("lookup", {"q": "b"})), text("done")])
    agent = make_agent(model, harness.instrument(Toolkit(tools=[tool(f) for f in TOOLS])),
                       middlewares=harness.middlewares())
    with harness.acting_for(ALICE):
        _asked(await drain(agent, UserMsg("user", "go")))
    parked = harness.table.get(agent.state.reply_id)
    assert parked is not None
    written = records.record_of(parked)
    assert written["run"]["offers"] and written["facts"]["succeeded"] and written["facts"]["success_counts"]
    assert written["run"]["input_tokens"] == 300 and written["facts"]["spent_usd"] > 0
    read = json.loads(json.dumps(written))
    target = _blank_run()
    records.apply(target, records.carried(read))
    assert records.record_of(target) == written


@pytest.mark.parametrize("field, value", [
    ("run.input_tokens", -5), ("run.model_calls", "3"), ("facts.spent_usd", float("nan")),
    ("facts.force_conclude", "yes"), ("run.offers", {"c": {"ledger:web": -1}}), ("facts.latched", None),
])
async def test_a_park_record_that_does_not_read_back_is_applied_not_at_all(field: str, value: Any) -> None:
    """A record tampered with (or another version's) is refused whole: no
    field of it is applied, so no count half-moves."""
    written = records.record_of(_blank_run())
    written["run"]["model_calls"] = 7
    part, name = field.split(".")
    written[part][name] = value
    run = _blank_run()
    with pytest.raises((ValueError, TypeError)):
        records.apply(run, records.carried(written))
    assert run.model_calls == 0


def _blank_run() -> Any:
    harness = Harness(HarnessConfig(), load_entry_points=False, environ={})
    from agentscope_harness.facts import GuardState
    from agentscope_harness.run_state import RunState

    return RunState(run_id="x", agent_name="a", session_id=None, principal=None, deadline=None,
                    facts=GuardState(), table=harness.table)


# ------------------------------------------------------------------ shadow mode at a resume


async def _shadow_resume(edit: dict[str, Any] | None, resumer: Principal) -> tuple[list[Any], RunReport, list[Any]]:
    """A refund left at AgentScope's own ASK, parked for Alice under a
    shadow Harness and confirmed (``edit``: with the arguments the human
    changed) by ``resumer``: what ran, the report, its decisions."""
    ACTED.clear()
    harness = Harness(HarnessConfig(mode="shadow"), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("pay_out", {"user_id": "u-42", "amount": 90})), text("Refund handled."),
                           text("Refund handled.")])
    agent = make_agent(model, harness.instrument(Toolkit(tools=[FunctionTool(pay_out, permission=ASK)])),
                       middlewares=harness.middlewares())
    with harness.acting_for(ALICE):
        asked = _asked(await drain(agent, UserMsg("user", "refund me")))
    call = asked.tool_calls[0]
    if edit is not None:
        call = call.model_copy(update={"input": json.dumps(edit)})
    with harness.acting_for(resumer):
        await drain(agent, confirm(asked, call))
    report = harness.last_report(agent)
    assert report is not None
    return list(ACTED), report, [d for d in report.decisions if d.hook == "resume_check"]


@pytest.mark.parametrize("edit, resumer", [({"user_id": "u-42", "amount": 50}, ALICE), (None, BOB)],
                         ids=["edited_by_the_human", "confirmed_by_another"])
async def test_shadow_mode_refuses_no_confirmed_call_at_its_resume(edit: Any, resumer: Principal) -> None:
    """Shadow mode: decide and record, refuse nothing. A confirmation the
    enforcing harness refuses (arguments edited; another caller) runs as it
    would without the harness, recorded as not enforced."""
    acted, report, checks = await _shadow_resume(edit, resumer)
    amount = 90 if edit is None else 50
    assert acted == [("pay_out", amount)]
    assert checks and all(d.enforced is False for d in checks)
    assert report.refusals == {}
    if resumer is BOB:  # README: the report ends as enforcing would, and the reply goes on
        assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "refused:permission_denied")
        assert report.model_calls == 2  # the round that parked, and the resumed one: it went on


async def test_enforcing_still_refuses_an_edited_confirmation() -> None:
    """The same edit under an enforcing Harness stays refused (the control)."""
    ACTED.clear()
    harness = Harness(HarnessConfig(), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("pay_out", {"user_id": "u-42", "amount": 90})), text("No."), text("No.")])
    agent = make_agent(model, harness.instrument(Toolkit(tools=[FunctionTool(pay_out, permission=ASK)])),
                       middlewares=harness.middlewares())
    with harness.acting_for(ALICE):
        asked = _asked(await drain(agent, UserMsg("user", "refund me")))
        call = asked.tool_calls[0].model_copy(update={"input": json.dumps({"user_id": "u-42", "amount": 50})})
        with contextlib.suppress(Exception):
            await drain(agent, confirm(asked, call))
    assert ACTED == []


@pytest.mark.parametrize("resumer", [ALICE, BOB])
async def test_a_tampered_park_record_leaves_the_resume_unverified_and_still_bound(
    resumer: Principal, tmp_path: Path,
) -> None:
    """A park record whose counts do not read back: none of them is applied
    (the resume is unverified, a call needing approval is not run on it),
    and who parked it is still compared (Bob's yes acts for nobody)."""
    ACTED.clear()
    path = str(tmp_path / "shared.db")

    def worker() -> Harness:
        return Harness(HarnessConfig(store=SQLiteStore(path), tools={"pay_out": PAY_OUT}),
                       load_entry_points=False, environ={})

    model = ScriptedModel([calls(("pay_out", {"user_id": "u-42", "amount": 80})), text("Done."), text("Done.")])
    here = worker()
    agent = make_agent(model, here.instrument(Toolkit(tools=[tool(f) for f in TOOLS])), middlewares=here.middlewares())
    with here.acting_for(ALICE):
        asked = _asked(await drain(agent, UserMsg("user", "pay me 80")))
    store = SQLiteStore(path)
    written = json.loads(await store.park_get(agent.state.reply_id, deadline=None) or "{}")
    written["run"]["model_calls"] = -1
    await store.park_put(agent.state.reply_id, json.dumps(written), ttl_s=60, deadline=None)
    there = worker()
    restored = make_agent(model, there.instrument(Toolkit(tools=[tool(f) for f in TOOLS])),
                          middlewares=there.middlewares(),
                          state=AgentState.model_validate_json(agent.state.model_dump_json()))
    with there.acting_for(resumer):
        await drain(restored, confirm(asked, asked.tool_calls[0]))
    report = there.last_report(restored)
    assert report is not None
    assert ACTED == []
    assert report.model_calls >= 0
    if resumer is BOB:
        assert report.reason == "refused:permission_denied"
    else:
        assert report.refusals == {"approval_mismatch": 1}


# ------------------------------------------------------------------ round 78: the fleet's limits


def test_one_output_bound_counts_anthropics_thinking_budget_and_its_own_default() -> None:
    """AgentScope's Anthropic model sends ``max_tokens`` raised to fit its
    thinking budget (1,024 → 17,024), and 8,192 when its parameters set
    none: the daily quota's reservation counted 1,024 (and 4,096), so two
    workers spent ten times the quota. One reading bounds every use."""
    from agentscope.credential import AnthropicCredential
    from agentscope.model import AnthropicChatModel

    from agentscope_harness.fleet import max_output_tokens, output_bound

    def anthropic(**parameters: Any) -> Any:
        return AnthropicChatModel(credential=AnthropicCredential(api_key="k"), model="claude-x",
                                  parameters=AnthropicChatModel.Parameters(**parameters))

    thinking = anthropic(max_tokens=1024, thinking_enable=True, thinking_budget=16000)
    config = HarnessConfig()
    assert output_bound(thinking) == max_output_tokens(thinking, config) == 17024
    assert output_bound(anthropic()) == max_output_tokens(anthropic(), config) == 8192
    assert output_bound(anthropic(thinking_enable=True, thinking_budget=16000)) == 17024


async def test_the_daily_quota_reserves_what_a_thinking_call_may_bill(tmp_path: Path) -> None:
    """End to end, a real ``AnthropicChatModel`` (thinking budget 16,000 on
    ``max_tokens=1024``) against a mock transport, two workers on one SQLite
    file, a $0.05 daily quota: one call may bill $0.26, so none is made (two
    were, $0.50 spent)."""
    import asyncio

    import httpx2
    from agentscope.agent import Agent, InjectionConfig
    from agentscope.credential import AnthropicCredential
    from agentscope.model import AnthropicChatModel

    sent: list[int] = []

    async def handler(request: Any) -> Any:
        sent.append(json.loads(request.content)["max_tokens"])
        return httpx2.Response(200, json={
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 300, "output_tokens": 16500}})

    def worker() -> Harness:
        return Harness(HarnessConfig(store=SQLiteStore(str(tmp_path / "fleet.db")), cost=CostPolicy(
            prices={"claude-x": ModelPrice(3.0, 15.0)}, daily_quota_usd=0.05)), load_entry_points=False, environ={})

    async def reply(harness: Harness) -> RunReport:
        model = AnthropicChatModel(
            credential=AnthropicCredential(api_key="k"), model="claude-x", stream=False, max_retries=0,
            parameters=AnthropicChatModel.Parameters(max_tokens=1024, thinking_enable=True, thinking_budget=16000),
            client_kwargs={"http_client": httpx2.AsyncClient(transport=httpx2.MockTransport(handler))})
        agent = Agent(name="a", system_prompt="You help.", model=model, toolkit=harness.instrument(Toolkit()),
                      middlewares=harness.middlewares(), injection_config=InjectionConfig(enabled=False))
        with harness.acting_for(ALICE):
            await drain(agent, UserMsg("user", "hi"))
        report = harness.last_report(agent)
        assert report is not None
        return report

    reports = await asyncio.gather(reply(worker()), reply(worker()))
    assert sent == []
    assert [(r.terminal_state.value, r.reason) for r in reports] == [("incomplete", "budget")] * 2
    assert await SQLiteStore(str(tmp_path / "fleet.db")).get_spend(ALICE.key) == 0.0


@pytest.mark.parametrize("kind", _stores())
async def test_an_acquisition_cancelled_as_the_store_answers_is_given_back(kind: str, tmp_path: Path) -> None:
    """A lease or a spend hold the store granted just as its caller was
    cancelled was dropped between two ``wait_for`` tasks (the fleet's and the
    store's): neither returned nor given back, it held a user's slot for
    ``lease_s`` and their quota for the hold's TTL. Cancelled at every
    delay from 0 to 4 ms, every one is returned or given back."""
    import asyncio

    store = _store_of(kind, tmp_path)()
    harness = Harness(HarnessConfig(store=store), load_entry_points=False, environ={})
    fleet = harness.services.fleet
    key = f"runs:principal:{uuid.uuid4().hex[:6]}"
    leases: list[str] = []
    holds: list[str] = []
    for step in range(120):
        for acquire, got in ((lambda: store.lease_acquire(key, 10_000, 300), leases),
                             (lambda: store.reserve_spend(key, 0.01, 1e9, ttl_s=600), holds)):
            task = asyncio.ensure_future(fleet._call(acquire, "limits store", None))
            await asyncio.sleep((step % 40) / 10_000)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                got.append(await task)
    for lease in leases:
        await store.lease_release(key, lease)
    for hold in holds:
        await store.settle_spend(key, hold, 0.0)
    # the give-backs are made in the background: waited for (a loaded machine is slow), never assumed
    lease = hold = None
    for _ in range(100):
        lease = lease or await store.lease_acquire(key, 1, 300)  # no slot left taken
        hold = hold or await store.reserve_spend(key, 1.0, 1.0)  # no hold left counting
        if lease is not None and hold is not None:
            break
        await asyncio.sleep(0.05)
    assert lease is not None and hold is not None, (lease, hold)


async def _lost_leases(kind: str, store: Any) -> None:
    """The store loses every lease (a Redis restarted without persistence)."""
    if kind == "sqlite":
        import sqlite3

        with sqlite3.connect(store.path) as conn:
            conn.execute("DELETE FROM harness_leases")
        return
    import redis.asyncio as aioredis

    client = aioredis.from_url(os.environ["HARNESS_TEST_REDIS_URL"])
    async for found in client.scan_iter(f"{store.prefix}:*"):
        await client.delete(found)
    await client.aclose()


@pytest.mark.parametrize("kind", _stores())
async def test_a_limit_is_whole_again_after_the_store_lost_its_leases(kind: str, tmp_path: Path) -> None:
    """One run per principal; the store loses its leases (Redis restarted)
    while Alice's first run is in flight: the run dropped its slot for good
    and her second run was admitted beside it. The slot is taken again at
    the next renewal."""
    import asyncio

    from agentscope_harness import ConcurrencyLimit

    store_of = _store_of(kind, tmp_path)
    in_flight = [0, 0]

    async def work(q: str) -> str:
        """Work.

        Args:
            q (str): What.
        """
        in_flight[0] += 1
        in_flight[1] = max(in_flight)
        await asyncio.sleep(float(q))
        in_flight[0] -= 1
        return "done"

    def worker() -> tuple[Harness, Any]:
        store = store_of()
        harness = Harness(HarnessConfig(store=store, concurrency_limits=[
            ConcurrencyLimit(scope="principal", max_in_flight=1, lease_s=1.0)]), load_entry_points=False, environ={})
        return harness, store

    async def reply(harness: Harness, seconds: float) -> tuple[str, str]:
        model = ScriptedModel([calls(("work", {"q": str(seconds)})), text("ok")])
        agent = make_agent(model, harness.instrument(Toolkit(tools=[tool(work)])), middlewares=harness.middlewares())
        with harness.acting_for(ALICE):
            await drain(agent, UserMsg("user", "go"))
        report = harness.last_report(agent)
        assert report is not None
        return report.terminal_state.value, report.reason

    (first, store), (second, _) = worker(), worker()
    running = asyncio.ensure_future(reply(first, 3.0))
    await asyncio.sleep(0.3)
    assert await reply(second, 0.1) == ("incomplete", "concurrency_limited")
    await _lost_leases(kind, store)
    await asyncio.sleep(1.2)  # past the next renewal (every half lease)
    assert await reply(second, 0.1) == ("incomplete", "concurrency_limited")
    assert await running == ("completed", "answered")
    assert in_flight[1] == 1


# ------------------------------------------------------------------ round 79: your own hooks


SECRET = "hunter2-TOPSECRET-value"


async def fetch_config(name: str) -> str:
    """Fetch a config.

    Args:
        name (str): Which.
    """
    return f"config {name}: db_password={SECRET}"


class Escaped(BaseException):
    """A ``BaseException`` that is no ``Exception`` (as ``GeneratorExit``)."""


async def _model_read(hook: Any, **config: Any) -> tuple[list[str], RunReport]:
    from scripted import tool_messages

    harness = Harness(HarnessConfig(secret_values=[SECRET], **config), hooks=[hook],
                      load_entry_points=False, environ={})
    model = ScriptedModel([calls(("fetch_config", {"name": "prod"})), text("done"), text("done")])
    agent = make_agent(model, harness.instrument(Toolkit(tools=[tool(fetch_config)])), middlewares=harness.middlewares())
    with harness.acting_for(ALICE):
        await drain(agent, UserMsg("user", "go"))
    report = harness.last_report(agent)
    assert report is not None
    return tool_messages(model.calls[1]), report


def _writes_then_raises() -> Any:
    from agentscope_harness import harness_hook

    @harness_hook("post_tool_call", priority=100, name="annotate")
    def annotate(ctx: Any) -> None:
        ctx.result.text = "Annotated: " + ctx.result.raw_text
        raise KeyError("lookup table missing")

    return annotate


def _writes_then_times_out() -> Any:
    import asyncio

    from agentscope_harness import harness_hook

    @harness_hook("post_tool_call", priority=100, name="annotate")
    async def annotate(ctx: Any) -> None:
        ctx.result.text = "Annotated: " + ctx.result.raw_text
        await asyncio.sleep(5)

    return annotate


def _appends_a_notice() -> Any:
    from agentscope_harness import harness_hook

    @harness_hook("post_tool_call", priority=100, name="annotate")
    def annotate(ctx: Any) -> None:
        ctx.result.notices.append("raw was: " + ctx.result.raw_text + " [harness:done]")

    return annotate


@pytest.mark.parametrize("hook", [_writes_then_raises, _writes_then_times_out, _appends_a_notice],
                         ids=["write_then_raise", "write_then_time_out", "notice_appended_directly"])
async def test_what_a_hook_writes_into_a_result_is_shaped_however_it_ends(hook: Any) -> None:
    """A hook of yours that wrote the tool's raw text into the result and
    then failed (an observer fails open: the run goes on), or appended a
    notice to the list itself, put the secret in front of the model."""
    read, report = await _model_read(hook(), hook_timeout_s=0.2)
    assert read and not any(SECRET in message for message in read)
    assert any("redacted" in message for message in read)
    assert not any("[harness:done]" in message for message in read)  # a marker it wrote is defanged


@pytest.mark.parametrize("point", ["pre_tool_call", "post_tool_call"])
async def test_a_hook_raising_a_base_exception_fails_by_its_policy_and_the_tool_runs_at_most_once(point: str) -> None:
    """A hook raising a ``BaseException`` that is no ``Exception`` escaped
    the adapter: AgentScope ran the still-pending call again, thousands of
    times (a refund ran 3,378 times in 3 s), or judged it forever. It is the
    hook's failure: a safety gate refuses, an observer fails open."""
    from agentscope_harness import harness_hook

    ran: list[str] = []

    async def refund(order_id: str) -> str:
        """Refund.

        Args:
            order_id (str): The order.
        """
        ran.append(order_id)
        return "refunded"

    @harness_hook(point, priority=100, name="escaping", kind="safety" if point == "pre_tool_call" else "observer")
    def escaping(ctx: Any) -> None:
        raise Escaped()

    harness = Harness(HarnessConfig(deadline_s=30), hooks=[escaping], load_entry_points=False, environ={})
    model = ScriptedModel([calls(("refund", {"order_id": "o1"})), text("done"), text("done")])
    agent = make_agent(model, harness.instrument(Toolkit(tools=[tool(refund)])), middlewares=harness.middlewares())
    with harness.acting_for(ALICE):
        await drain(agent, UserMsg("user", "refund o1"))
    report = harness.last_report(agent)
    assert report is not None
    assert ran == ([] if point == "pre_tool_call" else ["o1"])
    assert next(d.action for d in report.decisions if d.hook == "escaping") == "error"
    if point == "pre_tool_call":
        assert report.refusals == {"policy_error": 1}


async def test_a_gates_refusal_text_is_redacted_before_the_model_reads_it() -> None:
    """A gate of yours refusing with a message that quotes a secret: the
    report and the events were redacted, the model read it whole."""
    from agentscope_harness import HookRejectSignal, harness_hook

    @harness_hook("pre_tool_call", priority=100, name="vault_gate", kind="safety")
    def vault_gate(ctx: Any) -> None:
        raise HookRejectSignal(f"refused; internal token {SECRET}", code="policy_refused")

    read, report = await _model_read(vault_gate)
    assert read and not any(SECRET in message for message in read)
    assert report.refusals == {"policy_refused": 1}


@pytest.mark.parametrize("field, value", [("breaker_cooldown_s", 0), ("hook_timeout_s", None)])
def test_a_value_that_switches_a_limit_off_is_refused_naming_its_field(field: str, value: Any) -> None:
    """``breaker_cooldown_s=0`` switched the breaker off (a dependency down
    was called 8 times of 8); ``hook_timeout_s=None`` let one async hook
    hold a reply for ever."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=field):
        HarnessConfig(**{field: value})


def test_the_hook_table_says_no_hook_runs_under_harness_enabled_0(capsys: Any) -> None:
    """``HARNESS_ENABLED=0``: no middleware, no hook runs; the table said all
    25 were enabled."""
    from agentscope_harness.cli import main

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HARNESS_ENABLED", "0")
        assert main(["hooks", "--no-entry-points", "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert table["harness_enabled"] is False
    assert not any(row["enabled"] for row in table["hooks"])


# ------------------------------------------------------------------ round 80: on today's rounds


def test_every_field_of_a_run_is_carried_or_says_why_not() -> None:
    """Round 77's record carried a hand-picked list again: repeated
    failures, the budget tier, the report's decisions and more reset on
    another worker. Every field of a run and of its facts is now carried or
    named with the reason it is not: a new field is a decision."""
    import dataclasses

    from agentscope_harness.facts import GuardState
    from agentscope_harness.run_state import RunState

    fields = {f.name for cls in (GuardState, RunState) for f in dataclasses.fields(cls)}
    carried = set(records._RUN) | set(records._FACTS)
    assert carried | set(records.NOT_CARRIED) == fields
    assert not carried & set(records.NOT_CARRIED)


@pytest.mark.parametrize("kind", _stores())
async def test_repeated_failures_and_the_trail_go_on_after_a_resume_elsewhere(kind: str, tmp_path: Path) -> None:
    """``max_identical_failures=2``: a call that failed once before the park
    ran twice more on another worker (once here), its ladder began again and
    the report lost every decision made before the park."""
    def config(store: Any) -> HarnessConfig:
        return HarnessConfig(store=store, tools={"pay_out": PAY_OUT}, max_identical_failures=2)

    def script() -> list[Any]:
        return [calls(("flaky", {"q": "x"})), calls(("pay_out", {"user_id": "u-42", "amount": 80})),
                *[calls(("flaky", {"q": "x"})) for _ in range(3)], text("done"), text("done"), text("done")]

    here = await _resumed(config, script(), _store_of(kind, tmp_path / "a"), False)
    there = await _resumed(config, script(), _store_of(kind, tmp_path / "b"), True)
    assert _outcome(*there) == _outcome(*here)
    trail = [(d.hook, d.action, d.code) for d in here[0].decisions]
    assert [(d.hook, d.action, d.code) for d in there[0].decisions] == trail
    assert ("ask_when", "ask", None) in trail  # decided before the park, kept in the report


async def test_a_notice_of_a_hook_gets_the_tools_personal_data_policy() -> None:
    """A tool with ``pii={"email": "redact"}``: a hook quoting its raw text
    in a notice (``ctx.notice``, or appended itself) gave the model the
    address the result itself had redacted."""
    from scripted import tool_messages

    from agentscope_harness import harness_hook

    async def customer(cid: str) -> str:
        """A customer.

        Args:
            cid (str): Who.
        """
        return f"customer {cid}: email jane.doe@example.com"

    @harness_hook("post_tool_call", priority=100, name="quote")
    def quote(ctx: Any) -> None:
        ctx.notice("Source said: " + ctx.result.raw_text)
        ctx.result.notices.append("Raw: " + ctx.result.raw_text)

    harness = Harness(HarnessConfig(tools={"customer": ToolPolicy(pii={"email": "redact"})}), hooks=[quote],
                      load_entry_points=False, environ={})
    model = ScriptedModel([calls(("customer", {"cid": "c1"})), text("done")])
    agent = make_agent(model, harness.instrument(Toolkit(tools=[tool(customer)])), middlewares=harness.middlewares())
    with harness.acting_for(ALICE):
        await drain(agent, UserMsg("user", "go"))
    read = tool_messages(model.calls[1])
    assert read and not any("jane.doe" in message for message in read)
    assert sum(message.count("[pii:email]") for message in read) == 3


async def test_a_lease_taken_again_as_its_run_closes_is_given_back() -> None:
    """The renewer re-took a lost lease while its run closed: the new lease
    went to the closed run's forgotten holds, never renewed nor released,
    and Alice's next reply was refused for ``lease_s``."""
    import asyncio

    from agentscope_harness import ConcurrencyLimit
    from agentscope_harness.stores import MemoryStore

    class LosingStore(MemoryStore):
        slow = False

        async def lease_acquire(self, key: str, max_in_flight: int, lease_s: float, **kw: Any) -> Any:
            if self.slow:
                await asyncio.sleep(1.0)
            return await super().lease_acquire(key, max_in_flight, lease_s, **kw)

    async def work(seconds: float) -> str:
        """Work a while.

        Args:
            seconds (float): How long.
        """
        await asyncio.sleep(seconds)
        return "worked"

    store = LosingStore()
    harness = Harness(HarnessConfig(store=store, concurrency_limits=[
        ConcurrencyLimit(scope="principal", max_in_flight=1, lease_s=2.0)]), load_entry_points=False, environ={})

    async def reply(who: Principal, script: list[Any]) -> tuple[str, str]:
        agent = make_agent(ScriptedModel(script), harness.instrument(Toolkit(tools=[tool(work)])),
                           middlewares=harness.middlewares())
        with harness.acting_for(who):
            await drain(agent, UserMsg("user", "go"))
        report = harness.last_report(agent)
        assert report is not None
        return report.terminal_state.value, report.reason

    bob = asyncio.ensure_future(reply(BOB, [calls(("work", {"seconds": 4.0})), text("B")]))  # keeps the renewer on
    alice = asyncio.ensure_future(reply(ALICE, [calls(("work", {"seconds": 0.9})), text("A")]))
    await asyncio.sleep(0.3)
    for key in [k for k in store._leases if ALICE.user_id in k]:
        store._leases.pop(key)  # the store lost Alice's lease
    store.slow = True  # the renewer's re-take answers after her run closed
    assert await alice == ("completed", "answered")
    store.slow = False
    await asyncio.sleep(0.9)
    assert await reply(ALICE, [text("again")]) == ("completed", "answered")
    assert await bob == ("completed", "answered")


def test_an_output_cap_sent_in_the_request_body_bounds_the_call() -> None:
    """``OpenAIChatModel(extra_body={"max_completion_tokens": 32000})`` sends
    32,000 over ``max_tokens=1000``: the cap, the quota and the rate read
    1,000."""
    from agentscope.credential import OpenAICredential
    from agentscope.model import OpenAIChatModel

    from agentscope_harness.fleet import max_output_tokens, output_bound

    model = OpenAIChatModel(credential=OpenAICredential(api_key="k"), model="gpt-x",
                            parameters=OpenAIChatModel.Parameters(max_tokens=1000),
                            extra_body={"max_completion_tokens": 32000})
    assert output_bound(model) == max_output_tokens(model, HarnessConfig()) == 32000
    lower = OpenAIChatModel(credential=OpenAICredential(api_key="k"), model="gpt-x",
                            parameters=OpenAIChatModel.Parameters(max_tokens=1000), extra_body={"max_tokens": 10})
    assert output_bound(lower) == 1000  # the larger of the two: what may be billed


@pytest.mark.parametrize("kind", _stores())
async def test_the_stall_ladder_goes_on_after_a_resume_elsewhere(kind: str, tmp_path: Path) -> None:
    """Every result says the same: resumed on another worker, the results
    read before the park were news again there (their shingles' hashes are
    salted per process), and the run made two more calls before it stalled."""
    def config(store: Any) -> HarnessConfig:
        return HarnessConfig(store=store, stall_rounds=2, tools={
            "search": ToolPolicy(role="retrieval"), "deep": ToolPolicy(role="retrieval", ask_when=lambda a: "costly")})

    def script() -> list[Any]:
        return [calls(("search", {"q": "1"})), calls(("search", {"q": "2"})), calls(("deep", {"q": "3"})),
                *[calls(("search", {"q": str(i)})) for i in range(4, 14)], text("done"), text("done"), text("done")]

    outcome = await _same_either_way(kind, tmp_path, config, script)
    assert outcome["end"] == ("incomplete", "stalled")


@pytest.mark.parametrize("kind", _stores())
async def test_a_reply_parked_twice_and_answered_back_where_it_first_parked_goes_on(kind: str, tmp_path: Path) -> None:
    """Worker A parks a payout; B takes the yes, pays, and parks on a second
    payout; its yes goes back to A, where the first agent is still cached:
    A resumed its stale copy of the run and refused the valid yes (one
    payout of two, a report of one model call and no tool calls)."""
    store_of = _store_of(kind, tmp_path)

    def worker() -> Harness:
        return Harness(HarnessConfig(store=store_of(), tools={"pay_out": PAY_OUT},
                                     cost=CostPolicy(prices=PRICES, max_input_tokens=10_000)),
                       load_entry_points=False, environ={})

    def agent_of(harness: Harness, model: Any, state: Any = None) -> Any:
        return make_agent(model, harness.instrument(Toolkit(tools=[tool(f) for f in TOOLS])),
                          middlewares=harness.middlewares(), **({"state": state} if state is not None else {}))

    ACTED.clear()
    model = ScriptedModel([calls(("pay_out", {"user_id": "u-42", "amount": 80}), inp=1000),
                           calls(("pay_out", {"user_id": "u-42", "amount": 90}), inp=1000),
                           text("Both paid.", inp=1000), text("Both paid.", inp=1000)])
    a, b = worker(), worker()
    first = agent_of(a, model)
    with a.acting_for(ALICE):
        asked = _asked(await drain(first, UserMsg("user", "pay")))
    there = agent_of(b, model, AgentState.model_validate_json(first.state.model_dump_json()))
    with b.acting_for(ALICE):
        asked = _asked(await drain(there, confirm(asked, asked.tool_calls[0])))
    back = agent_of(a, model, AgentState.model_validate_json(there.state.model_dump_json()))
    with a.acting_for(ALICE):
        await drain(back, confirm(asked, asked.tool_calls[0]))
    report = a.last_report(back)
    assert report is not None
    assert ACTED == [("pay_out", 80), ("pay_out", 90)]
    assert (report.terminal_state.value, report.reason) == ("completed", "answered")
    assert report.tool_calls == {"pay_out": 2} and report.input_tokens == 3000 and report.refusals == {}
    assert first is not None  # still cached on A


# ------------------------------------------------------------------ round 81: sub-agents and client tools elsewhere


def _client_lookup() -> Any:
    from agentscope.tool import ToolBase

    class ClientLookup(ToolBase):
        name = "client_lookup"
        description = "Look up an order on the user's device."
        input_schema = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
        is_concurrency_safe = False
        is_read_only = True
        is_external_tool = True

        async def check_permissions(self, tool_input: dict[str, Any], context: Any) -> PermissionDecision:
            return PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")

    return ClientLookup()


async def refund(order_id: str) -> str:
    """Refund an order.

    Args:
        order_id (str): The order.
    """
    ACTED.append(("refund", order_id))
    return f"order {order_id} refunded"


async def _client_answered(elsewhere: bool, script: list[Any], tmp_path: Path) -> RunReport:
    """Alice's reply asks her device for ``client_lookup``; its result is
    sent to this worker or (``elsewhere``) to another over the same store."""
    from agentscope.event import ExternalExecutionResultEvent, RequireExternalExecutionEvent
    from agentscope.message import ToolResultBlock

    ACTED.clear()
    path = str(tmp_path / f"client-{elsewhere}.db")

    def worker(state: Any = None) -> tuple[Harness, Any]:
        harness = Harness(HarnessConfig(store=SQLiteStore(path), tools={
            "client_lookup": ToolPolicy(role="retrieval"),
            "refund": ToolPolicy(role="mutation", requires=[Prerequisite("client_lookup", ["order_id"])]),
        }), load_entry_points=False, environ={})
        agent = make_agent(model, harness.instrument(Toolkit(tools=[_client_lookup(), tool(refund)])),
                           middlewares=harness.middlewares(), **({"state": state} if state is not None else {}))
        return harness, agent

    model = ScriptedModel(script)
    harness, agent = worker()
    with harness.acting_for(ALICE):
        items = await drain(agent, UserMsg("user", "refund A-1"))
    asked = next(i for i in items if isinstance(i, RequireExternalExecutionEvent))
    if elsewhere:
        harness, agent = worker(AgentState.model_validate_json(agent.state.model_dump_json()))
    call = asked.tool_calls[0]
    answer = ExternalExecutionResultEvent(reply_id=agent.state.reply_id, execution_results=[
        ToolResultBlock(id=call.id, name=call.name, output="A-1 ok", state="success")])
    with harness.acting_for(ALICE):
        await drain(agent, answer)
    report = harness.last_report(agent)
    assert report is not None
    return report


@pytest.mark.parametrize("elsewhere", [False, True], ids=["here", "elsewhere"])
async def test_a_client_result_answered_elsewhere_meets_a_prerequisite(elsewhere: bool, tmp_path: Path) -> None:
    """A client's result received by another worker was filed as a success
    of ``client_lookup`` with no arguments: the refund requiring the lookup
    of the same order was refused there (``prerequisite_missing``)."""
    report = await _client_answered(elsewhere, [
        calls(("client_lookup", {"order_id": "A-1"})), calls(("refund", {"order_id": "A-1"})), text("Refunded.")],
        tmp_path)
    assert ACTED == [("refund", "A-1")]
    assert report.refusals == {}


@pytest.mark.parametrize("elsewhere", [False, True], ids=["here", "elsewhere"])
async def test_a_client_call_answered_elsewhere_is_a_duplicate_when_made_again(elsewhere: bool, tmp_path: Path) -> None:
    """The same lookup made again after its result: refused as a duplicate
    here, asked of the device a second time on another worker."""
    report = await _client_answered(elsewhere, [
        calls(("client_lookup", {"order_id": "A-1"})), calls(("client_lookup", {"order_id": "A-1"})),
        text("Verified."), text("Verified.")], tmp_path)
    assert report.refusals == {"duplicate_call": 1}
    assert report.terminal_state.value == "completed"


async def test_a_resumed_sub_agent_is_one_child_of_its_lead() -> None:
    """A sub-agent parked on a payout, then resumed: the lead's report
    listed the same run twice (``waiting_input``, then ``completed``), its
    spend counted twice in the children's sum."""
    from scripted import parking_tools

    ACTED.clear()
    harness = Harness(HarnessConfig(tools={"pay_out": PAY_OUT}), load_entry_points=False, environ={})
    child = make_agent(ScriptedModel([calls(("pay_out", {"user_id": "u-42", "amount": 80})), text("Paid."),
                                      text("Paid.")]),
                       harness.instrument(Toolkit(tools=[tool(pay_out)])), middlewares=harness.middlewares(),
                       name="child")
    delegate, resume, _ = parking_tools(child)
    lead_model = ScriptedModel([calls(("delegate", {"task": "pay"})), calls(("resume", {"task": "go"})), text("Done."),
                                text("Done.")])
    lead = make_agent(lead_model, harness.instrument(Toolkit(tools=[tool(delegate), tool(resume)])),
                      middlewares=harness.middlewares(), name="lead")
    with harness.acting_for(ALICE):
        await drain(lead, UserMsg("user", "pay me"))
    report = harness.last_report(lead)
    assert report is not None
    ids = [c.run_id for c in report.children]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("resumer", [BOB, None], ids=["bob", "nobody"])
@pytest.mark.parametrize("elsewhere", [False, True], ids=["here", "elsewhere"])
async def test_a_run_another_resumed_stays_its_parkers_in_its_report(
    elsewhere: bool, resumer: Principal | None, tmp_path: Path,
) -> None:
    """Alice's parked reply answered by Bob (or nobody) acts for nobody, and
    its report is Alice's (her calls and spend are in it) wherever it was
    answered: on another worker it named Bob, or nobody."""
    def config(store: Any) -> HarnessConfig:
        return HarnessConfig(store=store, tools={"pay_out": PAY_OUT})

    ACTED.clear()
    model = ScriptedModel([calls(("pay_out", {"user_id": "u-42", "amount": 80})), text("Paid."), text("Paid.")])
    store_of = _store_of("sqlite", tmp_path)
    here = Harness(config(store_of()), load_entry_points=False, environ={})
    agent = make_agent(model, here.instrument(Toolkit(tools=[tool(f) for f in TOOLS])), middlewares=here.middlewares())
    with here.acting_for(ALICE):
        asked = _asked(await drain(agent, UserMsg("user", "pay me 80")))
    there = here
    if elsewhere:
        there = Harness(config(store_of()), load_entry_points=False, environ={})
        agent = make_agent(model, there.instrument(Toolkit(tools=[tool(f) for f in TOOLS])),
                           middlewares=there.middlewares(),
                           state=AgentState.model_validate_json(agent.state.model_dump_json()))
    with there.acting_for(resumer) if resumer is not None else contextlib.nullcontext():
        await drain(agent, confirm(asked, asked.tool_calls[0]))
    report = there.last_report(agent)
    assert report is not None
    assert ACTED == []
    assert report.reason == "refused:permission_denied"
    assert report.principal == ALICE.model_dump()


# ------------------------------------------------------------------ round 82: budgets


@pytest.mark.parametrize("stream", [False, True])
async def test_a_sub_agent_without_a_cost_policy_is_charged_to_its_leads_cap(stream: bool) -> None:
    """The lead caps $0.05; its sub-agent runs under a Harness with no cost
    policy, its provider reporting no usage: the estimate went to no run
    (nothing of this Harness prices it), and the lead spent three times its
    cap reporting $0.017. Every run that prices the call is charged it."""
    from scripted import run

    answer = "The kettle ships Monday. " * 160  # 4,000 characters: ~1,000 output tokens

    def no_usage(turn: Any) -> Any:
        response = text(answer)
        response.usage = None
        return response

    lead_harness = Harness(HarnessConfig(cost=CostPolicy(cap_usd=0.05, prices={"big": ModelPrice(10.0, 30.0)})),
                           load_entry_points=False, environ={})
    sub_harness = Harness(HarnessConfig(), load_entry_points=False, environ={})
    sub_model = ScriptedModel(no_usage, model="big", stream=stream)
    sub = make_agent(sub_model, sub_harness.instrument(Toolkit(tools=[tool(lookup)])),
                     middlewares=sub_harness.middlewares(), name="researcher")

    async def delegate(task: str) -> str:
        """Ask the researcher.

        Args:
            task (str): What to research.
        """
        said = await sub.reply(UserMsg("lead", task))
        return (said.get_text_content() or "")[:40]

    asked = iter(range(1, 100))
    lead_model = ScriptedModel(lambda turn: calls(("delegate", {"task": f"t{next(asked)}"})), model="big")
    lead = make_agent(lead_model, lead_harness.instrument(Toolkit(tools=[tool(delegate)])),
                      middlewares=lead_harness.middlewares(), name="lead")
    with lead_harness.acting_for(ALICE):
        await run(lead, "research kettles")
    report = lead_harness.last_report(lead)
    assert report is not None
    served = len(sub_model.calls) * ModelPrice(10.0, 30.0).usd(150, len(answer) // 4)
    assert report.output_tokens >= len(sub_model.calls) * (len(answer) // 4)
    assert report.spent_usd >= served * 0.9
    assert (report.terminal_state.value, report.reason) == ("incomplete", "budget")
    assert len(sub_model.calls) <= 2


# ------------------------------------------------------------------ round 83: on rounds 80-82


async def test_an_approval_used_elsewhere_never_runs_again_once_its_records_expired() -> None:
    """Alice's yes ran the payout on worker B; the same yes sent again to
    worker A, where her agent is still parked, after the park's record and
    its claim expired (``PARK_TTL_S``): it paid a second time."""
    from agentscope_harness.stores import PARK_TTL_S, MemoryStore

    ACTED.clear()
    now = [1000.0]
    store = MemoryStore(clock=lambda: now[0])
    model = ScriptedModel([calls(("pay_out", {"user_id": "u-42", "amount": 80})), *[text("Done.")] * 6])

    def agent_of(harness: Harness, state: Any = None) -> Any:
        return make_agent(model, harness.instrument(Toolkit(tools=[tool(pay_out)])), middlewares=harness.middlewares(),
                          **({"state": state} if state is not None else {}))

    a = Harness(HarnessConfig(store=store, tools={"pay_out": PAY_OUT}), load_entry_points=False, environ={})
    b = Harness(HarnessConfig(store=store, tools={"pay_out": PAY_OUT}), load_entry_points=False, environ={})
    kept = agent_of(a)
    with a.acting_for(ALICE):
        asked = _asked(await drain(kept, UserMsg("user", "pay me 80")))
    there = agent_of(b, AgentState.model_validate_json(kept.state.model_dump_json()))
    with b.acting_for(ALICE):
        await drain(there, confirm(asked, asked.tool_calls[0]))
    assert ACTED == [("pay_out", 80)]
    now[0] += PARK_TTL_S + 60
    with a.acting_for(ALICE):
        await drain(kept, confirm(asked, asked.tool_calls[0]))
    assert ACTED == [("pay_out", 80)]
    report = a.last_report(kept)
    assert report is not None and report.reason == "refused:permission_denied"


async def test_reading_a_restored_context_again_never_holds_the_loop() -> None:
    """A run restored with hundreds of results in its context reads them
    again for novelty: the event loop ran between them (it was held 0.77 s
    for 500 results of 16 KB); only its own reply's, as the run that never
    moved knew them."""
    import asyncio

    from agentscope.message import Msg, ToolCallBlock, ToolResultBlock

    from agentscope_harness.lifecycle import _recall_results

    blocks: list[Any] = []
    for i in range(200):
        blocks.append(ToolCallBlock(id=f"c{i}", name="lookup", input=json.dumps({"q": f"query {i}"})))
        blocks.append(ToolResultBlock(id=f"c{i}", name="lookup", output=f"result {i}: " + "amber basil cedar " * 500,
                                      state="success"))
    earlier = Msg(name="shop", role="assistant", content=[
        ToolCallBlock(id="e1", name="lookup", input=json.dumps({"q": "earlier"})),
        ToolResultBlock(id="e1", name="lookup", output="an earlier reply's result, its own run's", state="success")])
    agent = make_agent(ScriptedModel([text("x")]), Toolkit(tools=[tool(lookup)]))
    agent.state.reply_id = "this-reply"
    agent.state.context = [earlier, Msg(name="shop", role="assistant", content=blocks, id="this-reply")]
    run = _blank_run()
    ticks = [0]

    async def ticker() -> None:
        while True:
            ticks[0] += 1
            await asyncio.sleep(0)

    ticking = asyncio.ensure_future(ticker())
    await asyncio.sleep(0)
    try:
        await _recall_results(run, agent, 4000)
    finally:
        ticking.cancel()
    assert ticks[0] >= 100
    assert not run.facts.novelty.add("result 7: " + "amber basil cedar " * 500, echo={"q": "query 7"})
    # the run that never moved knew only its own reply's results (round 84)
    assert run.facts.novelty.add("an earlier reply's result, its own run's", echo={"q": "earlier"})


async def test_a_park_whose_record_was_never_written_is_answered_here_once() -> None:
    """The store did not answer when the park was recorded: the record was
    never written, not expired, so the yes in this process runs the call
    (claimed, once), and the same yes sent again acts for nobody."""
    from agentscope_harness.stores import MemoryStore

    class DownAtThePark(MemoryStore):
        down = True

        async def park_put(self, *args: Any, **kw: Any) -> None:
            if self.down:
                raise ConnectionError("store down")
            await super().park_put(*args, **kw)

    ACTED.clear()
    store = DownAtThePark()
    harness = Harness(HarnessConfig(store=store, tools={"pay_out": PAY_OUT}), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("pay_out", {"user_id": "u-42", "amount": 80})), *[text("Done.")] * 4])
    agent = make_agent(model, harness.instrument(Toolkit(tools=[tool(pay_out)])), middlewares=harness.middlewares())
    with harness.acting_for(ALICE):
        asked = _asked(await drain(agent, UserMsg("user", "pay me 80")))
        store.down = False
        await drain(agent, confirm(asked, asked.tool_calls[0]))
    assert ACTED == [("pay_out", 80)]
    report = harness.last_report(agent)
    assert report is not None and report.terminal_state.value == "completed"


# ------------------------------------------------------------------ round 84: on round 83


async def test_a_second_park_whose_write_failed_is_answered_here() -> None:
    """One reply parks twice; the store refuses the second park's record:
    the store's record is the first park's, of this same run (older, not
    newer), so Alice's yes to the second runs it (it was refused as stale)."""
    from agentscope_harness.stores import MemoryStore

    class FailsOnce(MemoryStore):
        fail = False

        async def park_put(self, *args: Any, **kw: Any) -> None:
            if self.fail:
                self.fail = False
                raise ConnectionError("blip")
            await super().park_put(*args, **kw)

    ACTED.clear()
    store = FailsOnce()
    harness = Harness(HarnessConfig(store=store, tools={"pay_out": PAY_OUT}), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("pay_out", {"user_id": "u-42", "amount": 80})),
                           calls(("pay_out", {"user_id": "u-42", "amount": 90})), *[text("Done.")] * 4])
    agent = make_agent(model, harness.instrument(Toolkit(tools=[tool(pay_out)])), middlewares=harness.middlewares())
    with harness.acting_for(ALICE):
        asked = _asked(await drain(agent, UserMsg("user", "pay me twice")))
        store.fail = True
        asked = _asked(await drain(agent, confirm(asked, asked.tool_calls[0])))
        await drain(agent, confirm(asked, asked.tool_calls[0]))
    assert ACTED == [("pay_out", 80), ("pay_out", 90)]
    report = harness.last_report(agent)
    assert report is not None and (report.terminal_state.value, report.reason) == ("completed", "answered")


async def test_a_park_held_longer_than_its_records_live_acts_for_nobody() -> None:
    """A park this process has held longer than ``PARK_TTL_S`` has outlived
    its record and its claim in the store, whatever its write answered (one
    that timed out may have landed, and been answered elsewhere): its yes
    acts for nobody."""
    from agentscope_harness.stores import PARK_TTL_S, MemoryStore

    ACTED.clear()
    harness = Harness(HarnessConfig(store=MemoryStore(), tools={"pay_out": PAY_OUT}), load_entry_points=False,
                      environ={})
    model = ScriptedModel([calls(("pay_out", {"user_id": "u-42", "amount": 80})), *[text("Done.")] * 4])
    agent = make_agent(model, harness.instrument(Toolkit(tools=[tool(pay_out)])), middlewares=harness.middlewares())
    with harness.acting_for(ALICE):
        asked = _asked(await drain(agent, UserMsg("user", "pay me 80")))
        parked = harness.table.get(agent.state.reply_id)
        assert parked is not None
        parked.park_recorded = False  # its write timed out (it may have landed)
        parked.parked_at -= PARK_TTL_S + 1
        await drain(agent, confirm(asked, asked.tool_calls[0]))
    assert ACTED == []
    report = harness.last_report(agent)
    assert report is not None and report.reason == "refused:permission_denied"
