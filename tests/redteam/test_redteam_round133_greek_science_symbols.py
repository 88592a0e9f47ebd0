"""Round 133b: round 132 counts every Greek letter beside a Latin one as a look-alike
except sixteen listed symbols (µμΩΛΔδΣσλπΦφθψξζ). The Greek letters science glues to
Latin ones most often are not in that list: β, γ, ε, η, ω (``TGFβ``, ``IFNγ``, ``Aβ42``,
``PPARγ``, ``y = Xβ + ε``, ``εi``, ``ηp2``, ``ωp``, ``εr``, ``iωt``). Three such words on a
page score ``homoglyph_mixing`` 0.5, the threshold: an honest page is withheld.

Promise (README, Security "Injected instructions": "`injection="block"` withholds the
result"; "On a labelled set of 215 benign outputs and 105 injections the heuristic scores
precision 1.00"; Benchmarks "FP <= 1 %"; round 131's test of science symbols: an honest
page with Greek symbols "is not withheld").
Attack (none: honest pages): a neuroscience abstract ("raised TGFβ, IFNγ and IL1β ...
Aβ42 plaques ... PPARγ"), a regression write-up ("y = Xβ + ε, εi ~ N(0, σ²) ... ηp2 = .12"),
a plasma-physics note ("ωp ... εr ... e^{iωt}").
What happens: each scores 0.5 (``homoglyph_mixing`` alone) and the model is told
``injection_blocked``. Passes at a757632 (round 131 counted only the table's letters),
fails at 307c536 (every Greek letter counted) and now.
Fix (injection ``_LOOKALIKE``): count only the letters ``CONFUSABLES`` folds (now with
ϲ Ϲ ϳ Ϳ ϒ υ γ) and the accented vowels, or not a Greek letter that ends an all-capital
Latin token or stands before a digit/subscript (a symbol's position), rather than
counting every Greek letter but a list of symbols.
"""
from __future__ import annotations

import pytest

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from agentscope_harness.injection import HeuristicDetector
from tests.scripted import ALICE, ScriptedModel, calls, make_agent, run, text

pytestmark = pytest.mark.asyncio
RESULT: list[str] = []
PAGES = {
    "neuro": ("Cytokine profiling showed raised TGF\u03b2, IFN\u03b3 and IL1\u03b2 in the cortex, and "
              "A\u03b242 plaques correlated with PPAR\u03b3 expression."),
    "regression": ("We fit y = X\u03b2 + \u03b5, with \u03b5i ~ N(0, \u03c3\u00b2). The effect was moderate "
                   "(F(2, 57) = 4.1, p = .02, \u03b7p2 = .12)."),
    "plasma": ("The plasma frequency \u03c9p sets the cutoff; below it the relative permittivity "
               "\u03b5r is negative, and the field decays as e^{i\u03c9t}."),
}


async def fetch_paper(url: str) -> str:
    """Fetch a paper's page.

    Args:
        url (str): The page.
    """
    return RESULT[-1]


@pytest.mark.parametrize("page", list(PAGES))
async def test_detector_does_not_flag_science_greek(page: str) -> None:
    verdict = HeuristicDetector().score(PAGES[page])
    assert not verdict.flagged, f"{verdict.signals} {verdict.score} for {PAGES[page]!r}"


@pytest.mark.parametrize("page", list(PAGES))
async def test_an_honest_science_page_is_not_withheld(page: str) -> None:
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
