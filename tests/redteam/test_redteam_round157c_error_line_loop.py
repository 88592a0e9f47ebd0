"""Round 157 c red team on round 156 a's error first line (``context_shaping.truncate_result``).

README, "Performance" table: "1 MB tool result end to end: ... longest loop block ... <= 5 ms: met
(5 MB rows: up to 3.1 ms)"; hook 16: "a result of megabytes never holds the event loop"; Security:
"a result over 16 KB is redacted ... in steps ... the loop gets a turn after every millisecond".

Attack: a tool raises with a message of megabytes (a dumped payload in the exception, as a
validation error quoting its input does). truncate_result searches the WHOLE error text with
``_ERROR_LINE`` (``^.*(error|...).*$``, backtracking over every line) and then ``_FIRST_LINE``,
in one synchronous step on the event loop.
"""
from __future__ import annotations

import pytest
from scripted import calls, text

from agentscope_harness import HarnessConfig
from tests.perf.loopkit import loop_gaps

pytestmark = pytest.mark.asyncio

BIG = 5_000_000


async def fetch_page(url: str) -> str:
    """Fetch a web page.

    Args:
        url (str): The page.
    """
    raise ValueError("payload rejected: " + "x" * BIG)


async def fetch_blank(url: str) -> str:
    """Fetch a web page.

    Args:
        url (str): The page.
    """
    raise ValueError(" " * BIG + "\nupstream said no")


@pytest.mark.parametrize("tool", [fetch_page, fetch_blank], ids=["one_line", "blank_first"])
async def test_a_megabyte_error_result_does_not_hold_the_loop(tool) -> None:
    """Promise: a result of megabytes never holds the event loop (1 MB end to end: <= 5 ms; 5 MB
    rows up to 3.1 ms). Attack: the tool fails with a 5 MB message. Happened: truncate_result's
    error-line regexes scan all of it in one step (~200+ ms held). Should: within 3x the bare
    agent's gap (floor 100 ms)."""
    script = [calls((tool.__name__, {"url": "https://example.com"})), text("done"), text("done")]
    gap, bare, (model, bare_model), _ = await loop_gaps(script, [tool], "fetch it", HarnessConfig(), model="m")
    told = model.calls[1].last_result
    assert "omitted" in told
    print(f"\nlongest loop block: harnessed {gap * 1000:.1f} ms, bare {bare * 1000:.1f} ms")
    assert gap < max(0.1, 3 * bare), (
        f"the event loop was held {gap * 1000:.0f} ms in one step (bare agent: {bare * 1000:.1f} ms)")
