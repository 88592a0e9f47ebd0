"""Round 158 a: claims read in the answer as written (round 157 a) quote a value the
answer's filter only hid in its context."""
from __future__ import annotations

from typing import Any

from agentscope.message import Msg
from agentscope.tool import Toolkit
from scripted import make_agent, run, tool

from agentscope_harness import Harness, HarnessConfig, ToolPolicy
from agentscope_harness.testing import ScriptedModel, text

PASSWORD = "Hunter2-Blue-Lagoon"


async def set_password(user: str, password: str) -> str:
    """Set a user's password.

    Args:
        user (str): Who.
        password (str): The new password.
    """
    return "done"


async def drive(h: Harness, agent: Any) -> tuple[list[Any], Msg | None, Any]:
    events, final = await run(agent)
    return events, final, h.last_report(agent)


async def test_context_redacted_secret_named_in_the_correction():
    """README (redact_patterns; final_answer_audit: "secrets (exact values too) redacted"
    from the answer; the correction "never names the value as written", round 157 a).
    Attack: redact_patterns hides a password by its context ("password set to \\S+"); a claim
    pattern names the password as an argument; the model says "bob's password set to
    Hunter2-Blue-Lagoon" without calling set_password. The filtered answer hides the claim;
    the answer as written shows it, its value rewritten by the filter ALONE (no context:
    nothing redacted), and the correction names it.
    Happened: the user receives "set_password (user bob, password Hunter2-Blue-Lagoon) did not
    succeed": the secret the filter redacted from the answer, in the clear."""
    h = Harness(HarnessConfig(
        redact_patterns=[r"password (?:was )?set to \S+"],
        tools={"set_password": ToolPolicy(role="mutation",
                                          claims=[r"(?P<user>\w+)'s password (?:was )?set to (?P<password>\S+)"])}),
        load_entry_points=False, environ={})
    m = ScriptedModel([text(f"Done: bob's password set to {PASSWORD} as you asked.")], stream=True)
    agent = make_agent(m, h.instrument(Toolkit(tools=[tool(set_password)])), h.middlewares())
    events, final, report = await drive(h, agent)
    said = final.get_text_content() or ""
    print(said)
    assert PASSWORD not in said, said
    assert PASSWORD not in report.to_json()


EMAIL = "jane.doe@examplebank.com"


async def invite(user: str) -> str:
    """Invite a user.

    Args:
        user (str): The user name.
    """
    return "invited"


async def test_part_of_a_redacted_email_named_in_the_correction():
    """README "Personal data": HarnessConfig.pii rewrites the answer's e-mail; round 157 a:
    a claim found in the answer as written is named "as rewritten" ("a correction never
    names the value as written"). Attack: pii={"email": "redact"}; a claim pattern whose
    group reads a user name (`invited (?P<user>[\\w.]+)`); the model says "invited
    jane.doe@examplebank.com" and never calls invite. The filtered answer ("invited
    [pii:email]") hides the claim; as written it is found with user "jane.doe", which the
    filter alone does not rewrite (no e-mail in it).
    Happened: the correction says "invite (user jane.doe) did not succeed": the mailbox the
    filter hid from the user, in the clear."""
    h = Harness(HarnessConfig(pii={"email": "redact"}, tools={
        "invite": ToolPolicy(role="mutation", claims=[r"invited (?P<user>[\w.]+)"])}),
        load_entry_points=False, environ={})
    m = ScriptedModel([text(f"Done: I invited {EMAIL} to the team.")], stream=True)
    agent = make_agent(m, h.instrument(Toolkit(tools=[tool(invite)])), h.middlewares())
    events, final, report = await drive(h, agent)
    said = final.get_text_content() or ""
    assert "jane.doe" not in said, said
