"""What a run tells the application afterwards: its terminal state, what it
spent, what ran, what was refused and why."""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class TerminalState(str, Enum):
    """How a run ended. Only ``COMPLETED`` means its delivery contract held."""

    COMPLETED = "completed"
    INCOMPLETE = "incomplete"
    WAITING_INPUT = "waiting_input"
    CANCELLED = "cancelled"
    FAILED = "failed"


class Decision(BaseModel):
    """One thing a hook decided (or would have decided, in shadow mode)."""

    model_config = ConfigDict(frozen=True)

    hook: str
    point: str
    action: str
    code: str | None = None
    tool: str | None = None
    detail: str = ""
    enforced: bool = True

    def as_event_value(self, run_id: str) -> dict[str, Any]:
        """The payload of the ``harness.decision`` CustomEvent."""
        return {"run_id": run_id, **self.model_dump(mode="json")}


class RunReport(BaseModel):
    """The settled account of one run (one reply, across HITL parks)."""

    run_id: str
    session_id: str | None = None
    agent: str
    principal: dict[str, Any] | None = None
    terminal_state: TerminalState
    reason: str = ""
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    spent_usd: float = 0.0
    tool_calls: dict[str, int] = Field(default_factory=dict)
    refusals: dict[str, int] = Field(default_factory=dict)
    refusals_by_hook: dict[str, int] = Field(default_factory=dict)
    decisions: list[Decision] = Field(default_factory=list)
    wall_s: float = 0.0
    deadline_left_s: float | None = None
    in_flight: list[str] = Field(default_factory=list)
    unsupported_claims: list[str] = Field(default_factory=list)
    facts: list[str] = Field(default_factory=list)
    children: list[RunReport] = Field(default_factory=list)
    extensions: list[dict[str, Any]] = Field(default_factory=list)
    """Budget extensions a human approved: ``{"what": "ledger:<name>" |
    "usd", "by": amount, "approved_by": user_id}``."""
    mode: str = "enforce"
    prefix_breaks: int = 0
    """Model calls whose payload did not extend the previous call's (a
    provider prompt-cache miss); each is a ``prefix_break`` decision naming
    its cause."""
    candidate_differences: list[dict[str, Any]] = Field(default_factory=list)
    """Calls where the candidate policy would have decided otherwise:
    ``{"point", "tool", "live", "candidate", "code"}``."""

    def to_json(self) -> str:
        """The report as JSON."""
        return self.model_dump_json()
