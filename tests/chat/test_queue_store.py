"""The turn queue's SQL on a real database: what a new lock holder finds after an instance died."""
from gateway.app import create_app
from gateway.context import get_context
from gateway.database import fetch_all
from plugins.auth import tokens_plugin
from plugins.chat import plugin as chat_plugin
from plugins.chat import store
from plugins.sessions import plugin as sessions_plugin


async def test_a_new_lock_holder_abandons_a_dead_instances_turn_and_claims_the_next(aiohttp_client, config):
    app = create_app("gateway", config, plugins=[tokens_plugin, sessions_plugin, chat_plugin])
    await aiohttp_client(app)
    db = get_context(app).db
    await get_context(app).services.require("conversations").create_session("admin", "session_queue_test")
    common = {"session_id": "session_queue_test", "user_id": "admin", "mode": "text", "attachments": [],
              "sender_connection": None}
    crashed = await store.enqueue(db, text="left running", client_msg_id="a", **common)
    waiting = await store.enqueue(db, text="next", client_msg_id="b", **common)
    assert await store.enqueue(db, text="again", client_msg_id="b", **common) is None  # a re-send
    assert (await store.claim_next(db, "session_queue_test"))["id"] == crashed  # then its instance dies

    claimed = await store.claim_next(db, "session_queue_test", abandon_running=True)
    assert claimed["id"] == waiting and claimed["text"] == "next"
    rows = await fetch_all(db, "SELECT id, status FROM chat_turn_queue ORDER BY id")
    assert rows == [{"id": crashed, "status": "abandoned"}, {"id": waiting, "status": "running"}]
    assert await store.claim_next(db, "session_queue_test") is None
