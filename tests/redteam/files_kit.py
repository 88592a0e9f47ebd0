"""A file tool and its gate, for the scenarios where a middleware before the
harness's changes the call it hands on (rounds 142 a, 143 a): ``delete_file``
records each path it deletes in ``DELETED``; ``no_deletes_outside_tmp``
refuses a delete outside ``/tmp/``."""

from __future__ import annotations

from typing import Any

from agentscope_harness import HookContext, HookRejectSignal, harness_hook

DELETED: list[str] = []


async def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path (str): The path.
    """
    DELETED.append(path)
    return f"deleted {path}"


@harness_hook("pre_tool_call", priority=50, name="no_deletes_outside_tmp")
def no_deletes_outside_tmp(ctx: HookContext) -> Any:
    if ctx.tool.name == "delete_file" and not str(ctx.tool.args.get("path", "")).startswith("/tmp/"):
        raise HookRejectSignal("only /tmp may be cleaned", code="permission_denied")
    return None
