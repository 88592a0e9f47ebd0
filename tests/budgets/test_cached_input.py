"""Input served from the provider's prompt cache is charged at
``cached_input_per_mtok``, whichever way AgentScope's model reports it:
OpenAI-style models count cache reads within ``input_tokens``, AgentScope's
``AnthropicChatModel`` beside it (reads and writes). The OpenAI path runs
end to end in ``tests/redteam/test_redteam_round23.py``."""

from __future__ import annotations

import pytest
from agentscope.credential import AnthropicCredential
from agentscope.model import AnthropicChatModel, ChatUsage

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from agentscope_harness.config import ModelPrice
from agentscope_harness.harness import billed_tokens

PRICE = ModelPrice(10.0, 20.0, 1.0)


def _usage(**tokens: int) -> ChatUsage:
    return ChatUsage(time=0.1, **{"input_tokens": 0, "output_tokens": 0, **tokens})


def test_cached_input_is_priced_at_its_own_price_and_never_below_zero() -> None:
    assert PRICE.usd(1000, 10, 900) == pytest.approx((100 * 10 + 900 * 1 + 10 * 20) / 1e6)
    assert PRICE.usd(1000, 10) == pytest.approx((1000 * 10 + 10 * 20) / 1e6)
    assert PRICE.usd(100, 0, 900) == pytest.approx(100 * 1 / 1e6)  # more cached than sent: all of it cached
    assert ModelPrice(10.0, 20.0).usd(1000, 0, 900) == pytest.approx(1000 * 10 / 1e6)  # no cached price: full


def test_anthropic_cache_reads_and_writes_count_as_input() -> None:
    anthropic = AnthropicChatModel(AnthropicCredential(api_key="k"), model="claude-test")
    usage = _usage(input_tokens=50, output_tokens=10, cache_input_tokens=900, cache_creation_input_tokens=200)
    assert billed_tokens(anthropic, usage) == (1150, 900, 10)
    assert billed_tokens(object(), _usage(input_tokens=1000, output_tokens=10, cache_input_tokens=900)) == (1000, 900, 10)


async def test_a_run_is_charged_the_cached_price_and_counts_every_input_token() -> None:
    h = Harness(HarnessConfig(cost=CostPolicy(cap_usd=1.0, prices={"claude-test": PRICE})), load_entry_points=False)
    anthropic = AnthropicChatModel(AnthropicCredential(api_key="k"), model="claude-test")
    run = h.table.open("r-1", "a", None, None, None, None, "enforce")
    await h.charge_usage(run, anthropic, _usage(input_tokens=50, output_tokens=10, cache_input_tokens=900))
    assert (run.input_tokens, run.output_tokens) == (950, 10)
    assert run.facts.spent_usd == pytest.approx((50 * 10 + 900 * 1 + 10 * 20) / 1e6)
