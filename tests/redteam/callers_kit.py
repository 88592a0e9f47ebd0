"""Two callers and the agents they share: the kit of rounds 172 c to 175 b (a stopped lead's
background work; a block bound to another caller with `acting_for` inside a run's tool).
`notes` records what it read (`LOG`) and the time it saw left (`SEEN`), taking `DELAY[0]`
seconds; `fresh` starts a test clean."""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agentscope.tool import Toolkit
from scripted import ScriptedModel, calls, make_agent, text, tool

from agentscope_harness import Harness, Principal, ToolPolicy, remaining_time

ALICE = Principal(user_id="alice", tenant="acme")
ALICE_R2 = Principal(user_id="alice", tenant="acme", request_id="r-2")
BOB = Principal(user_id="bob", tenant="acme")
LOG: list = []
SEEN: list = []
DELAY = [0.0]
POLICIES = {"notes": ToolPolicy(role="retrieval"), **{name: ToolPolicy(role="other") for name in (
    "ask", "start", "wait", "peek", "help_owner", "start_worker", "ask_worker")}}


def fresh(delay_s: float = 0.0) -> None:
    """A test's start: nothing read yet, each `notes` call taking `delay_s`."""
    LOG.clear()
    SEEN.clear()
    DELAY[0] = delay_s


async def notes(q: str) -> str:
    """Read notes.

    Args:
        q (str): Query.
    """
    SEEN.append(("notes-remaining", remaining_time()))
    if DELAY[0]:
        await asyncio.sleep(DELAY[0])
    LOG.append(("notes", q))
    return f"note about {q}: fine"


def notes_agent(h: Harness, name: str = "worker", n: int = 3, agent_adapter: bool = True) -> Any:
    """An agent under `h` that reads `n` notes, then answers (the tool adapter alone
    without `agent_adapter`)."""
    model = ScriptedModel([*(calls(("notes", {"q": f"{name}-{i}"})) for i in range(n)), text(f"{name} done")])
    return make_agent(model, h.instrument(Toolkit(tools=[tool(notes)])),
                      h.middlewares() if agent_adapter else h.middlewares()[1:], name=name)


def lead_agent(h: Harness, fns: list[Callable[..., Any]], script: list, name: str = "lead") -> Any:
    """A lead under `h` with the tools `fns`, playing `script`."""
    return make_agent(ScriptedModel(script), h.instrument(Toolkit(tools=[tool(f) for f in fns])), h.middlewares(),
                      name=name)


def ask_lead(h: Harness, body: Callable[[str], Any], name: str = "lead") -> Any:
    """A lead under `h` that calls its `ask` tool once (`q="x"`), which runs `body(q)`, then
    answers "done"."""

    async def ask(q: str) -> str:
        """Ask.

        Args:
            q (str): What.
        """
        return await body(q)

    return lead_agent(h, [ask], [calls(("ask", {"q": "x"})), text("done")], name=name)
