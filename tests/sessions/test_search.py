"""Message search: substrings in Chinese and English, paging, whose messages, and the plan on a
100,000-message history (the trigram index, not a scan)."""
import json

from bench.search.history import NEEDLES, fill
from gateway.database import fetch_value
from plugins.sessions.queries import SEARCH_COUNT_SQL, SEARCH_PAGE_SQL, escape_like
from tests.sessions.conftest import API

RESULT_FIELDS = {"message_id", "session_id", "session_title", "role", "content", "created_at"}


def plan_nodes(node: dict):
    yield node
    for child in node.get("Plans", []):
        yield from plan_nodes(child)


async def search(client, headers, **query):
    response = await client.get(f"{API}/messages/search", params=query, headers=headers)
    assert response.status == 200, await response.text()
    return await response.json()


async def test_chinese_and_english_substrings(sessions_app):
    client, conversations, headers = sessions_app
    await conversations.create_session("user_alice", "trip", "旅行计划")
    await conversations.add_message("trip", "user_alice", "user", "我们下周去北京旅游，顺便看看长城")
    await conversations.add_message("trip", "user_alice", "assistant", "Sure! The Great Wall is beautiful in autumn.")
    await conversations.add_message("trip", "user_alice", "user", "100% sure? use_case_1")
    await conversations.create_session("user_bob", "bob-trip")
    await conversations.add_message("bob-trip", "user_bob", "user", "北京的天气")

    body = await search(client, headers["alice"], q="北京")
    assert body["total"] == 1 and body["query"] == "北京" and body["limit"] == 50 and body["offset"] == 0
    result = body["results"][0]
    assert set(result) == RESULT_FIELDS and result["session_title"] == "旅行计划"
    assert result["session_id"] == "trip" and result["role"] == "user" and isinstance(result["message_id"], str)
    assert isinstance(result["created_at"], int)
    for q in ("长", "看看长城", "旅游，顺便"):  # one character, the end of a message, across punctuation
        assert (await search(client, headers["alice"], q=q))["total"] == 1, q
    assert (await search(client, headers["alice"], q="great wall"))["results"][0]["role"] == "assistant"
    assert (await search(client, headers["alice"], q="GREAT"))["total"] == 1
    # LIKE's wildcards are literal characters in a query
    assert [r["content"] for r in (await search(client, headers["alice"], q="0%"))["results"]] == ["100% sure? use_case_1"]
    assert (await search(client, headers["alice"], q="e_c"))["total"] == 1
    assert (await search(client, headers["alice"], q="%"))["total"] == 1
    assert (await search(client, headers["alice"], q="上海"))["results"] == []


async def test_whose_messages_and_bad_queries(sessions_app):
    client, conversations, headers = sessions_app
    await conversations.create_session("user_bob", "b1", "Bob")
    await conversations.add_message("b1", "user_bob", "user", "秘密计划")
    assert (await search(client, headers["alice"], q="秘密"))["total"] == 0
    response = await client.get(f"{API}/messages/search", params={"q": "秘密", "user_id": "user_bob"},
                                headers=headers["alice"])
    assert response.status == 403
    assert (await search(client, headers["admin"], q="秘密", user_id="user_bob"))["total"] == 1
    for params in ({}, {"q": ""}, {"q": "x", "limit": "0"}, {"q": "x", "offset": "-1"}, {"q": "x", "limit": "no"}):
        response = await client.get(f"{API}/messages/search", params=params, headers=headers["alice"])
        assert response.status == 400, params
        assert (await response.json())["errorType"] == "validation_error"
    assert (await client.get(f"{API}/messages/search?q=x")).status == 401


async def test_paging_is_newest_first_with_the_total(sessions_app):
    client, conversations, headers = sessions_app
    await conversations.create_session("user_alice", "s")
    for n in range(7):
        await conversations.add_message("s", "user_alice", "user", f"提醒 number {n}")
    await conversations.add_message("s", "user_alice", "user", "unrelated")
    pages = [await search(client, headers["alice"], q="提醒", limit=3, offset=offset) for offset in (0, 3, 6, 9)]
    assert [p["total"] for p in pages] == [7, 7, 7, 7]
    assert [[r["content"][-1] for r in p["results"]] for p in pages] == [["6", "5", "4"], ["3", "2", "1"], ["0"], []]
    assert pages[1]["limit"] == 3 and pages[1]["offset"] == 3


async def test_a_100000_message_history_is_searched_through_the_trigram_index(sessions_app):
    client, conversations, headers = sessions_app
    await fill(conversations.db, "user_alice", 100_000)
    assert await fetch_value(conversations.db, "SELECT count(*) FROM chat_messages") == 100_000 + sum(NEEDLES.values())
    for needle, count in NEEDLES.items():
        pattern = f"%{escape_like(needle)}%"
        for sql, arguments in ((SEARCH_COUNT_SQL, ("user_alice", pattern)),
                               (SEARCH_PAGE_SQL, ("user_alice", pattern, 50, 0))):
            plan = await fetch_value(conversations.db, "EXPLAIN (FORMAT JSON) " + sql, arguments)
            reads = [(node["Node Type"], node.get("Index Name")) for node in plan_nodes(plan[0]["Plan"])
                     if node.get("Relation Name") == "chat_messages" or node.get("Index Name")]
            assert ("Bitmap Index Scan", "chat_messages_content_trgm") in reads, json.dumps(plan)
            assert ("Seq Scan", None) not in reads, json.dumps(plan)
        # How fast is bench/search's to say (bench/README.md); here, that the index is what is read.
        body = await search(client, headers["alice"], q=needle)
        assert body["total"] == count and all(needle in r["content"] for r in body["results"])
