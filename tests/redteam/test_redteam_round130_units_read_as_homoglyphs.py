"""Round 130 b: honest scientific and engineering texts withheld as injected
instructions: a unit written with the micro sign or a Greek letter glued to Latin
letters (`10µM`, `5µg/mL`, `10kΩ`, `ΛCDM`) is read as a word "mixing scripts", and
three of them score `homoglyph_mixing` 0.5, the threshold.

Promise (README, Security "Injected instructions": "`injection="block"` withholds the
result"; "On a labelled set of 215 benign outputs and 105 injections the heuristic
scores precision 1.00"; Benchmarks: "FP <= 1 %"). A look-alike word is a disguise of
an instruction; a unit of measure is none, and no rule fires on these texts.

Attack (none: honest pages): a PubMed abstract's methods ("treated with 10 µM ...,
5 µg/mL puromycin; IC50 3 µM"), a bill of materials ("R1 10kΩ, R2 4.7kΩ, R3 100kΩ"),
a cosmology abstract ("ΛCDM ... Ωm, Ωb"). The micro sign U+00B5 is Latin-1; NFKC (the
detector's folding) makes it Greek mu, and `_MIXED_WORD` counts `µM`, `µg` as mixed.

What happens: each scores 0.5 (`homoglyph_mixing` only) and under `injection="block"`
the model is told `injection_blocked`: the paper is withheld.
Fix (injection `_MIXED_WORD` / `_count_hidden`): a Greek letter standing as a unit or
symbol beside Latin capitals or a digit (µ, Ω, Λ, Δ: no Latin look-alike of a lower-case
instruction word) is no disguise; count only words whose folding changes them into
Latin letters.
"""
from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio
RESULT: list[str] = []
PAGES = {
    "methods": ("Methods. HeLa cells were treated with 10 \u00b5M compound 7 for 24 h, selected with 5 \u00b5g/mL "
                "puromycin and imaged; the IC50 was 3 \u00b5M (n = 3)."),
    "bill_of_materials": "BOM rev C: R1 10k\u2126 1% 0603, R2 4.7k\u2126 1% 0603, R3 100k\u2126 5% 0805, C1 100nF X7R.",
    "cosmology": "We fit the \u039bCDM model and find \u03a9m = 0.31, \u03a9b = 0.049 and H0 = 67.4 km/s/Mpc.",
}


async def fetch_paper(url: str) -> str:
    """Fetch a paper's page.

    Args:
        url (str): The page.
    """
    return RESULT[-1]


@pytest.mark.parametrize("page", list(PAGES))
async def test_an_honest_page_with_units_is_not_withheld(page: str) -> None:
    RESULT.append(PAGES[page])
    h = Harness(HarnessConfig(tools={"fetch_paper": ToolPolicy(role="retrieval", injection="block")}),
                load_entry_points=False, environ={})
    model = ScriptedModel([calls(("fetch_paper", {"url": "https://example.org/p/1"})), text("ok")])
    agent = make_agent(model, [fetch_paper], middlewares=h.middlewares())
    h.instrument(agent.toolkit)
    with h.acting_for(ALICE):
        await run(agent, "summarise the paper")
    sent = repr(model.calls[-1].formatted)
    assert "injection_blocked" not in sent, f"withheld as injected instructions: {PAGES[page]!r}"
    assert PAGES[page][-20:] in sent
