"""The turn queue's SQL on a real database: what a new lock holder finds after an instance died,
and the statement that queues and claims an idle session's turn at once."""
import uuid

import pytest

from gateway.app import create_app
from gateway.context import get_context
from gateway.database import fetch_all
from plugins.auth import tokens_plugin
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.chat import plugin as chat_plugin
from plugins.chat import store
from plugins.sessions import plugin as sessions_plugin
from plugins.sessions.contract import CONVERSATIONS

COMMON = {"user_id": "admin", "mode": "text", "attachments": [], "sender_connection": None}


async def enqueue(db, **fields):
    return await store.enqueue(db, turn_id=uuid.uuid4().hex[:16], **fields)


@pytest.fixture
async def db(aiohttp_client, config):
    app = create_app("gateway", config, plugins=[tokens_plugin, sessions_plugin, ai_core_client_plugin, chat_plugin])
    await aiohttp_client(app)
    conversations = get_context(app).contracts.require(CONVERSATIONS)
    for session_id in ("session_queue_test", "session_fast_test"):
        await conversations.create_session("admin", session_id)
    return get_context(app).db


async def statuses(db, session_id: str) -> list[tuple[str, str]]:
    rows = await fetch_all(db, "SELECT text, status FROM chat_turn_queue WHERE session_id = %s ORDER BY id",
                           (session_id,))
    return [(row["text"], row["status"]) for row in rows]


async def test_a_new_lock_holder_abandons_a_dead_instances_turn_and_claims_the_next(db):
    common = {"session_id": "session_queue_test", **COMMON}
    crashed = (await enqueue(db, text="left running", client_msg_id="a", **common))["id"]
    waiting = (await enqueue(db, text="next", client_msg_id="b", **common))["id"]
    assert await enqueue(db, text="again", client_msg_id="b", **common) is None  # a re-send
    assert (await store.claim_next(db, "admin", "session_queue_test"))["id"] == crashed  # then its instance dies

    claimed = await store.claim_next(db, "admin", "session_queue_test", abandon_running=True)
    assert claimed["id"] == waiting and claimed["text"] == "next"
    rows = await fetch_all(db, "SELECT id, status FROM chat_turn_queue ORDER BY id")
    assert rows == [{"id": crashed, "status": "abandoned"}, {"id": waiting, "status": "running"}]
    assert await store.claim_next(db, "admin", "session_queue_test") is None


async def test_an_idle_sessions_turn_is_queued_and_claimed_in_one_statement(db):
    session = "session_fast_test"
    first = await enqueue(db, session_id=session, text="one", client_msg_id="m1", start=True, **COMMON)
    assert first["status"] == "running" and first["text"] == "one" and first["attachments"] == []
    # The same client_msg_id again while it runs (a re-send after a reconnect) is not a second turn.
    assert await enqueue(db, session_id=session, text="one", client_msg_id="m1", **COMMON) is None
    assert await statuses(db, session) == [("one", "running")]


async def test_the_fast_statement_queues_behind_older_waiting_turns_and_abandons_a_dead_holders(db):
    session = "session_fast_test"
    # An instance died running "crashed"; "waiting" was queued behind it.
    await enqueue(db, session_id=session, text="crashed", client_msg_id="c1", start=True, **COMMON)
    await enqueue(db, session_id=session, text="waiting", client_msg_id="c2", **COMMON)
    late = await enqueue(db, session_id=session, text="late", client_msg_id="c3", start=True, **COMMON)
    assert late["status"] == "queued"  # the older waiting turn goes first
    assert await statuses(db, session) == [("crashed", "abandoned"), ("waiting", "queued"), ("late", "queued")]
    assert (await store.claim_next(db, "admin", session))["text"] == "waiting"


async def test_a_turn_started_before_its_row_is_recorded_as_running_whatever_waits(db):
    session = "session_fast_test"
    await enqueue(db, session_id=session, text="crashed", client_msg_id="r1", start=True, **COMMON)
    await enqueue(db, session_id=session, text="waiting", client_msg_id="r2", **COMMON)
    started = await store.enqueue(db, turn_id="turn-fast", session_id=session, text="fast", client_msg_id="r3",
                                  running=True, **COMMON)
    assert started["turn_id"] == "turn-fast" and started["status"] == "running"
    assert await statuses(db, session) == [("crashed", "abandoned"), ("waiting", "queued"), ("fast", "running")]
    await store.finish(db, "turn-fast", "done")
    assert (await statuses(db, session))[-1] == ("fast", "done")


async def test_rows_of_turns_running_at_once_are_recorded_and_finished_in_batches(aiohttp_client, config):
    """TurnRecords batches the running rows and final statuses of turns written at once: each
    row as `enqueue(running=True)` and `finish` write it, a dead holder's row abandoned, a
    client_msg_id the queue already has refused for that turn alone. The batched statements are
    called themselves: through the batcher, a failing one would be retried row by row and pass."""
    app = create_app("gateway", config, plugins=[tokens_plugin, sessions_plugin, ai_core_client_plugin, chat_plugin])
    await aiohttp_client(app)
    context = get_context(app)
    db, records = context.db, store.TurnRecords(context)
    sessions = [f"session_batch_{index}" for index in range(6)]
    await enqueue(db, session_id=sessions[0], text="crashed", client_msg_id="dead", start=True, **COMMON)
    await enqueue(db, session_id=sessions[1], text="taken", client_msg_id="taken", **COMMON)
    turns = [{"turn_id": f"batch-turn-{index}", "session_id": session, "text": f"turn {index}",
              "client_msg_id": "taken" if index == 1 else f"new-{index}", "metadata": {"index": index}, **COMMON}
             for index, session in enumerate(sessions)]
    recorded = await records._record_many(turns)
    assert recorded == [index != 1 for index in range(6)]
    assert await statuses(db, sessions[0]) == [("crashed", "abandoned"), ("turn 0", "running")]
    assert await statuses(db, sessions[1]) == [("taken", "queued")]
    await records._finish_many([(turn["turn_id"], "done" if index % 2 else "failed")
                                for index, turn in enumerate(turns)])
    for index, session in enumerate(sessions[2:], start=2):
        assert await statuses(db, session) == [(f"turn {index}", "done" if index % 2 else "failed")]
    row = (await fetch_all(db, "SELECT metadata, attachments FROM chat_turn_queue WHERE turn_id = 'batch-turn-4'"))[0]
    assert row == {"metadata": {"index": 4}, "attachments": []}
