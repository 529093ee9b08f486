"""A small Qdrant server for the tests of the server path (`QDRANT_URL`): no Qdrant server binary
installs from the package registries, so this speaks Qdrant's REST protocol, the part
`gateway.qdrant_engine.QdrantClientEngine` uses, to the real `qdrant-client`: collections (exists,
create with a named dense and a named sparse vector with the IDF modifier, keyword indexes,
delete), points (upsert, delete by ids or filter, count, batched queries), `must` filters of
`match.value`, `match.any` and `has_id`, and Qdrant's error bodies (404 for a missing collection).
Scores as Qdrant computes them: cosine on normalised vectors; sparse dot products with
idf = ln((N − n + 0.5) / (n + 0.5) + 1) over the collection, or over the points a search's
`params.idf.corpus` filter selects. Every request is kept in
`requests` as (method, path, body)."""
from __future__ import annotations

import math
from typing import Any

from aiohttp import web

BODY = web.RequestKey("body", object)


def _ok(result: Any) -> web.Response:
    return web.json_response({"result": result, "status": "ok", "time": 0.0001})


def _missing(name: str) -> web.Response:
    return web.json_response({"status": {"error": f"Not found: Collection `{name}` doesn't exist!"},
                              "time": 0.0}, status=404)


class Collection:
    def __init__(self, config: dict):
        self.config = config
        self.points: dict[str, dict] = {}
        self.indexes: dict[str, Any] = {}

    def matches(self, point: dict, flt: dict | None) -> bool:
        for condition in (flt or {}).get("must") or []:
            if "has_id" in condition:
                if point["id"] not in {str(i) for i in condition["has_id"]}:
                    return False
                continue
            value = point["payload"].get(condition["key"])
            match = condition["match"]
            if "value" in match and value != match["value"]:
                return False
            if "any" in match and value not in match["any"]:
                return False
        return True


class FakeQdrant:
    def __init__(self):
        self.collections: dict[str, Collection] = {}
        self.requests: list[tuple[str, str, Any]] = []
        self.queries: list[str] = []  # the query strings of writes (`wait=true`)

    def app(self) -> web.Application:
        # Qdrant takes requests up to 32 MB by default (an upsert of 256 points of 384 floats is
        # 2-3 MB of JSON); aiohttp's default is 1 MB.
        app = web.Application(middlewares=[self._record], client_max_size=32 * 1024 * 1024)
        app.router.add_get("/collections/{name}/exists", self.exists)
        app.router.add_put("/collections/{name}", self.create)
        app.router.add_delete("/collections/{name}", self.drop)
        app.router.add_put("/collections/{name}/index", self.index)
        app.router.add_put("/collections/{name}/points", self.upsert)
        app.router.add_post("/collections/{name}/points/delete", self.delete)
        app.router.add_post("/collections/{name}/points/count", self.count)
        app.router.add_post("/collections/{name}/points/query/batch", self.query_batch)
        return app

    @web.middleware
    async def _record(self, request: web.Request, handler):
        body = await request.json() if request.can_read_body else None
        request[BODY] = body
        self.requests.append((request.method, request.path, body))
        if request.method in ("PUT", "POST") and "/points" in request.path and "/count" not in request.path \
                and "/query" not in request.path:
            self.queries.append(request.query_string)
        return await handler(request)

    def _collection(self, request: web.Request) -> Collection | None:
        return self.collections.get(request.match_info["name"])

    async def exists(self, request: web.Request) -> web.Response:
        return _ok({"exists": request.match_info["name"] in self.collections})

    async def create(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name in self.collections:
            return web.json_response({"status": {"error": f"Wrong input: Collection `{name}` already exists!"},
                                      "time": 0.0}, status=409)
        self.collections[name] = Collection(request[BODY])
        return _ok(True)

    async def drop(self, request: web.Request) -> web.Response:
        return _ok(self.collections.pop(request.match_info["name"], None) is not None)

    async def index(self, request: web.Request) -> web.Response:
        collection = self._collection(request)
        if collection is None:
            return _missing(request.match_info["name"])
        collection.indexes[request[BODY]["field_name"]] = request[BODY]["field_schema"]
        return _ok({"operation_id": 1, "status": "completed"})

    async def upsert(self, request: web.Request) -> web.Response:
        collection = self._collection(request)
        if collection is None:
            return _missing(request.match_info["name"])
        size = collection.config["vectors"]["dense"]["size"]
        for point in request[BODY]["points"]:
            dense = point["vector"]["dense"]
            if len(dense) != size:
                return web.json_response({"status": {"error": f"Wrong input: Vector dimension error: expected "
                                                              f"dim: {size}, got {len(dense)}"}, "time": 0.0},
                                         status=400)
            norm = math.sqrt(sum(x * x for x in dense)) or 1.0
            sparse = point["vector"].get("lexical") or {"indices": [], "values": []}
            collection.points[str(point["id"])] = {
                "id": str(point["id"]), "dense": [x / norm for x in dense],
                "sparse": dict(zip(sparse["indices"], sparse["values"])), "payload": point.get("payload") or {}}
        return _ok({"operation_id": 2, "status": "completed"})

    async def delete(self, request: web.Request) -> web.Response:
        collection = self._collection(request)
        if collection is None:
            return _missing(request.match_info["name"])
        body = request[BODY]
        if "points" in body:
            for point in body["points"]:
                collection.points.pop(str(point), None)
        else:
            for key in [k for k, p in collection.points.items() if collection.matches(p, body["filter"])]:
                del collection.points[key]
        return _ok({"operation_id": 3, "status": "completed"})

    async def count(self, request: web.Request) -> web.Response:
        collection = self._collection(request)
        if collection is None:
            return _missing(request.match_info["name"])
        flt = request[BODY].get("filter")
        return _ok({"count": sum(1 for p in collection.points.values() if collection.matches(p, flt))})

    async def query_batch(self, request: web.Request) -> web.Response:
        collection = self._collection(request)
        if collection is None:
            return _missing(request.match_info["name"])
        answers = []
        for search in request[BODY]["searches"]:
            candidates = [p for p in collection.points.values() if collection.matches(p, search.get("filter"))]
            query = search["query"]
            query = query.get("nearest", query) if isinstance(query, dict) else query  # {"nearest": vector}
            if search["using"] == "dense":
                scored = [(sum(a * b for a, b in zip(query, p["dense"])), p) for p in candidates]
            else:
                corpus = ((search.get("params") or {}).get("idf") or {})
                corpus = corpus.get("corpus") if isinstance(corpus, dict) else None  # else "global"
                idf = self._idf(collection, query["indices"], corpus)
                scored = [(sum(v * idf[i] * p["sparse"][i] for i, v in zip(query["indices"], query["values"])
                               if i in p["sparse"]), p) for p in candidates]
                scored = [(score, p) for score, p in scored if score > 0]
            scored.sort(key=lambda pair: pair[0], reverse=True)
            answers.append({"points": [{"id": p["id"], "version": 1, "score": score, "payload": p["payload"]}
                                       for score, p in scored[:search["limit"]]]})
        return _ok(answers)

    @staticmethod
    def _idf(collection: Collection, indices: list[int], corpus: dict | None) -> dict[int, float]:
        points = [p for p in collection.points.values() if p["sparse"] and collection.matches(p, corpus)]
        total = len(points)
        result = {}
        for index in indices:
            having = sum(1 for p in points if index in p["sparse"])
            result[index] = math.log((total - having + 0.5) / (having + 0.5) + 1)
        return result
