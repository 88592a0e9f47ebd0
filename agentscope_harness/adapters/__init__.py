"""The two AgentScope middlewares: the only code that touches AgentScope."""

from .agent_adapter import HarnessAgentAdapter
from .tool_adapter import ErrorClassMiddleware, HarnessToolAdapter

__all__ = ["ErrorClassMiddleware", "HarnessAgentAdapter", "HarnessToolAdapter"]
