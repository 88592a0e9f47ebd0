"""Round 177 a (a red team on the `pii` steps sized by their cost, whose cuts now move from run
to run): a PII stream's cut made a result read otherwise than one scan of the whole reads it.

- A phone number after an IBAN (`Account BE68 5390 0754 7034 012 0345 678 9012`): the whole
  scan's phone detector passed over `0754 7034 012` (inside the IBAN, not chosen) and found
  `0345 678 9012`; a window starting at the IBAN's end found `012 0345 678`, and `9012` was
  shown. Now the stream never cuts inside a run of overlapping values of any detector.
- An accented address written as JSON in a JSON string is longer (344 characters) than the
  stream holds back (320): cut inside it, its first part was shown before its `@` arrived. Now
  the stream never cuts inside a run of address characters that reaches its window's end.

The property: a text dense with values of every kind, JSON escapes and separators, fed in
pieces of any size, reads as `apply_pii` of the whole reads it."""
from __future__ import annotations

import json

import pytest
from agentscope.event import ToolResultTextDeltaEvent
from hypothesis import given, settings
from hypothesis import strategies as st

from agentscope_harness import Harness, HarnessConfig, ToolPolicy, outputs
from agentscope_harness.outputs import PiiStream
from agentscope_harness.pii import apply_pii
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text, tool_messages

PIECES = ["jane.doe@example.com", "4111 1111 1111 1111", "10.20.30.40", "078-05-1120", "+1 415 555 0100",
          "BE68 5390 0754 7034", "0345 678 9012", "012", "DE89 3704 0044 0532 0130 00", "2001:db8::1",
          "nguy\\\\u1ec5n.th\\\\u1ecb@example.vn", "\\n", "\\\\n", " ", "\n", ".", "-", "7034",
          "(555) 234-5678", "word ", "Ask at the desk. "]
MODES = {"email": "hash", "payment_card": "mask", "ipv4": "redact", "ssn": "redact", "phone": "redact",
         "iban": "hash", "ipv6": "mask"}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=20, max_size=160),
       st.lists(st.sampled_from([1, 7, 64, 256, 333, 1000]), min_size=1, max_size=8))
def test_a_stream_fed_in_any_pieces_reads_as_the_whole(parts: list[str], sizes: list[int]) -> None:
    whole = "".join(parts)
    stream, out, at, i = PiiStream(MODES, b"salt"), [], 0, 0
    while at < len(whole):
        n = sizes[i % len(sizes)]
        out.append(stream.feed(whole[at:at + n]))
        at, i = at + n, i + 1
    out.append(stream.flush())
    assert "".join(out) == apply_pii(whole, MODES, b"salt").text


PAGE: dict[str, str] = {}
PROSE = "".join(f"Branch {i}: open 9-5, closed on public holidays. Ask at the desk.\n" for i in range(60))
FIRST_CUT = outputs.PII_INLINE - outputs.PII_HOLD  # the first step's cut, whatever the clock says


async def lookup(q: str) -> str:
    """Look a record up.

    Args:
        q (str): What.
    """
    return PAGE["text"]


async def _read(page: str, modes: dict[str, str]) -> tuple[str, str]:
    PAGE["text"] = page
    h = Harness(HarnessConfig(tools={"lookup": ToolPolicy(role="lookup", pii=modes)}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("lookup", {"q": "it"})), text("ok")], stream=True)
    agent = make_agent(model, [lookup], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        events, _ = await run(agent, "what is the record?")
    return tool_messages(model.calls[-1])[-1], "".join(
        e.delta for e in events if isinstance(e, ToolResultTextDeltaEvent))


IBAN, PHONE = "BE68 5390 0754 7034", "0345 678 9012"
LINE = f"Account {IBAN} 012 {PHONE} (ask for Sam)."


@pytest.mark.parametrize("shift", range(0, len(IBAN) + len(PHONE) + 8, 3))
async def test_a_phone_after_an_iban_reads_as_the_whole_at_the_cut(shift: int) -> None:
    """The line placed around the first cut: the model and the user's stream read the whole
    scan's rewrite (`Account [pii:iban] 012 [pii:phone]`), never the phone's last group."""
    modes = {"iban": "redact", "phone": "redact"}
    at = FIRST_CUT - len(IBAN) + shift - len("Account ")
    page = PROSE[:at] + LINE + "\n" + PROSE
    read, shown = await _read(page, modes)
    assert "Account [pii:iban] 012 [pii:phone] (ask for Sam)." in read
    assert "9012" not in read and "9012" not in shown


VN = ("nguyễn.thị.phương.thảo.trần.đức.hoàng.lê.văn.việt.phạm.quỳnh@phòng-kế-toán-tổng-hợp."
      "công-ty-thương-mại-điện-tử-việt-nam.chi-nhánh-đông-á.hà-nội.vn")


@pytest.mark.parametrize("into", [1, 5, 12, 20, 150])
async def test_a_twice_escaped_accented_address_is_not_cut(into: int) -> None:
    """A webhook log's payload as JSON in a JSON string: the 146-character address is 344
    characters as written; the first cut `into` characters into it shows none of it."""
    body = json.dumps({"event": "signup", "payload": json.dumps({"contact": VN})})
    at = body.index("nguy")
    page = PROSE[: FIRST_CUT - into - at - 1] + "\n" + body + "\n" + PROSE
    assert page.index("nguy") + into == FIRST_CUT
    read, shown = await _read(page, {"email": "redact"})
    assert "nguy" not in read and "nguy" not in shown
    assert "contact" in read and read.count("[pii:email]") == 1
