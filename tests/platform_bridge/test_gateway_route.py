"""The gateway's `POST /api/v1/bridge/turns`: the service credential only, a turn of the named
user's session answered as server-sent events (deltas, then `done` with the stored reply)."""
from __future__ import annotations

import json

from gateway.identity import Identity
from plugins.auth.tokens import JwtTokens
from tests.platform_bridge.conftest import SERVICE

ANSWER = "Hello from scripted."
BODY = {"user_id": "erin", "session_id": "tg_chat_1", "text": "hello", "platform": "telegram", "title": "Telegram"}


async def events_of(response) -> list[dict]:
    events = []
    async for line in response.content:
        if line.startswith(b"data: "):
            events.append(json.loads(line[len(b"data: "):]))
    return events


async def test_a_turn_streams_back_and_is_stored(aiohttp_client, gateway):
    client = await aiohttp_client(gateway)
    response = await client.post("/api/v1/bridge/turns", json=BODY, headers=SERVICE)
    assert response.status == 200 and response.content_type == "text/event-stream"
    events = await events_of(response)
    deltas = [event["content"] for event in events if event["type"] == "delta"]
    assert len(deltas) >= 2 and "".join(deltas) == ANSWER
    done = events[-1]
    assert done["type"] == "done" and done["text"] == ANSWER and done["session_id"] == "tg_chat_1"
    stored = await gateway.conversations.list_messages("erin", "tg_chat_1")
    assert [m["id"] for m in stored if m["role"] == "assistant"] == done["message_ids"]
    assert stored[0]["metadata"] == {"platform": "telegram"}
    assert (await gateway.conversations.get_session("erin", "tg_chat_1"))["title"] == "Telegram"


async def test_only_the_service_credential_runs_turns(aiohttp_client, gateway):
    client = await aiohttp_client(gateway)
    person, _ = JwtTokens(secret="test-jwt-secret-" + "x" * 32).issue_access(Identity("erin", "erin"))
    response = await client.post("/api/v1/bridge/turns", json=BODY, headers={"Authorization": f"Bearer {person}"})
    assert response.status == 403 and (await response.json())["errorType"] == "service_only"
    assert (await client.post("/api/v1/bridge/turns", json=BODY)).status == 401
    response = await client.post("/api/v1/bridge/turns", json={**BODY, "session_id": "no spaces"}, headers=SERVICE)
    assert response.status == 400
