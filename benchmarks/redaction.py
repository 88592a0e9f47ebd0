"""Redaction of large tool results: total time, and the longest event-loop
block while ``Redactor.redact_async`` runs (a ticker task records the largest
gap between its wake-ups). Ordinary text and JSON, with and without trigger
words, and adversarial inputs. Bare = the same text through ``str.replace``
of one literal (the floor of touching every character once)."""

from __future__ import annotations

import json
import time

from agentscope_harness.hooks.safety import _as_read as read_as_the_user_reads
from agentscope_harness.outputs import written_by_hook
from agentscope_harness.redaction import Redactor
from agentscope_harness.sentinels import neutralise_markers

from ._common import _document, timed_on_loop
from ._report import Figure, Section

SIZES = {"full": (10_000, 1_000_000, 5_000_000), "quick": (10_000, 100_000)}
GOAL_MS_PER_MB = 15.0
GOAL_BLOCK_MS = 5.0


def inputs(size: int) -> dict[str, str]:
    text = _document("kettle", size)
    rows = json.dumps([{"id": i, "name": "kettle", "region": "eu-west-1", "note": "in stock"}
                       for i in range(size // 70)])[:size]
    middle = size // 2
    return {
        "text": text,
        "json": rows,
        "text + 'Asia'": text[:middle] + " Asia " + text[middle:],
        "text + 'secret'": text[:middle] + " secret " + text[middle:],
        "json + 'password'": rows[:middle] + ' "password" ' + rows[middle:],
        "eyJ repeated": ("eyJ" * (size // 3 + 1))[:size],
        "eyJ + a*N": "eyJ" + "a" * (size - 3),
        "eyJ tokens, dense": ("eyJabcd." * (size // 8 + 1))[:size],  # a secret every 8 characters
        "repeated key headers": ("-----BEGIN RSA PRIVATE KEY-----\n" * (size // 32 + 1))[:size],
    }


def hook_edits(size: int) -> dict[str, tuple[str, str]]:
    """A result before and after a user's ``post_tool_call`` hook edited it
    (``written_by_hook`` shapes the edit's seams): an ordinary page, one
    word changed; brackets no marker follows, one ``&lt;`` unescaped; the
    whole text rewritten to them."""
    page = _document("kettle", size)
    return {
        "one word": (page, "Howdy" + page[5:]),
        "'&lt;' unescaped before brackets": ("&lt;" + "<" * size, "<" * (size + 1)),
        "all rewritten to '<'": ("x" * size, "<" * size),
    }


async def measure(redactor: Redactor, text: str) -> tuple[float, float, str]:
    """Total ms and the longest loop block (ms) of ``redact_async``."""
    return await timed_on_loop(redactor.redact_async(text))


async def run(size: str = "full") -> Section:
    redactor = Redactor()
    section = Section("Redaction of large results")
    for n in SIZES[size]:
        for name, text in inputs(n).items():
            best_total, best_block = float("inf"), float("inf")
            for _ in range(3):
                total, block, _ = await measure(redactor, text)
                best_total, best_block = min(best_total, total), min(best_block, block)
            t0 = time.perf_counter()
            text.replace("\x00", "")
            bare = (time.perf_counter() - t0) * 1000
            mb = n / 1_000_000
            adversarial = name.startswith(("eyJ", "repeated"))
            goal = f"<= {GOAL_MS_PER_MB * max(mb, 1):.0f} ms" if mb >= 1 and not adversarial else ""
            section.figures.append(Figure(
                "redaction", f"{n // 1000:,} KB {name}: total ms", best_total, bare, unit="ms",
                goal=goal, met=(best_total <= GOAL_MS_PER_MB * mb) if goal and size == "full" else None,
                show_ratio=False,
            ))
            section.figures.append(Figure(
                "redaction", f"{n // 1000:,} KB {name}: longest loop block", best_block, None,
                unit="ms", goal=f"<= {GOAL_BLOCK_MS:.0f} ms",
                met=best_block <= GOAL_BLOCK_MS if size == "full" else None, show_ratio=False,
            ))
        for name, (before, after) in hook_edits(n).items():
            blocks = [(await timed_on_loop(written_by_hook(before, after, redactor, {}, b"salt")))[1] for _ in range(3)]
            section.figures.append(Figure(
                "redaction", f"{n // 1000:,} KB, a hook's edit ({name}): longest loop block", min(blocks), None,
                unit="ms", goal=f"<= {GOAL_BLOCK_MS:.0f} ms",
                met=min(blocks) <= GOAL_BLOCK_MS if size == "full" else None, show_ratio=False,
            ))
        marker_text = inputs(n)["text"]
        t0 = time.perf_counter()
        neutralise_markers(marker_text)
        section.details.append(
            f"  neutralise_markers, {n // 1000:,} KB text: {(time.perf_counter() - t0) * 1000:.2f} ms",
        )
        for name, answer in answers(n).items():
            t0 = time.perf_counter()
            read_as_the_user_reads(answer)
            ms = (time.perf_counter() - t0) * 1000
            section.figures.append(Figure(
                "redaction", f"{n // 1000:,} KB answer read for claims ({name}): ms", ms, None, unit="ms",
                goal=f"<= {GOAL_CLAIMS_MS_PER_MB:.0f} ms a MB",
                met=ms <= GOAL_CLAIMS_MS_PER_MB * max(n / 1_000_000, 0.1) if size == "full" else None,
                show_ratio=False,
            ))
    return section


GOAL_CLAIMS_MS_PER_MB = 500.0
"""The final answer is read for claims once per reply (on the loop): linear, whatever it holds."""


def answers(size: int) -> dict[str, str]:
    """Final answers built against the claims reading's patterns: one long
    word beside a non-ASCII letter (each word once, not each position),
    openings that never close, mixed scripts, markup everywhere."""
    return {
        "one long word and an accent": "a" * (size - 2) + " é",
        "unclosed '<a x'": ("<a x " * (size // 5 + 1))[:size],
        "unclosed '~~'": ("~~a " * (size // 4 + 1))[:size],
        "mixed scripts": ("Заказ A-1 cаncelled **ok** " * (size // 26 + 1))[:size],
        "hidden elements": ('<span hidden>x</span><b title="y">z</b> ' * (size // 40 + 1))[:size],
    }
