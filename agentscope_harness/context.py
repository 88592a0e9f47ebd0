"""HookContext: what a hook sees at its point, and the only thing it may change.

Hooks decide, adapters act: a hook mutates its context (adds a hint, rewrites
the result text, sets a fallback answer...) or raises ``HookRejectSignal``;
the adapters turn that into AgentScope actions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .facts import GuardState, call_digest

if TYPE_CHECKING:
    from .config import HarnessConfig, ToolPolicy
    from .harness import Harness, Principal
    from .run_state import RunState


CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """A cheap token estimate (4 characters a token)."""
    return len(text) // CHARS_PER_TOKEN


REASONS = {
    "deadline": "the time allowed for it ran out",
    "budget": "its budget is used up",
    "max_model_calls": "it took too many steps",
    "stalled": "no progress was being made",
    "dependency_down": "a service it needs is unavailable",
}
"""Plain words for the reasons a run is stopped, used in fallback answers."""


@dataclass
class ToolCallView:
    """The tool call being judged (arguments parsed; never the live block)."""

    id: str
    name: str
    args: dict[str, Any]
    raw_input: str
    policy: "ToolPolicy | None"
    batch: tuple[str, int]
    args_valid: bool = True
    _digest: str | None = None

    @property
    def digest(self) -> str:
        """Tool name plus normalized arguments."""
        if self._digest is None:
            self._digest = call_digest(self.name, self.args)
        return self._digest

    @property
    def role(self) -> str:
        """The tool's role from its policy (``"other"`` when unconfigured)."""
        return self.policy.role if self.policy is not None else "other"


@dataclass
class ToolResultView:
    """The tool's final result. ``text`` may be rewritten; ``notices`` are
    appended after it, outside any fence, in the order hooks add them."""

    text: str
    state: str
    metadata: dict[str, Any]
    error_class: str | None = None
    refused: bool = False
    notices: list[str] = field(default_factory=list)
    has_data: bool = False
    raw_text: str = ""
    """The tool's own text, before any hook rewrote it."""
    new_facts: list[str] = field(default_factory=list)
    """Facts this result reached for the first time (progress edges)."""

    @property
    def ok(self) -> bool:
        """The tool ran and succeeded."""
        return self.state == "success"

    @property
    def harness_meta(self) -> dict[str, Any]:
        """What the tool reported to the harness in ``metadata["harness"]``."""
        value = self.metadata.get("harness")
        return value if isinstance(value, dict) else {}


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


@dataclass
class HookContext:
    """The view one hook receives at one point of one run."""

    point: str
    run: "RunState"
    harness: "Harness"
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
    results_in_context: Callable[[], list["ContextResult"]] | None = None
    prune: list[str] = field(default_factory=list)
    undo: list[Callable[[], None]] = field(default_factory=list)
    hook_name: str = ""

    @property
    def facts(self) -> GuardState:
        """The run's facts."""
        return self.run.facts

    @property
    def config(self) -> "HarnessConfig":
        """The harness's config."""
        return self.harness.config

    @property
    def principal(self) -> "Principal | None":
        """The authenticated caller bound with ``acting_for`` (or ``None``)."""
        return self.run.principal

    def hint(self, text: str, key: str | None = None) -> bool:
        """Tell the model something before its next call, and record it as a
        decision. ``key`` names the hint (default: the hook's name): the same
        hint is never given twice in a row, and then this returns False."""
        key = key or self.hook_name
        facts = self.run.facts
        if key == facts.last_hint:
            return False
        facts.last_hint = key
        self.hints.append((key, text))
        self.decide("hint", detail=text)
        return True

    def notice(self, text: str) -> None:
        """Append a note to this call's result (outside the fence), recorded
        as a hint once it reaches the result. A note given before the call
        runs is dropped, unrecorded, if its dependency turns out to be down."""
        if self.result is not None:
            self.result.notices.append(text)
            self.decide("hint", detail=text)
        else:
            self.pending_notices.append((self.hook_name, text))

    def attach_pending_notices(self) -> None:
        """Give the notes made before the call ran to its result (adapter)."""
        for hook, text in self.pending_notices:
            self.result.notices.append(text)
            self.harness._record(
                self.run, hook, "pre_tool_call", "hint", tool=self.tool.name, detail=text,
            )
        self.pending_notices.clear()

    def on_refused(self, undo: Callable[[], None]) -> None:
        """Run ``undo`` if a later gate refuses this call (e.g. give back the
        ledger units charged for it)."""
        self.undo.append(undo)

    def stop(self, reason: str, text: str | None = None, code: str | None = None) -> None:
        """End the run now without another model call: the user gets
        ``text`` (default: the config's fallback text) and the run ends
        ``incomplete`` with ``reason``."""
        from .report import TerminalState

        if text is None:
            text = self.config.fallback_text.format(reason=REASONS.get(reason, reason))
        self.fallback_answer = text
        self.facts.conclude(TerminalState.INCOMPLETE, reason)
        self.decide("fallback", code=code, detail=reason)

    def decide(
        self,
        action: str,
        code: str | None = None,
        detail: str = "",
        tool: str | None = None,
    ) -> None:
        """Record a decision of the running hook (observable: event + report)."""
        self.harness._record(
            self.run,
            self.hook_name,
            self.point,
            action,
            code=code,
            tool=tool or (self.tool.name if self.tool else None),
            detail=detail,
        )
