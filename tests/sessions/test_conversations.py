"""The `conversations` service that the chat channel and webhooks write through."""
import asyncio

import pytest

from gateway.errors import Conflict, NotFound
from plugins.sessions import DEFAULT_TITLE


async def test_create_and_get_sessions(sessions_app):
    _, conversations, _ = sessions_app
    generated = await conversations.create_session("user_alice")
    assert generated["id"].startswith("session_") and len(generated["id"]) == len("session_") + 12
    assert generated["title"] == DEFAULT_TITLE and generated["is_main"] is False
    assert isinstance(generated["created_at"], int) and generated["created_at"] > 1_600_000_000_000
    named = await conversations.create_session("user_alice", "s-main", "主会话", is_main=True)
    assert named == await conversations.get_session("user_alice", "s-main")
    assert named["is_main"] is True and named["title"] == "主会话" and named["user_id"] == "user_alice"
    assert await conversations.get_session("user_alice", "nope") is None
    with pytest.raises(Conflict):  # only the owner's own ids collide
        await conversations.create_session("user_alice", "s-main")
    bobs = await conversations.create_session("user_bob", "s-main")  # ids are per owner
    assert bobs["user_id"] == "user_bob" and await conversations.get_session("user_alice", "s-main") == named
    assert [s["user_id"] for s in await conversations.find_sessions("s-main")] == ["user_bob", "user_alice"]


async def test_ensure_session_creates_once_per_owner(sessions_app):
    _, conversations, _ = sessions_app
    created = await conversations.ensure_session("user_alice", "s1", "Title")
    again = await conversations.ensure_session("user_alice", "s1", "Other title")
    assert again == created and again["title"] == "Title"
    bobs = await conversations.ensure_session("user_bob", "s1")  # another user's id is free for Bob
    assert bobs["user_id"] == "user_bob" and bobs["title"] == DEFAULT_TITLE
    # concurrent first messages of one new session agree on one row
    results = await asyncio.gather(*(conversations.ensure_session("user_carol", "s2") for _ in range(5)))
    assert len({r["created_at"] for r in results}) == 1


async def test_add_message_deduplicates_by_client_msg_id_and_bumps_the_session(sessions_app):
    _, conversations, _ = sessions_app
    session = await conversations.create_session("user_alice", "s1")
    await asyncio.sleep(0.01)
    first = await conversations.add_message("s1", "user_alice", "user", "你好", client_msg_id="c-1",
                                            metadata={"attachments": [{"file_id": "f"}]})
    assert first["duplicate"] is False and isinstance(first["id"], int)
    assert first["msg_type"] == "chat" and first["metadata"] == {"attachments": [{"file_id": "f"}]}
    again = await conversations.add_message("s1", "user_alice", "user", "你好 (retry)", client_msg_id="c-1")
    assert again["duplicate"] is True and again["id"] == first["id"] and again["content"] == "你好"
    # the same client id in another session is another message
    await conversations.create_session("user_alice", "s2")
    other = await conversations.add_message("s2", "user_alice", "user", "hi", client_msg_id="c-1")
    assert other["duplicate"] is False and other["id"] != first["id"]
    # without a client id nothing is de-duplicated
    a = await conversations.add_message("s1", "user_alice", "assistant", "same")
    b = await conversations.add_message("s1", "user_alice", "assistant", "same")
    assert a["id"] != b["id"]
    assert (await conversations.get_session("user_alice", "s1"))["updated_at"] > session["updated_at"]
    with pytest.raises(NotFound):
        await conversations.add_message("missing", "user_alice", "user", "x")
    with pytest.raises(NotFound):  # Alice's session is not Bob's
        await conversations.add_message("s1", "user_bob", "user", "x")


async def test_messages_stored_at_once_go_in_one_batch_each_with_its_own_outcome(sessions_app):
    """Concurrent add_message calls share statements (gateway.batching): each still gets its
    own row, a re-sent id its earlier message, an unknown session its NotFound."""
    _, conversations, _ = sessions_app
    for session_id in ("b1", "b2"):
        await conversations.create_session("user_alice", session_id)
    earlier = await conversations.add_message("b1", "user_alice", "user", "earlier", client_msg_id="known")
    results = await asyncio.gather(
        *(conversations.add_message(f"b{index % 2 + 1}", "user_alice", "user", f"message {index}",
                                    client_msg_id=f"id-{index}", metadata={"index": index}) for index in range(12)),
        conversations.add_message("b1", "user_alice", "user", "a re-send", client_msg_id="known"),
        conversations.add_message("b1", "user_alice", "user", "twice", client_msg_id="twice"),
        conversations.add_message("b1", "user_alice", "user", "twice again", client_msg_id="twice"),
        conversations.add_message("missing", "user_alice", "user", "nowhere"),
        return_exceptions=True)
    *stored, resent, twice, twice_again, missing = results
    assert [(row["content"], row["metadata"], row["duplicate"]) for row in stored] == \
        [(f"message {index}", {"index": index}, False) for index in range(12)]
    assert len({row["id"] for row in stored}) == 12
    assert resent["duplicate"] is True and resent["id"] == earlier["id"] and resent["content"] == "earlier"
    assert sorted([twice["duplicate"], twice_again["duplicate"]]) == [False, True]
    assert twice["id"] == twice_again["id"]
    assert isinstance(missing, NotFound)
    # Calls made at once have no order among themselves; each is stored, listed and in the history.
    listed = await conversations.list_messages("user_alice", "b2")
    assert sorted(message["content"] for message in listed) == sorted(f"message {index}" for index in range(1, 12, 2))
    history = await conversations.recent_history("user_alice", "b2")
    assert [item["content"] for item in history] == [message["content"] for message in listed]


async def test_a_batch_of_messages_is_one_statement_with_each_outcome_in_order(sessions_app):
    """The batched statement itself (the public path above also takes its fallback, one
    statement a message, since one of its messages fails): rows in the batch's order with ids
    drawn in that order, a re-sent id's earlier row, None for an id taken earlier in the batch,
    and only sessions that got a message touched."""
    _, conversations, _ = sessions_app
    for session_id in ("b1", "b2", "quiet"):
        await conversations.create_session("user_alice", session_id)
    earlier = await conversations.add_message("b1", "user_alice", "user", "earlier", client_msg_id="known")
    quiet_before = await conversations.get_session("user_alice", "quiet")

    def message(session_id: str, content: str, client: str | None) -> dict:
        return {"session": session_id, "user": "user_alice", "role": "user", "type": "chat", "content": content,
                "metadata": '{"n": 1}', "client": client}

    rows = await conversations._insert_messages([
        message("b2", "first", "a"), message("b1", "second", None), message("b1", "re-sent", "known"),
        message("b2", "third", "twice"), message("b2", "twice again", "twice")])
    first, second, resent, third, taken = rows
    assert [first["content"], second["content"], third["content"]] == ["first", "second", "third"]
    assert first["id"] < second["id"] < third["id"] and not (first["duplicate"] or second["duplicate"])
    assert first["metadata"] == {"n": 1} and isinstance(first["created_at"], int)
    assert resent["duplicate"] is True and resent["id"] == earlier["id"] and resent["content"] == "earlier"
    assert taken is None
    assert await conversations.get_session("user_alice", "quiet") == quiet_before


async def test_list_messages_pages_and_scrolls_back(sessions_app):
    _, conversations, _ = sessions_app
    await conversations.create_session("user_alice", "s1")
    ids = [(await conversations.add_message("s1", "user_alice", "user" if n % 2 == 0 else "assistant",
                                            f"m{n}"))["id"] for n in range(7)]
    assert [m["content"] for m in await conversations.list_messages("user_alice", "s1")] == [f"m{n}" for n in range(7)]
    assert [m["content"] for m in await conversations.list_messages("user_alice", "s1", limit=3, offset=5)] == ["m5", "m6"]
    assert await conversations.list_messages("user_alice", "s1", limit=3, offset=7) == []
    page = await conversations.list_messages("user_alice", "s1", limit=3, before_id=ids[5])
    assert [m["content"] for m in page] == ["m2", "m3", "m4"]
    assert [m["content"] for m in await conversations.list_messages("user_alice", "s1", limit=3, before_id=ids[1])] == ["m0"]
    assert set(page[0]) >= {"id", "session_id", "role", "msg_type", "content", "created_at"}


async def test_recent_history_is_the_latest_user_and_assistant_turns(sessions_app):
    _, conversations, _ = sessions_app
    await conversations.create_session("user_alice", "s1")
    for n in range(5):
        await conversations.add_message("s1", "user_alice", "user", f"q{n}")
        await conversations.add_message("s1", "user_alice", "action", f"*nods {n}*", msg_type="action")
        await conversations.add_message("s1", "user_alice", "assistant", f"a{n}")
    assert await conversations.recent_history("user_alice", "s1", limit=4) == [
        {"role": "user", "content": "q3"}, {"role": "assistant", "content": "a3"},
        {"role": "user", "content": "q4"}, {"role": "assistant", "content": "a4"}]
    assert len(await conversations.recent_history("user_alice", "s1")) == 10
    assert await conversations.recent_history("user_alice", "empty") == []


async def test_the_first_message_titles_a_session_with_no_title(sessions_app):
    """Five conversations in a morning must not all read "New chat": the person's first words
    title it at once, until someone renames it."""
    _, conversations, _ = sessions_app
    await conversations.create_session("user_alice", "s1")
    await conversations.add_message("s1", "user_alice", "assistant", "Hello! How can I help?")
    assert (await conversations.get_session("user_alice", "s1"))["title"] == DEFAULT_TITLE
    await conversations.add_message("s1", "user_alice", "user", "\n  Plan a   trip to Kyoto\nin April, please")
    await conversations.add_message("s1", "user_alice", "user", "And book a hotel")
    assert (await conversations.get_session("user_alice", "s1"))["title"] == "Plan a trip to Kyoto"

    await conversations.create_session("user_alice", "s2", "My own title")
    await conversations.add_message("s2", "user_alice", "user", "something else")
    assert (await conversations.get_session("user_alice", "s2"))["title"] == "My own title"

    await conversations.create_session("user_alice", "s3")
    long = "word " * 40 + "end"
    await conversations.add_message("s3", "user_alice", "user", long)
    title = (await conversations.get_session("user_alice", "s3"))["title"]
    assert title.endswith("…") and len(title) <= 61 and title.startswith("word word")

    # Many sessions' first messages stored together (one batched statement) each title their own.
    ids = [f"b{number}" for number in range(8)]
    for session_id in ids:
        await conversations.create_session("user_bob", session_id)
    await asyncio.gather(*(conversations.add_message(session_id, "user_bob", "user", f"topic {session_id}")
                           for session_id in ids for _ in range(2)))
    for session_id in ids:
        assert (await conversations.get_session("user_bob", session_id))["title"] == f"topic {session_id}"


async def test_a_default_title_in_any_language_is_replaced_by_the_first_message(sessions_app):
    """"New chat" counts as no title, as 新对话 does: through one message and a batch of them."""
    _, conversations, _ = sessions_app
    english = await conversations.create_session("user_alice", "en1", language="en-US")
    ensured = await conversations.ensure_session("user_alice", "en2", language="en")
    assert english["title"] == ensured["title"] == "New chat"
    assert (await conversations.ensure_session("user_alice", "zh1", language="zh-TW"))["title"] == "新对话"
    await conversations.add_message("en1", "user_alice", "user", "Plan a trip")
    assert (await conversations.get_session("user_alice", "en1"))["title"] == "Plan a trip"
    await asyncio.gather(*(conversations.add_message(session_id, "user_alice", "user", f"about {session_id}")
                           for session_id in ("en2", "zh1") for _ in range(2)))
    assert (await conversations.get_session("user_alice", "en2"))["title"] == "about en2"
    assert (await conversations.get_session("user_alice", "zh1"))["title"] == "about zh1"


def test_a_title_from_chinese_words_is_cut_without_a_space():
    from plugins.sessions.title_text import title_from

    assert title_from("帮我写一封邮件给房东，说明下个月的房租会晚三天到账，因为工资发放推迟了，请他谅解，谢谢。还有其他事情需要讨论一下，比如说暖气的问题和楼道灯的问题") \
        .endswith("…")
    assert title_from("   \n  ") is None and title_from("") is None
