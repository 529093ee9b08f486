"""The gateway's four memory endpoints in front of a real memory service on a loopback port:
what each passes on and answers, a person always scoped to their own memories whatever
`user_id` they send, the administrator's choice of person, and 502 memory_service_unreachable
(never a 500) when the service is down, hangs past the timeout, or refuses the gateway."""
from __future__ import annotations

import asyncio
import time

from aiohttp import web

from tests.memory.conftest import ADMIN, ALICE, BOB, SERVICE, remember, url_of
from tests.support.servers import free_port


async def test_the_four_endpoints_pass_a_persons_requests_on(memory_service, make_gateway):
    gateway = await make_gateway(url_of(memory_service))
    assert (await gateway.get("/api/v1/memory")).status == 401

    response = await gateway.post("/api/v1/memory", headers=ALICE,
                                  json={"content": "I'm vegetarian and my sister is called Lena.", "priority": 8})
    written = await response.json()
    assert response.status == 201 and written["action"] == "created" and written["replaced"] is None
    memory = written["memory"]
    assert (memory["user_id"], memory["category"], memory["priority"], memory["source"]) == ("user_alice", "other", 8, "api")

    response = await gateway.post("/api/v1/memory", headers=ALICE, json={"content": "I'm vegetarian, and my "
                                                                         "sister is called Lena."})
    assert response.status == 200 and (await response.json())["action"] == "merged"

    response = await gateway.get("/api/v1/memory", headers=ALICE)
    page = await response.json()
    assert response.status == 200 and page["total"] == 1 and page["memories"][0]["id"] == memory["id"]

    response = await gateway.get("/api/v1/memory/search", headers=ALICE, params={"q": "a dinner for my sibling's visit"})
    found = await response.json()
    assert response.status == 200 and found["query"] == "a dinner for my sibling's visit"
    assert [hit["id"] for hit in found["memories"]] == [memory["id"]] and isinstance(found["memories"][0]["score"], float)

    response = await gateway.delete("/api/v1/memory", headers=ALICE, params={"id": memory["id"]})
    assert response.status == 200 and await response.json() == {"status": "deleted", "id": memory["id"]}
    response = await gateway.delete("/api/v1/memory", headers=ALICE, params={"id": memory["id"]})
    assert response.status == 404 and (await response.json())["errorType"] == "memory_not_found"  # passed on

    # The gateway's own validation, and the service's, both answer 400.
    for body in ({}, {"content": "x", "category": "gossip"}, {"content": "x", "priority": "high"}):
        assert (await gateway.post("/api/v1/memory", headers=ALICE, json=body)).status == 400
    assert (await gateway.get("/api/v1/memory/search", headers=ALICE)).status == 400
    assert (await gateway.delete("/api/v1/memory", headers=ALICE, params={"id": "../../x"})).status == 400


async def test_a_person_is_scoped_to_their_own_memories_whatever_user_id_they_send(memory_service, make_gateway):
    gateway = await make_gateway(url_of(memory_service))
    bobs = (await remember(memory_service, "I collect vintage stamps.", user_id="user_bob"))["memory"]

    response = await gateway.post("/api/v1/memory", headers=ALICE, json={"content": "I like opera.", "user_id": "user_bob"})
    assert response.status == 201 and (await response.json())["memory"]["user_id"] == "user_alice"
    page = await (await gateway.get("/api/v1/memory", headers=ALICE, params={"user_id": "user_bob"})).json()
    assert [m["content"] for m in page["memories"]] == ["I like opera."]
    found = await (await gateway.get("/api/v1/memory/search", headers=ALICE,
                                     params={"q": "opera music", "user_id": "user_bob"})).json()
    assert [m["user_id"] for m in found["memories"]] == ["user_alice"]
    response = await gateway.delete("/api/v1/memory", headers=ALICE, params={"id": bobs["id"], "user_id": "user_bob"})
    assert response.status == 404
    page = await (await gateway.get("/api/v1/memory", headers=BOB)).json()
    assert [m["id"] for m in page["memories"]] == [bobs["id"]]

    # The administrator names anyone (and lists everyone's without a name).
    page = await (await gateway.get("/api/v1/memory", headers=ADMIN, params={"user_id": "user_bob"})).json()
    assert [m["id"] for m in page["memories"]] == [bobs["id"]]
    page = await (await gateway.get("/api/v1/memory", headers=ADMIN)).json()
    assert sorted(m["user_id"] for m in page["memories"]) == ["user_alice", "user_bob"]
    response = await gateway.post("/api/v1/memory", headers=ADMIN, json={"content": "Bob's birthday is on May 3.",
                                                                         "user_id": "user_bob"})
    assert (await response.json())["memory"]["user_id"] == "user_bob"
    # The service credential is an administrator at the gateway, acting for whom it names.
    found = await (await gateway.get("/api/v1/memory/search", headers=SERVICE,
                                     params={"q": "stamp collection", "user_id": "user_bob"})).json()
    assert {m["user_id"] for m in found["memories"]} == {"user_bob"}
    response = await gateway.delete("/api/v1/memory", headers=ADMIN, params={"id": bobs["id"]})
    assert response.status == 200



async def test_a_memory_is_edited_through_the_gateway_and_found_by_its_new_meaning(memory_service, make_gateway):
    gateway = await make_gateway(url_of(memory_service))
    mine = (await remember(memory_service, "I drink my coffee black.", priority=5))["memory"]
    bobs = (await remember(memory_service, "I collect vintage stamps.", user_id="user_bob"))["memory"]

    response = await gateway.put("/api/v1/memory", headers=ALICE, params={"id": mine["id"]},
                                 json={"content": "I am allergic to peanuts.", "category": "health", "priority": 9})
    edited = await response.json()
    assert response.status == 200, edited
    assert (edited["id"], edited["content"], edited["category"], edited["priority"]) == (
        mine["id"], "I am allergic to peanuts.", "health", 9)
    page = await (await gateway.get("/api/v1/memory", headers=ALICE)).json()
    assert [(m["id"], m["content"]) for m in page["memories"]] == [(mine["id"], "I am allergic to peanuts.")]
    # The new content was embedded again: a question about it finds it by meaning.
    found = await (await gateway.get("/api/v1/memory/search", headers=ALICE,
                                     params={"q": "which foods are dangerous for me", "mode": "dense"})).json()
    assert [m["id"] for m in found["memories"]][:1] == [mine["id"]]

    # Only the fields sent change.
    response = await gateway.put("/api/v1/memory", headers=ALICE, params={"id": mine["id"]}, json={"priority": 3})
    assert (await response.json())["content"] == "I am allergic to peanuts." and response.status == 200

    # Someone else's memory is not found, whatever user_id is sent; the administrator reaches it.
    response = await gateway.put("/api/v1/memory", headers=ALICE, params={"id": bobs["id"], "user_id": "user_bob"},
                                 json={"content": "Hacked"})
    assert response.status == 404 and (await response.json())["errorType"] == "memory_not_found"
    response = await gateway.put("/api/v1/memory", headers=ADMIN, params={"id": bobs["id"]},
                                 json={"content": "I collect old stamps and coins."})
    assert response.status == 200 and (await response.json())["user_id"] == "user_bob"

    # Bad input: the spec's error body, 400.
    for params, body in (({"id": mine["id"]}, {}), ({"id": mine["id"]}, {"content": ""}),
                         ({"id": mine["id"]}, {"category": "gossip"}), ({"id": "../../x"}, {"content": "x"}),
                         ({}, {"content": "x"})):
        response = await gateway.put("/api/v1/memory", headers=ALICE, params=params, json=body)
        error = await response.json()
        assert response.status == 400 and {"error", "errorType", "hint"} <= set(error), (params, body, error)


def assert_unreachable(response, body: dict) -> None:
    assert response.status == 502, body
    assert set(body) == {"error", "errorType", "hint"} and body["errorType"] == "memory_service_unreachable"


async def test_a_memory_service_that_is_down_is_a_502(make_gateway):
    gateway = await make_gateway(f"http://127.0.0.1:{free_port()}")
    for response in (await gateway.get("/api/v1/memory", headers=ALICE),
                     await gateway.get("/api/v1/memory/search", headers=ALICE, params={"q": "x"}),
                     await gateway.post("/api/v1/memory", headers=ALICE, json={"content": "x"}),
                     await gateway.put("/api/v1/memory", headers=ALICE, json={"content": "x"},
                                       params={"id": "0b9f1e0e-4c5c-4f55-9d43-6a3f2a3e0c11"}),
                     await gateway.delete("/api/v1/memory", headers=ALICE,
                                          params={"id": "0b9f1e0e-4c5c-4f55-9d43-6a3f2a3e0c11"})):
        body = await response.json()
        assert_unreachable(response, body)
        assert "MEMORY_SERVICE_URL" in body["hint"]


async def test_a_memory_service_that_hangs_is_a_502_after_the_timeout(aiohttp_server, make_gateway):
    release = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        await release.wait()
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", hang)
    server = await aiohttp_server(app)
    gateway = await make_gateway(str(server.make_url("")).rstrip("/"), {"plugins.memory_proxy": {"timeout": 0.5}})
    started = time.monotonic()
    response = await gateway.get("/api/v1/memory", headers=ALICE)
    assert_unreachable(response, await response.json())
    assert 0.4 < time.monotonic() - started < 5
    release.set()


async def test_a_service_that_refuses_the_gateway_or_answers_nonsense_is_a_502(aiohttp_server, memory_service,
                                                                               make_gateway):
    gateway = await make_gateway(url_of(memory_service), {"auth.service_token": "another-token"})
    response = await gateway.get("/api/v1/memory", headers=ALICE)
    body = await response.json()
    assert_unreachable(response, body)
    assert "SERVICE_TOKEN" in body["hint"]

    async def nonsense(request: web.Request) -> web.Response:
        return web.Response(text="<html>proxy error</html>", status=500)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", nonsense)
    server = await aiohttp_server(app)
    gateway = await make_gateway(str(server.make_url("")).rstrip("/"))
    response = await gateway.post("/api/v1/memory", headers=ALICE, json={"content": "x"})
    assert_unreachable(response, await response.json())


async def test_an_outage_behind_the_service_is_passed_on_as_its_503(make_memory_service, make_gateway):
    service = await make_memory_service({"vectors.qdrant_url": f"http://127.0.0.1:{free_port()}", "vectors.timeout": 2})
    gateway = await make_gateway(url_of(service))
    response = await gateway.get("/api/v1/memory/search", headers=ALICE, params={"q": "x"})
    body = await response.json()
    assert response.status == 503 and body["errorType"] == "vector_store_unavailable"
    assert response.headers["Retry-After"] == "5"


async def test_a_retried_create_with_the_same_idempotency_key_answers_the_first_write(memory_service, make_gateway):
    """A client that got no answer (a 502 at the gateway's timeout while the memory service went
    on storing) retries with the same key: the first write's answer, one memory; a late retry
    never undoes what was written since."""
    gateway = await make_gateway(url_of(memory_service))

    async def create(content: str, key: str | None) -> tuple[int, dict, str | None]:
        headers = {**ALICE, **({"Idempotency-Key": key} if key else {})}
        response = await gateway.post("/api/v1/memory", headers=headers, json={"content": content})
        return response.status, await response.json(), response.headers.get("Idempotent-Replayed")

    first = await create("I like green tea.", "key-1")
    retry = await create("I like green tea.", "key-1")
    assert first[0] == 201 and first[1]["action"] == "created" and first[2] is None
    assert retry[0] == 201 and retry[1]["action"] == "created" and retry[2] == "true"
    assert retry[1]["memory"]["id"] == first[1]["memory"]["id"]

    changed = await create("I don't like green tea.", "key-2")
    assert changed[1]["action"] == "superseded"
    late = await create("I like green tea.", "key-1")
    assert late[2] == "true" and late[1]["memory"]["content"] == "I don't like green tea."
    listed = await (await gateway.get("/api/v1/memory", headers=ALICE)).json()
    assert [m["content"] for m in listed["memories"]] == ["I don't like green tea."]

    status, body, _ = await create("I like coffee.", "key-1")
    assert status == 409 and body["errorType"] == "idempotency_key_reused" and body["hint"]
    for bad in ("with space", "k" * 129):
        status, body, _ = await create("I like coffee.", bad)
        assert status == 400 and body["errorType"] == "validation_error" and "Idempotency-Key" in body["error"]
    # Keys are per person: Bob's key-1 is his own first write.
    response = await gateway.post("/api/v1/memory", headers={**BOB, "Idempotency-Key": "key-1"},
                                  json={"content": "I like green tea."})
    assert response.status == 201 and "Idempotent-Replayed" not in response.headers

