"""Search through the API: paraphrases in English and Chinese, scoping, deletion, background
indexing, restarts, a new embedding collection, and a vector store that is down."""
import asyncio
import importlib.metadata
import time

import psycopg2
import pytest
from aiohttp import web

from gateway.context import get_context
from plugins.knowledge.indexer import COLLECTION
from tests.support.servers import free_port

# Each target shares no word with the question that should find it.
ENGLISH = {
    "Cat": "The cat sleeps on the warm windowsill all afternoon.",
    "Revenue": "Our quarterly revenue grew by twelve percent thanks to strong sales in Asia.",
    "Bread": "To bake bread, knead the dough and let it rise for two hours.",
    "Dentist": "My dental appointment was moved to Thursday morning.",
}
CHINESE = {
    "猫": "猫咪整个下午都在温暖的窗台上睡觉。",
    "营收": "本季度营收增长了百分之十二，主要得益于亚洲市场的强劲销售。",
    "面包": "烤面包时要揉面团，然后让它发酵两个小时。",
    "牙医": "我的牙科预约改到了星期四上午。",
}


async def wait_until_indexed(knowledge, document_id: str, timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        document = (await knowledge.call("GET", f"/knowledge/documents/{document_id}"))["document"]
        if document["index_status"] in ("ready", "failed") or time.monotonic() > deadline:
            return document
        await asyncio.sleep(0.25)


async def test_paraphrases_find_their_target_in_english_and_chinese(knowledge):
    kb_id = (await knowledge.base())["id"]
    for title, text in {**ENGLISH, **CHINESE}.items():
        await knowledge.note(kb_id, title, text)
    questions = {
        "company income increase last period": "Revenue",
        "which day is my tooth doctor visit": "Dentist",
        "kitty napping by sunny glass": "Cat",
        "去年赚钱情况如何": "营收",
        "看牙医是哪天": "牙医",
        "做吐司的步骤": "面包",
    }
    for question, title in questions.items():
        found = await knowledge.search(question, limit=3)
        assert found["query"] == question and found["total"] == len(found["chunks"]) == 3
        top = found["chunks"][0]
        assert top["document_title"] == title, (question, [chunk["document_title"] for chunk in found["chunks"]])
        assert top["text"] in {**ENGLISH, **CHINESE}.values()
        scores = [chunk["score"] for chunk in found["chunks"]]
        assert scores == sorted(scores, reverse=True)
    for mode in ("dense", "lexical"):
        found = await knowledge.search("quarterly revenue", mode=mode, limit=1)
        assert found["chunks"][0]["document_title"] == "Revenue"


async def test_kb_ids_scope_the_search(knowledge):
    work = (await knowledge.base("Work"))["id"]
    home = (await knowledge.base("Home"))["id"]
    await knowledge.note(work, "Revenue", ENGLISH["Revenue"])
    await knowledge.note(home, "Bread", ENGLISH["Bread"])
    every = await knowledge.search("money and baking", limit=10)
    assert {chunk["kb_id"] for chunk in every["chunks"]} == {work, home}
    assert await knowledge.search("money and baking", limit=10, kb_ids=[]) == every
    only_home = await knowledge.search("money and baking", limit=10, kb_ids=[home])
    assert {chunk["kb_id"] for chunk in only_home["chunks"]} == {home}
    assert (await knowledge.search("money", limit=1))["total"] == 1


async def test_deleting_removes_from_search_at_once(knowledge):
    kb_id = (await knowledge.base())["id"]
    cat = await knowledge.note(kb_id, "Cat", ENGLISH["Cat"])
    await knowledge.note(kb_id, "Bread", ENGLISH["Bread"])
    assert (await knowledge.search("windowsill cat", limit=1))["chunks"][0]["document_id"] == cat["id"]
    await knowledge.call("DELETE", f"/knowledge/documents/{cat['id']}")
    found = await knowledge.search("windowsill cat", limit=50)
    assert cat["id"] not in {chunk["document_id"] for chunk in found["chunks"]}
    vectors = get_context(knowledge.app).vectors
    assert await vectors.count(COLLECTION, {"document_id": cat["id"]}) == 0
    assert await vectors.count(COLLECTION, {"kb_id": kb_id}) == 1

    await knowledge.call("DELETE", f"/knowledge/bases/{kb_id}")
    assert (await knowledge.search("bread dough", limit=50))["chunks"] == []
    assert await vectors.count(COLLECTION, {"kb_id": kb_id}) == 0


async def test_large_documents_are_indexed_in_the_background(make_knowledge_app):
    knowledge = await make_knowledge_app({"inline_index_chars": 500, "index_batch": 2, "chunk_max_units": 300,
                                          "chunk_min_units": 100})
    kb_id = (await knowledge.base())["id"]
    paragraphs = [f"Paragraph {i} is filler about nothing in particular, repeated to make length. " * 3
                  for i in range(4)]
    content = "\n\n".join(paragraphs + ["The spare key hides under the third garden gnome."])
    document = await knowledge.note(kb_id, "Long note", content)
    assert document["index_status"] == "pending" and document["chunk_count"] == 5
    assert document["raw_content"] == content
    indexed = await wait_until_indexed(knowledge, document["id"])
    assert indexed["index_status"] == "ready" and indexed["index_error"] is None
    found = await knowledge.search("where is the extra house key", limit=1)
    assert found["chunks"][0]["document_id"] == document["id"]
    assert "gnome" in found["chunks"][0]["text"]


async def test_a_megabyte_answers_at_once_without_blocking_the_loop(make_knowledge_app):
    knowledge = await make_knowledge_app({"index_batch": 1})
    kb_id = (await knowledge.base())["id"]
    content = ("An ordinary sentence about the weather and the sea. " * 20 + "\n\n") * 1000
    assert len(content) > 1_000_000
    started = time.monotonic()
    ingest = asyncio.ensure_future(knowledge.note(kb_id, "Big", content))
    # Meanwhile the service keeps answering: extraction, chunking and embedding run on threads.
    slowest = 0.0
    while not ingest.done():
        asked = time.monotonic()
        response = await knowledge.client.get("/api/v1/health")
        assert response.status == 200
        slowest = max(slowest, time.monotonic() - asked)
        await asyncio.sleep(0.02)
    document = await ingest
    assert time.monotonic() - started < 30
    assert slowest < 2.0, f"a health check waited {slowest:.2f}s while a megabyte was ingested"
    assert document["index_status"] in ("pending", "indexing") and document["chunk_count"] > 1000
    # Deleting it while it is being indexed stops the indexer and leaves nothing behind.
    await knowledge.call("DELETE", f"/knowledge/documents/{document['id']}")
    vectors = get_context(knowledge.app).vectors
    deadline = time.monotonic() + 60
    while await vectors.count(COLLECTION, {"document_id": document["id"]}) and time.monotonic() < deadline:
        await asyncio.sleep(0.25)
    await asyncio.sleep(1)
    assert await vectors.count(COLLECTION, {"document_id": document["id"]}) == 0


async def test_a_restart_takes_over_a_claim_left_by_a_stopped_service(make_knowledge_app, database_url):
    knowledge = await make_knowledge_app({"inline_index_chars": 0})
    kb_id = (await knowledge.base())["id"]
    document = await knowledge.note(kb_id, "Dentist", ENGLISH["Dentist"])
    await knowledge.client.close()

    def leave_claimed() -> None:  # as a service killed while indexing leaves it
        with psycopg2.connect(database_url) as connection, connection.cursor() as cursor:
            cursor.execute("UPDATE knowledge_documents SET index_status = 'indexing', "
                           "index_claimed_at = now() - interval '1 hour' WHERE id = %s", (document["id"],))

    await asyncio.to_thread(leave_claimed)
    restarted = await make_knowledge_app({"inline_index_chars": 0})
    assert (await wait_until_indexed(restarted, document["id"]))["index_status"] == "ready"
    vectors = get_context(restarted.app).vectors
    assert await vectors.count(COLLECTION, {"document_id": document["id"]}) == document["chunk_count"] == 1
    found = await restarted.search("tooth doctor visit", limit=1)
    assert found["chunks"][0]["document_id"] == document["id"]


async def test_a_new_collection_is_filled_from_the_stored_chunks(make_knowledge_app, tmp_path):
    first = await make_knowledge_app()
    kb_id = (await first.base())["id"]
    document = await first.note(kb_id, "Bread", ENGLISH["Bread"])
    await first.client.close()
    # Another vector directory: a collection as new as after a change of embedding model.
    second = await make_knowledge_app(overrides={"vectors.path": str(tmp_path / "other-vectors")})
    assert (await wait_until_indexed(second, document["id"]))["index_status"] == "ready"
    found = await second.search("how to make a loaf", limit=1)
    assert found["chunks"][0]["document_id"] == document["id"]


@pytest.fixture(params=["down", "answering 503"])
async def failing_qdrant(request, aiohttp_server) -> str:
    """The URL of a Qdrant server that is down (a closed port), or that answers its version and
    then 503 to every call (starting up, overloaded)."""
    if request.param == "down":
        return f"http://127.0.0.1:{free_port()}"

    async def qdrant(request: web.Request) -> web.Response:
        if request.path == "/" and request.method == "GET":
            # The client's own version, so that its compatibility check is content.
            return web.json_response({"title": "qdrant - vector search engine",
                                      "version": importlib.metadata.version("qdrant-client")})
        return web.json_response({"status": {"error": "Service Unavailable"}, "time": 0}, status=503)

    failing = web.Application()
    failing.router.add_route("*", "/{tail:.*}", qdrant)
    server = await aiohttp_server(failing)
    return f"http://127.0.0.1:{server.port}"


async def test_a_failing_vector_store_is_503(make_knowledge_app, failing_qdrant):
    """Nothing is stored or deleted half-way, and the caller is told to retry."""
    knowledge = await make_knowledge_app(overrides={"vectors.qdrant_url": failing_qdrant, "vectors.timeout": 2})
    kb_id = (await knowledge.base())["id"]
    body = await knowledge.error("POST", f"/knowledge/bases/{kb_id}/documents", 503, "vector_store_unavailable",
                                 json={"title": "Cat", "content": ENGLISH["Cat"]})
    assert "QDRANT_URL" in body["hint"]
    assert (await knowledge.call("GET", f"/knowledge/bases/{kb_id}/documents"))["total"] == 0
    await knowledge.error("POST", "/knowledge/search", 503, "vector_store_unavailable",
                          json={"query": "cat", "kb_ids": [kb_id]})
    await knowledge.error("DELETE", f"/knowledge/bases/{kb_id}", 503, "vector_store_unavailable")
    # Nothing was deleted while the vectors could not be.
    assert (await knowledge.call("GET", "/knowledge/bases"))["total"] == 1


async def test_background_indexing_waits_for_the_vector_store_and_says_why(make_knowledge_app, failing_qdrant):
    knowledge = await make_knowledge_app({"inline_index_chars": 0},
                                         overrides={"vectors.qdrant_url": failing_qdrant, "vectors.timeout": 2})
    kb_id = (await knowledge.base())["id"]
    document = await knowledge.note(kb_id, "Cat", ENGLISH["Cat"])
    assert document["index_status"] == "pending"
    deadline = time.monotonic() + 60
    while True:
        waiting = (await knowledge.call("GET", f"/knowledge/documents/{document['id']}"))["document"]
        if waiting["index_error"] or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    assert waiting["index_status"] in ("pending", "indexing")  # to be tried again, not given up
    assert waiting["index_error"].startswith("waiting for the vector store")


async def test_the_same_on_qdrant_clients_engine(make_knowledge_app):
    """The server path's client calls (qdrant-client, here in its local mode: no Qdrant server
    binary can be installed from the registries) index, filter, search and delete alike."""
    knowledge = await make_knowledge_app(overrides={"vectors.engine": "qdrant-local"})
    kb_id = (await knowledge.base())["id"]
    dentist = await knowledge.note(kb_id, "Dentist", ENGLISH["Dentist"])
    await knowledge.note(kb_id, "牙医", CHINESE["牙医"])
    bobs = await knowledge.base("Bob's", who="bob")
    await knowledge.note(bobs["id"], "Bob's dentist", "Bob sees the dentist on Friday.", who="bob")
    found = await knowledge.search("which day is my tooth doctor visit", limit=5)
    assert found["chunks"][0]["document_id"] == dentist["id"]
    assert {chunk["kb_id"] for chunk in found["chunks"]} == {kb_id}
    assert (await knowledge.search("看牙医是哪天", limit=1))["chunks"][0]["document_title"] == "牙医"
    await knowledge.call("DELETE", f"/knowledge/documents/{dentist['id']}")
    found = await knowledge.search("which day is my tooth doctor visit", limit=5)
    assert dentist["id"] not in {chunk["document_id"] for chunk in found["chunks"]}
