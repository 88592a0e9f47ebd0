"""Red team, round 90 (on round 89). Parallel tool calls of one run, each making a model call of its own
(``generate_structured_output``: a reranker in a search tool). Each side call
takes its worst case (input + 4,096 output) from the principal's
``tokens_per_min`` bucket; once it answers (10 tokens billed) the README says
what was not billed goes back. With three at once, only one gives its units
back: ``Fleet._model_units`` is keyed by run id, so each admission overwrites
the previous one's units and the first to finish pops (and refunds) the last's.
Sequential calls of the same tools leave the bucket nearly full."""

import time
from typing import Any

from agentscope.message import UserMsg
from scripted import ALICE, Ids, ScriptedModel, SlowModel, calls, make_agent, run, text

from agentscope_harness import Harness, HarnessConfig, RateLimit, TerminalState
from agentscope_harness.stores import MemoryStore

PER_MIN = 20_000


def _units_in_use(store: MemoryStore, per_min: int = PER_MIN) -> float:
    now = time.monotonic()
    keys = [k for k in store._rates if k.startswith("rate:model:tokens:")]
    assert keys, store._rates
    return sum(max(store._rates[k] - now, 0.0) * per_min / 60.0 for k in keys)


async def _drive(parallel: bool, per_min: int = PER_MIN, check: bool = True) -> tuple[float, Any, ScriptedModel]:
    reranker = SlowModel([calls(("generate_structured_output", {"ids": ["c1"]}), inp=5, out=5)],
                         model="rer", repeat=True, delay=0.2)

    async def lookup(q: str) -> str:
        """Look something up, reranked.

        Args:
            q (str): The query.
        """
        res = await reranker.generate_structured_output([UserMsg("user", q)], structured_model=Ids)
        return f"best for {q}: {res.content}"

    if parallel:
        script = [calls(("lookup", {"q": "a"}), ("lookup", {"q": "b"}), ("lookup", {"q": "c"}), inp=5, out=5),
                  text("done", inp=5, out=5)]
    else:
        script = [calls(("lookup", {"q": q}), inp=5, out=5) for q in "abc"] + [text("done", inp=5, out=5)]
    base = ScriptedModel(script, model="base")
    store = MemoryStore()
    h = Harness(HarnessConfig(store=store, rate_limits=[RateLimit(scope="principal", tokens_per_min=per_min)]),
                load_entry_points=False, environ={})
    agent = make_agent(base, [lookup], h.middlewares())
    with h.acting_for(ALICE):
        _, final = await run(agent, "look up a, b and c")
    report = h.last_report(agent)
    if not check:
        return _units_in_use(store, per_min), report, reranker
    assert report.terminal_state is TerminalState.COMPLETED, (report.terminal_state, report.reason)
    assert len(reranker.calls) == 3
    return _units_in_use(store, per_min), report, reranker


async def test_sequential_side_calls_give_back_unbilled_token_units() -> None:
    used, report, _ = await _drive(parallel=False)
    # 4 main calls + 3 side calls, each billed 10 tokens: ~70 units in use
    assert used < 1_000, used


async def test_parallel_side_calls_give_back_unbilled_token_units() -> None:
    used, report, _ = await _drive(parallel=True)
    # 2 main calls + 3 side calls, each billed 10 tokens: the bucket should be nearly full
    assert used < 1_000, f"{used:.0f} of {PER_MIN} tokens_per_min units still taken after the run"


async def test_side_calls_in_parallel_never_refuse_the_runs_own_next_call() -> None:
    """Visible: with ``tokens_per_min`` just above three side calls' worst
    case (taken at once, fine), the run's own final call (worst case ~4.2k,
    billed 10) is refused ``rate_limited`` after all three answered, though
    the tokens billed this minute are ~50."""
    _, report, reranker = await _drive(parallel=True, per_min=12_600, check=False)
    assert len(reranker.calls) == 3  # every side call was admitted and answered
    assert report.terminal_state is TerminalState.COMPLETED, (report.terminal_state, report.reason,
                                                              report.input_tokens + report.output_tokens)
