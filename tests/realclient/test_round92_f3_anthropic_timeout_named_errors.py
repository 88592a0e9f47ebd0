"""Red team, round 92 (charging streamed and timed-out calls). Anthropic answers that are errors whose class name says "Timeout" are charged as
requests the client's own timeout cut: ``BetaRequestBodyTimeoutError`` (400,
``request_body_timeout``: "The request body did not finish arriving in time, so
nothing was done") and ``GatewayTimeoutError`` (504). Nothing timed out in the
client; the provider answered an error."""
import json

import httpx2 as httpx
import pytest
from agentscope.credential import AnthropicCredential
from agentscope.message import UserMsg
from agentscope.model import AnthropicChatModel
from pydantic import SecretStr
from scripted import ALICE, make_agent, run
from server import FakeOpenAI, Reply
from side_kit import Ids, model

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from agentscope_harness.stores import MemoryStore

PRICES = {"gpt-main": (1.0, 1.0), "claude-x": (3.0, 15.0)}
BIG = "lorem ipsum " * 33_000  # ~99k tokens by characters / 4: $0.30 a request at $3/M
ERRORS = {
    "request_body_timeout": (400, {"type": "error", "error": {
        "type": "invalid_request_error", "message": "The request body did not finish arriving in time.",
        "details": {"error_code": "request_body_timeout"}}}),
    "gateway_504": (504, {"type": "error", "error": {"type": "api_error", "message": "Gateway timeout"}}),
    "control_overloaded_529": (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
}


class Mock:
    def __init__(self, kind: str) -> None:
        self.kind, self.requests, self.statuses = kind, [], []

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(request.content))
        status, body = ERRORS[self.kind]
        self.statuses.append(status)
        return httpx.Response(status, json=body)

    def model(self, stream: bool) -> AnthropicChatModel:
        client = httpx.AsyncClient(transport=httpx.MockTransport(self.handle))
        return AnthropicChatModel(credential=AnthropicCredential(api_key=SecretStr("sk-ant-test")), model="claude-x",
                                  stream=stream, max_retries=0, retry_delay=0.01,
                                  client_kwargs={"http_client": client, "max_retries": 0})


@pytest.mark.parametrize("stream", [False, True], ids=["not_streamed", "streamed"])
@pytest.mark.parametrize("kind", list(ERRORS))
async def test_the_runs_own_call_answered_an_error_is_charged_nothing(kind: str, stream: bool) -> None:
    mock = Mock(kind)
    store = MemoryStore()
    h = Harness(HarnessConfig(store=store, model_error_text="the model failed",
                              cost=CostPolicy(cap_usd=10, daily_quota_usd=100, prices=PRICES)),
                load_entry_points=False, environ={})
    agent = make_agent(mock.model(stream), [], h.middlewares())
    with h.acting_for(ALICE):
        await run(agent, BIG)
    r = h.last_report(agent)
    assert len(mock.requests) == 1 and r.reason == "model_error"
    # README (quota rule): "the reservation is settled with the actual cost (0 if the call failed ...)";
    # only "an attempt the client's own timeout cut after its request went out is charged its request"
    assert r.spent_usd == 0 and await store.get_spend(ALICE.key) == 0, (
        kind, r.spent_usd, r.input_tokens, [d.detail for d in r.decisions if d.action == "usage_estimated"])


@pytest.mark.parametrize("kind", list(ERRORS))
async def test_a_side_call_answered_an_error_is_charged_nothing(kind: str) -> None:
    main, mock = FakeOpenAI(), Mock(kind)
    await main.start()
    try:
        main.plan(Reply(tool_calls=[("lookup", {"q": "a"})], usage=(100, 10)), Reply(text="done", usage=(100, 10)))
        h = Harness(HarnessConfig(store=MemoryStore(), cost=CostPolicy(cap_usd=10, daily_quota_usd=100, prices=PRICES)),
                    load_entry_points=False, environ={})
        side = mock.model(stream=False)
        log: list = []

        async def lookup(q: str) -> str:
            """Look something up, reranked.

            Args:
                q (str): The query.
            """
            try:
                res = await side.generate_structured_output([UserMsg("user", BIG)], structured_model=Ids)
                return str(res.content)
            except Exception as exc:
                log.append(exc)
                return f"not reranked: {type(exc).__name__}"

        agent = make_agent(model(main, "gpt-main", stream=False), [lookup], h.middlewares())
        with h.acting_for(ALICE):
            await run(agent, "look it up")
        r = h.last_report(agent)
        side_usd = r.spent_usd - 2 * 110e-6
        assert abs(side_usd) < 1e-9, (kind, len(mock.requests), mock.statuses, round(side_usd, 4),
                                      type(log[0]).__name__)
    finally:
        await main.close()


async def test_control_the_same_504_through_openai_is_charged_nothing() -> None:
    """Control: a 504 from an OpenAI-compatible server (``InternalServerError``) is $0."""
    from server import fail
    main = FakeOpenAI()
    await main.start()
    try:
        main.plan(*fail(504))
        store = MemoryStore()
        h = Harness(HarnessConfig(store=store, model_error_text="the model failed",
                                  cost=CostPolicy(cap_usd=10, daily_quota_usd=100,
                                                  prices={"gpt-main": (3.0, 15.0)})),
                    load_entry_points=False, environ={})
        agent = make_agent(model(main, "gpt-main", stream=False), [], h.middlewares())
        with h.acting_for(ALICE):
            await run(agent, BIG)
        r = h.last_report(agent)
        assert main.statuses == [504] and r.spent_usd == 0, r.spent_usd
    finally:
        await main.close()
