"""Red team, round 87, on round 85: a secret the model wrote across two
text blocks of a tool round (a thinking delta amid the text) was stored raw
(each block filtered alone, where the stream judged them joined), and so was
an answer the finishing-tool rule replaced with another round; after a cut
whose stream held a block's end, the fallback streamed as more of the cut
block (and a held call's end came after it); a failed read of a quota only
a lead's candidate keeps read as "nothing left" for a live sub-agent under
another Harness; in shadow mode a spent budget whose policy asks ended the
report ``waiting_input`` though nobody was asked."""

import asyncio
import json
from typing import Any

from agentscope.event import TextBlockDeltaEvent, TextBlockEndEvent, TextBlockStartEvent, ToolCallEndEvent
from agentscope.message import TextBlock, ThinkingBlock, ToolCallBlock
from agentscope.model import ChatResponse, ChatUsage
from agentscope.tool import Toolkit
from scripted import ScriptedModel, calls, delegating_tool, make_agent, run, text, tool

from agentscope_harness import (
    CostPolicy,
    Harness,
    HarnessConfig,
    ModelPrice,
    Principal,
    TerminalState,
    ToolPolicy,
)
from agentscope_harness.stores import MemoryStore

KEY = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
PRICE = {"scripted": ModelPrice(input_per_mtok=1.0, output_per_mtok=1.0)}
QUOTA = CostPolicy(daily_quota_usd=5.0, prices=PRICE)
ALICE = Principal(user_id="u1", tenant="t")


# ----------------------------------------------------------- a chunked model

class ChunkModel(ScriptedModel):
    """Streams the given chunk lists (one list per call); a float in a list is a sleep."""

    def __init__(self, rounds: list[list[Any]], **kw: Any) -> None:
        super().__init__([], stream=True, **kw)
        self.rounds = list(rounds)

    async def _call_api(self, model_name: str, messages: list, tools: Any = None, tool_choice: Any = None, **kw: Any) -> Any:
        from agentscope_harness.testing import Turn
        self.calls.append(Turn(formatted=await self.formatter.format(messages), tool_choice=tool_choice,
                               model=model_name, tools=tools, messages=list(messages)))
        items = self.rounds.pop(0)

        async def gen():
            for it in items:
                if isinstance(it, (int, float)):
                    await asyncio.sleep(it)
                else:
                    yield ChatResponse(content=it if isinstance(it, list) else [it], is_last=False)
        return gen()


# ------------------------------------------------- the stored context

async def lookup(q: str) -> str:
    """Look up.

    Args:
        q (str): The query.
    """
    return "nothing"


async def test_a_secret_across_two_text_blocks_of_a_tool_round_is_stored_redacted() -> None:
    first = ChatResponse(
        content=[TextBlock(text=f"Your key is {KEY[:14]}"), TextBlock(text=f"{KEY[14:]} ok."),
                 ToolCallBlock(id="c1", name="lookup", input='{"q": "x"}')],
        is_last=True, usage=ChatUsage(input_tokens=10, output_tokens=10, time=0.0))
    model = ScriptedModel([first, text("All set.")], stream=True, chunk=100)
    h = Harness(HarnessConfig(), load_entry_points=False)
    agent = make_agent(model, [lookup], middlewares=h.middlewares())
    with h.acting_for(Principal(user_id="u-42")):
        events, final = await run(agent, "go")
    streamed = "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))
    assert KEY[:14] not in streamed and KEY[14:] not in streamed, streamed  # the stream redacted it
    assert "[redacted:openai_key]" in streamed
    stored = [b.text for m in agent.state.context if not isinstance(m.content, str)
              for b in m.content if isinstance(b, TextBlock)]
    joined = "".join(stored)
    assert KEY not in joined and KEY[14:] not in joined, f"stored context keeps the key raw: {stored}"
    # and the next request carried it to the provider as one text
    sent = json.dumps(model.calls[-1]["formatted"])
    assert KEY[14:] not in sent, "the next request carries the raw key"


async def submit(answer: str) -> str:
    """Submit the answer.

    Args:
        answer (str): The answer.
    """
    return answer


async def test_replaced_answer_is_not_stored_raw() -> None:
    model = ScriptedModel([text(f"Here is your key {KEY} and I am done."),
                           calls(("submit", {"answer": "All set."}))], stream=True)
    h = Harness(HarnessConfig(tools={"submit": ToolPolicy(role="finish")}), load_entry_points=False, environ={})
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(submit)])), h.middlewares())
    with h.acting_for(Principal(user_id="u-42")):
        events, final = await run(agent, "go")
    streamed = "".join(e.delta for e in events if isinstance(e, TextBlockDeltaEvent))
    assert KEY not in streamed  # never shown
    assert h.last_report(agent).terminal_state.value == "completed"
    stored = json.dumps([m.model_dump(mode="json") for m in agent.state.context])
    assert KEY not in stored, "the stored context keeps the replaced answer's key raw"


# ------------------------------------------------------------ the cut

async def test_fallback_after_cut_is_a_block_of_its_own_when_the_cut_text_end_was_held() -> None:
    model = ChunkModel([[
        TextBlock(id="t", text="Your refund was issued, the token is sk-"),  # a secret's possible opening: held
        ThinkingBlock(id="k", thinking="let me think"),  # AgentScope ends the text block here
        5.0,  # the provider stalls: the deadline cuts the call
    ]])
    h = Harness(HarnessConfig(deadline_s=1.0), load_entry_points=False)
    agent = make_agent(model, [], middlewares=h.middlewares())
    with h.acting_for(Principal(user_id="u-42")):
        events, final = await run(agent, "refund?")
    report = h.last_report(agent)
    assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "deadline")
    fb = final.get_text_content()
    assert fb.startswith("I could not complete")
    model_block = next(e.block_id for e in events if isinstance(e, TextBlockDeltaEvent) and "refund" in e.delta)
    fallback_block = next(e.block_id for e in events if isinstance(e, TextBlockDeltaEvent) and "could not complete" in e.delta)
    starts = [e.block_id for e in events if isinstance(e, TextBlockStartEvent)]
    ends = [e.block_id for e in events if isinstance(e, TextBlockEndEvent)]
    assert fallback_block != model_block, (
        f"the fallback streamed inside the cut block {model_block} (starts {starts}, ends {ends})")
    assert fallback_block in starts


async def test_a_call_whose_end_was_held_at_the_cut_ends_before_the_fallback_block() -> None:
    """Parallel calls take turns (AgentScope ends c1 when a chunk carries
    only c2) while c1's arguments hold back a secret's opening: its end is
    held; the cut drops what it held but keeps the end, which then comes
    after the whole fallback text block (the UI shows a call open across it)."""
    model = ChunkModel([[ToolCallBlock(id="c1", name="submit", input='{"answer": "sk-'),
                         ToolCallBlock(id="c2", name="submit", input='{"answer": "x'), 5.0]])
    h = Harness(HarnessConfig(deadline_s=1.0), load_entry_points=False, environ={})
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(submit)])), h.middlewares())
    with h.acting_for(Principal(user_id="u-42")):
        events, final = await run(agent, "go")
    assert h.last_report(agent).reason == "deadline"
    order = [(type(e).__name__, getattr(e, "tool_call_id", None) or getattr(e, "block_id", None)) for e in events
             if isinstance(e, (ToolCallEndEvent, TextBlockStartEvent))]
    first_fallback = next(i for i, (n, _) in enumerate(order) if n == "TextBlockStartEvent")
    c1_end = order.index(("ToolCallEndEvent", "c1"))
    assert c1_end < first_fallback, f"c1 ends after the fallback block started: {order}"


# ------------------------------------------------- a candidate's quota

class SpendStoreDown(MemoryStore):
    async def get_spend(self, key, day=None, **kw):
        raise ConnectionError("spend store down")


async def _drive(lead_store, sub_store, with_candidate: bool):
    sub_h = Harness(HarnessConfig(store=sub_store, cost=QUOTA), load_entry_points=False, environ={})
    sub = make_agent(ScriptedModel([text("Sub-agent's finding: 42.")]), [], sub_h.middlewares(), name="researcher")
    lead_h = Harness(HarnessConfig(store=lead_store), candidate=HarnessConfig(cost=QUOTA) if with_candidate else None,
                     load_entry_points=False, environ={})
    lead_model = ScriptedModel([calls(("delegate", {"task": "find it"})), text("Done.")])
    lead = make_agent(lead_model, lead_h.instrument(Toolkit(tools=[tool(delegating_tool(sub))])), lead_h.middlewares(),
                      name="lead")
    with lead_h.acting_for(ALICE):
        _, final = await run(lead, "go")
    return sub_h.last_report(sub), lead_model


async def test_without_a_candidate_the_sub_agent_answers() -> None:
    report, lead_model = await _drive(SpendStoreDown(), MemoryStore(), with_candidate=False)
    assert (report.terminal_state.value, report.reason) == ("completed", "answered")


async def test_a_candidates_failed_quota_read_never_refuses_a_live_sub_agent() -> None:
    report, lead_model = await _drive(SpendStoreDown(), MemoryStore(), with_candidate=True)
    assert (report.terminal_state.value, report.reason) == ("completed", "answered"), (
        report.terminal_state.value, report.reason, lead_model.calls[-1].last_result[:300])


async def test_a_live_sub_agent_keeps_its_own_quota_beside_a_candidates_read() -> None:
    sub_store = MemoryStore()
    await sub_store.add_spend(ALICE.key, 5.0)  # the principal spent the whole quota today (in the sub-agent's store)
    control, _ = await _drive(MemoryStore(), sub_store, with_candidate=False)
    assert control.terminal_state.value == "incomplete"  # refused: quota spent
    sub_store2 = MemoryStore()
    await sub_store2.add_spend(ALICE.key, 5.0)
    report, lead_model = await _drive(MemoryStore(), sub_store2, with_candidate=True)
    assert (report.terminal_state.value, report.reason) == (control.terminal_state.value, control.reason), (
        "with a candidate on the lead, the live sub-agent's quota is judged on the lead store's spend:",
        report.terminal_state.value, report.reason)


# ------------------------------------------- shadow: a budget question

async def long_search(q: str) -> str:
    """Search.

    Args:
        q (str): The query.
    """
    return f"found {q} " + " ".join(f"{q}{i}" for i in range(400))


long_search.__name__ = "search"


async def test_shadow_budget_question_is_not_reported_waiting_input() -> None:
    h = Harness(HarnessConfig(mode="shadow", store=MemoryStore(),
                              cost=CostPolicy(cap_usd=0.002, prices=PRICE, on_exhausted="ask")),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"})),
                           calls(("search", {"q": "c"})), text("The answer.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(long_search)])), h.middlewares())
    with h.acting_for(Principal(user_id="u1", tenant="t")):
        _, final = await run(agent, "q")
    report = h.last_report(agent)
    assert final.get_text_content() == "The answer." and len(model.calls) == 4
    assert report.terminal_state.value != "waiting_input", (report.terminal_state.value, report.reason)
    # the question enforcing would ask is recorded, not asked (as a call's ask is)
    assert any(d.hook == "budget_router" and d.action == "ask" for d in report.decisions)
    assert not any("was not made" in d.detail for d in report.decisions)  # it was made


async def test_shadow_records_the_budget_question_once_a_run() -> None:
    """Enforcing asks once and the run ends there; shadow mode lets the
    rounds after it run, and records the question it would have asked once
    (each call past the cap is still recorded as one that would not be made)."""
    h = Harness(HarnessConfig(mode="shadow", store=MemoryStore(),
                              cost=CostPolicy(cap_usd=0.002, prices=PRICE, on_exhausted="ask")),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("search", {"q": q})) for q in "abcdef"] + [text("The answer.")])
    agent = make_agent(model, h.instrument(Toolkit(tools=[tool(long_search)])), h.middlewares())
    with h.acting_for(Principal(user_id="u1", tenant="t")):
        _, final = await run(agent, "q")
    report = h.last_report(agent)
    assert final.get_text_content() == "The answer." and len(model.calls) == 7
    asks = [d for d in report.decisions if d.hook == "budget_router" and d.action == "ask"]
    unmade = [d for d in report.decisions if "would not be made" in d.detail]
    assert len(asks) == 1 and not asks[0].enforced, asks
    assert len(unmade) >= 3, unmade
