"""Red team, round 10: the three latest fixes attacked from a user's side.

1. a stream the provider breaks mid-answer is charged its request and what
   streamed (not $0); broken before its first chunk, nothing (273e1b2);
2. a shadow sub-agent's tool calls are refused at its enforcing parent's
   ``max_tool_calls`` (43d9fdc);
3. ``Prerequisite(same_args)`` compares the values the tools run with: an
   argument left out is the tool's schema default (7431c1a).

Real ``Agent``s, real tools; part 1 through AgentScope's real
``OpenAIChatModel`` against the scripted server of ``tests/realclient``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "realclient"))

import realclient.conftest as realclient_fixtures
from agentscope.message import UserMsg
from hookkit import Ran, drive, refunding, searcher
from scripted import ScriptedModel, calls, delegating_tool, make_agent, text
from server import SUMMARY, FakeOpenAI, Reply, _chunks, _page

from agentscope_harness import (
    CostPolicy,
    Harness,
    HarnessConfig,
    MemoryStore,
    ModelPrice,
    Principal,
    harness_hook,
)
from agentscope_harness.report import TerminalState

make_model = realclient_fixtures.make_model  # the real-client fixtures, as tests/budgets/conftest.py has them
real_agent = realclient_fixtures.real_agent

U42 = Principal(user_id="u-42", tenant="acme")
PRICE = ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0)
PRICES = {"gpt-test": PRICE}
ANSWER = "The order A-1 has been cancelled and refunded in full. " * 3


def usd(inp: int, out: int) -> float:
    return (inp * 2.0 + out * 8.0) / 1e6


async def outcome(h: Any, agent: Any, principal: Any = None) -> tuple[Any, BaseException | None]:
    """One reply: the final message, or the exception the caller received."""
    try:
        _, final, _ = await drive(h, agent, principal)
    except Exception as exc:  # the provider's exception, raised to the caller
        return None, exc
    return final, None


def quota(store: MemoryStore, **kw: Any) -> HarnessConfig:
    return HarnessConfig(cost=CostPolicy(daily_quota_usd=1.0, prices=PRICES), store=store, **kw)


# ====================================================== 1. broken streams


async def test_a_stream_broken_at_every_position_is_charged_once_and_settles_the_daily_quota(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    """Every cut position of a text answer with a usage chunk: the run's
    charge and the principal's daily spend agree, no reservation is left
    held, a stream broken before its first visible chunk is charged its request
    (its HTTP 200 came: the provider took it; round 183 b, README "broken by
    the provider after it began"), and the charge grows with what streamed
    (never above the request plus all of it)."""
    total = len(_chunks(ANSWER, [], (100, 10), True))
    previous = 0.0
    for drop in range(total):
        store = MemoryStore()
        server.requests.clear()
        server.plan(Reply(text=ANSWER, drop_after=drop))
        h, agent = real_agent(quota(store), make_model(server), [])
        final, exc = await outcome(h, agent, U42)
        report = h.last_report(agent)
        spend = await store.get_spend(U42.key)
        assert exc is not None and final is None and len(server.requests) == 1, drop
        assert (report.terminal_state, report.reason) == (TerminalState.FAILED, "model_error"), drop
        assert report.spent_usd == pytest.approx(spend), drop
        assert store._holds == {}, drop  # the reservation was settled, not left to lapse
        if drop <= 1:  # only the role chunk (AgentScope yields nothing for it): no chunk reached the caller
            assert spend > 0.0 and report.input_tokens > 100 and report.output_tokens == 0, drop
        else:
            assert report.input_tokens > 100 and spend >= previous, drop
            assert report.output_tokens <= len(ANSWER) // 4 + 1, drop
        previous = spend


async def test_a_tool_call_stream_broken_mid_arguments_never_runs_the_tool_and_is_charged(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    ran = Ran()

    async def cancel_order(order_id: str) -> str:
        """Cancel an order.

        Args:
            order_id (str): The order.
        """
        ran.append(("cancel_order", {"order_id": order_id}))
        return "cancelled"

    call = [("cancel_order", {"order_id": "A-1" * 40})]
    total = len(_chunks(None, [("id", "cancel_order", "{}")], (100, 10), True))
    for drop in range(2, total):
        store = MemoryStore()
        server.plan(Reply(tool_calls=call, drop_after=drop))
        h, agent = real_agent(quota(store), make_model(server), [cancel_order])
        _, exc = await outcome(h, agent, U42)
        report = h.last_report(agent)
        assert exc is not None and ran == [], drop
        assert report.spent_usd > 0 and report.spent_usd == pytest.approx(await store.get_spend(U42.key)), drop
        assert store._holds == {}, drop


async def test_a_broken_stream_after_a_failed_retry_is_charged_once_and_the_500_nothing(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    from server import fail

    store = MemoryStore()
    server.plan(*fail(500), Reply(text=ANSWER, drop_after=20))
    h, agent = real_agent(quota(store), make_model(server, max_retries=1), [])
    _, exc = await outcome(h, agent, U42)
    report = h.last_report(agent)
    assert exc is not None and len(server.requests) == 2 and report.model_calls == 2
    one = report.input_tokens
    assert 100 < one < 250  # one request estimated, not two
    assert report.spent_usd == pytest.approx(usd(report.input_tokens, report.output_tokens))
    assert report.spent_usd == pytest.approx(await store.get_spend(U42.key)) and store._holds == {}


async def test_a_broken_stream_in_a_later_round_adds_its_estimate_to_the_rounds_that_answered(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    store = MemoryStore()
    server.plan(
        Reply(tool_calls=[("_page", {"url": "http://x"})], usage=(1000, 10)),
        Reply(text=ANSWER, drop_after=20),
    )
    h, agent = real_agent(quota(store, model_error_text="The provider failed; try again."),
                          make_model(server), [_page])
    final, exc = await outcome(h, agent, U42)
    report = h.last_report(agent)
    assert exc is None and final.get_text_content() == "The provider failed; try again."
    assert (report.terminal_state, report.reason) == (TerminalState.FAILED, "model_error")
    assert report.input_tokens > 1000 + 100 and report.output_tokens > 10
    assert report.spent_usd == pytest.approx(await store.get_spend(U42.key)) and store._holds == {}
    # the next reply is not charged for the broken one again
    before = report.spent_usd
    server.plan(Reply(text="fine now", usage=(50, 5)))
    final, exc = await outcome(h, agent, U42)
    assert exc is None and h.last_report(agent).spent_usd == pytest.approx(usd(50, 5))
    assert await store.get_spend(U42.key) == pytest.approx(before + usd(50, 5)) and store._holds == {}


async def test_a_sub_agents_broken_stream_is_charged_to_its_lead_and_the_callers_quota(
    server: FakeOpenAI, make_model: Any,
) -> None:
    store = MemoryStore()
    h = Harness(quota(store), load_entry_points=False)  # one Harness: the daily quota is its config's
    child = make_agent(make_model(server), [], middlewares=h.middlewares(), name="researcher")

    async def delegate(task: str) -> str:
        """Ask the researcher.

        Args:
            task (str): What to research.
        """
        msg = await child.reply(UserMsg("lead", task))
        return msg.get_text_content() or ""

    lead = make_agent(make_model(server), [delegate], middlewares=h.middlewares(), name="lead")
    server.plan(
        Reply(tool_calls=[("delegate", {"task": "find"})], usage=(100, 10)),
        Reply(text=ANSWER, drop_after=20),  # the researcher's stream breaks
        Reply(text="The researcher failed.", usage=(100, 10)),
    )
    _, exc = await outcome(h, lead, U42)
    report = h.last_report(lead)
    assert exc is None and len(server.requests) == 3
    [sub] = report.children
    assert (sub.terminal_state, sub.reason) == (TerminalState.FAILED, "model_error")
    assert sub.spent_usd > 0
    assert report.spent_usd == pytest.approx(usd(200, 20) + sub.spent_usd)
    assert await store.get_spend(U42.key) == pytest.approx(report.spent_usd) and store._holds == {}


async def test_a_users_middleware_that_retries_a_broken_stream_is_charged_for_both_attempts(
    server: FakeOpenAI, make_model: Any,
) -> None:
    """A middleware of the user's own, before the harness's, that answers a
    stream the provider broke by asking again and streaming the new answer:
    the broken attempt is charged its estimate, the retry its usage, both
    settled against the daily quota, no reservation left."""
    from agentscope.middleware import MiddlewareBase

    class RetryBrokenStreams(MiddlewareBase):
        async def on_model_call(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
            first = await next_handler(**input_kwargs)

            async def stream() -> Any:
                try:
                    async for chunk in first:
                        yield chunk
                    return
                except Exception:
                    pass
                again = await next_handler(**input_kwargs)
                async for chunk in again:
                    yield chunk

            return stream()

    store = MemoryStore()
    h = Harness(quota(store), load_entry_points=False)
    agent = make_agent(make_model(server), [], middlewares=[RetryBrokenStreams(), *h.middlewares()])
    server.plan(Reply(text=ANSWER, drop_after=20), Reply(text="Order A-1 is cancelled.", usage=(100, 10)))
    _, final, report = await drive(h, agent, U42)
    assert len(server.requests) == 2 and report.model_calls == 2
    assert report.input_tokens > 200 and report.output_tokens > 10  # the broken one's estimate and the usage
    assert report.spent_usd == pytest.approx(await store.get_spend(U42.key)) and store._holds == {}


def compression_script(broken: Reply) -> list[Reply]:
    """A page that takes a 4,000-token context over its compression
    threshold, a compression attempt (``broken``), AgentScope's retry of it
    (answered), then the answer."""
    return [
        Reply(tool_calls=[("_page", {"url": "http://x"})], usage=(1000, 10)),
        broken,
        Reply(tool_calls=[("generate_structured_output", SUMMARY)], usage=(6000, 500)),
        Reply(text="Here is the page summary.", usage=(1000, 10)),
    ]


ANSWERED = (1000 + 6000 + 1000, 10 + 500 + 10)
"""Tokens of the three calls that answered (the page, the retried compression, the answer)."""


@pytest.mark.parametrize("drop", [0, 1])
async def test_a_compression_stream_broken_before_its_first_chunk_costs_nothing(
    server: FakeOpenAI, make_model: Any, real_agent: Any, drop: int,
) -> None:
    """The rule of 273e1b2 for the compression path (AgentScope's
    ``generate_structured_output`` retries an attempt whose stream the
    provider broke): no chunk reached anyone, nothing is charged. The fix
    had covered ``on_model_call`` streams only: the compression's broken
    attempt was charged its request's estimate ($0.0085 of the quota)."""
    server.plan(*compression_script(Reply(tool_calls=[("generate_structured_output", SUMMARY)], drop_after=drop)))
    h, agent = real_agent(HarnessConfig(cost=CostPolicy(cap_usd=5.0, prices=PRICES)),
                          make_model(server, context_size=4000, max_retries=1), [_page])
    _, _, report = await drive(h, agent)
    assert len(server.requests) == 4 and report.model_calls == 4
    assert (report.input_tokens, report.output_tokens) == ANSWERED


async def test_a_compression_stream_broken_mid_answer_is_charged_what_streamed(
    server: FakeOpenAI, make_model: Any, real_agent: Any,
) -> None:
    """Broken after 15,000 characters of arguments: charged what streamed
    (it had been charged its request only)."""
    big = dict.fromkeys(SUMMARY, "x" * 3000)
    streamed = len(json.dumps(big))
    server.plan(*compression_script(Reply(tool_calls=[("generate_structured_output", big)], drop_after=5)))
    h, agent = real_agent(HarnessConfig(cost=CostPolicy(cap_usd=5.0, prices=PRICES)),
                          make_model(server, context_size=4000, max_retries=1), [_page])
    _, _, report = await drive(h, agent)
    assert len(server.requests) == 4
    assert report.output_tokens >= ANSWERED[1] + streamed // 4


class BreakingModel(ScriptedModel):
    """A scripted streaming model whose provider breaks the stream with
    ``error`` after ``after`` chunks (as a real client raises it)."""

    def __init__(self, script: list[Any], error: BaseException, after: int, **kw: Any) -> None:
        super().__init__(script, stream=True, **kw)
        self.error, self.after = error, after

    async def _stream(self, res: Any) -> Any:
        sent = 0
        async for chunk in super()._stream(res):
            if sent == self.after:
                raise self.error
            sent += 1
            yield chunk


@pytest.mark.parametrize("deadline_s", [None, 600.0])
async def test_a_stream_the_provider_breaks_with_a_read_timeout_is_a_model_error_not_the_deadline(
    deadline_s: float | None,
) -> None:
    """A client built on aiohttp (DashScope's SDK, installed with
    AgentScope) breaks a stream it stops receiving with
    ``aiohttp.ServerTimeoutError``, a subclass of ``TimeoutError``.
    ``_counted`` caught ``TimeoutError`` around each chunk as its own
    deadline cut: with no deadline at all (or ten minutes left) the run ended
    ``incomplete`` (``deadline``) with the fallback answer, a
    ``liveness_watchdog`` stop saying the deadline cut the call, and the
    provider's failure never reached the caller. The README: "the provider
    fails after its retries: ``failed`` (``model_error``) ... otherwise the
    provider's exception is raised to the caller"."""
    import aiohttp

    model = BreakingModel([text(ANSWER, inp=100, out=10)], aiohttp.ServerTimeoutError("Timeout on reading data"),
                          after=3, model="gpt-test")
    h = Harness(HarnessConfig(deadline_s=deadline_s, cost=CostPolicy(cap_usd=5.0, prices=PRICES)),
                load_entry_points=False)
    agent = make_agent(model, [], middlewares=h.middlewares())
    final, exc = await outcome(h, agent)
    report = h.last_report(agent)
    assert report.spent_usd > 0  # it streamed: charged (this part holds)
    assert (report.terminal_state, report.reason) == (TerminalState.FAILED, "model_error")
    assert isinstance(exc, aiohttp.ServerTimeoutError)


async def test_a_non_streamed_call_failing_with_a_read_timeout_is_a_model_error_not_the_deadline() -> None:
    """The same misreading on the non-streamed path (``_bounded``): any
    ``TimeoutError`` out of the call was read as the deadline's."""
    import aiohttp

    model = ScriptedModel([aiohttp.ServerTimeoutError("Timeout on reading data")], model="gpt-test")
    h = Harness(HarnessConfig(deadline_s=600.0, model_error_text="The provider failed."), load_entry_points=False)
    agent = make_agent(model, [], middlewares=h.middlewares())
    final, exc = await outcome(h, agent)
    report = h.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.FAILED, "model_error")
    assert exc is None and final.get_text_content() == "The provider failed."


# ====================================================== 2. shadow sub-agents


def keeps_searching(prefix: str) -> Any:
    """A sub-agent model that searches for something new on every call."""
    count = iter(range(10_000))
    return lambda turn: calls(("search", {"q": f"{prefix}{next(count)}"}))


def three_deep(lead_config: HarnessConfig, mid_h: Harness, leaf_h: Harness, leaf_script: Any, ran: Ran,
               leaf_iters: int = 50) -> tuple[Harness, Any, ScriptedModel]:
    """lead (its own Harness) -> mid (``mid_h``) -> leaf (``leaf_h``), each
    level's tool running the next level's agent."""
    leaf_model = ScriptedModel(leaf_script, model="leaf-m")
    leaf = make_agent(leaf_model, [searcher(ran)], leaf_h.middlewares(), name="leaf", max_iters=leaf_iters)
    mid_model = ScriptedModel([calls(("delegate", {"task": "dig"})), text("mid done")], model="mid-m")
    mid = make_agent(mid_model, [delegating_tool(leaf)], mid_h.middlewares(), name="mid")
    h = Harness(lead_config, load_entry_points=False)
    lead_model = ScriptedModel([calls(("delegate", {"task": "find"})), text("lead done")], model="lead-m")
    lead = make_agent(lead_model, [delegating_tool(mid)], h.middlewares(), name="lead")
    return h, lead, leaf_model


def shadow(**kw: Any) -> Harness:
    return Harness(HarnessConfig(mode="shadow", **kw), load_entry_points=False)


@pytest.mark.parametrize("shared", [False, True])
async def test_the_enforcing_leads_tool_cap_holds_two_shadow_levels_down(shared: bool) -> None:
    """enforce(max_tool_calls=4) -> shadow -> shadow: the two delegations
    and two searches, then every search refused as enforced, whether the
    two shadow levels share one Harness or have one each."""
    ran = Ran()
    mid_h = shadow(max_tool_calls=100)
    leaf_h = mid_h if shared else shadow()
    h, lead, _ = three_deep(HarnessConfig(max_tool_calls=4), mid_h, leaf_h, keeps_searching("q"), ran, leaf_iters=6)
    _, final, report = await drive(h, lead)
    assert len(ran) == 2 and final.get_text_content() == "lead done"
    [mid] = report.children
    [leaf] = mid.children
    refused = [d for d in leaf.decisions if d.action == "refuse"]
    assert refused and all(d.code == "quota_exhausted" and d.enforced for d in refused)
    assert leaf.refusals == {"quota_exhausted": len(refused)}


async def test_a_shadow_leads_tool_cap_refuses_nothing_two_shadow_levels_down() -> None:
    ran = Ran()
    script = [*[calls(("search", {"q": f"q{i}"})) for i in range(5)], text("leaf done")]
    h, lead, _ = three_deep(HarnessConfig(mode="shadow", max_tool_calls=2), shadow(max_tool_calls=1),
                            shadow(max_tool_calls=1), script, ran)
    _, final, report = await drive(h, lead)
    assert len(ran) == 5 and final.get_text_content() == "lead done"
    leaf = report.children[0].children[0]
    assert leaf.refusals == {}  # recorded, not enforced
    assert any(d.code == "quota_exhausted" and not d.enforced for d in leaf.decisions)


async def test_a_shadow_sub_agent_ignoring_the_leads_tool_cap_is_stopped_like_an_enforcing_one() -> None:
    """The lead enforces ``max_tool_calls=4``; its sub-agent's Harness is
    in shadow mode and its model ignores ``quota_exhausted`` and keeps
    searching. The cap held (two searches ran) but the refusal was all the
    enforcement there was: the ladder that ends a run whose model ignores an
    enforced refusal (``refused:<code>``: "stopped if it keeps going") is
    the shadow Harness's and only records, so the sub-agent ran to
    AgentScope's ``max_iters`` (51 model calls of the enforcing lead's run).
    With an enforcing sub-agent Harness the same run stops after 5 calls;
    the shadow one is now stopped when it meets the refusal in a second turn."""
    def run_with(mode: str) -> Any:
        ran = Ran()
        return three_deep(HarnessConfig(max_tool_calls=4), shadow(), Harness(HarnessConfig(mode=mode),
                          load_entry_points=False), keeps_searching("q"), ran), ran

    (h, lead, leaf_model), ran = run_with("enforce")
    await drive(h, lead)
    enforcing_calls = len(leaf_model.calls)
    assert len(ran) == 2 and enforcing_calls <= 6

    (h, lead, leaf_model), ran = run_with("shadow")
    _, _, report = await drive(h, lead)
    assert len(ran) == 2
    assert len(leaf_model.calls) <= enforcing_calls + 2, (len(leaf_model.calls), report.model_calls)
    [leaf] = report.children[0].children
    assert (leaf.terminal_state, leaf.reason) == (TerminalState.INCOMPLETE, "refused:quota_exhausted")


async def test_a_shadow_sub_agents_call_parked_by_agentscope_is_refused_on_resume_past_the_leads_cap() -> None:
    """The shadow sub-agent's ``refund`` (no ALLOW: AgentScope asks) is
    parked; the lead spends its ``max_tool_calls=3`` (delegate, search,
    resume); the approved call, judged again on resume, is refused as
    enforced and never runs."""
    from scripted import parking_tools

    ran = Ran()

    child_model = ScriptedModel([calls(("refund", {"order_id": "A-1"})), text("child: done")], model="c")
    child = make_agent(child_model, [refunding(ran)], shadow().middlewares(), name="child")
    delegate, resume, asks = parking_tools(child)
    h = Harness(HarnessConfig(max_tool_calls=3), load_entry_points=False)
    lead_model = ScriptedModel([calls(("delegate", {"task": "refund"})), calls(("search", {"q": "a"})),
                                calls(("resume", {"task": "go"})), text("lead done")], model="l")
    lead = make_agent(lead_model, [delegate, resume, searcher(ran)], h.middlewares(), name="lead")
    _, final, report = await drive(h, lead)
    assert len(asks) == 1 and ran == [("search", {"q": "a"})]
    assert report.tool_calls == {"delegate": 1, "search": 1, "resume": 1}
    (resumed,) = report.children  # the resumed run supersedes its park's provisional report (round 81)
    assert resumed.terminal_state is not TerminalState.WAITING_INPUT
    assert resumed.refusals == {"quota_exhausted": 1}
    assert any(d.code == "quota_exhausted" and d.enforced and d.tool == "refund" for d in resumed.decisions)


async def test_two_shadow_sub_agents_in_one_parallel_batch_share_the_leads_tool_cap() -> None:
    """Two delegations in one batch (run concurrently), each shadow
    sub-agent searching in parallel batches under a gate that awaits: the
    lead's ``max_tool_calls=5`` admits exactly three searches in all."""
    from agentscope_harness import harness_hook

    @harness_hook("pre_tool_call", priority=60, name="slow_gate", kind="safety")
    async def slow_gate(ctx: Any) -> None:
        await asyncio.sleep(0.005)

    ran = Ran()
    children = []
    for name in ("a", "b"):
        model = ScriptedModel([calls(*[("search", {"q": f"{name}{i}"}) for i in range(3)]),
                               calls(*[("search", {"q": f"{name}{i}x"}) for i in range(3)]), text(f"{name} done")],
                              model="c")
        h_child = Harness(HarnessConfig(mode="shadow"), hooks=(slow_gate,), load_entry_points=False)
        children.append(make_agent(model, [searcher(ran)], h_child.middlewares(), name=f"child_{name}"))
    h = Harness(HarnessConfig(max_tool_calls=5), load_entry_points=False)
    lead_model = ScriptedModel([calls(("ask_a", {"task": "x"}), ("ask_b", {"task": "y"})), text("lead done")],
                               model="l")
    lead = make_agent(lead_model, [delegating_tool(children[0], "ask_a"), delegating_tool(children[1], "ask_b")],
                      h.middlewares(), name="lead")
    _, final, report = await drive(h, lead)
    assert len(ran) == 3 and final.get_text_content() == "lead done"
    assert sum(c.refusals.get("quota_exhausted", 0) for c in report.children) == 9


@pytest.mark.parametrize("mode", ["shadow", "enforce"])
async def test_a_tool_adapter_only_sub_agent_answers_to_the_leads_tool_cap(mode: str) -> None:
    """"Either adapter works alone ... the tool adapter alone still gates
    every tool call", and ``max_tool_calls`` is "run-wide, sub-agents
    included (a sub-agent under another Harness too)". A sub-agent whose
    Harness gives it only the tool adapter (``middlewares()[1:]``) opened
    its run at its first tool call with ``parent=None`` (``tool_only_run``):
    no child of the lead's run, so the lead's cap never bound it (5 tool
    calls ran). It is now nested in the live run, as the agent adapter
    nests one."""
    ran = Ran()
    child_h = Harness(HarnessConfig(mode=mode), load_entry_points=False)
    child_model = ScriptedModel([*[calls(("search", {"q": f"q{i}"})) for i in range(4)], text("child done")],
                                model="c")
    child = make_agent(child_model, [searcher(ran)], child_h.middlewares()[1:], name="child")
    h = Harness(HarnessConfig(max_tool_calls=3), load_entry_points=False)
    lead_model = ScriptedModel([calls(("delegate", {"task": "x"})), text("lead done")], model="l")
    lead = make_agent(lead_model, [delegating_tool(child)], h.middlewares(), name="lead")
    await drive(h, lead)
    assert len(ran) == 2  # the delegation and two searches: 3


# ====================================================== 3. same_args and defaults


def seq_config(same: list[str] = ["order_id", "region"], **kw: Any) -> HarnessConfig:  # noqa: B006
    from agentscope_harness import Prerequisite, ToolPolicy

    return HarnessConfig(
        tools={
            "lookup_order": ToolPolicy(role="lookup"),
            "cancel_order": ToolPolicy(role="mutation", requires=[Prerequisite(tool="lookup_order", same_args=same)]),
        },
        require_finish_tool=False, max_enforce_retries=0, **kw,
    )


def regional_lookup(ran: Ran, region_default: str, delay: float = 0.0) -> Any:
    async def lookup_order(order_id: str, region: str = region_default) -> str:
        """Look up an order.

        Args:
            order_id (str): The order.
            region (str): The region.
        """
        if delay:
            await asyncio.sleep(delay)
        ran.append(("lookup_order", {"order_id": order_id, "region": region}))
        return f"order {order_id} ({region}): 1 mug, paid"

    return lookup_order


def canceller(ran: Ran, region_default: Any = None) -> Any:
    async def cancel_order(order_id: str, region: str) -> str:
        """Cancel an order.

        Args:
            order_id (str): The order.
            region (str): The region.
        """
        ran.append(("cancel_order", {"order_id": order_id, "region": region}))
        return f"order {order_id} ({region}) cancelled"

    if region_default is not None:
        cancel_order.__defaults__ = (region_default,)
    return cancel_order


def grouped(ran: Ran, basic: list[Any], eu: list[Any], us: list[Any]) -> Any:
    from agentscope.tool import ToolGroup, Toolkit
    from scripted import tool as always_allowed

    def group(name: str, fns: list[Any]) -> ToolGroup:
        return ToolGroup(name=name, description=f"{name.upper()} orders", tools=[always_allowed(f) for f in fns])

    return Toolkit(tools=[always_allowed(f) for f in basic], tool_groups=[group("eu", eu), group("us", us)])


@harness_hook("pre_tool_call", priority=60, name="store_gate", kind="safety")
async def store_gate(ctx: Any) -> None:
    """An async gate (a store, a service) that takes a moment for cancels."""
    if ctx.tool.name == "cancel_order":
        await asyncio.sleep(0.05)


async def test_a_lookup_is_indexed_with_the_defaults_of_the_tool_that_ran() -> None:
    """``lookup_order`` exists in two AgentScope tool groups, ``eu``
    (region defaults to "eu") and ``us`` ("us"). The model looks an order
    up with ``eu`` active and, in the same batch, switches to ``us``
    (``reset_tools``, concurrency-safe, runs beside it). The lookup ran for
    "eu" (its result says so), but the defaults were read when the result
    was shaped, from the groups active then: it was indexed as region "us",
    and ``cancel_order(region="us")`` passed the sequence gate."""
    ran = Ran()
    toolkit = grouped(ran, [canceller(ran)], [regional_lookup(ran, "eu", delay=0.05)], [regional_lookup(ran, "us")])
    h = Harness(seq_config(), load_entry_points=False)
    model = ScriptedModel([
        calls(("lookup_order", {"order_id": "A-1"}), ("reset_tools", {"eu": False, "us": True})),
        calls(("cancel_order", {"order_id": "A-1", "region": "us"})),
        text("done"),
    ])
    agent = make_agent(model, h.instrument(toolkit), h.middlewares())
    agent.state.tool_context.activated_groups.append("eu")
    _, _, report = await drive(h, agent)
    assert ran.of("lookup_order") == [{"order_id": "A-1", "region": "eu"}]
    assert ran.of("cancel_order") == []  # no lookup ever ran for region "us"
    assert report.refusals == {"prerequisite_missing": 1}


@pytest.mark.xfail(strict=True, reason="a cancel judged with the EU tool's region default runs as the US tool when a "
                   "concurrent reset_tools switches groups while an async gate awaits: cancelled for 'us'")
async def test_a_cancel_runs_with_the_defaults_it_was_judged_with() -> None:
    """``cancel_order`` exists in groups ``eu`` and ``us`` (region defaults
    "eu" / "us"); the order was looked up for "eu". The model cancels it
    leaving the region out and switches to ``us`` in the same batch. The
    sequence gate fills in "eu" (the tool active when it judged) and
    passes; an async gate later in the chain awaits, ``reset_tools`` runs
    meanwhile, and AgentScope resolves ``cancel_order`` at call time to the
    ``us`` tool, which runs with region "us": an order no lookup covered.
    "judged ... on exactly what the tool receives" does not hold for what
    it receives by default."""
    ran = Ran()
    toolkit = grouped(ran, [regional_lookup(ran, "eu")], [canceller(ran, "eu")], [canceller(ran, "us")])
    h = Harness(seq_config(), hooks=(store_gate,), load_entry_points=False)
    model = ScriptedModel([
        calls(("lookup_order", {"order_id": "A-1", "region": "eu"})),
        calls(("cancel_order", {"order_id": "A-1"}), ("reset_tools", {"eu": False, "us": True})),
        text("done"),
    ])
    agent = make_agent(model, h.instrument(toolkit), h.middlewares())
    agent.state.tool_context.activated_groups.append("eu")
    await drive(h, agent)
    assert ran.of("lookup_order") == [{"order_id": "A-1", "region": "eu"}]
    assert ran.of("cancel_order") in ([], [{"order_id": "A-1", "region": "eu"}])


async def test_same_args_naming_an_argument_no_tool_has_is_not_a_silent_pass() -> None:
    """``Prerequisite("lookup_order", same_args=["orderid"])``: neither tool
    has that argument, so both sides were ``MISSING``, which compared equal
    to ``MISSING``; the gate degenerated to "some lookup succeeded", and
    the cancel of another order B-2 ran after a lookup of A-1. Neither
    ``HarnessConfig`` nor ``harness.instrument(toolkit)`` (which has the
    schemas) said anything ("A config that would silently disable a limit
    is invalid too")."""
    from agentscope.tool import Toolkit
    from scripted import tool as always_allowed

    ran = Ran()
    toolkit = Toolkit(tools=[always_allowed(regional_lookup(ran, "eu")), always_allowed(canceller(ran, "eu"))])
    model = ScriptedModel([
        calls(("lookup_order", {"order_id": "A-1"})),
        calls(("cancel_order", {"order_id": "B-2"})),
        text("done"),
    ])
    try:
        h = Harness(seq_config(same=["orderid"]), load_entry_points=False)
        agent = make_agent(model, h.instrument(toolkit), h.middlewares())
    except Exception:
        return  # refused at configuration: the promise holds
    await drive(h, agent)
    assert ran.of("cancel_order") == []


async def test_explicit_null_matches_a_null_default_and_a_nested_default_is_compared_whole() -> None:
    """``region: str | None = None`` left out on one side and written as
    ``null`` on the other is the same value the tools ran with; a nested
    default (a dict) compares as a whole, key order aside; a different
    nested value is refused."""
    from agentscope.tool import Toolkit
    from scripted import tool as always_allowed

    ran = Ran()

    async def lookup_order(order_id: str, region: str | None = None,
                           opts: dict = {"fast": True, "tags": ["a", "b"]}) -> str:  # noqa: B006
        """Look up an order.

        Args:
            order_id (str): The order.
            region (str | None): The region.
            opts (dict): Options.
        """
        ran.append(("lookup_order", {"order_id": order_id, "region": region, "opts": opts}))
        return f"order {order_id} ({region}, {opts}): paid"

    async def cancel_order(order_id: str, region: str | None, opts: dict) -> str:
        """Cancel an order.

        Args:
            order_id (str): The order.
            region (str | None): The region.
            opts (dict): Options.
        """
        ran.append(("cancel_order", {"order_id": order_id, "region": region, "opts": opts}))
        return f"order {order_id} cancelled"

    h = Harness(seq_config(same=["order_id", "region", "opts"]), load_entry_points=False)
    model = ScriptedModel([
        calls(("lookup_order", {"order_id": "A-1"})),
        calls(("cancel_order", {"order_id": "A-1", "region": None, "opts": {"fast": True, "tags": ["b", "a"]}})),
        calls(("cancel_order", {"order_id": "A-1", "region": None, "opts": {"tags": ["a", "b"], "fast": True}})),
        text("done"),
    ])
    toolkit = Toolkit(tools=[always_allowed(lookup_order), always_allowed(cancel_order)])
    agent = make_agent(model, h.instrument(toolkit), h.middlewares())
    _, _, report = await drive(h, agent)
    assert ran.of("cancel_order") == [{"order_id": "A-1", "region": None, "opts": {"tags": ["a", "b"], "fast": True}}]
    assert report.refusals == {"prerequisite_missing": 1}


async def test_a_default_changed_in_place_is_read_again() -> None:
    """A deployment switches a tool's default region at runtime (its
    settings reloaded): the function's default and its schema's
    ``default`` both become "us", the schema dict updated in place. The
    harness read the defaults once (keyed on the schema object, which is
    the same object) and indexed the next lookup, which ran for "us", as
    "eu"; ``cancel_order(region="eu")`` then passed for an order looked up
    in another region."""
    from agentscope.tool import Toolkit
    from scripted import tool as always_allowed

    ran = Ran()
    lookup_fn = regional_lookup(ran, "eu")
    lookup = always_allowed(lookup_fn)
    toolkit = Toolkit(tools=[lookup, always_allowed(canceller(ran))])
    h = Harness(seq_config(), load_entry_points=False)

    def switch_region(turn: Any) -> Any:
        lookup_fn.__defaults__ = ("us",)
        lookup.input_schema["properties"]["region"]["default"] = "us"
        return calls(("lookup_order", {"order_id": "A-2"}))

    model = ScriptedModel([
        calls(("lookup_order", {"order_id": "A-1"})),  # ran for eu: defaults read and cached
        switch_region,                                 # ran for us
        calls(("cancel_order", {"order_id": "A-2", "region": "eu"})),
        text("done"),
    ])
    agent = make_agent(model, h.instrument(toolkit), h.middlewares())
    await drive(h, agent)
    assert ran.of("lookup_order") == [{"order_id": "A-1", "region": "eu"}, {"order_id": "A-2", "region": "us"}]
    assert ran.of("cancel_order") == []


async def test_a_toolkit_of_500_tools_keeps_the_default_lookup_cheap() -> None:
    """The defaults are found by a scan of the toolkit's tools on every
    judged cancel and every successful lookup (``services._registered``):
    O(tools), not O(1). With 500 tools (in four groups) a run still gates
    right, and a look-up costs tens of microseconds (about 30 µs here; 0.66
    ms at 5,000 tools), small beside a round's ~1.3 ms of harness work."""

    from agentscope.tool import ToolGroup, Toolkit
    from scripted import tool as always_allowed

    def filler(i: int) -> Any:
        async def f(x: str, region: str = "eu") -> str:
            """Filler.

            Args:
                x (str): x.
                region (str): r.
            """
            return x

        return always_allowed(f, name=f"tool_{i}")

    ran = Ran()
    groups = [ToolGroup(name=f"g{g}", description="g", tools=[filler(g * 100 + i) for i in range(100)])
              for g in range(4)]
    toolkit = Toolkit(tools=[*[filler(400 + i) for i in range(100)], always_allowed(regional_lookup(ran, "eu")),
                             always_allowed(canceller(ran, "eu"))], tool_groups=groups)
    h = Harness(seq_config(), load_entry_points=False)
    model = ScriptedModel([calls(("lookup_order", {"order_id": "A-1"})), calls(("cancel_order", {"order_id": "B-2"})),
                           calls(("cancel_order", {"order_id": "A-1"})), text("done")])
    agent = make_agent(model, h.instrument(toolkit), h.middlewares())
    _, _, report = await drive(h, agent)
    assert ran.of("cancel_order") == [{"order_id": "A-1", "region": "eu"}]
    assert report.refusals == {"prerequisite_missing": 1}
