"""Round 166 a: an exploring hint given in a text round that terminal_enforcer then constrains.

README "The hooks" (after the table): "no hint invites exploring once the run is
constrained (one given in the round that then constrained it is dropped before the model
reads it; its `hint` decision stays in the report)". Row 23 terminal_enforcer: "Text answer
while a finishing tool is required: one more round with a nudge and `tool_choice` narrowed
to the finishing tool".

Attack: two rounds without news, then the model answers in text. At that post_reflect
drift_detector (priority 20) hints "Change approach" and terminal_enforcer (priority 60)
constrains the run (tool_choice narrowed to `submit`). Round 165 b drops an exploring hint
only from the deferred hints (a round that called tools); a text round's hints are added
at once (``_post_reflect``), so the model narrowed to `submit` reads "Change approach".
"""

from __future__ import annotations

from hookkit import Ran, drive, harnessed, hint_texts
from scripted import calls, text

from agentscope_harness import HarnessConfig, ToolPolicy


async def test_no_change_approach_reaches_a_model_narrowed_to_submit() -> None:
    ran = Ran()

    async def search(q: str) -> str:
        """Search the catalogue.

        Args:
            q (str): The query.
        """
        ran.append(("search", {"q": q}))
        return "3 products: red mug, blue mug, green mug"

    async def submit(answer: str) -> str:
        """Deliver the answer.

        Args:
            answer (str): The answer.
        """
        return answer

    config = HarnessConfig(
        tools={"search": ToolPolicy(role="retrieval"), "submit": ToolPolicy(role="finish")},
        stall_rounds=2, loop_threshold=20, loop_window=20,
    )
    script = [calls(("search", {"q": f"mugs {i}"})) for i in range(3)] + [
        text("We have red, blue and green mugs."),
        calls(("submit", {"answer": "red, blue and green mugs"})), text("done"),
    ]
    h, model, agent = harnessed(config, script, [search, submit])
    _, final, report = await drive(h, agent)
    narrowed = [c for c in model.calls if getattr(c.tool_choice, "mode", None) == "submit"]
    assert narrowed, [c.tool_choice for c in model.calls]
    first = narrowed[0]
    i = model.calls.index(first)
    told_now = hint_texts(first)[len(hint_texts(model.calls[i - 1])):]
    assert any("call submit" in t for t in told_now), told_now  # the constrain rung's nudge
    # the break: the model narrowed to submit is told to change approach (explore) beside it
    assert not any("Change approach" in t or "going round in circles" in t for t in told_now), told_now
