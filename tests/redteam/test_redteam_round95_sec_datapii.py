"""Round 95 red team: a data block's URL escapes its tool's ``pii`` policy."""

from __future__ import annotations

from agentscope.message import DataBlock, TextBlock, URLSource
from agentscope.tool import ToolChunk
from hookkit import drive, harnessed
from scripted import calls, text

from agentscope_harness import HarnessConfig, ToolPolicy

EMAIL = "alice.smith@example.com"


async def test_an_email_in_a_data_blocks_url_follows_the_tools_pii_policy() -> None:
    """README: personal data in "a tool's results, as the model reads and the
    stream shows them" follows its tool's ``pii``. AgentScope's formatter
    writes a data block's URL into the tool message as text ("can be
    accessed at the URL: ..."); the harness redacts secrets there but never
    applies the tool's ``pii``: an address the policy says to redact reaches
    the model (and the stream's data event) as written, while the same
    address in the result's text is redacted."""

    async def export_video(q: str) -> ToolChunk:
        """Export a video.

        Args:
            q (str): The query.
        """
        url = f"https://files.example.com/v.mp4?owner={EMAIL}"
        return ToolChunk(content=[TextBlock(text=f"exported for {EMAIL}"),
                                  DataBlock(source=URLSource(url=url, media_type="video/mp4"))])

    cfg = HarnessConfig(tools={"export_video": ToolPolicy(role="lookup", pii={"email": "redact"})})
    h, model, agent = harnessed(cfg, [calls(("export_video", {"q": "x"})), text("done")], [export_video])
    events, _, _ = await drive(h, agent)
    told = str(model.calls[-1].formatted)
    assert "exported for" in told and "files.example.com/v.mp4" in told
    assert EMAIL not in told
    assert all(EMAIL not in str(getattr(e, "url", "") or "") for e in events)
