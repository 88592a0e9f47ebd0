"""A reply stream its consumer stops reading but keeps (a reference, or an
exception's traceback holding the frame that read it) is not abandoned: its
run goes on holding what it holds, its principal's run slot too, until the
stream is closed, dropped, or the agent's next reply starts. README, "Nothing
leaks from a run" (round 182 b: with one agent a conversation there may be no
next reply; close what you stop reading)."""
from __future__ import annotations

import asyncio
from contextlib import aclosing

from agentscope.message import UserMsg
from scripted import ALICE, ScriptedModel, calls, make_agent, run, text

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig, TerminalState


async def search(q: str) -> str:
    """Search.

    Args:
        q (str): The query.
    """
    return f"found {q}"


def one_at_a_time() -> Harness:
    return Harness(HarnessConfig(concurrency_limits=[ConcurrencyLimit(scope="principal", max_in_flight=1)]),
                   load_entry_points=False, environ={})


def conversation(h: Harness, answer: str):
    model = ScriptedModel([calls(("search", {"q": answer})), text(answer)])
    return make_agent(model, [search], h.middlewares())


async def test_a_kept_stream_holds_its_run_slot_until_it_is_closed() -> None:
    h = one_at_a_time()
    first, second = conversation(h, "first"), conversation(h, "second")
    with h.acting_for(ALICE):
        kept = first.reply_stream(UserMsg("user", "go"))
        await kept.__anext__()  # the run is open; the consumer stops reading, the stream kept
        assert len(h.table) == 1
        _, refused = await run(second)  # another conversation of the same user: the slot is held
        report = h.last_report(second)
        assert (report.terminal_state, report.reason) == (TerminalState.INCOMPLETE, "concurrency_limited")
        assert "too many requests are already running" in refused.get_text_content()
        assert second.model.calls == []
        assert h.last_report(first) is None  # the kept run is not settled
        async with aclosing(kept):
            pass  # closed: settled soon after (AgentScope closes the reply's layers in a task)
        for _ in range(50):
            if h.last_report(first) is not None:
                break
            await asyncio.sleep(0.01)
        assert h.last_report(first).terminal_state == TerminalState.CANCELLED
        assert len(h.table) == 0
        _, final = await run(conversation(h, "third"))
    assert final.get_text_content() == "third"
