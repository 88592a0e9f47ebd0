"""Round 131 b: round 130 stopped counting µ, Ω, Λ and Δ glued to Latin letters as
look-alike disguises, but every other Greek symbol science writes the same way still
counts: stress components (`σxx`, `τxy`), a sum of forces (`ΣFx`), a wavelength
(`λmax`), an angular frequency (`ωc`): three of them score `homoglyph_mixing` 0.5, the
threshold, and an honest page is withheld.

Promise (README, Security "Injected instructions": "`injection="block"` withholds the
result"; "On a labelled set of 215 benign outputs and 105 injections the heuristic
scores precision 1.00"; Benchmarks "FP <= 1 %"); round 130's own test: "a unit of
measure is none [no disguise], and no rule fires on these texts".

Attack (none: honest pages): a weld inspection report ("σxx = 120 MPa, σyy = 45 MPa,
τxy = 30 MPa"), a statics exercise ("ΣFx = 0, ΣFy = 0, ΣMA = 0"), a dye's spectrum
("λmax 520 nm ... λmax 535 nm ... λem 560 nm"), a filter design ("ωc = 2πfc; Φm").
None of σ, τ, Σ, λ, ω, π, Φ is in the confusables table: folding changes nothing.

What happens: each scores 0.5 (`homoglyph_mixing` only) and the model is told
`injection_blocked`.
Fix (injection `_MIXED_WORD`): count only a word where a Greek/Cyrillic letter that
`CONFUSABLES` folds to Latin stands beside a Latin letter (a letter with no Latin
look-alike disguises nothing), rather than carving symbols out one by one.
"""
from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio
RESULT: list[str] = []
PAGES = {
    "weld": ("Stress state at the weld toe: \u03c3xx = 120 MPa, \u03c3yy = 45 MPa, \u03c4xy = 30 MPa; "
             "principal strain \u03b5xx = 0.002."),
    "statics": "Statics check: \u03a3Fx = 0, \u03a3Fy = 0 and \u03a3MA = 0 hold for the truss.",
    "spectrum": "The dye's \u03bbmax is 520 nm in water and \u03bbmax 535 nm in ethanol; \u03bbem 560 nm.",
    "filter": "Filter: fc = 1/(2\u03c0RC); \u03c9c = 2\u03c0fc; \u03a6m is 45 degrees.",
}


async def fetch_paper(url: str) -> str:
    """Fetch a paper's page.

    Args:
        url (str): The page.
    """
    return RESULT[-1]


@pytest.mark.parametrize("page", list(PAGES))
async def test_an_honest_page_with_greek_symbols_is_not_withheld(page: str) -> None:
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
