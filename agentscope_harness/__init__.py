"""agentscope-harness: a control plane around AgentScope 2.0 agents.

AgentScope's loop decides how the agent runs; the harness decides what it
may not do. Public API only (re-exports).
"""

from .config import (
    ConcurrencyLimit,
    CostPolicy,
    HarnessConfig,
    Ledger,
    ModelPrice,
    Prerequisite,
    RateLimit,
    ToolPolicy,
)
from .context import HookContext, ReflectContext, SessionEndContext, ToolCallContext, ToolResultContext
from .deadline import clamp_timeout, remaining_time
from .errors import (
    METADATA_KEY,
    Conflict,
    DependencyDown,
    ErrorClass,
    HarnessConfigError,
    HarnessError,
    InvalidArguments,
)
from .harness import Harness, Principal
from .injection import InjectionDetector, InjectionVerdict
from .model_guard import ModelCallRefused
from .registry import HOOK_POINTS, HookRejectSignal, HookSpec, harness_hook
from .report import Decision, RunReport, TerminalState
from .retry import retry_call
from .stores import LedgerStore, MemoryStore, RedisStore, SQLiteStore

__version__ = "0.1.0"

__all__ = [
    "HOOK_POINTS",
    "METADATA_KEY",
    "ConcurrencyLimit",
    "Conflict",
    "CostPolicy",
    "Decision",
    "DependencyDown",
    "ErrorClass",
    "Harness",
    "HarnessConfig",
    "HarnessConfigError",
    "HarnessError",
    "HookContext",
    "HookRejectSignal",
    "HookSpec",
    "InjectionDetector",
    "InjectionVerdict",
    "InvalidArguments",
    "Ledger",
    "LedgerStore",
    "MemoryStore",
    "ModelCallRefused",
    "ModelPrice",
    "Prerequisite",
    "Principal",
    "RateLimit",
    "RedisStore",
    "ReflectContext",
    "RunReport",
    "SQLiteStore",
    "SessionEndContext",
    "TerminalState",
    "ToolCallContext",
    "ToolPolicy",
    "ToolResultContext",
    "clamp_timeout",
    "harness_hook",
    "remaining_time",
    "retry_call",
]
