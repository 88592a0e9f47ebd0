"""Red team, round 91 (a middleware's calls, AgentScope's real clients). Finding: a middleware's own call (``generate_structured_output``) is
estimated from its messages only. AgentScope sends the structured model's
JSON schema as a tool (and a reminder text) with every attempt, so a
classifier over a 1,000-label taxonomy sends ~14k tokens while the harness
checks (and, without usage, charges) ~46: ``max_request_input_tokens`` and
``cap_usd`` do not hold for it, and a usage-less answer is charged next to
nothing. The run's own calls count the tools' schemas."""

import json

from scripted import ALICE, make_agent, run
from server import FakeOpenAI, Reply
from side_kit import lookup_tool, model

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from agentscope_harness.stores import MemoryStore

LABELS = [f"category-{i:05d}-electronics-audio-headphones-over-ear" for i in range(1000)]
SCHEMA = {"type": "object", "properties": {"label": {"type": "string", "enum": LABELS}}, "required": ["label"]}
PRICES = {"gpt-main": (1.0, 1.0), "gpt-side": (10.0, 10.0)}


async def _drive(cost: CostPolicy, side_usage) -> tuple:
    main, side = FakeOpenAI(), FakeOpenAI()
    await main.start()
    await side.start()
    try:
        main.plan(Reply(tool_calls=[("lookup", {"q": "a"})], usage=(100, 10)), Reply(text="done", usage=(100, 10)))
        side.plan(Reply(tool_calls=[("generate_structured_output", {"label": LABELS[0]})], usage=side_usage))
        h = Harness(HarnessConfig(store=MemoryStore(), cost=cost), load_entry_points=False, environ={})
        log: list = []
        tool = lookup_tool(model(side, "gpt-side", stream=False), schema=SCHEMA, log=log)
        agent = make_agent(model(main, "gpt-main", stream=False), [tool], h.middlewares())
        with h.acting_for(ALICE):
            _, final = await run(agent, "classify it")
        sent_tokens = [len(json.dumps(body)) // 4 for body in side.requests]
        return h.last_report(agent), sent_tokens, log, final
    finally:
        await main.close()
        await side.close()


async def test_max_request_input_tokens_holds_for_a_side_call() -> None:
    """README: "`max_request_input_tokens` is checked before each model call
    from the payload about to be sent, estimated as characters / 4 (...
    and the tools' JSON schemas); a request over it is not sent"."""
    report, sent, log, _ = await _drive(CostPolicy(prices=PRICES, max_request_input_tokens=2000), (14_000, 5))
    assert sent == [], f"a request of ~{sent} tokens was sent under max_request_input_tokens=2000; {log}"


async def test_a_usage_less_side_answer_is_charged_its_requests_estimate() -> None:
    """README ("No usage, no free ride"): "charged an estimate ...: the
    request's estimate as input" (characters / 4 of the payload sent)."""
    report, sent, log, _ = await _drive(CostPolicy(cap_usd=10, prices=PRICES), {})
    charged_input = report.input_tokens - 200  # the two main calls reported 100 each
    assert charged_input >= sent[0] // 2, f"request of ~{sent[0]} tokens charged {charged_input} input tokens"


async def test_cap_usd_holds_for_a_side_call() -> None:
    """README: "A call that would take the spend past `cap_usd` ... is not
    made" (the estimate is the request's characters / 4). ~14k tokens at
    $10/M is $0.14 against a $0.05 cap."""
    report, sent, log, _ = await _drive(CostPolicy(cap_usd=0.05, prices=PRICES), (14_000, 5))
    assert report.spent_usd <= 0.05, (report.spent_usd, sent, log)
