"""Rounds 166 a and 167 a: a withheld result in a parallel batch takes back what a readable one brought.

README row 8 phase_check: "`requires_facts` reached, in an earlier batch than the call
..., by a result the model read (one the harness withheld, `injection_blocked` or
`pii_blocked`, reaches none)". Row 20: a withheld result "brings no fact".

Attack: one batch, two retrieval calls. ``search_web``'s result is large (its
``content_filter`` pass yields the loop) and carries an email (``pii={"email": "block"}``:
withheld). ``search_docs`` answers a moment later, readable. ``found_in`` marks
``retrieved`` for the FIRST result to be shaped (search_web); search_docs finds it marked
and brings no edge; then search_web is withheld and ``unreach(["retrieved"])`` forgets it.
The model read search_docs' hits, yet ``rank`` (``requires_facts=["retrieved"]``) is
refused ``not_ready`` ("first retrieve") in the next batch.
"""

from __future__ import annotations

import asyncio

import pytest
from hookkit import Ran, drive, harnessed
from scripted import calls, text

from agentscope_harness import HarnessConfig, ToolPolicy


def _tools(ran: Ran, blocked: bool):
    async def search_web(q: str) -> str:
        """Search the web.

        Args:
            q (str): The query.
        """
        ran.append(("search_web", {"q": q}))
        body = " ".join(f"page{i} about {q}" for i in range(60_000))
        return body + (" contact: jane.doe@example.com" if blocked else "")

    async def search_docs(q: str) -> str:
        """Search the docs.

        Args:
            q (str): The query.
        """
        await asyncio.sleep(0.005)
        ran.append(("search_docs", {"q": q}))
        return f"doc hits for {q}: manual-7, faq-12, guide-3"

    async def rank(top: int) -> str:
        """Rank the hits.

        Args:
            top (int): How many.
        """
        ran.append(("rank", {"top": top}))
        return "ranked: manual-7, guide-3"

    return [search_web, search_docs, rank]


async def _go(blocked: bool):
    ran = Ran()
    cfg = HarnessConfig(tools={
        "search_web": ToolPolicy(role="retrieval", pii={"email": "block"}),
        "search_docs": ToolPolicy(role="retrieval"),
        "rank": ToolPolicy(role="selection", requires_facts=["retrieved"]),
    })
    script = [calls(("search_web", {"q": "router reset"}), ("search_docs", {"q": "router reset"})),
              calls(("rank", {"top": 2})), text("manual-7 says hold reset 10s.")]
    h, model, agent = harnessed(cfg, script, _tools(ran, blocked))
    _, final, report = await drive(h, agent)
    return ran, model, report


async def test_a_withheld_twin_does_not_take_back_what_the_read_result_brought() -> None:
    ran, model, report = await _go(blocked=True)
    told = model.calls[1].tool_results
    assert any("pii_blocked" in t for t in told) and any("manual-7, faq-12" in t for t in told), told
    refused = [(d.hook, d.code) for d in report.decisions if d.action == "refuse" and d.tool == "rank"]
    # the break: the model read search_docs' hits; rank is refused "first retrieve"
    assert refused == [], refused
    assert ran.of("rank") == [{"top": 2}], ran


@pytest.mark.parametrize("blocked", [False, True])
async def test_the_read_result_carries_the_next_step(blocked: bool) -> None:
    """Round 167 a: the next-step notice went on the twin shaped first; withheld, it took
    the notice with it, and the result the model read told no next step."""
    _, model, _ = await _go(blocked=blocked)
    docs = next(t for t in model.calls[1].tool_results if "manual-7, faq-12" in t)
    assert "You have results now" in docs
