"""Progress is judged on what the model reads: redacted, truncated, inside
the fence. Red team: a result made long only by a secret (redacted to a few
characters, so the model reads it whole) brings new facts in its middle;
judging the raw head and tail would call it stalled."""

from __future__ import annotations

from hookkit import Ran, drive, harnessed, results
from scripted import calls, text

from agentscope_harness import HarnessConfig, ToolPolicy

TOKEN = "eyJ" + "a" * 6000 + "." + "b" * 5000 + "." + "c" * 500
ROUNDS = 8


def _tools(ran: Ran) -> list:
    async def search(q: str) -> str:
        """Search the catalogue.

        Args:
            q (str): The query.
        """
        n = len(ran)
        ran.append(("search", {"q": q}))
        fresh = " ".join(f"item{n}x{j}" for j in range(30))
        return f"session={TOKEN}\n{fresh}\nsession={TOKEN}"

    async def submit(answer: str) -> str:
        """Deliver the answer.

        Args:
            answer (str): The answer.
        """
        return "delivered"

    return [search, submit]


async def test_new_facts_between_long_secrets_are_progress() -> None:
    ran = Ran()
    cfg = HarnessConfig(tools={"search": ToolPolicy(role="retrieval"), "submit": ToolPolicy(role="finish")},
                        result_max_tokens=1000)
    script = [calls(("search", {"q": f"query {i}"})) for i in range(ROUNDS)]
    h, model, agent = harnessed(cfg, [*script, calls(("submit", {"answer": "done"})), text("ok")], _tools(ran))
    _, _, report = await drive(h, agent)
    assert len(ran) == ROUNDS
    assert report.terminal_state.value == "completed", report.reason
    last = results(model)[-1]
    assert f"item{ROUNDS - 1}x0" in last and "omitted" not in last  # read whole, redacted
    assert TOKEN[:40] not in last
