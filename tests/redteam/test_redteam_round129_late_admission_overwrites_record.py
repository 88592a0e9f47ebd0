"""Round 129 b. A call admitted late on the worker that parked a reply rewrites the
reply's park record over the newer one another worker wrote: the next park's answer,
on a third worker, is refused "answered already".

README "Running many workers": a parked reply's answer "reaching two workers at
once ..., or sent again on an old copy of the state, resumes one run, and the
other acts for nobody (... an earlier park's sent again, never takes the answer
of the park that waits ...)"; round 128 (`lifecycle.record_parked`): "a parked
run's record is written again when a call is admitted" after the park.

Attack: three workers on one SQLite file. Worker A: one turn calls a client-run
`verify_code` and a `lookup` whose own permission check takes 2 s there (its order service
answered late; instant on the other workers). The reader
closes the stream at the client's question; the app saves the state and sends
the client's result to worker B at once. B resumes the reply, the model asks the
client for a second code, and the reply parks again (B writes the record of
park 2). A's judging of `lookup` then ends and admits it: `record_parked` writes
A's run (park 1, claimed by B long ago) over B's record with INSERT OR REPLACE.
The client's second code reaches worker C.

What happens: C reads A's stale record (park 1), claims park 1's answer, which
B used, and ends the reply "answered already" (`incomplete`, nothing more
runs): the user's legitimate answer to the park that waits is refused. (C also
restores A's counts and spend, not B's.)
Should: a park record is rewritten only by the run of the park it records (a
conditional write on the park id, or no rewrite once the park's answer is
claimed); C resumes park 2 and the reply completes.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agentscope.message import UserMsg
from agentscope.tool import Toolkit

from agentscope_harness import Harness, TerminalState, ToolPolicy
from tests.redteam.park_kit import checked, instrumented, resumed
from tests.redteam.park_kit import worker as park_worker
from tests.scripted import ALICE, ScriptedModel, calls, client_result, make_agent, text, until_question

pytestmark = pytest.mark.asyncio


async def lookup(order_id: str) -> str:
    """Look an order up.

    Args:
        order_id (str): The order.
    """
    return f"order {order_id}: paid, not shipped"


def worker(path: str) -> Harness:
    return park_worker(path, tools={"lookup": ToolPolicy(role="lookup")})


def toolkit(h: Harness, delay: float = 0.0) -> Toolkit:
    # the order service is asked whether the caller may see it: slow on worker A only
    return instrumented(h, checked(lookup, delay))


@pytest.mark.parametrize("judged_for", [0.0, 2.0], ids=["control-judged-at-once", "judged-past-the-next-park"])
async def test_a_late_admission_on_the_first_worker_does_not_undo_the_second_park(tmp_path: Path,
                                                                                 judged_for: float) -> None:
    path = str(tmp_path / "fleet.db")
    model = ScriptedModel([calls(("verify_code", {"code": "123"}), ("lookup", {"order_id": "A-1"})),
                           calls(("verify_code", {"code": "456"})),
                           text("Both codes check out; order A-1 is paid."), text("x")])
    a = worker(path)
    first = make_agent(model, toolkit(a, delay=judged_for), a.middlewares())
    with a.acting_for(ALICE):
        asked = await until_question(first, UserMsg("user", "check my order A-1"))
    saved = first.state.model_dump_json()  # at once: lookup is still being judged on A

    b = worker(path)
    second = resumed(model, b, toolkit(b), saved)
    with b.acting_for(ALICE):
        asked_again = await until_question(second, client_result(asked, "code 123 ok"))
    assert asked_again is not None and asked_again.tool_calls[0].input  # park 2, recorded by B
    saved_again = second.state.model_dump_json()
    await asyncio.sleep(6.0)  # 3x A's judging: its lookup has been admitted (and its record rewritten)

    c = worker(path)
    third = resumed(model, c, toolkit(c), saved_again)
    with c.acting_for(ALICE):
        async for _ in third.reply_stream(client_result(asked_again, "code 456 ok")):
            pass
    report = c.last_report(third)
    assert report.terminal_state is TerminalState.COMPLETED and len(model.calls) == 3, (
        f"the client's answer to park 2 on a third worker: {report.terminal_state.value} ({report.reason}), "
        f"{len(model.calls)} model calls")
