"""Red team r112 (seq): an honest polling run, every executed poll of which
brings new information, is stopped as ``stalled`` ("no progress was being
made") and the user gets the fallback instead of the model's answer.

The model starts an export and polls ``export_status(job_id)`` as the job
advances (queued, 20 %, 55 %, 90 %, done). The harness first refuses two
polls as ``duplicate_call`` ("reuse its earlier result": the stale
"queued"), then the loop detector (``repetition._watch_loop``) sees the same
digest ``loop_threshold`` times in ``loop_window`` and constrains the run
with ``facts.stuck = "stalled"``, although every poll that ran was news to
the drift tracker (``new_fact_this_round`` was set each round). A real model
then answers in text (``tool_choice="none"``), and that answer is replaced
by "I could not complete this request (no progress was being made)";
the report says ``incomplete`` / ``stalled``.

README: "A productive 30-round run is never stopped"; hook 20/21: progress
is new information, ``stalled`` is ``stall_rounds`` rounds without it;
"a stalled or cycling run's answer given once it was made to conclude is
replaced by it" -- here the run was never stalled.
"""

from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio

STEPS = ["queued", "running: 20% (2,000 of 10,000 rows exported)", "running: 55% (5,500 of 10,000 rows exported)",
         "running: 90% (9,000 of 10,000 rows exported)", "done: download at https://files.example/exp/J-7.csv"]
SEEN: list[str] = []


async def start_export(table: str) -> str:
    """Start an export job.

    Args:
        table (str): The table.
    """
    return f"export job J-7 started for {table}"


async def export_status(job_id: str) -> str:
    """The status of an export job.

    Args:
        job_id (str): The job.
    """
    step = STEPS[min(len(SEEN), len(STEPS) - 1)]
    SEEN.append(step)
    return f"job {job_id}: {step}"


async def test_a_poll_that_brings_news_every_time_is_not_stopped_as_stalled() -> None:
    SEEN.clear()
    h = Harness(HarnessConfig(tools={"start_export": ToolPolicy(role="mutation"),
                                     "export_status": ToolPolicy(role="lookup")}),
                load_entry_points=False, environ={})
    poll = calls(("export_status", {"job_id": "J-7"}))
    answer = "Your export is still running (55% done, 5,500 of 10,000 rows); I will check again shortly."
    model = ScriptedModel([calls(("start_export", {"table": "orders"})), poll, poll, poll, poll, poll,
                           text(answer)])  # the last turn: tool_choice "none", a real model answers in text
    agent = make_agent(model, [start_export, export_status], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    _, final = await run(agent, "export my orders table and give me the link")
    report = h.last_report(agent)
    received = final.get_text_content() or ""
    assert SEEN == STEPS[:3], SEEN  # every poll that ran brought news: queued, 20 %, 55 %
    assert report.reason != "stalled", (report.terminal_state, report.reason, received)
    assert received == answer, received
