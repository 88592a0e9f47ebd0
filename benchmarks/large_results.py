"""Large tool results end to end: one reply whose only tool returns 10 KB,
1 MB or 5 MB (text or JSON, with and without a trigger word), through a
real Agent, bare and harnessed (the whole ``post_tool_call`` chain:
truncation, content filter, fence...). Figures: the reply's wall time and
the longest event-loop block while it runs (a ticker task records the
largest gap between its wake-ups)."""

from __future__ import annotations

import gc
from typing import Any

from agentscope.tool import FunctionTool, Toolkit

from agentscope_harness import ToolPolicy

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


CRAFTED: dict[str, tuple[str, dict]] = {
    "digit groups, tool pii on": ("4111 ", {"tools": {"fetch": ToolPolicy(
        role="other", pii={"card": "redact", "phone": "mask", "iban": "hash", "email": "redact"})}}),
    "IBAN-like groups, tool pii on": ("DE12 ", {"tools": {"fetch": ToolPolicy(
        role="other", pii={"card": "redact", "phone": "mask", "iban": "hash", "email": "redact"})}}),
    "near misses of 60 secret values": ("svc0", {"secret_values": [f"svc{i:03d}-Zq7Rt2Lm9Xv4" for i in range(60)]}),
}
"""Text crafted against a step's cost, and the config that runs that step:
every group a card, phone or IBAN candidate; every position a secret value's
opening. The loop's longest block must stay what prose gives."""


async def measure(text: str, harnessed: bool, whole: bool = False, **config: Any) -> tuple[float, float]:
    """Wall ms of a reply reading ``text`` once, and the longest loop block (ms)."""
    raised = {"result_max_tokens": 10**8} if whole else {}
    policy = {"tools": {}, **config}
    h = harness(full_policy(ledgers={}, enough_candidates=None, **raised, **policy)) if harnessed else None
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
    for kind, (unit, config) in CRAFTED.items():
        n = SIZES[size][-1] // 5 if size == "full" else SIZES[size][-1]
        text = (unit * (n // len(unit) + 1))[:n]
        blocks = [(await measure(text, harnessed, **config))[1] for harnessed in (False, True, False, True)]
        bb, hb = min(blocks[0::2]), min(blocks[1::2])
        section.figures.append(Figure(
            "large results", f"{n // 1000:,} KB crafted: {kind}: longest loop block", hb, bb, unit="ms",
            goal=f"harness adds no block over {GOAL_BLOCK_MS:.0f} ms",
            met=(hb <= max(GOAL_BLOCK_MS, bb * 1.1)) if size == "full" else None, show_ratio=False,
        ))
    return section
