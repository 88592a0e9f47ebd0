"""Large tool results end to end: one reply whose only tool returns 10 KB,
1 MB or 5 MB (text or JSON, with and without a trigger word), through a
real Agent, bare and harnessed (the whole ``post_tool_call`` chain:
truncation, content filter, fence...). Figures: the reply's wall time and
the longest event-loop block while it runs (a ticker task records the
largest gap between its wake-ups)."""

from __future__ import annotations

import gc

from agentscope.tool import FunctionTool, Toolkit

from ._common import ALLOW, full_policy, harness, make_agent, reply, timed_on_loop
from ._model import BenchModel, call, say
from ._report import Figure, Section
from .redaction import inputs

SIZES = {"full": (10_000, 1_000_000, 5_000_000), "quick": (10_000, 100_000)}
KINDS = ("text", "json", "text + 'Asia'", "text + 'secret'", "json + 'password'")
GOAL_MS_PER_MB = 15.0
GOAL_BLOCK_MS = 5.0


class _BigTools:
    """A ``Tools`` stand-in whose one tool returns ``text``."""

    def __init__(self, text: str) -> None:
        self.text = text

    def toolkit(self) -> Toolkit:
        text = self.text

        async def fetch(url: str) -> str:
            """Fetch a page.

            Args:
                url (str): The page address.
            """
            return text

        return Toolkit(tools=[FunctionTool(fetch, permission=ALLOW)])


WHOLE = "text, read whole"
"""The text kind again with ``result_max_tokens`` raised past it: the model
reads all of it, so nothing is truncated before the other steps."""


async def measure(text: str, harnessed: bool, whole: bool = False) -> tuple[float, float]:
    """Wall ms of a reply reading ``text`` once, and the longest loop block (ms)."""
    raised = {"result_max_tokens": 10**8} if whole else {}
    h = harness(full_policy(tools={}, ledgers={}, enough_candidates=None, **raised)) if harnessed else None
    model = BenchModel([call("fetch", url="https://example.com/big"), say("done")])
    agent = make_agent(model, _BigTools(text), h)  # type: ignore[arg-type]
    gc.collect()  # as overhead does: both variants start from a collected heap, not the last section's garbage
    total, longest, _ = await timed_on_loop(reply(agent, h))
    return total, longest


async def run(size: str = "full") -> Section:
    section = Section("Large tool results, end to end")
    for n in SIZES[size]:
        texts = inputs(n)
        for kind in (*KINDS, WHOLE):
            best: dict[bool, tuple[float, float]] = {}
            for harnessed in (False, True, False, True):
                total, block = await measure(texts["text" if kind == WHOLE else kind], harnessed, kind == WHOLE)
                prev = best.get(harnessed, (float("inf"), float("inf")))
                best[harnessed] = (min(prev[0], total), min(prev[1], block))
            (bt, bb), (ht, hb) = best[False], best[True]
            mb = n / 1_000_000
            full = size == "full"
            label = f"{n // 1000:,} KB {kind}"
            timed = mb >= 1 and kind != WHOLE  # read whole, the model's own payload grows with it
            section.figures += [
                Figure("large results", f"{label}: harness time", ht - bt, None, unit="ms",
                       goal=f"<= {GOAL_MS_PER_MB * max(mb, 1):.0f} ms" if timed else "",
                       met=(ht - bt <= GOAL_MS_PER_MB * mb) if full and timed else None,
                       show_ratio=False, note=f"reply {ht:,.1f} ms harnessed / {bt:,.1f} ms bare"),
                Figure("large results", f"{label}: longest loop block", hb, bb, unit="ms",
                       goal=f"harness adds no block over {GOAL_BLOCK_MS:.0f} ms",
                       met=(hb <= max(GOAL_BLOCK_MS, bb * 1.1)) if full else None, show_ratio=False),
            ]
    return section
