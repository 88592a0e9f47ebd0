"""HookContext: what a hook sees at its point, and the verbs it may use.

Hooks decide, adapters act: a hook reads the run's facts and states intent
through a small vocabulary (``hint``, ``notice``, ``constrain``, ``stop``,
``ask``, ``decide``, rewriting ``result.text`` / ``final_text``) or raises
``HookRejectSignal``; the adapters turn that into AgentScope actions. No hook
settles a run or computes its terminal state: ``outcome.py`` does, once.

Each point has a typed view (``ToolCallContext``, ``ToolResultContext``,
``ReflectContext``, ``SessionEndContext``) whose point-specific attributes are
never ``None``; they are all ``HookContext``s, so a hook typed against the
base class keeps working.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from agentscope.permission import PermissionMode

from .facts import OUT_OF_TIME, Batch, Declared, GuardState, Heard, call_digest, finish_required, frozen
from .injection import shows_nothing
from .outputs import shaped_notice
from .registry import TOOL_POINTS
from .report import TerminalState

if TYPE_CHECKING:
    from .config import CostPolicy, HarnessConfig, ToolPolicy
    from .harness import Principal
    from .run_state import RunState
    from .services import Services


CHARS_PER_TOKEN = 4


async def awaited(value: Any) -> Any:
    """``value``, awaited when a user callable (``ask_when``, ``when``,
    ``count_results``) returned an awaitable: they may be sync or async."""
    return await value if inspect.isawaitable(value) else value


def kept_ends(text: str, max_tokens: int) -> tuple[str, str] | None:
    """The head and tail a result over ``max_tokens`` keeps when it is
    truncated (two thirds head, one third tail); ``None`` when it fits."""
    budget = max_tokens * CHARS_PER_TOKEN
    if len(text) <= budget:
        return None
    head_len = budget * 2 // 3
    return text[:head_len], text[len(text) - (budget - head_len):]


def estimate_tokens(text: str) -> int:
    """A cheap token estimate (4 characters a token)."""
    return len(text) // CHARS_PER_TOKEN


REASONS = {
    "deadline": "the time allowed for it ran out",
    "budget": "its budget is used up",
    "max_model_calls": "it took too many steps",
    "stalled": "no progress was being made",
    "cycling": "it was going round in circles",
    "refused": "a step it needed was refused",
    "dependency_down": "a service it needs is unavailable",
    "unpriced_model": "its model has no price, so its budget cannot be kept",
    "model_error": "the language model could not be reached",
    "rate_limited": "too many requests were made in the last minute",
    "concurrency_limited": "too many requests are already running",
    "finish_tool_not_called": "it did not deliver its result the way this task requires",
    "no_answer": "no answer was given",
    "policy_error": "a safety check could not run",
    "policy_refused": "a rule of this service does not allow it",
    "run_concluded": "the task it was part of has ended",
}
"""Plain words for the reasons a run is stopped, used in fallback answers
(``refused:<code>`` reads as ``refused``; a hook's own reason reads as its
hook wrote it, so write it for the user, or give ``ctx.stop`` a text)."""


def reason_words(reason: str) -> str:
    """The plain words for ``reason`` (itself when it has none)."""
    return REASONS.get(reason) or REASONS.get(reason.partition(":")[0], reason)


@dataclass(frozen=True)
class ToolCallView:
    """The tool call being judged: AgentScope's own parsed and schema-checked
    arguments, the exact value the tool receives (never the live block).
    Read-only all the way down (``frozen``): the tool receives AgentScope's
    own arguments, so an edit here would only change what the gates judge.
    A hook that writes ``args`` fails (fail closed for a safety hook); to
    change a call, refuse it and say what to call instead."""

    id: str
    name: str
    args: Mapping[str, Any]
    policy: ToolPolicy | None
    batch: Batch
    resumed: bool = False
    """The call was confirmed by a human and is being judged again."""
    rejudged: bool = False
    """This run judged this very call before (a park, then its resume or a
    re-evaluation): windows that count calls count it once."""
    declared: Declared | None = None
    """What the schema of the tool AgentScope judged the call with declares
    (argument names, defaults), for a tool a gate reads the schema of;
    else ``None``."""
    agentscope_own: bool = False
    """AgentScope's own tool (its structured output, its compression), not one
    of that name: AgentScope judges it, the harness does not gate it."""
    meta_tool: bool = False
    """The toolkit's own meta tool (``reset_tools``, the skill viewer): it
    changes what the model is offered and acts on no service, so it is gated
    but not counted on ``max_tool_calls``, as AgentScope's own tools are not."""
    _digest: str | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if type(self.args) is not MappingProxyType:
            object.__setattr__(self, "args", frozen(self.args))

    @property
    def digest(self) -> str:
        """Tool name plus normalized arguments (duplicate detection only)."""
        if self._digest is None:
            object.__setattr__(self, "_digest", call_digest(self.name, self.args))
        assert self._digest is not None
        return self._digest

    @property
    def role(self) -> str:
        """The tool's role from its policy (``"other"`` when unconfigured)."""
        return self.policy.role if self.policy is not None else "other"

    @property
    def identity_bound(self) -> bool:
        """The tool acts for the principal (``identity_args``): its refusal
        is a call for another user, not a tool the account may not use."""
        return self.policy is not None and bool(self.policy.identity_args)


@dataclass
class ToolResultView:
    """The tool's final result. ``text`` may be rewritten; ``notices`` are
    appended after it, outside any fence, in the order hooks add them."""

    text: str
    state: str
    metadata: dict[str, Any]
    error_class: str | None = None
    notices: list[str] = field(default_factory=list)
    has_data: bool = False
    raw_text: str = ""
    """The tool's own text, before any hook rewrote it."""
    data_names: tuple[str, ...] = ()
    """The names of its data blocks (an image's): text the model reads
    outside the fence (AgentScope's note on an image it drops quotes it)."""
    data_digests: tuple[int, ...] = ()
    """What tells its data blocks from others (``outputs.data_digests``):
    a new image under the same caption is news."""
    new_facts: list[str] = field(default_factory=list)
    """Facts this result reached for the first time (progress edges)."""
    news: bool = False
    """The drift tracker's verdict: the result brings new information (or
    acted): the round's progress once the model reads it."""
    heard: Heard | None = None
    """What the drift tracker read of it, remembered once the model reads it."""
    heard_of: str | None = None
    """The text it read (a hook that rewrote the result after it: read again)."""
    withheld: bool = False
    """A post_tool_call gate refused the result: the model reads a sentinel."""
    failed_verify: bool = False
    """Its finishing tool's ``verify`` failed it: no success in the run's
    facts (in shadow mode its state stays the tool's own ``success``)."""
    suspect: bool = False
    """Its text reads as instructions addressed to the model (``injection``
    flagged it): never quoted outside its fence."""
    trusted_metadata: bool = False
    """``metadata["harness"]`` was written by the harness's own tool
    middleware (or the tool itself), not parsed from text."""

    @property
    def ok(self) -> bool:
        """The tool ran and succeeded."""
        return self.state == "success"

    @property
    def body(self) -> str:
        """What the model reads of the result: its text, then each notice, a line each."""
        return "\n".join(p for p in [self.text, *self.notices] if p)

    @property
    def harness_meta(self) -> dict[str, Any]:
        """What the tool reported to the harness in ``metadata["harness"]``."""
        value = self.metadata.get("harness")
        return value if isinstance(value, dict) else {}


PRUNED = "[pruned: an earlier result of {name} ({tokens} tokens), kept as ref {ref}]"
"""What the model reads in place of a result the pruner removed."""


def is_pruned(text: str) -> bool:
    """Whether a result's text in the context is a pruned result's placeholder."""
    return text.startswith("[pruned: ")


@dataclass(frozen=True)
class ContextResult:
    """A tool result in the agent's context, as the pruner sees it."""

    id: str
    name: str
    tokens: int
    pruned: bool


@dataclass
class ModelOutputView:
    """What the model produced in this round."""

    text: str
    tool_calls: list[tuple[str, str]]
    """``(name, raw input)`` of each tool call."""

    @property
    def is_final(self) -> bool:
        """The model answered with text and no tool call."""
        return not self.tool_calls


WRAP_UP_CALLS = 1.5
"""The default wrap-up window is at least this many of the run's slowest
model calls: a window shorter than one call cannot be concluded in."""


@dataclass
class HookContext:
    """The view one hook receives at one point of one run."""

    point: str
    run: RunState
    services: Services
    agent: Any = None
    tool: ToolCallView | None = None
    result: ToolResultView | None = None
    model_output: ModelOutputView | None = None
    final_text: str | None = None
    prompt_addition: list[str] = field(default_factory=list)
    hints: list[tuple[str, str]] = field(default_factory=list)
    fallback_answer: str | None = None
    another_round: str | None = None
    end_reason: str | None = None
    pending_notices: list[tuple[str, str]] = field(default_factory=list)
    results_in_context: Callable[[], list[ContextResult]] | None = None
    prune: list[str] = field(default_factory=list)
    admissions: list[tuple[str, Callable[[], Callable[[], None] | None]]] = field(
        default_factory=list,
    )
    refunds: tuple[Callable[[], None], ...] = ()
    """The undos of an admitted call's charges: a call admitted but never
    made gives them back (``HarnessToolAdapter._uncount``)."""
    ask_reason: str | None = None
    """At ``pre_tool_call``: why the hooks that asked ask, joined by ``; ``."""
    asked: tuple[tuple[str, str], ...] = ()
    """Each hook that asked, and why: recorded once the call is put to a
    human (a call a later gate refuses, or nobody is asked about, was not)."""
    asks_anew: bool = False
    """A resumed call is put to a human again: its approval answered another
    question than this one (a ledger's extension never offered)."""
    judged_text: str | None = None
    """``pre_tool_call``: the arguments text of the call judged, as AgentScope
    runs it; ``on_acting`` makes only a call that carries it."""
    would_refuse: str | None = None
    """In shadow mode: the code of the first refusal a hook made and shadow
    mode did not apply (a candidate policy is compared with it)."""
    limits_met: dict[str, Exception | None] | None = None
    """``pre_tool_call``: the tool rate and concurrency limits the fleet
    judged for the call (by store key, size and a rate's waits: ``None``
    taken, else the refusal), which a candidate policy's same limits follow."""
    hook_name: str = ""
    hook_builtin: bool = False
    """The running hook is one of the harness's own (its hints carry the
    harness's markers; anyone else's are defanged)."""
    audit: tuple[str, str] | None = None
    """``on_session_end``: the answer ``final_answer_audit`` read, and the
    one it gave."""

    @property
    def facts(self) -> GuardState:
        """The run's facts."""
        return self.run.facts

    @property
    def config(self) -> HarnessConfig:
        """The harness's config."""
        return self.services.config

    @property
    def harness(self) -> Services:
        """The services hooks may use (kept under its 0.1 name)."""
        return self.services

    def wrap_up_s(self) -> float | None:
        """This run's wrap-up window (the watchdog's and the budget status
        line's): the configured one, or the default, a share of the time
        this run has (a nested run inherits less than its own ``deadline_s``
        when its parent's deadline is closer), widened to ``WRAP_UP_CALLS``
        of the slowest model call this run has seen (never past the deadline)."""
        config, run = self.config, self.run
        if config.wrap_up_s is not None or config.deadline_s is None:
            return config.effective_wrap_up_s()
        span = config.deadline_s if run.deadline is None else min(config.deadline_s, run.deadline - run.timed_from)
        window = config.default_wrap_up_s(span)
        return min(max(window, WRAP_UP_CALLS * run.root.longest_model_call_s), span)

    @property
    def principal(self) -> Principal | None:
        """The authenticated caller bound with ``acting_for`` (or ``None``)."""
        return self.run.principal

    # ------------------------------------------------------------- verbs

    def hint(self, text: str, key: str | None = None) -> bool:
        """Tell the model something before its next call (its secrets
        redacted: a hook may quote what a call carried; a hook of yours, the
        tool's ``pii`` applied and markers defanged too, as a notice), and record it as a
        decision. ``key`` names the hint (default: a built-in's name; a hook
        of yours, its name and the text, so another text of it is another
        hint): the same hint is never given twice in a row, and then this
        returns False. Once
        the run is constrained, hints that invite exploring are dropped: the
        ladder only climbs."""
        self._acts_at("hint", _HINTED_POINTS)
        shaped = None
        if not key and not self.hook_builtin:  # its name and a digest of the text as shaped (a park record keeps it)
            shaped = self._shaped_hint(text)
            key = f"{self.hook_name}: {_digest(shaped)}"
        key = key or self.hook_name
        facts = self.run.facts
        if key in facts.last_hints:
            return False  # not shaped: a built-in's hint, dropped every round it repeats, costs nothing
        if facts.force_conclude and key in EXPLORING_HINTS:
            return False
        # the model call it is given before: this one at pre_think, the next one elsewhere (this run's
        # own count: a sub-agent's calls in the batch are no round of this run)
        facts.remember_hint(key, self.run.turns + (self.point != "pre_think"))
        text = shaped if shaped is not None else self._shaped_hint(text)
        self.hints.append((key, text))
        self.decide("hint", detail=text)
        return True

    def _shaped_hint(self, text: str) -> str:
        """A hint as the model reads it: a built-in's redacted; a hook of
        yours may quote a tool's output, so shaped as a notice is."""
        if self.hook_builtin:
            return self.services.redactor.redact(text)
        return shaped_notice(text, self.services.redactor, self.tool.policy if self.tool else None, self.run)

    def notice(self, text: str) -> None:
        """Append a note to this call's result (outside the fence, shaped as
        ``outputs.shaped_notice`` says: it may quote the tool's output),
        recorded as a hint once it reaches the result. A note
        given before the call runs is dropped, unrecorded, if its dependency
        turns out to be down."""
        self._acts_at("notice", TOOL_POINTS)
        policy = self.tool.policy if self.tool is not None else None
        text = shaped_notice(text, self.services.redactor, policy, self.run)
        if self.result is not None:
            self.result.notices.append(text)
            self.decide("hint", detail=text)
        else:
            self.pending_notices.append((self.hook_name, text))

    def constrain(self, reason: str, code: str | None = None) -> None:
        """Second rung of the ladder: from the next model call on,
        ``tool_choice`` is narrowed to the finishing tool (or ``none``). A
        model that keeps calling other tools after that is stopped, with
        ``code`` as the run's reason (default: ``reason``)."""
        self._acts_at("constrain", _HINTED_POINTS)
        if type(reason) is not str or (code is not None and type(code) is not str):
            raise TypeError("ctx.constrain: reason and code must be text")
        facts = self.run.facts
        if facts.force_conclude:
            return
        facts.force_conclude = True
        facts.forced_at = self.run.root.model_calls
        facts.constrained_for = code or reason
        self.decide("constrain", detail=reason)

    def stop(
        self,
        reason: str,
        state: TerminalState = TerminalState.INCOMPLETE,
        *,
        text: str | None = None,
        code: str | None = None,
    ) -> None:
        """Last rung: end the run with ``state`` and ``reason``. At
        ``pre_think`` the user gets ``text`` without another model call;
        elsewhere every further tool call is refused and the next round
        answers that way. ``text`` defaults to ``reason`` itself for a stop
        that completes the run or leaves it waiting (what was done, the
        question: a completed run never answers that it failed), unless a
        finishing tool must deliver; else to the config's fallback text.
        A run that ended already keeps its end, and answers what that end does.
        A ``state`` that is no ``TerminalState``, or a ``reason``, ``text``
        or ``code`` that is no text, fails the hook (by its kind)."""
        state = _terminal_state(state)
        if type(reason) is not str or any(v is not None and type(v) is not str for v in (text, code)):
            raise TypeError("ctx.stop: reason, text and code must be text")
        if self.fallback_answer is not None:
            return  # the first stop of a point stands
        facts = self.run.facts
        ended = facts.terminal
        if ended is not None:  # the run's first end stands, and so does what it answers
            text = facts.stop_text or facts.ended_by_tool()
        end_state, end_reason = (state, reason) if ended is None else (TerminalState(ended.state), ended.reason)
        settled = end_state in (TerminalState.COMPLETED, TerminalState.WAITING_INPUT)
        if text is None:
            finishing = finish_required(self.run, self.config)  # this run's: a sub-agent without one answers its lead
            text = (
                reason if settled and not finishing
                # a completed stop where a finishing tool must deliver ends finish_tool_not_called: said so
                else fallback(self.config, "finish_tool_not_called") if end_state == TerminalState.COMPLETED
                else fallback(self.config, end_reason)
            )
        if not settled:
            found = found_so_far(self.run)
            if found not in text:
                text += found
        if ended is None:
            facts.conclude(state, reason)
            facts.stop_text = text
        if self.point == "pre_think":
            self.fallback_answer = text
        self.decide("stop" if self.point != "pre_think" else "fallback", code=code, detail=reason,
                    enforced=True if reason == OUT_OF_TIME else None)

    def _acts_at(self, verb: str, points: tuple[str, ...]) -> None:
        """A verb used where nothing acts on it is refused loudly (the hook
        fails) rather than dropped: ``on_system_prompt`` hooks run once per
        Harness, on the config alone, and what they decide is kept for every
        later prompt (a hint there would reach the first run only); at
        ``on_session_end`` no model call follows; a notice has a result only
        at a tool point, a charge a call only at ``pre_tool_call``."""
        if self.point not in points:
            where = "use pre_think" if self.point == "on_system_prompt" else f"use {' or '.join(points)}"
            raise ValueError(f"ctx.{verb}() is not available at {self.point} (nothing acts on it there): {where}")

    def ask(self, reason: str) -> None:
        """At ``pre_tool_call``: park the call for a human (AgentScope's own
        confirmation flow). The run reports ``waiting_input`` with ``reason``
        (an empty one says which hook asks: a call is parked all the same)."""
        self._acts_at("ask", ("pre_tool_call",))
        own = str(reason or "")
        if shows_nothing(own):  # a blank question would tell the human nothing: say who asks
            own = f"{self.hook_name} asks a human to confirm this call"
        self.asked += ((self.hook_name, own),)
        self.ask_reason = own if self.ask_reason is None else f"{self.ask_reason}; {own}"

    def admit(self, charge: Callable[[], Callable[[], None] | None]) -> None:
        """Run ``charge`` only once every gate of this call has passed, with
        no await between the gates' last check and the charge: it re-checks
        and charges (returning an undo callable; any other value, ``None``
        or not, has nothing to undo) or raises
        ``HookRejectSignal``. So an async gate can never hold a charge while
        other calls of the batch are judged."""
        self._acts_at("admit", ("pre_tool_call",))
        if inspect.iscoroutinefunction(charge):  # it would never run: no await comes between the last check and it
            raise TypeError("ctx.admit: a charge must be synchronous, not async")
        self.admissions.append((self.hook_name, charge))

    def decide(
        self,
        action: str,
        code: str | None = None,
        detail: str = "",
        tool: str | None = None,
        *,
        enforced: bool | None = None,
    ) -> None:
        """Record a decision of the running hook (observable: event + report)."""
        self.services.record(
            self.run,
            self.hook_name,
            self.point,
            action,
            code=code,
            tool=tool or (self.tool.name if self.tool else None),
            detail=detail,
            enforced=enforced,
        )


STRUCTURED_OUTPUT_TOOL = "GenerateStructuredOutput"
"""AgentScope's tool for a reply that owes a structured output: the only way
such a reply can end."""


def structured_output_owed(agent: Any) -> bool:
    """The reply owes a structured output it has not produced yet."""
    reply = getattr(getattr(agent, "state", None), "reply_context", None)
    return reply is not None and reply.structured_schema is not None and reply.structured_output is None


def nobody_to_ask(agent: Any) -> bool:
    """The agent's permission engine runs in AgentScope's ``DONT_ASK`` mode
    (unattended, scheduled): no human is there to answer (it turns its own
    asks into denials), so nothing the harness would ask parks for nobody."""
    context = getattr(getattr(agent, "_engine", None), "context", None)
    return getattr(context, "mode", None) == PermissionMode.DONT_ASK


def fallback(config: HarnessConfig, reason: str, cost: CostPolicy | None = None) -> str:
    """The answer of a run stopped for ``reason``: the text of the budget
    that was spent (``cost``, default the config's) when the reason is
    ``budget``, the config's ``fallback_text`` for every other reason."""
    cost = cost or config.cost
    text = cost.fallback_text if reason == "budget" and cost is not None else config.fallback_text
    return text.format(reason=reason_words(reason))


def found_so_far(run: RunState) -> str:
    """What the run's successful calls did and found, for the answer of a
    stopped run (bounded and redacted); empty when nothing was."""
    said = ""
    for heading, kept in (("What I did", run.actions), ("What I found", run.findings)):
        if kept:
            lines = "\n".join(f"- {tool}: {text}" for tool, text in kept)
            said += f"\n\n{heading} before stopping:\n{lines}"
    return said


def time_ran_out(run: RunState, config: HarnessConfig) -> str:
    """The deadline ends the run (shadow mode too: time is no refusal): what
    the user is told, the fallback and what the run found."""
    run.facts.time_is_up(config.mode == "shadow")
    return run.facts.stop(OUT_OF_TIME, fallback(config, OUT_OF_TIME) + found_so_far(run))


_HINTED_POINTS = ("pre_think", "pre_tool_call", "post_tool_call", "post_reflect")
"""Where a hint or a constraint reaches a later model call of the run."""

EXPLORING_HINTS = frozenset({"drift", "cycle", "reopen_retrieval", "widen_search"})
"""Hints that invite the model to search on: never given once it must conclude."""


class ToolCallContext(HookContext):
    """``pre_tool_call``: ``tool`` is set."""

    tool: ToolCallView


class ToolResultContext(HookContext):
    """``post_tool_call``: ``tool`` and ``result`` are set."""

    tool: ToolCallView
    result: ToolResultView


class ReflectContext(HookContext):
    """``post_reflect``: ``model_output`` is set."""

    model_output: ModelOutputView


class SessionEndContext(HookContext):
    """``on_session_end``: ``final_text`` is the answer about to be delivered."""

    final_text: str


def _terminal_state(state: Any) -> TerminalState:
    try:
        return TerminalState(state)
    except ValueError:
        allowed = ", ".join(s.value for s in TerminalState)
        raise ValueError(f"ctx.stop: state must be a TerminalState ({allowed}), got {state!r}") from None


def _digest(text: str) -> str:
    """A hint's text as a short key: the same in every process, and never
    the text itself (a park record keeps the last key)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
