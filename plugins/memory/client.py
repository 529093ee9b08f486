"""The one way to reach the memory service from another service (`peers.memory_service_url`,
MEMORY_SERVICE_URL), with the service credential acting for a named person.

- `MemoryTransport`: one HTTP call and its decoded answer, over the core's peer transport
  (gateway/peers.py); every way of not getting a usable answer (no URL, unreachable, past the
  time limit, not a JSON object, our credential refused) is `MemoryUnavailable`, a 502
  `memory_service_unreachable`. The gateway's memory endpoints (proxy.py) pass its answers on as they
  are; the client below reads them.
- `MemoryClient`: the `MEMORY` contract (contract.py) for the plugins that use memories."""
from __future__ import annotations

from typing import Any, NamedTuple

from gateway.peers import PeerClient, PeerContext, PeerTimeout

from .contract import MemoryServiceError, MemoryUnavailable, SearchMode, Source
from .schemas import IDEMPOTENCY_KEY, REPLAYED

PEER = "memory_service"
MEMORIES = "/api/v1/memories"


class Answer(NamedTuple):
    status: int
    body: dict
    retry_after: str | None
    replayed: bool = False    # the answer to an earlier write with the same Idempotency-Key


class MemoryTransport(PeerClient):
    def __init__(self, context: PeerContext, timeout: PeerTimeout) -> None:
        super().__init__(context, PEER, service="memory service", timeout=timeout,
                         unreachable=MemoryUnavailable, refused=MemoryServiceError)

    async def ask(self, method: str, path: str, *, params: dict | None = None,
                  body: dict | None = None, client_key: str | None = None) -> Answer:
        """The memory service's answer to `method path` (any status); MemoryUnavailable when
        there is none to use. `client_key`: a create's Idempotency-Key, passed on."""
        headers = {IDEMPOTENCY_KEY: client_key} if client_key is not None else None
        answer = await self.request(method, path, params=params, json_body=body, headers=headers)
        decoded = answer.json()
        if decoded is None:
            raise self.unreachable(f"The memory service answered {answer.status} without a JSON object.",
                                   peer_status=answer.status)
        return Answer(answer.status, decoded, answer.headers.get("Retry-After"),
                      answer.headers.get(REPLAYED) == "true")


def _failure(answer: Answer) -> MemoryServiceError:
    body = answer.body
    kind = MemoryUnavailable if answer.status >= 500 else MemoryServiceError
    return kind(str(body.get("error") or f"the memory service answered {answer.status}"),
                str(body.get("errorType") or "memory_service_failed"), body.get("hint"), answer.status,
                peer_status=answer.status, retry_after=answer.retry_after)


class MemoryClient:
    """The `MEMORY` contract over HTTP; every call names the person it acts for."""

    def __init__(self, transport: MemoryTransport):
        self.transport = transport

    async def _ok(self, method: str, path: str, *, params: dict | None = None, body: dict | None = None,
                  missing_is_none: bool = False, client_key: str | None = None) -> dict | None:
        answer = await self.transport.ask(method, path, params=params, body=body, client_key=client_key)
        if answer.status == 404 and missing_is_none:
            return None
        if answer.status >= 400:
            raise _failure(answer)
        return answer.body

    async def search(self, user_id: str, query: str, limit: int = 10, mode: SearchMode = "dense",
                     category: str | None = None, min_relevance: float | None = None) -> list[dict]:
        answer = await self._ok("GET", MEMORIES + "/search", params={
            "user_id": user_id, "q": query, "limit": limit, "mode": mode, "category": category,
            "min_relevance": min_relevance})
        assert answer is not None
        return list(answer["memories"])

    async def top(self, user_id: str, limit: int = 5) -> list[dict]:
        answer = await self._ok("GET", MEMORIES, params={"user_id": user_id, "limit": limit, "order": "priority"})
        assert answer is not None
        return list(answer["memories"])

    async def create(self, user_id: str, content: str, category: str = "other", priority: int = 5,
                     source: Source = "api", session_id: str | None = None,
                     message_id: str | None = None, client_key: str | None = None) -> dict:
        answer = await self._ok("POST", MEMORIES, body={
            "user_id": user_id, "content": content, "category": category, "priority": priority,
            "source": source, "source_session_id": session_id, "source_message_id": message_id},
            client_key=client_key)
        assert answer is not None
        return answer

    async def get(self, user_id: str, memory_id: str) -> dict | None:
        return await self._ok("GET", f"{MEMORIES}/{memory_id}", params={"user_id": user_id}, missing_is_none=True)

    async def update(self, user_id: str, memory_id: str, **fields: Any) -> dict | None:
        changes = {key: fields[key] for key in ("content", "category", "priority") if fields.get(key) is not None}
        return await self._ok("PUT", f"{MEMORIES}/{memory_id}", body={"user_id": user_id, **changes},
                              missing_is_none=True)

    async def delete(self, user_id: str, memory_id: str) -> bool:
        answer = await self._ok("DELETE", f"{MEMORIES}/{memory_id}", params={"user_id": user_id},
                                missing_is_none=True)
        return answer is not None

    async def list(self, user_id: str | None, category: str | None = None, limit: int = 50,
                   offset: int = 0) -> dict:
        answer = await self._ok("GET", MEMORIES, params={
            "user_id": user_id, "category": category, "limit": limit, "offset": offset})
        assert answer is not None
        return answer
