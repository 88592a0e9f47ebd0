"""Red team, round 99 (a). Two Harnesses, each with a run concurrency limit
(``scope="principal", max_in_flight=1``), each on its own store: a lead
under ``h1`` starts a sub-agent (``h1``) in the background and settles;
``h1``'s ``close_run`` keeps the lead's slot for it and sets the lead's
``after_nested`` to ``h1``'s ``_release_kept``. The sub-agent then asks a
helper agent under ``h2``: ``h2``'s ``open_run`` sees a nested run under a
settled root and *overwrites* the root's ``after_nested`` with its own
``_release_kept``. When the last nested run ends only ``h2`` lets go:
``h1``'s kept slot is never released (``h1.services.fleet._holds`` keeps
the lead, its renewer runs on) and, once everything has ended, the
principal's next run under ``h1`` is refused ``concurrency_limited`` for
the whole ``lease_s``."""

from __future__ import annotations

import asyncio
from typing import Any

from background_kit import spawner
from scripted import ALICE, ScriptedModel, calls, delegating_tool, make_agent, run, search, slow, text

from agentscope_harness import ConcurrencyLimit, Harness, HarnessConfig, TerminalState


def limited() -> Harness:
    config = HarnessConfig(concurrency_limits=[ConcurrencyLimit(scope="principal", max_in_flight=1)])
    return Harness(config, load_entry_points=False, environ={})


async def test_a_helper_under_another_harness_does_not_strand_the_leads_kept_slot() -> None:
    h1, h2 = limited(), limited()
    helper = make_agent(ScriptedModel([text("checked")]), [search], h2.middlewares(), name="helper")
    child = make_agent(ScriptedModel([calls(("slow", {"seconds": 0.2})), calls(("delegate", {"task": "check"})),
                                      text("migrated")]),
                       [slow, delegating_tool(helper)], h1.middlewares(), name="migrator")
    background: list[asyncio.Task[Any]] = []

    spawn = spawner(child, background)

    lead = make_agent(ScriptedModel([calls(("spawn", {"task": "migrate"})), text("under way")]), [spawn],
                      h1.middlewares(), name="lead")
    with h1.acting_for(ALICE):
        await run(lead, "migrate my data")
        await asyncio.gather(*background)
    assert h1.last_report(child).terminal_state is TerminalState.COMPLETED
    await asyncio.sleep(0.05)  # slots given back in the background are back
    fleet = h1.services.fleet
    assert fleet._holds == {}, f"h1 still holds the settled lead's slot after every run ended: {list(fleet._holds)}"
    other = make_agent(ScriptedModel([calls(("search", {"q": "invoices"})), text("found")]), [search],
                       h1.middlewares(), name="other")
    with h1.acting_for(ALICE):
        await run(other, "find my invoices")
    assert h1.last_report(other).terminal_state is TerminalState.COMPLETED
