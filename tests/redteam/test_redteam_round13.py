"""Red team, round 13: the latest fixes attacked from a user's side.

1. re-nesting a resumed run (2b435aa, 067239d): what moves with it (its
   ledgers, its own sub-agents' caps) and a tool-only sub-agent's deadline;
2. ``caller_principal`` / enclosing caps through ``live_parent`` and
   ``_bounds_of`` (36f4361, c37aef3); 3. scrubbed reasons (2b435aa, caf8a70);
4. novelty judging after its performance pass (0577efe).

Real ``Agent``s, real tools in real ``Toolkit``s, the scripted model of
``tests/scripted.py`` and the helpers of ``tests/hooks/hookkit.py``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agentscope.event import ConfirmResult, UserConfirmResultEvent
from agentscope.message import Msg
from hookkit import Ran, drive, refunding, searcher
from scripted import ScriptedModel, calls, make_agent, parking_tools, text

from agentscope_harness import Harness, HarnessConfig, Ledger, ToolPolicy

# ====================================================== 1. what re-nesting moves


def _retrieval_harness(cap: int = 2, **kw: Any) -> Harness:
    return Harness(HarnessConfig(tools={"search": ToolPolicy(role="retrieval", ledgers=["retrieval"])},
                                 ledgers={"retrieval": Ledger(cap=cap)}, **kw), load_entry_points=False)


async def test_a_sub_agent_resumed_in_the_leads_next_reply_spends_that_replys_ledger() -> None:
    """One Harness, a retrieval ledger of 2 shared by lead and sub-agent
    (examples/sub_agent.py: "it shares the parent's ... ledgers"). The
    sub-agent parks in lead reply 1; in reply 2 the lead spends the ledger
    (2/2), then resumes it: re-nested in reply 2, its searches must meet
    reply 2's spent ledger."""
    ran = Ran()
    h = _retrieval_harness(cap=2)
    child = make_agent(ScriptedModel([calls(("refund", {"order_id": "A-1"})),
                                      *[calls(("search", {"q": f"child-{i}"})) for i in range(3)],
                                      text("child done")], model="c"),
                       [refunding(ran), searcher(ran)], h.middlewares(), name="child")
    delegate, resume, asks = parking_tools(child)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "refund"})), text("parked"),
                                     calls(("search", {"q": "lead-1"})), calls(("search", {"q": "lead-2"})),
                                     calls(("resume", {"task": "go"})), text("lead done")], model="l"),
                      [delegate, resume, searcher(ran)], h.middlewares(), name="lead")
    await drive(h, lead)
    assert len(asks) == 1 and ran == []
    _, _, report = await drive(h, lead)
    assert ran.of("refund") == [{"order_id": "A-1"}]
    assert [a["q"] for a in ran.of("search")][:2] == ["lead-1", "lead-2"]
    child_searches = [a["q"] for a in ran.of("search") if a["q"].startswith("child")]
    print(report.children and [(c.terminal_state, c.reason, c.refusals) for c in report.children])
    assert child_searches == [], child_searches


def _refund_tool(ran: Ran, name: str) -> Any:
    """A refund tool named ``name`` that AgentScope asks about (no permission)."""
    from agentscope.tool import FunctionTool

    async def refund(order_id: str) -> str:
        """Refund an order.

        Args:
            order_id (str): The order.
        """
        ran.append((name, {"order_id": order_id}))
        return f"refunded {order_id}"

    refund.__name__ = name
    return FunctionTool(refund)


def _three_levels(ran: Ran, lead_b: HarnessConfig, child_script: list[Any]) -> tuple[Any, ...]:
    """Lead A runs a middle agent S that runs a sub-agent C: C parks (its
    refund awaits a human), then S parks (its own refund). Lead B (another
    Harness, ``lead_b``) resumes S; S's next tool resumes C. Each under a
    Harness of its own."""
    hc = Harness(HarnessConfig(), load_entry_points=False)
    child = make_agent(ScriptedModel(child_script, model="c"), [_refund_tool(ran, "refund_c"), searcher(ran)],
                       hc.middlewares(), name="child")
    delegate_c, resume_c, child_asks = parking_tools(child)
    hs = Harness(HarnessConfig(), load_entry_points=False)
    middle = make_agent(ScriptedModel([calls(("delegate", {"task": "refund"})), calls(("refund_s", {"order_id": "S-1"})),
                                       calls(("resume", {"task": "go"})), text("middle done")], model="s"),
                        [delegate_c, resume_c, _refund_tool(ran, "refund_s")], hs.middlewares(), name="middle")
    delegate_s, resume_s, middle_asks = parking_tools(middle)
    ha = Harness(HarnessConfig(), load_entry_points=False)
    lead_a = make_agent(ScriptedModel([calls(("delegate", {"task": "x"})), text("parked")], model="a"),
                        [delegate_s], ha.middlewares(), name="lead_a")
    hb = Harness(lead_b, load_entry_points=False)
    lead_b_agent = make_agent(ScriptedModel([calls(("resume", {"task": "go"})), text("lead b done")], model="b"),
                              [resume_s], hb.middlewares(), name="lead_b")
    return (ha, lead_a), child_asks, hb, lead_b_agent, middle_asks


async def test_a_sub_agents_own_sub_agent_answers_to_the_lead_it_was_re_nested_under() -> None:
    """Lead B (max_tool_calls=4) resumes S, which resumes its parked
    sub-agent C. B's cap counts resume, refund_s, S's resume and C's
    refund_c: C's searches after them must be refused (README: a sub-agent
    parked in one lead reply and resumed from the lead's next answers to
    the next; nested runs answer to every run they are nested in)."""
    ran = Ran()
    (ha, lead_a), child_asks, hb, lead_b, middle_asks = _three_levels(
        ran, HarnessConfig(max_tool_calls=4),
        [calls(("refund_c", {"order_id": "C-1"})), *[calls(("search", {"q": f"c{i}"})) for i in range(3)],
         text("child done")])
    await drive(ha, lead_a)
    assert len(child_asks) == 1 and len(middle_asks) == 1 and ran == []
    _, final, report = await drive(hb, lead_b)
    print(ran, report.tool_calls, report.refusals)
    assert ran.of("refund_s") == [{"order_id": "S-1"}]
    assert ran.of("search") == [], ran


async def _approve(agent: Any, ask: Any) -> str:
    """The human approves ``ask`` from outside any run; what the agent says."""
    answers = [ConfirmResult(confirmed=True, tool_call=c) for c in ask.tool_calls]
    said = [item.get_text_content() or "" async for item in agent.reply_stream(
        UserConfirmResultEvent(reply_id=ask.reply_id, confirm_results=answers), yield_final_msg=True,
    ) if isinstance(item, Msg)]
    return " ".join(said)


@pytest.mark.parametrize("adapters", ["both", "tool_only"])
async def test_a_sub_agent_resumed_outside_any_run_is_not_bound_by_its_ended_leads_deadline(adapters: str) -> None:
    """Parked in a lead reply with deadline_s=1.0; the human approves 1.3 s
    later, outside any run (the lead's reply ended long ago). README: "a
    sub-agent resumed inside another run is bounded by that run, not by a
    parent that has ended"; "a human's wait is not the agent's time". The
    approved refund must run."""
    ran = Ran()
    child_h = Harness(HarnessConfig(), load_entry_points=False)
    mws = child_h.middlewares()
    child = make_agent(ScriptedModel([calls(("refund", {"order_id": "A-1"})), text("child: refunded")], model="c"),
                       [refunding(ran)], mws[1:] if adapters == "tool_only" else mws, name="child")
    delegate, _, asks = parking_tools(child)
    h = Harness(HarnessConfig(deadline_s=1.0), load_entry_points=False)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "refund"})), text("parked")], model="l"),
                      [delegate], h.middlewares(), name="lead")
    await drive(h, lead)
    assert len(asks) == 1
    await asyncio.sleep(1.3)
    said = await _approve(child, asks[-1])
    print(adapters, repr(said), ran)
    assert ran.of("refund") == [{"order_id": "A-1"}], said


@pytest.mark.parametrize("adapters", ["both", "tool_only"])
async def test_a_call_parked_on_a_human_gives_the_rest_of_its_batch_no_more_time(adapters: str) -> None:
    """A batch whose first call waits on a human and whose second runs on
    in the same reply: the run is not timed again there (only a resume is,
    with either adapter). Its deadline_s=2.0 started at the first batch; the
    model then took 0.8 s; the provisional report keeps what was left."""
    import time

    ran = Ran()
    h = Harness(HarnessConfig(deadline_s=2.0), load_entry_points=False)
    mws = h.middlewares()

    def slow_batch(_: Any) -> Any:
        time.sleep(0.8)  # a slow model answer (blocking is fine: nothing else runs)
        return calls(("refund", {"order_id": "A-1"}), ("search", {"q": "after the ask"}))

    agent = make_agent(ScriptedModel([calls(("search", {"q": "first"})), slow_batch, text("done")], model="m"),
                       [refunding(ran), searcher(ran)], mws[1:] if adapters == "tool_only" else mws, name="a")
    started = time.monotonic()
    await drive(h, agent)
    assert [a["q"] for a in ran.of("search")] == ["first", "after the ask"] and ran.of("refund") == []
    run = h.table.get(agent.state.reply_id)
    assert run is not None and run.deadline is not None
    assert run.deadline - started < 2.4  # timed at the first batch, not again 0.8 s later at "after the ask"


# ====================================================== 4. novelty after its performance pass


def _document(tag: str, words: int) -> str:
    """A fixed document of ``words`` distinct ordinary words (no ids)."""
    return " ".join(f"{tag}w{i}" for i in range(words))


def _alternating(doc_words: int, rounds: int, **cfg: Any) -> tuple[Harness, ScriptedModel, Any, Ran]:
    """Two tools, each answering the same fixed document whatever its page
    argument; a stubborn model alternates them with a new page each time."""
    ran = Ran()
    docs = {"a": _document("alpha", doc_words), "b": _document("beta", doc_words)}

    def reader(name: str) -> Any:
        async def read(page: int) -> str:
            """Read a page.

            Args:
                page (int): The page.
            """
            ran.append((name, {"page": page}))
            return docs[name[-1]]

        read.__name__ = name
        return read

    h = Harness(HarnessConfig(**cfg), load_entry_points=False)
    script = [calls((f"read_{'ab'[i % 2]}", {"page": i})) for i in range(rounds)] + [text("made it up")]
    model = ScriptedModel(script, model="m")
    agent = make_agent(model, [reader("read_a"), reader("read_b")], h.middlewares(), name="reader")
    return h, model, agent, ran


async def test_two_tools_alternated_for_the_same_short_documents_are_stopped() -> None:
    """README: two tools alternated for nothing new are stopped (7 model
    calls in the benchmark, goal <= 16)."""
    h, model, agent, ran = _alternating(300, 40)
    _, final, report = await drive(h, agent)
    assert report.terminal_state.value == "incomplete" and report.reason in ("stalled", "cycling")
    assert len(model.calls) <= 16 and "made it up" not in final.get_text_content()


async def test_two_tools_alternated_for_the_same_large_documents_are_stopped() -> None:
    """The same attack with documents a long-context policy lets through
    (result_max_tokens=100,000; pruning keeps the context small): after
    the first two reads nothing is new, yet the run goes on for 20 rounds
    and its made-up answer is delivered as ``completed``. At 20,000 words
    each (40,000 shingles, under the cap) it is stopped in 8 calls."""
    h, model, agent, ran = _alternating(30_000, 20, result_max_tokens=100_000, prune_over_tokens=150_000)
    _, final, report = await drive(h, agent)
    assert report.terminal_state.value == "incomplete" and report.reason in ("stalled", "cycling")
    assert len(model.calls) <= 16 and "made it up" not in final.get_text_content()


async def test_a_productive_run_of_large_new_documents_is_never_called_stalled() -> None:
    """The other side: 12 reads, each a large document never seen before
    (over the cap in total, so the older generation is dropped as it
    goes): every round is progress and the model's answer stands."""
    ran = Ran()

    async def read(page: int) -> str:
        """Read a page.

        Args:
            page (int): The page.
        """
        ran.append(("read", {"page": page}))
        return _document(f"p{page}x", 8_000)

    h = Harness(HarnessConfig(result_max_tokens=100_000, prune_over_tokens=150_000),
                load_entry_points=False)
    model = ScriptedModel([*[calls(("read", {"page": i})) for i in range(12)], text("summary of 12 pages")], model="m")
    agent = make_agent(model, [read], h.middlewares(), name="reader")
    _, final, report = await drive(h, agent)
    assert len(ran) == 12 and final.get_text_content() == "summary of 12 pages"
    assert (report.terminal_state.value, report.reason) == ("completed", "answered")


class _Slices(list):
    """A result's words that count the phrase lookups made on them."""

    sliced = 0

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            self.sliced += 1
        return super().__getitem__(key)


def test_a_result_repeating_the_echoed_words_costs_at_most_a_lookup_a_word() -> None:
    """Arguments 'a', 'a a', ... 'a a a a a a a a' and a result of 'a a a
    ...': the echo discount once made one slice per phrase length at every
    word (8 a word, ~40-50 ms of one synchronous post_tool_call step on the
    16 KB the model reads). Now at most ECHO_CHECKS_PER_WORD a word (8,000 words here); the
    result read against other arguments makes none. (Its time is a
    benchmark's: ``python -m benchmarks --only large_results``.)"""
    from agentscope_harness import facts
    from agentscope_harness.context import kept_ends

    text = "\n".join(kept_ends("a " * 50_000, 4_000) or ())
    crafted = _Slices(facts._words(text))
    facts._without(crafted, facts._echoed({f"p{i}": " ".join(["a"] * i) for i in range(1, 9)}))
    assert 0 < crafted.sliced <= max(facts.ECHO_CHECKS_PER_WORD * len(crafted), facts.ECHO_CHECKS_MIN)
    plain = _Slices(facts._words(text))
    facts._without(plain, facts._echoed({f"p{i}": f"zz{i}" for i in range(1, 9)}))
    assert plain.sliced == 0


# ====================================================== 2/3. enclosing caps and scrubbed reasons

SECRET = "hunter2-super-secret-value-XYZ"


async def test_a_sub_agents_stop_reason_quoting_the_leads_secret_is_scrubbed_in_the_leads_report() -> None:
    """README: exact values (secret_values) are redacted in ... decision
    details and the report's reason. The lead's Harness knows the secret;
    its sub-agent's Harness (another team's hook pack) stops with a reason
    that quotes it. What the lead's Harness reports and streams must not."""
    from scripted import delegating_tool

    from agentscope_harness import harness_hook

    @harness_hook("post_tool_call", name="leaky_stop")
    def leaky_stop(ctx: Any) -> None:
        ctx.stop(f"blocked: upstream key {SECRET}")

    ran = Ran()
    child_h = Harness(HarnessConfig(), hooks=[leaky_stop], load_entry_points=False)
    child = make_agent(ScriptedModel([calls(("search", {"q": "x"})), text("never")], model="c"), [searcher(ran)],
                       child_h.middlewares(), name="child")
    published: list[Any] = []
    h = Harness(HarnessConfig(secret_values=[SECRET], on_report=published.append), load_entry_points=False)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "x"})), text("lead done")], model="l"),
                      [delegating_tool(child)], h.middlewares(), name="lead")
    events, final, report = await drive(h, lead)
    assert [c.agent for c in report.children] == ["child"] and SECRET not in final.get_text_content()
    streamed_values = json.dumps([getattr(e, "value", None) for e in events], default=str)
    assert SECRET not in streamed_values
    assert SECRET not in json.dumps([r.model_dump(mode="json") for r in published], default=str)


async def test_a_shadow_leads_lower_request_cap_lends_nothing_to_an_enforcing_sub_agent() -> None:
    """_bounds_of(enforced_only): a shadow lead's max_request_input_tokens
    is recorded on its own runs only; the enforcing sub-agent (uncapped)
    sends its big request and answers."""
    from scripted import delegating_tool

    from agentscope_harness import CostPolicy

    ran = Ran()

    async def search(q: str) -> str:
        """Search.

        Args:
            q (str): The query.
        """
        ran.append(("search", {"q": q}))
        return "lorem ipsum " * 2000  # ~6,000 tokens once in the context

    child_model = ScriptedModel([calls(("search", {"q": "x"})), text("child done")], model="child-m")
    child_h = Harness(HarnessConfig(), load_entry_points=False)
    child = make_agent(child_model, [search], child_h.middlewares(), name="researcher")
    h = Harness(HarnessConfig(mode="shadow", cost=CostPolicy(max_request_input_tokens=3000)), load_entry_points=False)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "find"})), text("lead done")], model="lead-m"),
                      [delegating_tool(child)], h.middlewares(), name="lead")
    _, final, report = await drive(h, lead)
    assert len(child_model.calls) == 2 and final.get_text_content() == "lead done"
    [c] = report.children
    assert c.terminal_state.value == "completed"


async def test_a_sub_agent_resumed_from_a_tool_only_leads_next_reply_answers_to_its_cap() -> None:
    """ce34ba2 + 067239d: a lead with the tool adapter alone, max_tool_calls=2.
    Reply 1 parks the sub-agent; reply 2's resume (1) and the approved
    refund (2) use the cap: the sub-agent's searches are refused."""
    ran = Ran()
    child_h = Harness(HarnessConfig(), load_entry_points=False)
    child = make_agent(ScriptedModel([calls(("refund", {"order_id": "A-1"})),
                                      *[calls(("search", {"q": f"c{i}"})) for i in range(3)], text("child done")],
                                     model="c"), [refunding(ran), searcher(ran)], child_h.middlewares(), name="child")
    delegate, resume, asks = parking_tools(child)
    h = Harness(HarnessConfig(max_tool_calls=2), load_entry_points=False)
    lead = make_agent(ScriptedModel([calls(("delegate", {"task": "refund"})), text("parked"),
                                     calls(("resume", {"task": "go"})), text("lead done")], model="l"),
                      [delegate, resume], h.middlewares()[1:], name="lead")
    await drive(h, lead)
    assert len(asks) == 1 and ran == []
    await drive(h, lead)
    assert ran.of("refund") == [{"order_id": "A-1"}]
    assert ran.of("search") == [], ran
