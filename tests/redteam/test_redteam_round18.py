"""Red team, round 18: attacks on round 17's fixes.

1. ``max_model_calls`` checked where a call is counted (``ModelGuard._out_of_calls``),
   with its exemption for a concluded run;
2. ``claims`` read a structured output's strings; sub-agents' successes count;
3. a lease whose answer was lost is given back (``stores.given_back_if_abandoned``);
4. the stream holds back only what may still become a secret;
5. ``RunReport.principal`` scrubbed.

A test marked ``xfail(strict=True)`` is an attack that succeeds today (the
promise named in its reason is broken); the others are regression guards of
the fixes. Real ``Agent``s, real ``Toolkit``s, real stores (a SQLite file,
the Redis of ``HARNESS_TEST_REDIS_URL``), the scripted model of
``tests/scripted.py`` and the helpers of ``tests/hooks/hookkit.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest
from agentscope.event import TextBlockDeltaEvent, ToolCallDeltaEvent
from hookkit import (
    Ran,
    drive,
    every_event,
    harnessed,
    searcher,
    shop_tools,
    structured_delegate,
    structured_reply,
    submit,
)
from netkit import ReplyProxy
from pydantic import BaseModel
from scripted import ScriptedModel, calls, delegating_tool, make_agent, text

from agentscope_harness import (
    ConcurrencyLimit,
    CostPolicy,
    Harness,
    HarnessConfig,
    HookContext,
    HookRejectSignal,
    Principal,
    TerminalState,
    ToolPolicy,
    harness_hook,
)
from agentscope_harness.stores import SQLiteStore

U1 = Principal(user_id="u1")
PRICES = {"c": (1.0, 1.0), "l": (1.0, 1.0)}


# ====================================================== 1. max_model_calls


def _barrier(n: int, name: str) -> Any:
    """A tool ``name`` whose calls all return together once ``n`` arrived:
    parallel sub-agents then reach their next round together."""
    arrived: list[str] = []
    all_in = asyncio.Event()

    async def tool(question: str) -> str:
        """Ask or look up.

        Args:
            question (str): What.
        """
        arrived.append(question)
        if len(arrived) >= n:
            all_in.set()
        await all_in.wait()
        return f"done: {question} (a new fact)"

    tool.__name__ = name
    return tool


def _lead_of_three(h_lead: Harness, h_child: Harness, tool: Any) -> tuple[Any, list[ScriptedModel], ScriptedModel]:
    """A lead whose one model call delegates to three sub-agents at once;
    each sub-agent calls ``tool`` once, then answers."""
    models, delegates = [], []
    for name in "abc":
        model = ScriptedModel([calls((tool.__name__, {"question": name})), text(f"{name} done")], model="c")
        models.append(model)
        child = make_agent(model, [tool], h_child.middlewares(), name=f"child_{name}")
        delegates.append(delegating_tool(child, f"ask_{name}"))
    lead_model = ScriptedModel([calls(*[(f"ask_{n}", {"task": "x"}) for n in "abc"]), text("lead done")], model="l")
    return make_agent(lead_model, delegates, h_lead.middlewares(), name="lead"), models, lead_model


async def test_parallel_sub_agents_that_asked_the_user_stay_within_the_leads_max_model_calls(tmp_path: Any) -> None:
    """README: "`max_model_calls` is checked where a call is counted, with
    no await between: parallel sub-agents whose calls wait on the store ...
    cannot pass it together". Three parallel sub-agents each call their
    ``ask`` tool (the run concludes ``waiting_input``/``asked_user``, and the
    model is called again to relay the question). All three pass
    ``pre_think`` at 4 calls of 5, wait on the SQLite quota reservation, and
    ``ModelGuard._out_of_calls`` then lets every one through because
    ``run.facts.terminal is not None``."""
    cost = CostPolicy(prices=PRICES, daily_quota_usd=100.0)
    h = Harness(HarnessConfig(max_model_calls=5, store=SQLiteStore(str(tmp_path / "q.db")), cost=cost,
                              tools={"ask_user": ToolPolicy(role="ask")}), load_entry_points=False)
    lead, models, lead_model = _lead_of_three(h, h, _barrier(3, "ask_user"))
    _, _, report = await drive(h, lead, U1)
    served = len(lead_model.calls) + sum(len(m.calls) for m in models)
    assert served <= 5 and report.model_calls <= 5, [(c.reason, c.model_calls) for c in report.children]


async def test_shadow_sub_agents_stopped_by_their_own_cap_stay_within_the_enforcing_leads_cap(tmp_path: Any) -> None:
    """README: "an enforcing parent's ... `max_model_calls` ... still bind a
    shadow sub-agent's calls"; checked where counted, parallel sub-agents
    cannot pass it together. The shadow Harness has its own
    ``max_model_calls=1`` (recorded only): its watchdog's ``ctx.stop``
    concludes each sub-agent's run at its second round, which exempts its
    call from ``_out_of_calls``. Without the shadow cap the lead's cap holds
    (5 calls); with it, 7."""
    db = str(tmp_path / "q.db")
    cost = CostPolicy(prices=PRICES, daily_quota_usd=100.0)
    lead_h = Harness(HarnessConfig(max_model_calls=5, store=SQLiteStore(db), cost=cost), load_entry_points=False)
    shadow = Harness(HarnessConfig(mode="shadow", max_model_calls=1, store=SQLiteStore(db), cost=cost),
                     load_entry_points=False)
    lead, models, lead_model = _lead_of_three(lead_h, shadow, _barrier(3, "lookup"))
    with shadow.acting_for(U1):
        _, _, report = await drive(lead_h, lead, U1)
    served = len(lead_model.calls) + sum(len(m.calls) for m in models)
    assert served <= 5 and report.model_calls <= 5, [(c.reason, c.model_calls) for c in report.children]


class Outcome(BaseModel):
    summary: str


async def test_structured_sub_agents_started_past_the_leads_cap_do_not_multiply_the_narrowed_rounds() -> None:
    """README: "`max_tool_calls` / `max_model_calls` | run-wide, sub-agents
    included"; a stopped structured reply gets up to two narrowed rounds:
    "stopped at `max_model_calls`, these two calls are made past the cap:
    nothing else is". The lead (cap 1) makes its one call, which delegates
    to five structured sub-agents; each starts past the cap, is stopped at
    its first ``pre_think`` and, concluded, makes a narrowed call: six model
    calls under a cap of one (the count grows with the sub-agents)."""
    h = Harness(HarnessConfig(max_model_calls=1), load_entry_points=False)
    models, delegates = [], []
    for name in "abcde":
        model = ScriptedModel([calls(("GenerateStructuredOutput", {"summary": f"{name} ok"}))], model="c",
                              repeat=True)
        models.append(model)
        delegates.append(structured_delegate(make_agent(model, [], h.middlewares(), name=f"child_{name}"),
                                             f"ask_{name}", Outcome))
    lead_model = ScriptedModel([calls(*[(f"ask_{n}", {"task": "x"}) for n in "abcde"]), text("done")], model="l")
    lead = make_agent(lead_model, delegates, h.middlewares(), name="lead")
    _, _, report = await drive(h, lead, U1)
    served = len(lead_model.calls) + sum(len(m.calls) for m in models)
    assert served <= 1 + 2 and report.model_calls <= 3


class _Flaky(ScriptedModel):
    """A model whose provider errors AgentScope retries (as a real client's
    connection errors are)."""

    @classmethod
    def _get_retryable_exceptions(cls) -> tuple[type[Exception], ...]:
        return (ConnectionError,)


async def test_retried_attempts_stay_within_max_model_calls() -> None:
    """README: "`max_model_calls` is checked where a call is counted";
    "`RunReport.model_calls` counts attempts". A model with AgentScope's
    ``max_retries=3`` that fails three times: four requests are sent under
    ``max_model_calls=1`` and the run ends ``completed`` with
    ``model_calls == 4``."""
    h = Harness(HarnessConfig(max_model_calls=1), load_entry_points=False)
    model = _Flaky([ConnectionError("reset")] * 3 + [text("ok")], model="m")
    model.max_retries, model.retry_delay = 3, 0.0
    agent = make_agent(model, [searcher(Ran())], h.middlewares(), name="a")
    _, _, report = await drive(h, agent, U1)
    assert len(model.calls) <= 1 and report.model_calls <= 1, (len(model.calls), report.model_calls)


async def test_a_parallel_batch_without_a_concluded_run_stays_within_the_cap(tmp_path: Any) -> None:
    """Regression guard of ``_out_of_calls``: the same barrier batch with a
    plain tool (no run concluded) makes exactly the cap's calls."""
    cost = CostPolicy(prices=PRICES, daily_quota_usd=100.0)
    h = Harness(HarnessConfig(max_model_calls=5, store=SQLiteStore(str(tmp_path / "q.db")), cost=cost),
                load_entry_points=False)
    lead, models, lead_model = _lead_of_three(h, h, _barrier(3, "lookup"))
    _, _, report = await drive(h, lead, U1)
    assert len(lead_model.calls) + sum(len(m.calls) for m in models) == 5 == report.model_calls
    assert report.reason == "max_model_calls"


# ====================================================== 2. claims


CANCEL_CLAIM = ToolPolicy(role="mutation", claims=[r"\bcancel+ed\b"])


class OrderStatus(BaseModel):
    order_id: str
    cancelled: bool


async def test_a_structured_output_whose_schema_names_the_action_is_not_withheld() -> None:
    """README: "the answer (its text, or a structured output's strings)
    claims an action whose tool never succeeded ... a structured output is
    withheld". The schema has a ``cancelled: bool`` field; the model looks
    the order up and answers ``{"order_id": "A-1", "cancelled": false}``,
    claiming nothing. ``_structured_strings`` collects keys too
    (``cleaned_args``), so every output of this schema is withheld while
    ``cancel_order`` has not run: the user is told "I have to correct
    myself: cancel_order did not succeed ..." and the run is ``incomplete``."""
    ran = Ran()
    tools = shop_tools(ran)
    h = Harness(HarnessConfig(tools={"cancel_order": CANCEL_CLAIM}), load_entry_points=False)
    model = ScriptedModel([calls(("lookup_order", {"order_id": "A-1", "user_id": "u1"})),
                           calls(("GenerateStructuredOutput", {"order_id": "A-1", "cancelled": False})),
                           text("x")], model="m")
    agent = make_agent(model, [tools["lookup_order"], tools["cancel_order"]], h.middlewares(), name="a")
    with h.acting_for(U1):
        _, final = await structured_reply(agent, OrderStatus, "is A-1 cancelled?")
    report = h.last_report(agent)
    assert final.structured_output == {"order_id": "A-1", "cancelled": False}, final.get_text_content()
    assert report.terminal_state is TerminalState.COMPLETED and report.unsupported_claims == []


@harness_hook("pre_tool_call", priority=25, name="no_cancels", kind="safety")
def _no_cancels(ctx: HookContext) -> None:
    if ctx.tool is not None and ctx.tool.name == "cancel_order":
        raise HookRejectSignal("Cancelling is not allowed; tell the user.", code="policy_refused")


async def test_a_sub_agents_refused_action_does_not_support_the_leads_claim() -> None:
    """Regression guard of ``tell_enclosing_runs``: a sub-agent whose
    ``cancel_order`` a gate refused did nothing; the lead saying "cancelled"
    is still corrected."""
    ran = Ran()
    h = Harness(HarnessConfig(tools={"cancel_order": CANCEL_CLAIM}), hooks=[_no_cancels], load_entry_points=False)
    child_model = ScriptedModel([calls(("cancel_order", {"order_id": "A-1", "user_id": "u1"})),
                                 text("I could not cancel it.")], model="c")
    child = make_agent(child_model, [shop_tools(ran)["cancel_order"]], h.middlewares(), name="child")
    lead_model = ScriptedModel([calls(("delegate", {"task": "cancel A-1"})),
                                text("Your order A-1 is cancelled.")], model="l")
    lead = make_agent(lead_model, [delegating_tool(child)], h.middlewares(), name="lead")
    _, final, report = await drive(h, lead, U1)
    assert ran == []
    assert report.unsupported_claims == ["cancel_order"]
    assert "has not been done" in final.get_text_content()


async def test_a_sub_agent_of_a_previous_reply_does_not_support_another_orders_claim() -> None:
    """Regression guard: what a sub-agent did in an earlier reply backs the
    lead's later claim of that very step, as the lead's own earlier calls do
    (round 119), and no other: the lead's next reply claiming B-2 cancelled
    (only A-1 was) is corrected."""
    ran = Ran()
    per_order = ToolPolicy(role="mutation", claims=[r"(?P<order_id>[A-Z]-\d) is cancell?ed"])
    h = Harness(HarnessConfig(tools={"cancel_order": per_order}), load_entry_points=False)
    child_model = ScriptedModel([calls(("cancel_order", {"order_id": "A-1", "user_id": "u1"})),
                                 text("Cancelled A-1.")], model="c")
    child = make_agent(child_model, [shop_tools(ran)["cancel_order"]], h.middlewares(), name="child")
    lead_model = ScriptedModel([calls(("delegate", {"task": "cancel A-1"})), text("A-1 is cancelled."),
                                text("Order B-2 is cancelled too.")], model="l")
    lead = make_agent(lead_model, [delegating_tool(child)], h.middlewares(), name="lead")
    _, _, first = await drive(h, lead, U1)
    assert first.unsupported_claims == []
    _, final, second = await drive(h, lead, U1, prompt="and B-2?")
    assert second.unsupported_claims == ["cancel_order"] and "has not been done" in final.get_text_content()


# ====================================================== 3. stores


def _redis_port() -> tuple[int, str]:
    """The port and database of the test Redis (``HARNESS_TEST_REDIS_URL``); skip without one."""
    redis = pytest.importorskip("redis")
    url = os.environ.get("HARNESS_TEST_REDIS_URL", "redis://127.0.0.1:6399/3")
    client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
    try:
        client.ping()
    except Exception:
        pytest.skip(f"no Redis answers at {url}")
    finally:
        client.close()
    port, _, db = url.rsplit(":", 1)[1].partition("/")
    return int(port), db or "0"


async def test_a_run_slot_whose_redis_answer_was_lost_is_given_back(redis_prefix: str) -> None:
    """README: "A lease or reservation whose caller stopped waiting ... or
    whose answer was lost is given back when the store's request
    completes". The lease script runs, the connection drops before its
    answer; ``RedisStore`` resends the command once (its ``Retry``), the
    second run sees the first's lease (``max_in_flight=1``) and answers
    "no slot": no error, so ``given_back_if_abandoned`` gives nothing back.
    The reply ends ``concurrency_limited`` with no other run in flight, and
    so does the user's next reply, for ``lease_s``."""
    from agentscope_harness.stores import RedisStore

    port, db = _redis_port()
    proxy = ReplyProxy(port)
    store = RedisStore(f"redis://127.0.0.1:{await proxy.start()}/{db}", prefix=redis_prefix, timeout_s=2.0)
    limit = ConcurrencyLimit(scope="principal", max_in_flight=1, lease_s=300)
    h = Harness(HarnessConfig(store=store, concurrency_limits=[limit]), load_entry_points=False)
    agent = make_agent(ScriptedModel([text("warm"), text("one"), text("two")], model="m"), [searcher(Ran())],
                       h.middlewares(), name="a")
    try:
        _, _, warm = await drive(h, agent, Principal(user_id="warm"))  # the lease script is loaded
        assert warm.terminal_state is TerminalState.COMPLETED
        await asyncio.sleep(0.1)
        proxy.drop_next = True
        _, _, first = await drive(h, agent, U1)
        await asyncio.sleep(0.3)  # any give-back has run
        _, msg, second = await drive(h, agent, U1)
        assert (second.terminal_state, second.reason) == (TerminalState.COMPLETED, "answered"), (
            first.reason, msg.get_text_content())
    finally:
        await store.aclose()
        await proxy.close()


# ====================================================== 4. streams


QUOTED = 'Tr0ub4dor"&3xyz'
"""A password with a quote: JSON writes it ``Tr0ub4dor\\"&3xyz``."""


@pytest.mark.parametrize("args", [
    {"answer": f"the password is {QUOTED}"},
    '{"answer": "key sk-\\u0061' + "a" * 29 + '"}',
    '{"answer": "pw hunter2\\u002dvery-secret-value"}',
], ids=["secret-value-with-quote", "openai-key-escaped", "secret-value-escaped"])
async def test_a_finishing_tools_streamed_arguments_never_carry_a_secret(args: Any) -> None:
    """README: "streams hold back only what could become a secret, in text,
    thinking and tool-call arguments"; what a streaming UI shows tells the
    same story as the answer. The finishing tool's answer is redacted
    (parsed, then cleaned), but its ``ToolCallDeltaEvent``s are filtered as
    the raw JSON text: a secret value holding a ``"`` (``secret_values``,
    ``secret_env``: passwords do) or any secret the model writes with a JSON
    escape passes, and the streamed arguments decode to it."""
    cfg = HarnessConfig(tools={"submit": ToolPolicy(role="finish")},
                        secret_values=[QUOTED, "hunter2-very-secret-value"])
    h, _, agent = harnessed(cfg, [calls(("submit", args)), text("done")], [submit], stream=True)
    events, final, report = await drive(h, agent)
    assert report.terminal_state is TerminalState.COMPLETED
    assert "[redacted:" in final.get_text_content()
    streamed = "".join(e.delta for e in events if isinstance(e, ToolCallDeltaEvent))
    shown = json.loads(streamed)["answer"]
    assert QUOTED not in shown and "sk-aaaa" not in shown and "hunter2-very" not in shown, shown


STREAM_SECRETS = [
    "sk-ant-api03-" + "A" * 30,
    "ghp_" + "g" * 36,
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.dozjgNryP4J3jVmNHl0w5N",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7abc\n-----END RSA PRIVATE KEY-----",
    "hunter2-very-secret-value",
]


@pytest.mark.parametrize("pii", [False, True], ids=["no-pii", "pii"])
@pytest.mark.parametrize("secret", STREAM_SECRETS, ids=lambda s: s[:8])
async def test_streamed_text_never_shows_a_secret_at_any_split(secret: str, pii: bool) -> None:
    """Regression guard of the shorter hold-back: the real streaming path
    (text deltas of every chunk size 1-9, so the secret is split at every
    position), no ``redact_patterns``: no streamed event carries the secret
    or any 12-character piece of it."""
    cfg = HarnessConfig(secret_values=["hunter2-very-secret-value"],
                        pii={"email": "redact"} if pii else {})
    answer = f"Here: {secret} and that is all."
    for chunk in range(1, 10):
        h = Harness(cfg, load_entry_points=False)
        model = ScriptedModel([text(answer)], stream=True, chunk=chunk, model="m")
        agent = make_agent(model, [searcher(Ran())], h.middlewares(), name="a")
        events, final, _ = await drive(h, agent)
        shown = every_event(events)
        body = secret.split("\n")[1] if secret.startswith("-----") else secret[-12:]
        assert body not in shown and body not in final.get_text_content(), chunk


async def test_plain_text_streams_before_the_end_of_its_model_call() -> None:
    """Regression guard: without ``redact_patterns`` a text delta is shown
    as it comes, held back only by a few characters (not ``redact_window``)."""
    h = Harness(HarnessConfig(), load_entry_points=False)
    answer = "The red mug is in stock and ships tomorrow from the main warehouse. " * 3
    agent = make_agent(ScriptedModel([text(answer)], stream=True, chunk=10, model="m"), [searcher(Ran())],
                       h.middlewares(), name="a")
    events, _, _ = await drive(h, agent)
    deltas = [e.delta for e in events if isinstance(e, TextBlockDeltaEvent)]
    assert len(deltas) > 10 and "".join(deltas) == answer


# ====================================================== 5. the principal in reports


async def test_a_reports_principal_carries_no_raw_card_number_held_as_a_number() -> None:
    """README: "Reports (the principal's attributes too) and decisions carry
    no raw personal data unless `record_raw=True`". ``build_report`` scrubs
    the principal's strings only: ``Principal(..., card=4111111111111111)``
    reaches the report and ``on_report`` as is (the same card as a string
    becomes ``[pii:payment_card]``)."""
    got: list[Any] = []
    h = Harness(HarnessConfig(on_report=got.append), load_entry_points=False)
    agent = make_agent(ScriptedModel([text("hello")], model="m"), [searcher(Ran())], h.middlewares(), name="a")
    principal = Principal(user_id="u-42", card="4111 1111 1111 1111", card_on_file=4111111111111111)
    _, _, report = await drive(h, agent, principal)
    assert report.principal is not None and report.principal["card"] == "[pii:payment_card]"
    assert "4111111111111111" not in report.model_dump_json()
    assert "4111111111111111" not in got[-1].model_dump_json()


async def test_a_child_report_under_a_record_raw_harness_is_scrubbed_in_the_leads_report() -> None:
    """Regression guard of ``_adopted``: a sub-agent under a Harness with
    ``record_raw=True`` keeps its principal's email in its own report; the
    lead's report (no ``record_raw``) carries it scrubbed."""
    lead_h = Harness(HarnessConfig(), load_entry_points=False)
    raw_h = Harness(HarnessConfig(record_raw=True), load_entry_points=False)
    alice = Principal(user_id="u-42", email="alice@example.com")
    child = make_agent(ScriptedModel([text("child done")], model="c"), [searcher(Ran())], raw_h.middlewares(),
                       name="child")
    lead_model = ScriptedModel([calls(("delegate", {"task": "x"})), text("lead done")], model="l")
    lead = make_agent(lead_model, [delegating_tool(child)], lead_h.middlewares(), name="lead")
    with raw_h.acting_for(alice):
        _, _, report = await drive(lead_h, lead, alice)
    assert "alice@example.com" in raw_h.last_report(child).model_dump_json()
    assert report.children and "alice@example.com" not in report.model_dump_json()
