"""Cache-bust detection: a model call whose messages or tools do not extend
the previous call of the run is a ``prefix_break``, attributed to the
harness's pruning, AgentScope's compression, or an unknown change (another
middleware, the application), with the estimated cost of the miss."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agentscope.agent import ContextConfig
from agentscope.message import HintBlock, Msg, TextBlock, ThinkingBlock, ToolCallBlock, ToolResultBlock, UserMsg
from agentscope.middleware import MiddlewareBase
from agentscope.state import AgentState
from hypothesis import given, settings
from hypothesis import strategies as st
from scripted import ScriptedModel, Turn, calls, make_agent, run, search, text

from agentscope_harness import CostPolicy, Harness, HarnessConfig
from agentscope_harness.prefix import _block_key, _chunk_keys, observe


def breaks(report: Any) -> list[str]:
    return [d.detail for d in report.decisions if d.action == "prefix_break"]


class EditsHistory(MiddlewareBase):
    """A foreign middleware: before the 3rd round it rewrites the user's
    message in place (or, ``append_only``, adds a note at the end; or,
    ``replace``, puts a new context list with an edited copy in place)."""

    def __init__(self, append_only: bool = False, replace: bool = False) -> None:
        self.append_only = append_only
        self.replace = replace

    async def on_reasoning(self, agent: Any, input_kwargs: dict, next_handler: Any) -> Any:
        if agent.state.cur_iter == 2:
            if self.append_only:
                agent.state.append_context(agent.name, [TextBlock(text="(note)")])
            elif self.replace:
                first = agent.state.context[0].model_copy(deep=True)
                first.content[0].text = "hi, and also something else"
                agent.state.context = [first, *agent.state.context[1:]]
            else:
                agent.state.context[0].content[0].text = "hi, and also something else"
        async for item in next_handler(**input_kwargs):
            yield item


def three_rounds() -> ScriptedModel:
    return ScriptedModel([calls(("search", {"q": "a"})), calls(("search", {"q": "b"})), text("done")])


@pytest.mark.parametrize(("outer", "replace"), [(True, False), (False, False), (False, True)])
async def test_a_foreign_middleware_editing_an_old_message_is_an_unknown_break(outer: bool, replace: bool):
    """Edited in place or in a new context list: not AgentScope's compression
    (which the harness tells by the new summary it writes)."""
    h = Harness(HarnessConfig(), load_entry_points=False)
    foreign = EditsHistory(replace=replace)
    mws = [foreign, *h.middlewares()] if outer else [*h.middlewares(), foreign]
    model = three_rounds()
    agent = make_agent(model, [search], mws)
    await run(agent)
    report = h.last_report(agent)
    assert report.prefix_breaks == 1
    [detail] = breaks(report)
    assert detail.startswith("unknown: message 1 changed")
    assert "something else" in json.dumps(model.calls[2].formatted)


async def test_switching_tool_groups_is_an_unknown_break_of_the_tool_table():
    """README "Cache-bust detection": the tool table the model is offered
    changed (its own ``reset_tools``): a break, ``unknown``."""
    from agentscope.tool import FunctionTool, ToolGroup, Toolkit
    from scripted import ALLOW

    h = Harness(HarnessConfig(), load_entry_points=False)
    toolkit = h.instrument(Toolkit(tool_groups=[
        ToolGroup(name="shop", description="The shop's tools.", tools=[FunctionTool(search, permission=ALLOW)])]))
    model = ScriptedModel([calls(("reset_tools", {"shop": True})), calls(("search", {"q": "a"})), text("done")])
    agent = make_agent(model, toolkit, h.middlewares())
    await run(agent)
    report = h.last_report(agent)
    assert [t["function"]["name"] for t in model.calls[1].tools] == ["reset_tools", "search"]
    assert report.prefix_breaks == 1
    [detail] = breaks(report)
    assert detail.startswith("unknown: the tool")


async def test_appending_at_the_end_is_no_break():
    h = Harness(HarnessConfig(), load_entry_points=False)
    model = three_rounds()
    agent = make_agent(model, [search], [EditsHistory(append_only=True), *h.middlewares()])
    await run(agent)
    assert h.last_report(agent).prefix_breaks == 0
    assert "(note)" in json.dumps(model.calls[2].formatted)


async def test_pruning_is_attributed_to_the_harness():
    async def fetch(url: str) -> str:
        """Fetch.

        Args:
            url (str): The page.
        """
        return url * 400

    h = Harness(HarnessConfig(prune_over_tokens=500, keep_last=1), load_entry_points=False)
    model = ScriptedModel([calls(("fetch", {"url": f"u{i}"})) for i in range(3)] + [text("done")])
    agent = make_agent(model, [fetch], h.middlewares())
    await run(agent)
    report = h.last_report(agent)
    assert report.prefix_breaks >= 1
    assert all(d.startswith("pruning: message") for d in breaks(report))
    assert "[pruned:" in json.dumps(model.calls[-1].formatted)


def summarising(turn: Turn) -> Any:
    """Answers AgentScope's compression request with a summary, and
    otherwise fetches pages."""
    names = [t["function"]["name"] for t in turn.tools or []]
    if "generate_structured_output" in names:
        fields = ("task_overview", "current_state", "important_discoveries", "next_steps",
                  "context_to_preserve")
        return calls(("generate_structured_output", dict.fromkeys(fields, "summary")))
    if turn.rounds >= 4:
        return text("done")
    return calls(("fetch", {"url": f"u{turn.rounds}"}))


async def test_compression_is_attributed_to_agentscope():
    async def fetch(url: str) -> str:
        """Fetch.

        Args:
            url (str): The page.
        """
        return "page " * 300

    h = Harness(HarnessConfig(), load_entry_points=False)
    model = ScriptedModel(summarising)
    model.context_size = 2500
    agent = make_agent(model, [fetch], h.middlewares(),
                       context_config=ContextConfig(trigger_ratio=0.6, reserve_ratio=0.1))
    await run(agent)
    report = h.last_report(agent)
    assert agent.state.summary  # AgentScope compressed the context
    assert report.prefix_breaks >= 1
    assert all(d.startswith("compression: message") for d in breaks(report))


async def test_the_cost_of_a_miss_uses_the_cached_price():
    h = Harness(HarnessConfig(cost=CostPolicy(prices={"scripted": (2.0, 8.0, 0.5)})),
                load_entry_points=False)
    agent = make_agent(three_rounds(), [search], [EditsHistory(), *h.middlewares()])
    await run(agent)
    [detail] = breaks(h.last_report(agent))
    lost = int(detail.split("~")[1].split()[0])
    assert lost > 0
    assert f"(est. ${lost * 1.5 / 1_000_000:.6f} more than cached)" in detail


async def test_the_break_count_is_a_span_attribute():
    sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    h = Harness(HarnessConfig(), load_entry_points=False)
    agent = make_agent(three_rounds(), [search], [EditsHistory(), *h.middlewares()])
    with provider.get_tracer("app").start_as_current_span("chat"):
        await run(agent)
    [span] = exporter.get_finished_spans()
    assert span.attributes["harness.prefix_breaks"] == 1
    [event] = [e for e in span.events if e.attributes.get("harness.action") == "prefix_break"]
    assert event.attributes["harness.code"] == "unknown"


# ------------------------------------------------------------ the rule itself

Edit = tuple[str, int, str]


@settings(max_examples=150, deadline=None)
@given(st.lists(
    st.tuples(st.sampled_from(["append_msg", "append_block", "edit", "noop"]),
              st.integers(0, 50), st.text(max_size=8)),
    min_size=1, max_size=12,
))
def test_only_a_change_to_what_was_sent_is_a_break(steps: list[Edit]):
    """Appending messages or blocks never breaks; rewriting any block
    already sent always does (unless it writes the same text)."""
    h = Harness(HarnessConfig(), load_entry_points=False)
    run_ = h.table.open("r", "a", None, None, None, None, "enforce")
    state = AgentState()  # never compressed
    messages: list[Msg] = [UserMsg("user", [TextBlock(text="start")])]
    expected = 0
    observe(h.services, run_, messages, [], None, state)
    for kind, at, value in steps:
        blocks = [b for m in messages for b in m.content]
        if kind == "append_msg":
            messages.append(Msg(name="a", content=[TextBlock(text=value)], role="assistant"))
        elif kind == "append_block":
            messages[-1].content.append(TextBlock(text=value))
        elif kind == "edit":
            block = blocks[at % len(blocks)]
            if block.text != value:
                expected += 1
            block.text = value
        observe(h.services, run_, messages, [], None, state)
    assert run_.prefix_breaks == expected


def test_a_tool_schema_edited_in_place_is_a_break() -> None:
    """Red team: a middleware that keeps its schema dict and edits it in
    place (a fresh list each call) changes what the provider receives."""
    schema = {"type": "function", "function": {"name": "search", "description": "Search. 8 calls left.",
              "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}
    h = Harness(HarnessConfig(), load_entry_points=False)
    r = h.table.open("r", "a", None, None, None, None, "enforce")
    state = AgentState()  # never compressed
    msgs = [UserMsg("user", [TextBlock(text="start")])]
    observe(h.services, r, msgs, [schema], None, state)
    schema["function"]["description"] = "Search. 7 calls left."
    observe(h.services, r, msgs, [schema], None, state)
    assert r.prefix_breaks == 1
    assert "the tool schemas changed" in r.decisions[-1].detail


class Label(str):
    """A str subclass in a schema: ``marshal`` cannot write it, JSON can."""


def _schema(description: Any) -> dict:
    return {"type": "function", "function": {"name": "search", "description": description,
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}


@pytest.mark.parametrize("value", ["Search.", Label("Search."), 3.5, ["a", 1, None, True]])
def test_tool_schemas_are_counted_by_their_json_and_broken_by_any_change(value: Any) -> None:
    """Schemas are hashed by value (``marshal``, or their JSON for what it
    cannot write): the same schemas rebuilt each call are no break, a
    change is, and their size is their JSON's whatever the hashing."""
    h = Harness(HarnessConfig(), load_entry_points=False)
    r = h.table.open("r", "a", None, None, None, None, "enforce")
    state = AgentState()
    msgs: list[Msg] = []
    chars = len(json.dumps([_schema(value)], ensure_ascii=False, default=str))
    for _ in range(3):  # rebuilt each call, as AgentScope does
        assert observe(h.services, r, msgs, [_schema(value)], None, state) == chars // 4
    assert r.prefix_breaks == 0
    changed = [_schema(value), _schema("More.")]
    tokens = observe(h.services, r, msgs, changed, None, state)
    assert tokens == len(json.dumps(changed, ensure_ascii=False, default=str)) // 4
    assert r.prefix_breaks == 1


def test_the_same_schema_in_another_key_order_is_a_break() -> None:
    """A provider receives the schemas in the order of their keys: a
    reordered schema is other bytes, a cache miss."""
    h = Harness(HarnessConfig(), load_entry_points=False)
    r = h.table.open("r", "a", None, None, None, None, "enforce")
    state = AgentState()
    schema = _schema("Search.")
    observe(h.services, r, [], [schema], None, state)
    observe(h.services, r, [], [dict(reversed(list(schema.items())))], None, state)
    assert r.prefix_breaks == 1


_TEXTS = st.text(max_size=12)


def _blocks() -> st.SearchStrategy[Any]:
    text = st.builds(TextBlock, text=_TEXTS)
    result_output = st.one_of(
        _TEXTS, st.lists(st.builds(TextBlock, text=_TEXTS), min_size=0, max_size=3), _TEXTS.map(_Str),
    )
    return st.one_of(
        text,
        st.builds(ToolCallBlock, id=_TEXTS, name=_TEXTS, input=_TEXTS),
        st.builds(ToolResultBlock, id=_TEXTS, name=_TEXTS, output=result_output),
        st.builds(HintBlock, hint=_TEXTS),
        st.builds(ThinkingBlock, thinking=_TEXTS),
    )


class _Str(str):
    """A string subclass: not the inline path's ``str``."""


@settings(max_examples=300, deadline=None)
@given(st.lists(_blocks(), max_size=6))
def test_the_inline_keys_are_each_blocks_own_key(blocks: list[Any]) -> None:
    """``_chunk_keys`` keys the common kinds inline, for speed: each chunk
    is still exactly what ``_block_key`` says of its block (the rule the
    breaks and the size estimate are stated in)."""
    msg = Msg(name="a", content=blocks, role="assistant")
    chunks = _chunk_keys([msg], None)
    assert chunks.keys[1:].tolist() == [hash(_block_key(b)[0]) for b in msg.content]
    assert chunks.sizes[1:].tolist() == [_block_key(b)[1] for b in msg.content]
    assert chunks.owners.tolist() == [0] * (1 + len(blocks))


def test_the_previous_payload_is_kept_where_the_garbage_collector_does_not_walk() -> None:
    """A run keeps one int per chunk of its last payload; under hundreds of
    concurrent replies a list of them per run was walked, int by int, at
    every collection. They are machine-int arrays: nothing in them to walk."""
    import gc

    h = Harness(HarnessConfig(), load_entry_points=False)
    run_ = h.table.open("r", "a", None, None, None, None, "enforce")
    messages = [UserMsg("user", [TextBlock(text=f"part {i}") for i in range(50)])]
    observe(h.services, run_, messages, [{"type": "function", "function": {"name": "f"}}], None, AgentState())
    assert run_.prefix is not None and run_.prefix.chunks is not None
    chunks = run_.prefix.chunks
    assert len(chunks.keys) == 52  # the tools, the message's header, 50 blocks
    assert all(len(gc.get_referents(ints)) <= 1 for ints in (chunks.keys, chunks.sizes, chunks.owners))
