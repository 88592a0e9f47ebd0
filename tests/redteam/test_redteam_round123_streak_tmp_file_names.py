"""Round 123 (red team on round 122). Round 123 red team: round 122's ``facts._TEMP_NAME`` drops "whatever stands right under a
``tmp`` or ``temp`` folder" from a failure's words. A job whose inputs are staged in /tmp
fails naming the input it lacks -- ``/tmp/report_q1.csv``, then ``/tmp/report_q2.csv``,
then ``/tmp/report_q3.csv`` -- and the model stages each (a successful mutation between):
three different, fixed failures now read as the same words ("missing input tmp"), so the
fourth, honest, attempt is refused ``repeated_failure`` (hard, never escapes) and the job
never runs. Round 121 (HEAD) read ``report_q1`` / ``report_q2`` as words: the job ran.
Same on Windows (``C:\\Temp\\ledger_march.xlsx``) and in a URL (``https://cdn.example/tmp/...``).

README, repeat_call_gate: "across a successful mutation the streak goes on only if the call
fails in the same words again, the drift tracker's volatile tokens ..., a temporary file's
name (Python's `tmpk_qzwvbn2`, `mktemp`'s `tmp.AbCdEfGhIj`, .NET's `tmpA961.tmp`), ...
left out: the model may have fixed what made it fail". ``report_q2.csv`` is no temporary
file's name: it is what the failure says.
"""
from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ScriptedModel, calls, make_agent, run, text, tool_messages

pytestmark = pytest.mark.asyncio

PATHS = {
    "posix_tmp": ["/tmp/report_q1.csv", "/tmp/report_q2.csv", "/tmp/report_q3.csv"],
    "windows_temp": [r"C:\Temp\ledger_march.xlsx", r"C:\Temp\ledger_april.xlsx", r"C:\Temp\ledger_may.xlsx"],
    "url": ["https://cdn.example.com/tmp/invoice_north.pdf", "https://cdn.example.com/tmp/invoice_south.pdf",
            "https://cdn.example.com/tmp/invoice_west.pdf"],
    "control_data_dir": ["/data/report_q1.csv", "/data/report_q2.csv", "/data/report_q3.csv"],
}
STAGED: set[str] = set()
WHICH: list[str] = []
RAN: list[str] = []


async def run_job(job: str) -> str:
    """Run a job.

    Args:
        job (str): The job.
    """
    for path in PATHS[WHICH[0]]:
        if path not in STAGED:
            raise FileNotFoundError(f"job {job} cannot start: missing input {path}")
    RAN.append(job)
    return f"job {job} finished"


async def stage_input(path: str) -> str:
    """Stage an input file.

    Args:
        path (str): The file.
    """
    STAGED.add(path)
    return f"staged {path}"


@pytest.mark.parametrize("which", list(PATHS))
async def test_three_fixed_failures_naming_other_files_are_not_one(which: str) -> None:
    STAGED.clear(), RAN.clear()
    WHICH[:] = [which]
    first, second, third = PATHS[which]
    h = Harness(HarnessConfig(tools={"run_job": ToolPolicy(role="mutation"),
                                     "stage_input": ToolPolicy(role="mutation")}),
                load_entry_points=False, environ={})
    model = ScriptedModel([
        calls(("run_job", {"job": "quarterly"})),
        calls(("stage_input", {"path": first})),
        calls(("run_job", {"job": "quarterly"})),
        calls(("stage_input", {"path": second})),
        calls(("run_job", {"job": "quarterly"})),
        calls(("stage_input", {"path": third})),
        calls(("run_job", {"job": "quarterly"})),
        text("The quarterly job finished."),
    ])
    agent = make_agent(model, [run_job, stage_input], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    await run(agent, "run the quarterly job")
    report = h.last_report(agent)
    last = tool_messages(model.calls[-1])[-1]
    assert RAN == ["quarterly"], (
        f"three failures naming three different files, each fixed, taken for one: the 4th run was told "
        f"{last!r}; report {report.terminal_state.value}/{report.reason}, refusals {report.refusals}")
