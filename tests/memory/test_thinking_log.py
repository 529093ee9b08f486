"""The memory service's thinking log on real PostgreSQL: who may write, read and delete entries,
isolation between people, paging, newest-first order, and retried writes stored once."""
from __future__ import annotations

import uuid

from tests.memory.conftest import ADMIN, ALICE, BOB, SERVICE


async def think(client, content: str, user_id: str = "user_alice", headers=SERVICE, expect: int = 201,
                **fields) -> dict:
    response = await client.post("/api/v1/thinking", headers=headers,
                                 json={"user_id": user_id, "content": content, **fields})
    body = await response.json()
    assert response.status == expect, body
    return body


async def entries(client, headers=SERVICE, **query) -> dict:
    response = await client.get("/api/v1/thinking", headers=headers, params={k: str(v) for k, v in query.items()})
    body = await response.json()
    assert response.status == 200, body
    return body


async def test_entries_are_written_by_the_service_and_read_by_their_owner(memory_service):
    written = await think(memory_service, "Alice asked about vegetarian recipes three times this week.",
                          suggestion="Offer a weekly vegetarian meal plan.", model="m-1",
                          source_session_ids=["s-1", "s-2"], source_memory_ids=[str(uuid.uuid4())])
    assert uuid.UUID(written["id"]) and written["user_id"] == "user_alice" and written["kind"] == "reflection"
    assert written["suggestion"] == "Offer a weekly vegetarian meal plan." and written["model"] == "m-1"
    assert written["source_session_ids"] == ["s-1", "s-2"] and written["created_at"] > 1.7e12

    # A retried write with the same id stores it once.
    again = await think(memory_service, "Alice asked about vegetarian recipes three times this week.",
                        id=written["id"], expect=200)
    assert again == written
    assert (await entries(memory_service, user_id="user_alice"))["total"] == 1

    # The person reads their own entries; another person never sees them, nor writes any.
    response = await memory_service.get(f"/api/v1/thinking/{written['id']}", headers=ALICE)
    assert response.status == 200 and await response.json() == written
    response = await memory_service.get(f"/api/v1/thinking/{written['id']}", headers=BOB)
    assert response.status == 404 and (await response.json())["errorType"] == "thinking_not_found"
    assert (await entries(memory_service, headers=BOB))["entries"] == []
    response = await memory_service.get("/api/v1/thinking", headers=BOB, params={"user_id": "user_alice"})
    assert response.status == 403
    await think(memory_service, "I think I should note this.", headers=ALICE, user_id="user_alice", expect=403)
    await think(memory_service, "no user named", user_id=None, expect=400)
    response = await memory_service.post("/api/v1/thinking", json={"user_id": "user_alice", "content": "x"})
    assert response.status == 401
    # The administrator writes for someone, and lists everyone's.
    await think(memory_service, "Bob plans a trip to Kyoto.", user_id="user_bob", headers=ADMIN)
    assert (await entries(memory_service, headers=ADMIN))["total"] == 2
    assert [e["content"] for e in (await entries(memory_service, headers=BOB))["entries"]] == ["Bob plans a trip to Kyoto."]
    # Another person's id cannot be reused.
    await think(memory_service, "taken", user_id="user_bob", id=written["id"], expect=403)

    # Deleting: a person their own only.
    response = await memory_service.delete(f"/api/v1/thinking/{written['id']}", headers=BOB)
    assert response.status == 404
    response = await memory_service.delete(f"/api/v1/thinking/{written['id']}", headers=ALICE)
    assert response.status == 200 and await response.json() == {"status": "deleted", "id": written["id"]}
    assert (await entries(memory_service, headers=ALICE))["total"] == 0
    response = await memory_service.get("/api/v1/thinking/not-a-uuid", headers=ALICE)
    assert response.status in (404, 405)


async def test_entries_are_paged_newest_first_and_filtered_by_time(memory_service):
    ids = [(await think(memory_service, f"thought {n}"))["id"] for n in range(5)]
    await think(memory_service, "Bob's thought", user_id="user_bob")
    page = await entries(memory_service, user_id="user_alice", limit=2)
    assert page["total"] == 5 and [e["id"] for e in page["entries"]] == ids[::-1][:2]
    page = await entries(memory_service, user_id="user_alice", limit=2, offset=4)
    assert [e["content"] for e in page["entries"]] == ["thought 0"] and page["offset"] == 4
    third = (await memory_service.get(f"/api/v1/thinking/{ids[2]}", headers=SERVICE))
    since = (await third.json())["created_at"]
    page = await entries(memory_service, user_id="user_alice", since=since)
    # `since` is inclusive, and two thoughts written in the same millisecond share a time: the
    # entries are those written at or after the third, newest first (the third and later at least).
    everything = (await entries(memory_service, user_id="user_alice"))["entries"]
    expected = [e["content"] for e in everything if e["created_at"] >= since]
    assert [e["content"] for e in page["entries"]] == expected
    assert expected[:3] == ["thought 4", "thought 3", "thought 2"]
    response = await memory_service.get("/api/v1/thinking", headers=SERVICE, params={"limit": "0"})
    assert response.status == 400
