"""Red team, round 56 (on rounds 54-55, and items left in round 55).

1. pydantic reads ``True`` as 1 in a number field: ``Ledger(cap=True)`` was
   a cap of one unit, ``max_tool_calls=True`` one call, ``deadline_s=True``
   one second; a boolean in a number field is refused, named;
2. a policy file of ``null`` loaded as the defaults (an empty file still does);
3. two calls of one turn under one id (a provider that numbers its calls),
   behind an outer middleware that awaits: the second call's judgement took
   the first's place, so ``search``'s result was recorded as
   ``lookup_order``'s success and ``cancel_order`` passed its prerequisite
   with no lookup ever run; a call under an id the run holds is refused;
4. the ``prerequisite_missing`` sentinel quoted values as Python writes them
   (``('a', 'b')``, ``True``, ``None``): it quotes JSON, as the model writes;
5. one caller's arguments opened a tool's breaker for everyone: three calls
   of one batch to closed ports (a fetch tool whose arguments choose the
   endpoint) were three connection errors; a run's failures of a tool now
   count once towards its breaker (the rest towards the run's own);
6. a sub-agent a tool started in a background task, still running when its
   lead settled (a cancelled lead: mid-way through a transfer), was in no
   report of the lead: it is in ``in_flight``, and in ``children`` once it ends;
7. shadow-mode reports: an unpriced model and the request-token cap said
   ``completed`` where a USD cap said ``incomplete``: each ends the report as
   enforcing would, and the user still gets the model's answer.

Real ``Agent``s, real tools in real ``Toolkit``s.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest
from agentscope.message import UserMsg
from agentscope.middleware import MiddlewareBase
from agentscope.tool import Toolkit
from pydantic import ValidationError
from scripted import ScriptedModel, calls, make_agent, run, text, tool, tool_messages

import agentscope_harness.fleet as fleet_module
import agentscope_harness.testing as harness_testing
from agentscope_harness import (
    ConcurrencyLimit,
    CostPolicy,
    Harness,
    HarnessConfig,
    Ledger,
    Prerequisite,
    Principal,
    RateLimit,
    ToolPolicy,
)
from agentscope_harness.cli import CliError, load_config
from agentscope_harness.stores import SQLiteStore

U42 = Principal(user_id="u-42")


@pytest.mark.parametrize(("make", "field"), [
    (lambda: Ledger(cap=True), "cap"),
    (lambda: Ledger(cap=5, soft_at=False), "soft_at"),
    (lambda: HarnessConfig(max_tool_calls=True), "max_tool_calls"),
    (lambda: HarnessConfig(deadline_s=True), "deadline_s"),
    (lambda: CostPolicy(cap_usd=True), "cap_usd"),
    (lambda: ToolPolicy(units=True), "units"),
    (lambda: CostPolicy(tiers=(0.5, 0.2, False)), "tiers"),  # round 90: a rung at 0, inside a tuple
])
def test_a_boolean_in_a_number_field_is_refused_named(make: Any, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        make()
    assert caught.value.errors()[0]["loc"][-1] == field
    assert "boolean" in str(caught.value)


def test_boolean_fields_still_take_booleans() -> None:
    config = HarnessConfig(fence=False, record_raw=True, require_finish_tool=False)
    assert (config.fence, config.record_raw, config.require_finish_tool) == (False, True, False)


@pytest.mark.parametrize(("name", "text"), [
    ("p.json", "null"), ("p.yaml", "null\n"), ("p.yml", "~\n"), ("p.yaml", "--- !!null\n"), ("p.yaml", "--- null\n"),
])
def test_a_policy_file_of_null_is_refused(tmp_path: Path, name: str, text: str) -> None:
    policy = tmp_path / name
    policy.write_text(text)
    with pytest.raises(CliError, match="must be a mapping of HarnessConfig fields, not null"):
        load_config(policy)


@pytest.mark.parametrize("text", ["", "# nothing set yet\n", "---\n"])
def test_an_empty_yaml_policy_is_the_defaults(tmp_path: Path, text: str) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(text)
    assert load_config(policy) == HarnessConfig()


# ------------------------------------------------------------ call ids


class AwaitingAudit(MiddlewareBase):
    """An ordinary outer middleware that awaits before passing a call on
    (an audit log's write)."""

    async def get_middleware_key(self) -> str:
        return "audit"

    async def on_acting(self, agent: Any, input_kwargs: dict, next_handler: Any) -> AsyncGenerator:
        await asyncio.sleep(0.01)
        async for item in next_handler(**input_kwargs):
            yield item


def _shop(ran: list[tuple[str, str]]) -> list[Any]:
    async def search(q: str) -> str:
        """Search the catalogue.

        Args:
            q (str): The query.
        """
        ran.append(("search", q))
        return f"results for {q}"

    async def lookup_order(order_id: str, user_id: str) -> str:
        """Look up an order.

        Args:
            order_id (str): The order.
            user_id (str): Its owner.
        """
        ran.append(("lookup_order", order_id))
        await asyncio.sleep(0.05)
        return f"order {order_id}: paid"

    async def cancel_order(order_id: str, user_id: str) -> str:
        """Cancel an order.

        Args:
            order_id (str): The order.
            user_id (str): Its owner.
        """
        ran.append(("cancel_order", order_id))
        return f"order {order_id} cancelled"

    return [search, lookup_order, cancel_order]


SHOP_POLICY = {
    "lookup_order": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"}),
    "cancel_order": ToolPolicy(
        role="mutation", identity_args={"user_id": "user_id"},
        requires=[Prerequisite(tool="lookup_order", same_args=["order_id"])],
    ),
}


@pytest.mark.parametrize("outer", [True, False])
async def test_two_calls_under_one_id_never_swap_judgements(monkeypatch: Any, outer: bool) -> None:
    """DESIGN 4.1: a call is judged on exactly what the tool receives. With
    an awaiting outer middleware the two calls of one turn are judged before
    either runs: the second (same id) is refused, the first runs as judged,
    and the cancel finds no lookup. Without one, they run one after the
    other and both run."""
    ran: list[tuple[str, str]] = []
    h = Harness(HarnessConfig(tools=SHOP_POLICY), load_entry_points=False)
    toolkit = h.instrument(Toolkit(tools=[tool(f) for f in _shop(ran)]))
    model = ScriptedModel([
        calls(("search", {"q": "shoes"}), ("lookup_order", {"order_id": "A-9", "user_id": "u-42"})),
        calls(("cancel_order", {"order_id": "A-9", "user_id": "u-42"})),
        text("Done."),
    ])
    ids = iter(["call_0", "call_0", "call_1"])  # as the model plays its turns
    monkeypatch.setattr(harness_testing, "_call_id", lambda: next(ids))
    middlewares = [AwaitingAudit(), *h.middlewares()] if outer else h.middlewares()
    agent = make_agent(model, toolkit, middlewares=middlewares)
    with h.acting_for(U42):
        await run(agent, "cancel A-9")
    report = h.last_report(agent)
    told = tool_messages(model.calls[1])
    if not outer:
        assert ran == [("search", "shoes"), ("lookup_order", "A-9"), ("cancel_order", "A-9")]
        return
    assert ran == [("search", "shoes")]
    assert any(t.startswith("[harness:duplicate_call] The call to lookup_order was not made") for t in told)
    assert any('tool="search"' in t and "results for shoes" in t for t in told)
    assert not any('tool="lookup_order"' in t for t in told)
    assert report.tool_calls == {"search": 1}
    assert report.refusals == {"duplicate_call": 1, "prerequisite_missing": 1}
    assert [d.hook for d in report.decisions if d.code == "duplicate_call"] == ["call_id_check"]


async def test_the_prerequisite_sentinel_quotes_values_as_json() -> None:
    async def quote(items: list[str], options: dict, express: bool, note: str | None = None) -> str:
        """Quote a shipment.

        Args:
            items (list[str]): The items.
            options (dict): Options.
            express (bool): Express delivery.
            note (str | None): A note.
        """
        return "quoted"

    async def ship(items: list[str], options: dict, express: bool, note: str | None = None) -> str:
        """Ship it.

        Args:
            items (list[str]): The items.
            options (dict): Options.
            express (bool): Express delivery.
            note (str | None): A note.
        """
        return "shipped"

    same = ["items", "options", "express", "note"]
    h = Harness(HarnessConfig(tools={"ship": ToolPolicy(role="mutation", requires=[Prerequisite("quote", same)])}),
                load_entry_points=False)
    toolkit = h.instrument(Toolkit(tools=[tool(quote), tool(ship)]))
    args = {"items": ["a", "b"], "options": {"gift": True}, "express": False, "note": None}
    model = ScriptedModel([calls(("ship", args)), text("x")])
    with h.acting_for(U42):
        await run(make_agent(model, toolkit, middlewares=h.middlewares()), "ship")
    assert tool_messages(model.calls[-1])[-1] == (
        '[harness:prerequisite_missing] Call quote for items=["a", "b"], options={"gift": true}, '
        "express=false, note=null first and check its result before calling ship."
    )


# ------------------------------------------------------------ breaker


async def test_one_callers_batch_of_failures_does_not_open_the_breaker_for_everyone() -> None:
    """README 'The breaker': one caller's arguments cannot deny a tool to
    everyone. Bob's batch fails three times (connection refused on the ports
    he chose); Alice's call still runs. Bob's own run goes without it."""
    ran: list[int] = []

    async def fetch(host: str, port: int) -> str:
        """Fetch a page.

        Args:
            host (str): The host.
            port (int): The port.
        """
        ran.append(port)
        await asyncio.sleep(0.01)  # connecting: the batch's other calls are judged meanwhile
        if port != 443:
            raise ConnectionRefusedError(f"connection refused: {host}:{port}")
        return "<html>welcome</html>"

    h = Harness(HarnessConfig(breaker_failures=3), load_entry_points=False)
    toolkit = h.instrument(Toolkit(tools=[tool(fetch)]))
    bob = ScriptedModel([
        calls(*[("fetch", {"host": "shop.example", "port": p}) for p in (1, 2, 3)]),
        calls(("fetch", {"host": "shop.example", "port": 4})),
        text("nothing"),
    ])
    with h.acting_for(Principal(user_id="bob")):
        await run(make_agent(bob, toolkit, middlewares=h.middlewares()), "fetch")
    assert ran == [1, 2, 3]  # his fourth call is refused in his own run
    assert tool_messages(bob.calls[2])[-1].startswith("[harness:dependency_down]")
    assert h.breakers["fetch"].opened_at is None

    alice = ScriptedModel([calls(("fetch", {"host": "shop.example", "port": 443})), text("done")])
    agent = make_agent(alice, toolkit, middlewares=h.middlewares())
    with h.acting_for(Principal(user_id="alice")):
        await run(agent, "fetch")
    assert ran[-1] == 443 and "welcome" in tool_messages(alice.calls[1])[-1]
    assert h.last_report(agent).refusals == {}


# ------------------------------------------------------------ background sub-agents


def _payment_tools(ran: list[str]) -> tuple[Any, Any]:
    """A transfer taking 0.3 s (``ran`` says it started, then finished) and a wait."""
    async def transfer(amount: float) -> str:
        """Transfer money.

        Args:
            amount (float): USD.
        """
        ran.append("start")
        await asyncio.sleep(0.3)
        ran.append("done")
        return "transferred"

    async def slow(seconds: float) -> str:
        """Wait.

        Args:
            seconds (float): How long.
        """
        await asyncio.sleep(seconds)
        return "ok"

    return transfer, slow


def _spawner(agent: Any, background: list[asyncio.Task[Any]], caller: str) -> Any:
    """A tool starting ``agent``'s reply in a background task."""
    async def spawn(task: str) -> str:
        """Start a sub-agent in the background.

        Args:
            task (str): What it should do.
        """
        background.append(asyncio.create_task(agent.reply(UserMsg(caller, task))))
        return "started"

    return spawn


async def _cancelled_mid_transfer(h: Harness, lead: Any, ran: list[str]) -> None:
    """The lead's reply, cancelled once the transfer it set off is under way."""
    with h.acting_for(U42):
        reply = asyncio.create_task(run(lead, "pay the supplier"))
        while ran != ["start"]:
            await asyncio.sleep(0.01)
        reply.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reply


async def test_a_background_sub_agent_outliving_its_lead_is_in_the_leads_report() -> None:
    """DESIGN 3.1: ``in_flight`` holds the side effects that may still
    happen, ``children`` the nested runs. The lead is cancelled while the
    sub-agent it started in the background is transferring money."""
    ran: list[str] = []

    transfer, slow = _payment_tools(ran)

    h = Harness(HarnessConfig(deadline_s=30), load_entry_points=False)
    child = make_agent(ScriptedModel([calls(("transfer", {"amount": 500})), text("sent")]), [transfer],
                       h.middlewares(), name="payer")
    background: list[asyncio.Task[Any]] = []

    lead = make_agent(ScriptedModel([calls(("spawn", {"task": "pay"})), calls(("slow", {"seconds": 5})), text("ok")]),
                      [_spawner(child, background, "lead"), slow], h.middlewares(), name="lead")
    await _cancelled_mid_transfer(h, lead, ran)
    report = h.last_report(lead)
    assert report.terminal_state.value == "cancelled"
    child_run = report.in_flight[1].split(":")[2]
    assert report.in_flight[0].startswith("slow:")
    assert report.in_flight[1:] == [f"sub_run:payer:{child_run}", report.in_flight[2]]
    assert report.in_flight[2].startswith("payer/transfer:call_")
    assert report.children == []
    await background[0]
    assert ran == ["start", "done"]
    assert [(c.agent, c.run_id, c.terminal_state.value) for c in h.last_report(lead).children] == [
        ("payer", child_run, "completed"),
    ]


async def test_a_background_sub_sub_agent_joins_the_leads_report_under_its_parent() -> None:
    """Round 57: a grandchild that settled after its parent was added to the
    parent's own report, not to the copy in the lead's report."""
    ran: list[str] = []

    transfer, slow = _payment_tools(ran)

    h = Harness(HarnessConfig(deadline_s=30), load_entry_points=False)
    background: list[asyncio.Task[Any]] = []
    payer = make_agent(ScriptedModel([calls(("transfer", {"amount": 5})), text("sent")]), [transfer],
                       h.middlewares(), name="payer")


    mid = make_agent(ScriptedModel([calls(("spawn", {"task": "pay"})), text("mid done")]),
                     [_spawner(payer, background, "mid")], h.middlewares(), name="mid")
    lead = make_agent(ScriptedModel([calls(("spawn", {"task": "pay"})), calls(("slow", {"seconds": 5})), text("ok")]),
                      [_spawner(mid, background, "lead"), slow], h.middlewares(), name="lead")
    await _cancelled_mid_transfer(h, lead, ran)
    await asyncio.gather(*background)
    assert ran == ["start", "done"]
    assert [(c.agent, [g.agent for g in c.children]) for c in h.last_report(lead).children] == [("mid", ["payer"])]


# ------------------------------------------------------------ the refusal ladder


_ORDERS_POLICY = HarnessConfig(tools={
    "search": ToolPolicy(role="retrieval"),
    "lookup_order": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"}),
})


def _order_tools() -> Toolkit:
    """A search whose every result is new, and an identity-bound lookup."""
    async def search(q: str) -> str:
        """Search the catalogue.

        Args:
            q (str): The query.
        """
        return f"results for {q}: " + " ".join(f"n{q}{j}" for j in range(20))

    async def lookup_order(order_id: str, user_id: str) -> str:
        """Look up an order.

        Args:
            order_id (str): The order.
            user_id (str): Its owner.
        """
        return f"order {order_id}: paid"

    return Toolkit(tools=[tool(search), tool(lookup_order)])


def _attack(n: int) -> tuple[str, dict[str, Any]]:
    return ("lookup_order", {"order_id": f"o{n}", "user_id": f"u-{n + 100}"})


def _work(n: int) -> tuple[str, dict[str, Any]]:
    return ("search", {"q": f"z{n}"})


@pytest.mark.parametrize(("pattern", "most_calls"), [
    (lambda n: calls(_attack(n), _work(n)), 5),  # round 57: an attempt beside new work, every round
    (lambda n: calls(_attack(n)) if n % 2 == 0 else calls(_work(n)), 5),  # round 59: every other round
    (lambda n: calls(_attack(n), _work(n)) if n % 2 == 0 else calls(_work(n)), 5),
    (lambda n: calls(_attack(n)) if n % 4 == 0 else calls(_work(n)), 13),  # round 60: waiting out stall_rounds
], ids=["beside", "alternating", "beside-then-work", "every-fourth"])
async def test_another_users_lookup_amid_new_work_is_still_stopped(pattern: Any, most_calls: int) -> None:
    """README: an ignored ``permission_denied`` is stopped in 3-4 model
    calls. New work beside each attempt (round 57), or between two (round
    59), reset the ladder: the run went on to AgentScope's ``max_iters``."""
    counter = iter(range(1000))


    h = Harness(_ORDERS_POLICY, load_entry_points=False)
    model = ScriptedModel([lambda n_call: pattern(next(counter))], repeat=True)
    agent = make_agent(model, h.instrument(_order_tools()), middlewares=h.middlewares())
    with h.acting_for(U42):
        await run(agent, "show me order o1")
    report = h.last_report(agent)
    assert len(model.calls) <= most_calls
    assert (report.terminal_state.value, report.reason) == ("incomplete", "refused:permission_denied")
    assert "lookup_order" not in report.tool_calls


async def test_two_refusals_rounds_of_work_apart_do_not_end_a_productive_run() -> None:
    """Round 58: the first fix kept a ``permission_denied`` for the whole
    run, so a second one (another tool, 12 productive rounds later) ended it."""

    script = [calls(("lookup_order", {"order_id": "o1", "user_id": "u-9"})),
              calls(("lookup_order", {"order_id": "o1", "user_id": "u-42"})),
              *[calls(("search", {"q": f"kettle {i}"})) for i in range(12)],
              calls(("lookup_order", {"order_id": "o2", "user_id": "u-7"})),
              *[calls(("search", {"q": f"tea {i}"})) for i in range(3)],
              text("Here is the summary.")]
    h = Harness(_ORDERS_POLICY, load_entry_points=False)
    model = ScriptedModel(script)
    agent = make_agent(model, h.instrument(_order_tools()), middlewares=h.middlewares())
    with h.acting_for(U42):
        _, final = await run(agent, "summarise my order")
    report = h.last_report(agent)
    assert (report.terminal_state.value, report.refusals) == ("completed", {"permission_denied": 2})
    assert final.get_text_content() == "Here is the summary." and len(model.calls) == len(script)


# ------------------------------------------------------------ shadow reports


async def _search(q: str) -> str:
    """Search the catalogue.

    Args:
        q (str): The query.
    """
    return f"results for {q}"


@pytest.mark.parametrize(("cost", "reason"), [
    (CostPolicy(cap_usd=0.0001, prices={"scripted": (100.0, 100.0)}), "budget"),
    (CostPolicy(cap_usd=1.0, prices={"another-model": (1.0, 1.0)}), "unpriced_model"),
    (CostPolicy(max_request_input_tokens=5), "budget"),
])
@pytest.mark.parametrize("mode", ["shadow", "enforce"])
async def test_a_shadow_report_ends_as_enforcing_would(cost: CostPolicy, reason: str, mode: str) -> None:
    """README 'Shadow mode': the report ends as enforcing would have ended
    the run; the user gets the model's answer (enforcing: the fallback)."""
    h = Harness(HarnessConfig(mode=mode, cost=cost), load_entry_points=False, environ={})
    model = ScriptedModel([calls(("search", {"q": "kettle"})), text("The K2 kettle.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(_search)])), middlewares=h.middlewares())
    with h.acting_for(U42):
        _, final = await run(agent, "which kettle?")
    report = h.last_report(agent)
    assert (report.terminal_state.value, report.reason) == ("incomplete", reason)
    if mode == "shadow":
        assert final.get_text_content() == "The K2 kettle."
        assert len(model.calls) == 2
        assert not any(d.enforced for d in report.decisions if d.hook == "budget_router")
    else:
        assert final.get_text_content() != "The K2 kettle."


async def test_a_run_that_failed_with_a_tool_never_gets_its_half_open_probe() -> None:
    """Round 57: a failed probe skipped the one-failure-per-run count, so one
    lead run, through a fresh sub-agent reply each cooldown, won the probe,
    failed it on a port it chose, and reopened the breaker for everyone."""
    ran: list[int] = []

    async def fetch(host: str, port: int) -> str:
        """Fetch a page.

        Args:
            host (str): The host.
            port (int): The port.
        """
        ran.append(port)
        if port != 443:
            raise ConnectionRefusedError(f"connection refused: {host}:{port}")
        return "<html>welcome</html>"

    h = Harness(HarnessConfig(breaker_failures=1, breaker_cooldown_s=0.05), load_entry_points=False)
    toolkit = h.instrument(Toolkit(tools=[tool(fetch)]))
    outage = ScriptedModel([calls(("fetch", {"host": "shop.example", "port": 8080})), text("down")])
    with h.acting_for(Principal(user_id="carol")):
        await run(make_agent(outage, toolkit, middlewares=h.middlewares()), "fetch")
    assert h.breakers["fetch"].opened_at is not None

    fetcher_model = ScriptedModel([calls(("fetch", {"host": "shop.example", "port": 1})), text("no")] * 2)
    fetcher = make_agent(fetcher_model, toolkit, middlewares=h.middlewares(), name="fetcher")

    async def delegate(task: str) -> str:
        """Ask the fetcher, once the breaker has cooled down.

        Args:
            task (str): What to fetch.
        """
        await asyncio.sleep(0.06)
        return (await fetcher.reply(UserMsg("lead", task))).get_text_content() or ""

    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "a"})), calls(("delegate", {"task": "b"})),
                                     text("done")]), [delegate], h.middlewares(), name="lead")
    with h.acting_for(Principal(user_id="bob")):
        await run(lead, "fetch")
    assert ran == [8080, 1]  # his second sub-agent was refused the probe
    assert tool_messages(fetcher_model.calls[-1])[-1].startswith("[harness:dependency_down]")

    alice = ScriptedModel([calls(("fetch", {"host": "shop.example", "port": 443})), text("ok")])
    with h.acting_for(Principal(user_id="alice")):
        await run(make_agent(alice, toolkit, middlewares=h.middlewares(), name="alice"), "fetch")
    assert ran[-1] == 443 and "welcome" in tool_messages(alice.calls[1])[-1]


async def test_a_failed_run_meeting_a_due_probe_leaves_it_to_another_process(tmp_path: Path) -> None:
    """Round 58: a run that failed with a tool (a lead whose sub-agent met
    the outage) claimed the shared probe from the store and could not use
    it, so every other process was refused for the probe's lease (60 s)
    although the dependency was back. Two Harnesses on one SQLite file
    stand for two processes."""
    up = {"now": False}
    ran: list[str] = []

    async def fetch(host: str) -> str:
        """Fetch a page.

        Args:
            host (str): The host.
        """
        ran.append(host)
        if not up["now"]:
            raise ConnectionError(f"connection reset by {host}")
        return "<html>welcome</html>"

    def worker() -> tuple[Harness, Toolkit]:
        h = Harness(HarnessConfig(breaker_failures=2, breaker_cooldown_s=0.05,
                                  store=SQLiteStore(tmp_path / "fleet.db")), load_entry_points=False)
        return h, h.instrument(Toolkit(tools=[tool(fetch)]))

    (one, tools_one), (two, tools_two) = worker(), worker()
    down = ScriptedModel([calls(("fetch", {"host": "api.example"})), text("down")])
    with two.acting_for(Principal(user_id="carol")):
        await run(make_agent(down, tools_two, middlewares=two.middlewares()), "go")
    researchers: list[ScriptedModel] = []

    async def research(task: str) -> str:
        """Ask a new researcher.

        Args:
            task (str): What to find.
        """
        model = ScriptedModel([calls(("fetch", {"host": "api.example"})), text("found")])
        researchers.append(model)
        sub = make_agent(model, tools_one, middlewares=one.middlewares(), name=f"researcher{len(researchers)}")
        return (await sub.reply(UserMsg("lead", task))).get_text_content() or ""

    async def pause(seconds: float) -> str:
        """Wait a while.

        Args:
            seconds (float): How long.
        """
        await asyncio.sleep(seconds)
        up["now"] = True  # the dependency is back, the breaker due for a probe
        return "waited"

    lead = make_agent(ScriptedModel([calls(("research", {"task": "a"})), calls(("pause", {"seconds": 0.06})),
                                     calls(("research", {"task": "b"})), text("done")]),
                      [research, pause], middlewares=one.middlewares(), name="lead")
    with one.acting_for(Principal(user_id="ops")):
        await run(lead, "go")
    assert ran == ["api.example", "api.example"]  # carol's and the first researcher's
    assert tool_messages(researchers[1].calls[-1])[-1].startswith("[harness:dependency_down]")
    fresh = ScriptedModel([calls(("fetch", {"host": "api.example"})), text("ok")])
    with two.acting_for(Principal(user_id="alice")):
        await run(make_agent(fresh, tools_two, middlewares=two.middlewares(), name="alice"), "go")
    assert "welcome" in tool_messages(fresh.calls[-1])[-1]


async def test_a_runs_own_breaker_count_is_of_consecutive_failures() -> None:
    """Round 58: three blips among twenty successes in one run took the tool
    from the run for good (the shared breaker never opened)."""
    served = {"n": 0}

    async def fetch(page: int) -> str:
        """Fetch a page.

        Args:
            page (int): The page.
        """
        served["n"] += 1
        if served["n"] in (1, 8, 15):
            raise TimeoutError("upstream timed out")
        return f"page {page}: " + " ".join(f"w{page}x{j}" for j in range(30))

    h = Harness(HarnessConfig(breaker_failures=3), load_entry_points=False)
    model = ScriptedModel([*[calls(("fetch", {"page": p})) for p in range(20)], text("report")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(fetch)])), middlewares=h.middlewares())
    with h.acting_for(U42):
        await run(agent, "crawl")
    report = h.last_report(agent)
    assert served["n"] == 20
    assert (report.terminal_state.value, report.refusals) == ("completed", {})



# ------------------------------------------------------------ the daily quota across workers


def _stalling(db: Path, seconds: float, script: list[Any]) -> ScriptedModel:
    """A scripted model whose call stalls the SQLite store ``db`` for
    ``seconds`` (another connection's exclusive transaction: a backup, a
    vacuum), answering once the lock is held: the call's settle meets it."""
    locked = threading.Event()

    def lock() -> None:
        held = sqlite3.connect(db, isolation_level=None)
        held.execute("BEGIN EXCLUSIVE")
        locked.set()
        time.sleep(seconds)
        held.execute("ROLLBACK")
        held.close()

    class Stalling(ScriptedModel):
        async def _call_api(self, *args: Any, **kwargs: Any) -> Any:
            threading.Thread(target=lock, daemon=True).start()
            await asyncio.to_thread(locked.wait)
            return await super()._call_api(*args, **kwargs)

    return Stalling(script)


async def test_a_settle_the_store_did_not_take_is_retried_in_the_background(
    tmp_path: Path, monkeypatch: Any,
) -> None:
    """Round 58: a settle the store did not take was kept only for the same
    principal's next reservation in the same worker; served next by another
    worker, the spend was gone for good once the hold lapsed (a $1 quota
    billed $1.20). It is retried in the background until the store takes it."""
    monkeypatch.setattr(fleet_module, "SETTLE_RETRY_S", 0.05, raising=False)
    db = tmp_path / "quota.db"
    config = HarnessConfig(store=SQLiteStore(db, timeout_s=0.3), cost=CostPolicy(
        prices={"scripted": (1000.0, 1000.0)}, daily_quota_usd=1.0, max_output_tokens=100))
    alice = Principal(user_id="alice", tenant="acme")

    h = Harness(config, load_entry_points=False)
    agent = make_agent(_stalling(db, 1.5, [text("ok", inp=300, out=100)]), [], middlewares=h.middlewares())
    with h.acting_for(alice):
        await run(agent, "hello")
    report = h.last_report(agent)
    assert report.spent_usd == pytest.approx(0.4)
    assert "dependency_down" in [d.code for d in report.decisions]  # the settle was not taken
    store = SQLiteStore(db)
    for _ in range(100):
        if await store.get_spend(alice.key) > 0:
            break
        await asyncio.sleep(0.05)
    assert await store.get_spend(alice.key) == pytest.approx(0.4)



def test_settles_kept_when_a_loop_ends_are_made_once_on_the_next(tmp_path: Path) -> None:
    """Round 59: a worker running each request in its own ``asyncio.run``.
    The loop's end cancelled the retry, and no later loop restarted it; a
    settle cancelled after the store took it was sent again and charged
    again. Alice's settle is kept; Bob's and Carol's requests (new loops)
    make it, once."""
    db = tmp_path / "quota.db"
    h = Harness(HarnessConfig(store=SQLiteStore(db, timeout_s=0.3), cost=CostPolicy(
        prices={"scripted": (1000.0, 1000.0)}, daily_quota_usd=10.0, max_output_tokens=100)),
        load_entry_points=False)
    alice = Principal(user_id="alice", tenant="acme")

    async def request(who: Principal, model: ScriptedModel) -> None:
        with h.acting_for(who):
            await run(make_agent(model, [], middlewares=h.middlewares()), "hello")

    asyncio.run(request(alice, _stalling(db, 1.5, [text("ok", inp=300, out=100)])))
    assert h.services.fleet._unsettled  # kept; its loop is gone
    time.sleep(1.5)  # the store is back
    for user in ("bob", "carol"):
        asyncio.run(request(Principal(user_id=user, tenant="acme"), ScriptedModel([text("ok", inp=300, out=100)])))

    async def spend() -> float:
        store = SQLiteStore(db)
        for _ in range(40):
            if not h.services.fleet._unsettled:
                break
            await asyncio.sleep(0.05)
        return await store.get_spend(alice.key)

    assert asyncio.run(spend()) == pytest.approx(0.4)


@pytest.mark.parametrize(("make", "field"), [
    (lambda: ConcurrencyLimit(scope="tool", tool="search", max_in_flight=1, lease_s=0.001), "lease_s"),
    (lambda: HarnessConfig(store=_redis_store(state_ttl_s=2), breaker_cooldown_s=30), "state_ttl_s"),
    (lambda: HarnessConfig(store=_redis_store(state_ttl_s=30), breaker_cooldown_s=30), "state_ttl_s"),
])
def test_a_fleet_setting_that_would_disable_its_limit_is_refused(make: Any, field: str) -> None:
    """Round 58: a 1 ms lease lapsed between renewals (two calls in flight
    under max_in_flight=1 across processes); a Redis state TTL shorter than
    the breaker's cooldown forgot the open breaker."""
    with pytest.raises(ValidationError, match=field):
        make()


def _redis_store(**kw: Any) -> Any:
    pytest.importorskip("redis")
    from agentscope_harness.stores import RedisStore

    return RedisStore("redis://127.0.0.1:6399/0", **kw)



# ------------------------------------------------------------ operating it


async def test_a_shadow_live_policy_is_compared_with_its_candidate_by_what_it_would_refuse() -> None:
    """README 'Candidate policies'. In shadow mode the candidate was compared
    with what was enforced (nothing): a candidate without the identity
    check showed no difference."""
    async def lookup(user_id: str) -> str:
        """Look up an account.

        Args:
            user_id (str): Whose.
        """
        return f"account of {user_id}"

    live = HarnessConfig(mode="shadow", tools={"lookup": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"})})
    candidate = live.model_copy(update={"disabled_hooks": {"authorization_gate"}})
    h = Harness(live, candidate=candidate, load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup", {"user_id": "u-42"})), calls(("lookup", {"user_id": "u-7"})), text("ok")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(lookup)])), middlewares=h.middlewares())
    with h.acting_for(U42):
        await run(agent, "look")
    differences = h.last_report(agent).candidate_differences
    assert [(d["live"], d["candidate"]) for d in differences] == [("refuse:permission_denied", "allow")]


def test_a_safety_hook_that_would_fail_open_is_refused() -> None:
    from agentscope_harness import harness_hook
    from agentscope_harness.errors import HarnessConfigError

    with pytest.raises(HarnessConfigError, match="fails closed"):
        @harness_hook("pre_tool_call", kind="safety", fail_closed=False)
        def gate(ctx: Any) -> None:
            return None
    with pytest.raises(HarnessConfigError, match="fail_closed must be"):
        @harness_hook("pre_tool_call", kind="safety", fail_closed=0)  # type: ignore[arg-type]
        def falsy(ctx: Any) -> None:
            return None
    with pytest.raises(HarnessConfigError, match="priority must be an int"):
        @harness_hook("pre_tool_call", priority=True)  # type: ignore[arg-type]
        def other(ctx: Any) -> None:
            return None



async def test_a_shadow_live_ask_is_compared_with_its_candidate() -> None:
    """Round 60: in shadow mode a live ``ask_when`` was compared as "allow":
    a candidate without the approval showed no difference."""
    async def refund(amount: float) -> str:
        """Refund money.

        Args:
            amount (float): USD.
        """
        return "refunded"

    asks = ToolPolicy(role="mutation", ask_when=lambda args: "over $100" if args["amount"] > 100 else None)
    live = HarnessConfig(mode="shadow", tools={"refund": asks})
    candidate = HarnessConfig(mode="shadow", tools={"refund": ToolPolicy(role="mutation")})
    h = Harness(live, candidate=candidate, load_entry_points=False, environ={})
    model = ScriptedModel([calls(("refund", {"amount": 500})), text("done")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(refund)])), middlewares=h.middlewares())
    with h.acting_for(U42):
        await run(agent, "refund me")
    differences = h.last_report(agent).candidate_differences
    assert [(d["live"], d["candidate"]) for d in differences] == [("ask", "allow")]


async def test_a_run_cancelled_while_its_settle_waits_keeps_the_spend(tmp_path: Path, monkeypatch: Any) -> None:
    """Round 60: a settle cancelled while it waited on the store (the client
    gone) was neither taken nor kept: the spend was dropped."""
    monkeypatch.setattr(fleet_module, "SETTLE_RETRY_S", 0.05, raising=False)
    db = tmp_path / "quota.db"
    store = SQLiteStore(db, timeout_s=0.3)
    h = Harness(HarnessConfig(store=store, cost=CostPolicy(
        prices={"scripted": (1000.0, 1000.0)}, daily_quota_usd=1.0, max_output_tokens=100)), load_entry_points=False)
    alice = Principal(user_id="alice", tenant="acme")

    settling = asyncio.Event()
    settle = store.settle_spend

    async def settle_spend(*args: Any, **kwargs: Any) -> float:
        settling.set()
        return await settle(*args, **kwargs)

    store.settle_spend = settle_spend  # type: ignore[method-assign]
    agent = make_agent(_stalling(db, 1.0, [text("ok", inp=300, out=100)]), [], middlewares=h.middlewares())

    async def request() -> None:
        with h.acting_for(alice):
            await run(agent, "hello")

    task = asyncio.create_task(request())
    await settling.wait()
    await asyncio.sleep(0.05)
    task.cancel()  # the client is gone while the settle waits
    with contextlib.suppress(asyncio.CancelledError):
        await task
    for _ in range(100):
        if await SQLiteStore(db).get_spend(alice.key) > 0:
            break
        await asyncio.sleep(0.05)
    assert await SQLiteStore(db).get_spend(alice.key) == pytest.approx(0.4)


async def test_a_tool_the_harness_never_instrumented_is_logged(caplog: Any) -> None:
    """Round 60: without ``harness.instrument(toolkit)`` a dependency down
    is text to the harness (the model's made-up answer delivered as
    ``completed``); the README says so, and the harness logs the tool once."""
    h = Harness(HarnessConfig(), load_entry_points=False)
    model = ScriptedModel([calls(("_search", {"q": "a"})), calls(("_search", {"q": "b"})), text("ok")])
    agent = make_agent(model, Toolkit(tools=[tool(_search)]), middlewares=h.middlewares())
    with caplog.at_level("WARNING", logger="agentscope_harness"), h.acting_for(U42):
        await run(agent, "search")
    told = [r.getMessage() for r in caplog.records if "was not instrumented" in r.getMessage()]
    assert len(told) == 1 and "'_search'" in told[0] and "harness.instrument(toolkit)" in told[0]



# ------------------------------------------------------------ round 61


async def test_a_stopped_runs_own_answer_is_not_read_for_claims() -> None:
    """README: a stopped run hands over what it found. What it found quoted
    a lookup saying "order A-9 was cancelled": the audit read the fallback as
    the model claiming a cancellation, and the user got a false correction."""
    async def lookup_status(order_id: str) -> str:
        """An order's status.

        Args:
            order_id (str): The order.
        """
        return f"order {order_id} was cancelled by the seller on 2 May; refund pending"

    claims = [r"order (?P<order_id>[\w-]+) (?:was |has been |is )?cancell?ed"]
    h = Harness(HarnessConfig(max_model_calls=2, tools={
        "cancel_order": ToolPolicy(role="mutation", claims=claims),
        "lookup_status": ToolPolicy(role="lookup"),
    }), load_entry_points=False)
    model = ScriptedModel([calls(("lookup_status", {"order_id": "A-9"})),
                           calls(("lookup_status", {"order_id": "A-10"})), text("x")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(lookup_status)])), middlewares=h.middlewares())
    with h.acting_for(U42):
        _, final = await run(agent, "what happened to my orders?")
    report = h.last_report(agent)
    text_ = final.get_text_content() or ""
    assert (report.terminal_state.value, report.reason) == ("incomplete", "max_model_calls")
    assert "correct myself" not in text_ and "order A-9 was cancelled by the seller" in text_
    assert report.unsupported_claims == []


async def test_a_run_cancelled_before_its_settle_keeps_the_spend(tmp_path: Path, monkeypatch: Any) -> None:
    """Round 61: with a token rate limit the rate refund was awaited before
    the settle; a cancel there dropped the spend."""
    monkeypatch.setattr(fleet_module, "SETTLE_RETRY_S", 0.05, raising=False)
    db = tmp_path / "quota.db"
    store = SQLiteStore(db, timeout_s=2.0)
    h = Harness(HarnessConfig(store=store, rate_limits=[RateLimit(scope="principal", tokens_per_min=1_000_000)],
                              cost=CostPolicy(prices={"scripted": (1000.0, 1000.0)}, daily_quota_usd=1.0,
                                              max_output_tokens=100)), load_entry_points=False, environ={})
    refunding = asyncio.Event()
    refund = store.rate_refund

    async def slow_refund(*args: Any, **kwargs: Any) -> Any:
        refunding.set()
        await asyncio.sleep(0.5)
        return await refund(*args, **kwargs)

    store.rate_refund = slow_refund  # type: ignore[method-assign]
    alice = Principal(user_id="alice", tenant="acme")
    agent = make_agent(ScriptedModel([text("ok", inp=300, out=100)]), [], middlewares=h.middlewares())

    async def request() -> None:
        with h.acting_for(alice):
            await run(agent, "hello")

    task = asyncio.create_task(request())
    await refunding.wait()
    task.cancel()  # the client goes away while the rate refund waits
    with contextlib.suppress(asyncio.CancelledError):
        await task
    for _ in range(40):
        if await SQLiteStore(db).get_spend(alice.key) > 0:
            break
        await asyncio.sleep(0.05)
    assert await SQLiteStore(db).get_spend(alice.key) == pytest.approx(0.4)


async def test_a_shadow_asked_call_that_runs_counts_on_the_candidates_ledgers() -> None:
    """Round 61: in shadow mode a call the live ``ask_when`` asked about ran
    but never reached the candidate's ledgers: past its cap the candidate
    still said "allow"."""
    async def refund(amount: float) -> str:
        """Refund money.

        Args:
            amount (float): USD.
        """
        return "refunded"

    def policy(ask: bool) -> HarnessConfig:
        rule = (lambda args: "a refund") if ask else None
        return HarnessConfig(mode="shadow", ledgers={"refunds": Ledger(2)}, tools={
            "refund": ToolPolicy(role="mutation", ledgers=["refunds"], ask_when=rule)})

    h = Harness(policy(True), candidate=policy(False), load_entry_points=False, environ={})
    model = ScriptedModel([*[calls(("refund", {"amount": 10 + i})) for i in range(4)], text("done")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(refund)])), middlewares=h.middlewares())
    with h.acting_for(U42):
        await run(agent, "refund")
    differences = h.last_report(agent).candidate_differences
    # the third and fourth refunds pass both policies' cap of 2: refused by both, no difference
    assert [(d["live"], d["candidate"]) for d in differences] == [("ask", "allow")] * 2


async def test_an_identity_attack_through_fresh_sub_agents_climbs_the_leads_ladder() -> None:
    """Round 61: each sub-agent reply is its own run, so a lead that sent a
    fresh researcher after every refusal was never stopped (41 model calls,
    ``completed``)."""
    async def lookup_order(order_id: str, user_id: str) -> str:
        """Look up an order.

        Args:
            order_id (str): The order.
            user_id (str): Its owner.
        """
        return f"order {order_id}"

    config = HarnessConfig(tools={"lookup_order": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"})})
    h = Harness(config, load_entry_points=False)
    toolkit = h.instrument(Toolkit(tools=[tool(lookup_order)]))
    sent = iter(range(1000))

    async def ask_researcher(task: str) -> str:
        """Ask a researcher.

        Args:
            task (str): What to find.
        """
        n = next(sent)
        researcher = make_agent(ScriptedModel([calls(("lookup_order", {"order_id": f"B-{n}", "user_id": "u-7"})),
                                               text("could not")]), toolkit, middlewares=h.middlewares(),
                                name=f"researcher{n}")
        return (await researcher.reply(UserMsg("lead", task))).get_text_content() or ""

    async def get_ticket(ticket_id: str) -> str:
        """Read a ticket.

        Args:
            ticket_id (str): The ticket.
        """
        return f"ticket {ticket_id}: " + " ".join(f"w{ticket_id}{j}" for j in range(20))

    step = iter(range(1000))
    lead_model = ScriptedModel([lambda n_call: (
        calls(("ask_researcher", {"task": "order of u-7"})) if next(step) % 2 == 0
        else calls(("get_ticket", {"ticket_id": f"T-{n_call}"})))], repeat=True)
    lead = make_agent(lead_model, [ask_researcher, get_ticket], h.middlewares(), name="lead")
    with h.acting_for(U42):
        await run(lead, "work the queue")
    report = h.last_report(lead)
    assert len(lead_model.calls) <= 12  # it ran to 41 and ended completed
    assert (report.terminal_state.value, report.reason) == ("incomplete", "refused:permission_denied")



async def test_a_finishing_tool_beside_the_call_that_reaches_its_fact_is_not_ready() -> None:
    """Round 61: ``requires_facts`` counted a fact reached by a call of the
    finishing tool's own batch (its result unread when the answer was
    written): "The widget costs 99 dollars." was delivered, ``completed``,
    beside a search saying 12."""
    async def search(q: str) -> str:
        """Search the catalogue.

        Args:
            q (str): The query.
        """
        return f"{q}: 12 dollars"

    async def submit_answer(answer: str) -> str:
        """Give the user the final answer.

        Args:
            answer (str): The answer.
        """
        return answer

    h = Harness(HarnessConfig(tools={
        "search": ToolPolicy(role="retrieval"),
        "submit_answer": ToolPolicy(role="finish", requires_facts=["retrieved"]),
    }), load_entry_points=False)
    model = ScriptedModel([
        calls(("search", {"q": "widget"}), ("submit_answer", {"answer": "The widget costs 99 dollars."})),
        calls(("submit_answer", {"answer": "The widget costs 12 dollars."})),
    ])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(search), tool(submit_answer)])),
                       middlewares=h.middlewares())
    with h.acting_for(U42):
        _, final = await run(agent, "how much is the widget?")
    report = h.last_report(agent)
    assert tool_messages(model.calls[1])[-1].startswith("[harness:not_ready]")
    assert final.get_text_content() == "The widget costs 12 dollars."
    assert (report.terminal_state.value, report.reason) == ("completed", "finished")



@pytest.mark.parametrize("answer", [
    "Order\xa0A-1 was\xa0cancelled.", "Order A-1 was can\u200bcelled.", "Order A-1 was\ncancelled.",
    "ＯＲＤＥＲ A-1 was cancelled.",
])
async def test_a_claim_hidden_by_spacing_or_invisible_characters_is_still_read(answer: str) -> None:
    """Round 61: claims were matched on the raw text; a no-break space, a
    zero-width character or a line break kept the README's own pattern from
    a claim the user reads plainly."""
    claims = [r"order (?P<order_id>[\w-]+) (?:was |has been |is )?cancell?ed"]
    h = Harness(HarnessConfig(tools={"cancel_order": ToolPolicy(role="mutation", claims=claims)}),
                load_entry_points=False)
    agent = make_agent(ScriptedModel([text(answer)]), [], middlewares=h.middlewares())
    with h.acting_for(U42):
        _, final = await run(agent, "cancel A-1")
    report = h.last_report(agent)
    assert report.unsupported_claims == ["cancel_order"]
    assert "correct myself" in (final.get_text_content() or "")



async def test_a_call_a_shadow_live_policy_would_refuse_counts_on_the_candidates_ledgers() -> None:
    """Round 61 (review): a call the live policy would refuse runs in shadow
    mode; the candidate that allows it must count it on its ledgers."""
    async def lookup(user_id: str) -> str:
        """Look up an account.

        Args:
            user_id (str): Whose.
        """
        return f"account of {user_id}"

    live = HarnessConfig(mode="shadow", tools={"lookup": ToolPolicy(role="lookup", identity_args={"user_id": "user_id"})})
    candidate = HarnessConfig(mode="shadow", ledgers={"lookups": Ledger(1)},
                              tools={"lookup": ToolPolicy(role="lookup", ledgers=["lookups"])})
    h = Harness(live, candidate=candidate, load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup", {"user_id": "u-7"})), calls(("lookup", {"user_id": "u-42"})), text("ok")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(lookup)])), middlewares=h.middlewares())
    with h.acting_for(U42):
        await run(agent, "look")
    differences = h.last_report(agent).candidate_differences
    assert [(d["live"], d["candidate"]) for d in differences] == [
        ("refuse:permission_denied", "allow"), ("allow", "refuse:quota_exhausted"),
    ]



# ------------------------------------------------------------ round 62 (on round 61)


async def _renamed(name: str, answer: str) -> Any:
    async def rename_project(name: str) -> str:
        """Rename the project.

        Args:
            name (str): The new name.
        """
        return f"renamed to {name}"

    policy = ToolPolicy(role="mutation", claims=[r'renamed the project to "(?P<name>[^"]+)"'])
    h = Harness(HarnessConfig(tools={"rename_project": policy}), load_entry_points=False)
    model = ScriptedModel([calls(("rename_project", {"name": name})), text(answer)])
    agent = make_agent(model, [rename_project], middlewares=h.middlewares())
    with h.acting_for(U42):
        _, final = await run(agent, "rename it")
    return final, h.last_report(agent)


@pytest.mark.parametrize("name", ["Acme™ Roadmap", "Q3  plan", "ﾌﾟﾛｼﾞｪｸﾄ１"])
async def test_a_true_claim_of_a_value_the_user_reads_otherwise_stands(name: str) -> None:
    """Round 62: round 61 compared the claim read as the user reads it
    (NFKC, spacing collapsed) with the argument as written: a rename that
    ran was "corrected" (``AcmeTM Roadmap``, a value nowhere in the answer)."""
    final, report = await _renamed(name, f'Done: I renamed the project to "{name}".')
    assert report.unsupported_claims == []
    assert final.get_text_content() == f'Done: I renamed the project to "{name}".'


@pytest.mark.parametrize(("pattern", "answer"), [
    (r"注文：(?P<order_id>\S+?)をキャンセルしました", "注文：A-9をキャンセルしました。"),
    (r"Cancelled:\n(?P<order_id>\S+)", "Status report\nCancelled:\nA-9"),
])
async def test_a_pattern_written_for_the_text_as_written_still_reads_it(pattern: str, answer: str) -> None:
    """Round 62: patterns met only the collapsed, NFKC reading, so one
    written with fullwidth punctuation or a line break never matched and a
    made-up cancellation was delivered ``completed``."""
    h = Harness(HarnessConfig(tools={"cancel_order": ToolPolicy(role="mutation", claims=[pattern])}),
                load_entry_points=False)
    agent = make_agent(ScriptedModel([text(answer)]), [], middlewares=h.middlewares())
    with h.acting_for(U42):
        _, final = await run(agent, "cancel A-9")
    assert h.last_report(agent).unsupported_claims == ["cancel_order"]
    assert "cancel_order (order_id A-9)" in (final.get_text_content() or "")


def _lead_of_fresh_researchers(h: Harness, scripts: list[list[Any]], tools: list[Any], rounds: int) -> Any:
    """A lead that asks a fresh sub-agent (the next of ``scripts``) each round."""
    made: list[Any] = []

    async def delegate(task: str) -> str:
        """Ask a fresh researcher.

        Args:
            task (str): What to research.
        """
        researcher = make_agent(ScriptedModel(scripts[len(made)]), tools, middlewares=h.middlewares(),
                                name=f"researcher{len(made)}")
        made.append(researcher)
        return (await researcher.reply(UserMsg("lead", task))).get_text_content() or ""

    script = [calls(("delegate", {"task": f"topic {i}"})) for i in range(rounds)] + [text("The report.")] * 3
    return make_agent(ScriptedModel(script), [delegate], h.middlewares(), name="lead")


async def test_a_sub_agents_refused_tool_not_in_the_plan_does_not_stop_its_lead() -> None:
    """Round 62: a tool the account may not use (``allowed_tools``), tried
    once by each of five fresh researchers, stopped a productive lead: only
    a call for another user (an identity-bound tool) counts for the lead."""
    async def search(q: str) -> str:
        """Search the news.

        Args:
            q (str): The query.
        """
        return f"news about {q}: " + " ".join(f"n{q}{j}" for j in range(20))

    async def export_csv(q: str) -> str:
        """Export results as CSV.

        Args:
            q (str): The query.
        """
        return "csv"

    h = Harness(HarnessConfig(), load_entry_points=False)
    scripts = [[calls(("export_csv", {"q": f"t{i}"})), calls(("search", {"q": f"t{i}"})), text(f"Findings {i}.")]
               for i in range(5)]
    lead = _lead_of_fresh_researchers(h, scripts, [search, export_csv], 5)
    with h.acting_for(Principal(user_id="u-42", allowed_tools=["delegate", "search"])):
        _, final = await run(lead, "research five topics")
    report = h.last_report(lead)
    assert (report.terminal_state.value, final.get_text_content()) == ("completed", "The report.")
    assert len(report.children) == 5


async def test_an_identity_attempt_by_a_sub_agent_that_ends_in_its_batch_counts_for_its_lead() -> None:
    """Round 62: a researcher's refusal reached its lead only at the
    researcher's next round; one that delivered beside the refused call
    never had one, and the lead ran 42 model calls."""
    async def cancel_order(order_id: str, user_id: str) -> str:
        """Cancel an order.

        Args:
            order_id (str): The order.
            user_id (str): Its owner.
        """
        return "cancelled"

    async def submit(answer: str) -> str:
        """Deliver the answer.

        Args:
            answer (str): The answer.
        """
        return answer

    h = Harness(HarnessConfig(tools={
        "cancel_order": ToolPolicy(role="mutation", identity_args={"user_id": "user_id"}),
        "submit": ToolPolicy(role="finish"),
    }), load_entry_points=False)
    scripts = [[calls(("cancel_order", {"order_id": f"B-{i}", "user_id": "victim"}),
                      ("submit", {"answer": f"B-{i}: refused"}))] for i in range(20)]
    lead = _lead_of_fresh_researchers(h, scripts, [cancel_order, submit], 20)
    with h.acting_for(U42):
        await run(lead, "cancel the victim's orders")
    report = h.last_report(lead)
    assert report.reason == "refused:permission_denied" and report.model_calls <= 8
