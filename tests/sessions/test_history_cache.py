"""Recent history, read at the start of every chat turn, comes from each instance's copy while no
write happened since; every write (on any instance) is seen by the next read."""
from __future__ import annotations

from gateway.app import create_app
from gateway.context import get_context
from gateway.database import execute
from plugins.auth import tokens_plugin
from plugins.sessions import plugin as sessions_plugin
from plugins.sessions.history_cache import HISTORY_DEPTH, RecentHistoryCache
from plugins.sessions.contract import CONVERSATIONS


async def conversations_on(aiohttp_client, config):
    app = create_app("gateway", config, plugins=[tokens_plugin, sessions_plugin])
    await aiohttp_client(app)
    return get_context(app).contracts.require(CONVERSATIONS)


def contents(history: list[dict]) -> list[str]:
    return [message["content"] for message in history]


async def test_history_is_served_from_the_copy_and_follows_every_write(aiohttp_client, config):
    conversations = await conversations_on(aiohttp_client, config)
    await conversations.create_session("user_alice", "cached")
    await conversations.add_message("cached", "user_alice", "user", "one")
    assert contents(await conversations.recent_history("user_alice", "cached")) == ["one"]  # read, and kept

    # A write behind the service's back is not seen while the copy is current: proof the copy is used.
    await execute(conversations.db, "UPDATE chat_messages SET content = 'edited' WHERE session_id = 'cached'")
    assert contents(await conversations.recent_history("user_alice", "cached")) == ["one"]

    # The service's own writes keep the copy exact.
    await conversations.add_message("cached", "user_alice", "assistant", "two")
    await conversations.add_message("cached", "user_alice", "action", "not history")
    assert contents(await conversations.recent_history("user_alice", "cached")) == ["one", "two"]
    assert contents(await conversations.recent_history("user_alice", "cached", limit=1)) == ["two"]
    await conversations.clear_messages("user_alice", "cached")
    assert await conversations.recent_history("user_alice", "cached") == []


async def test_a_new_sessions_first_turn_leaves_a_current_copy(aiohttp_client, config):
    """A chat turn reads the history before it writes: the first read of a session with no
    messages starts the copy, and the turn's writes follow it, so the second turn reads no table."""
    conversations = await conversations_on(aiohttp_client, config)
    await conversations.create_session("user_alice", "fresh")
    assert await conversations.recent_history("user_alice", "fresh") == []
    await conversations.add_message("fresh", "user_alice", "user", "hello")
    await conversations.add_message("fresh", "user_alice", "assistant", "hi there")
    await execute(conversations.db, "UPDATE chat_messages SET content = 'edited' WHERE session_id = 'fresh'")
    assert contents(await conversations.recent_history("user_alice", "fresh")) == ["hello", "hi there"]


async def test_a_longer_history_than_the_copy_holds_is_read_from_the_database(aiohttp_client, config):
    conversations = await conversations_on(aiohttp_client, config)
    await conversations.create_session("user_alice", "long")
    for index in range(HISTORY_DEPTH + 5):
        await conversations.add_message("long", "user_alice", "user", f"m{index}")
    await conversations.recent_history("user_alice", "long")
    everything = await conversations.recent_history("user_alice", "long", limit=HISTORY_DEPTH + 10)
    assert contents(everything) == [f"m{index}" for index in range(HISTORY_DEPTH + 5)]
    assert contents(await conversations.recent_history("user_alice", "long", limit=3)) == [f"m{HISTORY_DEPTH + i}" for i in (2, 3, 4)]


async def test_a_write_on_another_instance_is_seen_by_the_next_read(aiohttp_client, make_config, database_url,
                                                                    redis_url, bus_prefix):
    shared = make_config({"database.url": database_url, "bus.redis_url": redis_url, "bus.prefix": bus_prefix})
    first = await conversations_on(aiohttp_client, shared)
    second = await conversations_on(aiohttp_client, shared)
    await first.create_session("user_alice", "shared")
    await first.add_message("shared", "user_alice", "user", "hello")
    assert contents(await first.recent_history("user_alice", "shared")) == ["hello"]
    assert contents(await second.recent_history("user_alice", "shared")) == ["hello"]

    await second.add_message("shared", "user_alice", "assistant", "from the other instance")
    assert contents(await first.recent_history("user_alice", "shared")) == ["hello", "from the other instance"]
    await first.delete_session("user_alice", "shared")
    # The id is reused for a new session: nothing of the old one comes back on either instance.
    await second.create_session("user_alice", "shared")
    await second.add_message("shared", "user_alice", "user", "fresh")
    assert contents(await first.recent_history("user_alice", "shared")) == ["fresh"]
    assert contents(await second.recent_history("user_alice", "shared")) == ["fresh"]


def test_the_copy_takes_a_message_once_and_never_out_of_order():
    """The interleavings of concurrent writers, on the cache itself: (1) a read between a
    message's insert and its counter bump already holds it; (2) two writers bump in the other
    order than their ids."""
    cache = RecentHistoryCache()
    cache.put("s", 7, [{"id": 1, "role": "user", "content": "one"}, {"id": 2, "role": "assistant", "content": "two"}],
              complete=True)
    cache.appended("s", 8, (2, "assistant", "two"))  # the bump of the message the read already saw
    assert contents(cache.get("s", 8, 20)) == ["one", "two"]

    cache.appended("s", 9, (4, "assistant", "b"))  # id 4 bumps first
    cache.appended("s", 10, (3, "user", "a"))      # id 3, committed earlier, bumps second: forgotten
    assert cache.get("s", 10, 20) is None

    cache.put("s", 10, [{"id": 1, "role": "user", "content": "one"}], complete=True)
    cache.appended("s", 12, (5, "user", "late"))   # someone else bumped in between: forgotten
    assert cache.get("s", 12, 20) is None and cache.get("s", 10, 20) is None


def test_the_copy_is_bounded_by_sessions_and_characters():
    cache = RecentHistoryCache(max_sessions=2, max_chars=10)
    for name in ("a", "b", "c"):
        cache.put(name, 1, [{"id": 1, "role": "user", "content": "xy"}], complete=True)
    assert cache.get("a", 1, 5) is None and cache.get("c", 1, 5) is not None
    cache.put("big", 1, [{"id": 1, "role": "user", "content": "x" * 11}], complete=True)
    assert cache.get("big", 1, 5) is None


def test_the_copy_follows_appends_past_its_depth_and_counts_their_characters():
    cache = RecentHistoryCache(max_chars=HISTORY_DEPTH * 3)  # as many as the copy holds of three characters
    cache.put("s", 1, [{"id": 1, "role": "user", "content": "000"}], complete=True)
    for index in range(1, HISTORY_DEPTH + 3):
        cache.appended("s", index + 1, (index + 1, "user", f"{index:03d}"))
    version = HISTORY_DEPTH + 3
    assert contents(cache.get("s", version, HISTORY_DEPTH)) == [f"{index:03d}" for index in range(3, HISTORY_DEPTH + 3)]
    assert cache.get("s", version, HISTORY_DEPTH + 1) is None  # older ones were let go: not all of it any more
    assert cache.get("s", version, 0) == [] and contents(cache.get("s", version, 1)) == [f"{HISTORY_DEPTH + 2:03d}"]
    cache.appended("s", version + 1, (version + 1, "user", "wxyz"))  # one character over the bound: dropped
    assert cache.get("s", version + 1, 1) is None
