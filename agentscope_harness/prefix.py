"""What a model call is about to send, seen in ``on_model_call``: a
tokenizer-free size estimate (checked against ``max_request_input_tokens``
before the call) and whether it extends the run's previous call byte for
byte. A provider serves a prompt from its cache only up to the first changed
byte, so a call that rewrites anything already sent pays full price again for
everything after that point: a *prefix break*.

The payload is read as chunks, in the order a provider receives it: the tool
schemas, then each message's header and each of its blocks, serialised from
what a formatter sends (text, thinking, hint, tool-call arguments, tool-result
output; never block ids, timestamps, states or metadata). A run keeps only
the previous call's ``(hash, characters, message)`` per chunk, never a copy
of the payload: the next call is hashed once and compared chunk by chunk.

Estimate rule (stated in the README): input tokens of a request = characters
of those chunks / 4 (``CHARS_PER_TOKEN``).

Each break is recorded as ``Decision(action="prefix_break")`` whose detail
starts with its cause: ``compression`` (AgentScope compressed the context
since the last call: it wrote a new summary), ``pruning`` (the harness's pruner rewrote results since the
last call) or ``unknown`` (another middleware or the application changed what
was already sent), followed by the estimated cost of the miss.
"""

from __future__ import annotations

import json
import marshal
from array import array
from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING, Any

from agentscope.message import (
    DataBlock,
    HintBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultBlock,
)

from .context import CHARS_PER_TOKEN, fallback, found_so_far
from .lazy import made

if TYPE_CHECKING:
    from .run_state import RunState
    from .services import Services

try:  # opentelemetry-api ships with AgentScope; without an SDK this is a no-op
    from opentelemetry import trace as _otel_trace
except ImportError:  # pragma: no cover
    _otel_trace = None  # type: ignore[assignment]

CAUSES = ("compression", "pruning", "unknown")
"""What broke a prefix, in the order they are checked."""


_TOOLS = array("q", [-1])
"""The owner of the tool schemas' chunk (first, when tools are sent)."""


@dataclass(slots=True)
class Chunks:
    """A payload as three parallel arrays of machine ints: each chunk's
    hash, its characters, and the index of its message (-1: the tool
    schemas). Arrays, not lists: the garbage collector has nothing in them
    to walk (a list of a payload's ints is walked int by int at every
    collection, hundreds of them under concurrent replies)."""

    keys: array[int]
    sizes: array[int]
    owners: array[int]

    def take(self, other: Chunks) -> None:
        """Hold ``other``'s chunks instead, in these arrays: a run keeps one
        ``Chunks`` for its life (a new one each call would outlive the
        collections made while the model answers, and each would promote it)."""
        self.keys[:] = other.keys
        self.sizes[:] = other.sizes
        self.owners[:] = other.owners


@dataclass
class PrefixTrack:
    """A run's memory of its previous payload (its breaks are counted on
    the run: ``RunState.prefix_breaks``, which a park carries)."""

    chunks: Chunks | None = None
    decisions_seen: int = 0
    """How many of the run's decisions the previous call had seen: the
    pruner's rewrites since then are the newer ones."""
    summary: Any = None
    """The agent's summary at the previous call. AgentScope's compression,
    and nothing else within a reply, writes a new summary object (a context
    the application replaces leaves it: that break stays ``unknown``); seen
    here, with no middleware chain of its own per round. A compression whose
    summary model returned nothing keeps an earlier summary object: ``unknown``."""


def track(run: RunState) -> PrefixTrack:
    """The run's prefix track (created at its first model call)."""
    if run.prefix is None:
        run.prefix = PrefixTrack()
    return run.prefix


def observe(
    services: Services, run: RunState, messages: list[Any], tools: Any, model: Any, agent_state: Any,
) -> int:
    """Record this call's payload; a prefix break against the previous call
    becomes a decision (``agent_state``: the agent's, whose summary tells
    compression). Returns the payload's estimated input tokens."""
    state = track(run)
    previous = state.chunks
    chunks = _chunk_keys(messages, tools, previous)
    if previous is None:
        state.chunks = chunks
    else:
        if previous.keys:
            at = _divergence(previous.keys, chunks.keys)
            if at is not None:
                compressed = agent_state.summary is not state.summary
                _record_break(services, run, state, previous, at, model, compressed)
        previous.take(chunks)
    state.summary = agent_state.summary
    state.decisions_seen = len(made(run, "decisions") or ())
    return sum(chunks.sizes) // CHARS_PER_TOKEN


def over_request_cap(services: Services, run: RunState, tokens: int) -> str | None:
    """A request estimated over ``max_request_input_tokens`` is not sent: the
    run stops with the fallback text (returned; ``None`` when within the cap
    or in shadow mode). A cheaper tier would receive the very same payload,
    so the ladder has no lower rung for it."""
    cap = run.request_input_cap()  # every enclosing run's too, whichever Harness opened it
    if cap is None or tokens <= cap:
        return None
    enforced = run.request_input_cap(enforced_only=True)
    binding = enforced is not None and tokens > enforced  # a shadow Harness's own cap only records
    services.record(
        run, "budget_router", "on_model_call", "fallback", code="quota_exhausted",
        detail=f"request of ~{tokens} input tokens over max_request_input_tokens ({cap})",
        enforced=binding,
    )
    if not binding and not services.shadow:
        return None  # another Harness's shadow cap: recorded on this run, never its end
    text = run.facts.stop("budget", fallback(services.config, "budget") + found_so_far(run))
    return text if binding else None  # shadow mode: the report ends as enforcing would, the call is made


# ---------------------------------------------------------------- chunks


def _chunk_keys(messages: list[Any], tools: Any, previous: Chunks | None = None) -> Chunks:
    """Each chunk as ``(hash, characters, message index)``. Hashed as tuples
    of the payload's own strings, never copies of them: Python caches a
    string's hash, so a block already sent costs O(1) to hash again. Built
    in lists (whose ``append`` the interpreter specialises; an array's it
    does not), made arrays once at the end."""
    keys: list[int] = []
    sizes: list[int] = []
    owners: list[int] = []
    if tools:
        schemas, size = _tools_chunk(tools, previous)
        keys.append(schemas)
        sizes.append(size)
        owners.append(-1)
    for index, msg in enumerate(messages):
        role, name = msg.role, msg.name
        keys.append(hash(("\x00", role, name)))
        sizes.append(2 + len(role) + len(name or ""))
        content = msg.content
        if isinstance(content, str):
            keys.append(hash(content))
            sizes.append(len(content))
            owners += (index, index)
            continue
        owners += repeat(index, 1 + len(content))
        for block in content:
            # the common kinds inline, keyed as ``_block_key`` keys them
            cls = type(block)
            if cls is ToolResultBlock:
                output = block.output
                if type(output) is str:
                    call_id, tool = block.id, block.name
                    keys.append(hash(("r", call_id, tool, output)))
                    sizes.append(3 + len(call_id) + len(tool) + len(output))
                    continue
                if len(output) == 1 and type(output[0]) is TextBlock:
                    call_id, tool, text = block.id, block.name, output[0].text
                    keys.append(hash(("r", call_id, tool, text)))
                    sizes.append(4 + len(call_id) + len(tool) + len(text))
                    continue
            elif cls is ToolCallBlock:
                call_id, tool, args = block.id, block.name, block.input
                keys.append(hash(("c", call_id, tool, args)))
                sizes.append(3 + len(call_id) + len(tool) + len(args))
                continue
            elif cls is TextBlock:
                text = block.text
                keys.append(hash(("t", text)))
                sizes.append(1 + len(text))
                continue
            other, size = _block_key(block)
            keys.append(hash(other))
            sizes.append(size)
    return Chunks(array("q", keys), array("q", sizes), array("q", owners))


def _tools_chunk(tools: Any, previous: Chunks | None) -> tuple[int, int]:
    """The tool schemas' (hash, characters). Hashed from their value every
    call (a cached copy would share the dicts a middleware may edit in place,
    and miss exactly that change), through ``marshal`` (version 2: by value,
    in the order they are sent), a third of the cost of JSON; their JSON is
    written, for its length, only when the previous call's schemas differ."""
    try:
        key: int | None = hash(marshal.dumps(tools, 2))
    except ValueError:  # a value only JSON can write (through ``str``): hashed as JSON
        key = None
    if key is not None and previous is not None and previous.owners[:1] == _TOOLS and previous.keys[0] == key:
        return key, previous.sizes[0]
    text = json.dumps(tools, ensure_ascii=False, default=str)
    return hash(text) if key is None else key, len(text)


def _block_key(block: Any) -> tuple[tuple[Any, ...], int]:
    """What a formatter sends of one block, tagged by its kind, and its
    length in characters."""
    cls = type(block)
    if cls is TextBlock:
        return ("t", block.text), 1 + len(block.text)
    if cls is ToolResultBlock:
        output, size = _parts(block.output)
        return ("r", block.id, block.name, output), 3 + len(block.id) + len(block.name) + size
    if cls is ToolCallBlock:
        return ("c", block.id, block.name, block.input), 3 + len(block.id) + len(block.name) + len(block.input)
    if cls is HintBlock:
        hint, size = _parts(block.hint)
        return ("h", hint), 1 + size
    if cls is ThinkingBlock:
        return ("k", block.thinking), 1 + len(block.thinking)
    text = (
        block.source.model_dump_json() if cls is DataBlock
        else block.model_dump_json(exclude={"id", "created_at", "finished_at", "metadata", "state"})
    )
    return ("d" if cls is DataBlock else "?", text), 1 + len(text)


def _parts(value: Any) -> tuple[Any, int]:
    if isinstance(value, str):
        return value, len(value)
    if len(value) == 1 and type(value[0]) is TextBlock:  # the common result
        return value[0].text, 1 + len(value[0].text)
    keys = [_block_key(b) for b in value]
    return tuple(k for k, _ in keys), sum(n for _, n in keys) + max(len(keys) - 1, 0)


def _divergence(previous: array[int], current: array[int]) -> int | None:
    """Index of the first chunk key of ``previous`` that ``current`` does
    not repeat, or ``None`` when ``current`` extends it (compared in C
    first: the common case, an extension, costs no Python loop)."""
    if current[: len(previous)] == previous:
        return None
    for i, (old, new) in enumerate(zip(previous, current, strict=False)):
        if old != new:
            return i
    return len(current)


def _cause(run: RunState, state: PrefixTrack, compressed: bool) -> str:
    if compressed:
        return "compression"
    for d in run.decisions[state.decisions_seen:]:
        if d.action == "rewrite" and d.detail.startswith("pruned"):
            return "pruning"
    return "unknown"


def _record_break(
    services: Services, run: RunState, state: PrefixTrack,
    previous: Chunks, at: int, model: Any, compressed: bool,
) -> None:
    cause = _cause(run, state, compressed)
    lost = sum(previous.sizes[at:]) // CHARS_PER_TOKEN
    where = "the tool schemas" if previous.owners[at] < 0 else f"message {previous.owners[at]}"
    detail = f"{cause}: {where} changed; ~{lost} tokens already sent are no longer a cached prefix"
    cost = services.config.cost
    price = cost.price_of(getattr(model, "model", "")) if cost is not None else None
    if price is not None and price.cached_input_per_mtok is not None:
        miss = lost * (price.input_per_mtok - price.cached_input_per_mtok) / 1_000_000
        detail += f" (est. ${miss:.6f} more than cached)"
    run.prefix_breaks += 1
    services.record(run, "prefix_observer", "on_model_call", "prefix_break", code=cause, detail=detail)
    if _otel_trace is not None:
        span = _otel_trace.get_current_span()
        if span.is_recording():
            span.set_attribute("harness.prefix_breaks", run.prefix_breaks)


__all__ = ["CAUSES", "PrefixTrack", "observe", "over_request_cap"]
