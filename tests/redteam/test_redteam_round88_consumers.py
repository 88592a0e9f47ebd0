"""Red team, round 88 (on rounds 85-87). A consumer of one harnessed stream that runs another harnessed agent (same
task) while it holds an item: the inner reply's lifecycle overwrites and then
deletes HANDED_TO[consumer]; the outer one's ``del HANDED_TO[consumer]`` then
raises KeyError. Default config: nothing triggers."""

from agentscope.message import Msg, UserMsg
from scripted import ScriptedModel, make_agent, text

from agentscope_harness import Harness, HarnessConfig, Principal

ALICE = Principal(user_id="u-42", tenant="acme")


async def test_consumer_runs_a_second_harnessed_agent_while_holding_an_item() -> None:
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    writer = make_agent(ScriptedModel([text("the draft")]), [], h.middlewares(), name="writer")
    reviewer = make_agent(ScriptedModel([text("looks good")]), [], h.middlewares(), name="reviewer")
    final = review = None
    with h.acting_for(ALICE):
        async for item in writer.reply_stream(UserMsg("user", "write"), yield_final_msg=True):
            if review is None:  # e.g. a UI that asks a reviewer agent as soon as the writer starts
                review = await reviewer.reply(UserMsg("user", "review"))
            if isinstance(item, Msg):
                final = item
    assert review.get_text_content() == "looks good"
    assert final is not None and final.get_text_content() == "the draft"


async def test_same_without_harness_works() -> None:
    """Control: bare AgentScope agents do this fine."""
    writer = make_agent(ScriptedModel([text("the draft")]), [], [], name="writer")
    reviewer = make_agent(ScriptedModel([text("looks good")]), [], [], name="reviewer")
    final = review = None
    async for item in writer.reply_stream(UserMsg("user", "write"), yield_final_msg=True):
        if review is None:
            review = await reviewer.reply(UserMsg("user", "review"))
        if isinstance(item, Msg):
            final = item
    assert final.get_text_content() == "the draft"


async def test_two_streams_zipped_in_one_task() -> None:
    """Two harnessed replies read in turn by one task (a zip/merge of two streams)."""
    h = Harness(HarnessConfig(), load_entry_points=False, environ={})
    a = make_agent(ScriptedModel([text("answer A")]), [], h.middlewares(), name="a")
    b = make_agent(ScriptedModel([text("answer B")]), [], h.middlewares(), name="b")
    with h.acting_for(ALICE):
        ga = a.reply_stream(UserMsg("user", "x"), yield_final_msg=True)
        gb = b.reply_stream(UserMsg("user", "y"), yield_final_msg=True)
        out_a, out_b = [], []
        done_a = done_b = False
        while not (done_a and done_b):
            if not done_a:
                try:
                    out_a.append(await ga.__anext__())
                except StopAsyncIteration:
                    done_a = True
            if not done_b:
                try:
                    out_b.append(await gb.__anext__())
                except StopAsyncIteration:
                    done_b = True
    assert isinstance(out_a[-1], Msg) and out_a[-1].get_text_content() == "answer A"
    assert isinstance(out_b[-1], Msg) and out_b[-1].get_text_content() == "answer B"
