"""Every endpoint of the Knowledge table, its errors, and who may reach what."""
import uuid

import pytest

UNKNOWN = str(uuid.uuid4())
# A body each method's route accepts: PUT renames a base, POST adds a document.
VALID_BODIES = {"PUT": {"name": "mine now"}, "POST": {"title": "t", "content": "c"}}


async def test_base_lifecycle(knowledge):
    created = await knowledge.call("POST", "/knowledge/bases", status=201,
                                   json={"name": "  Recipes ", "description": "Things I cook"})
    assert created["name"] == "Recipes" and created["description"] == "Things I cook"
    assert created["user_id"] == "user_alice" and created["doc_count"] == 0
    assert uuid.UUID(created["id"]) and created["created_at"] == created["updated_at"] > 1_600_000_000_000
    kb_id = created["id"]

    listed = await knowledge.call("GET", "/knowledge/bases")
    assert listed == {"knowledge_bases": [created], "total": 1}

    await knowledge.note(kb_id, "Pancakes", "Mix flour, eggs and milk; fry thin.")
    detail = await knowledge.call("GET", f"/knowledge/bases/{kb_id}")
    assert detail["knowledge_base"]["doc_count"] == 1
    assert [document["title"] for document in detail["documents"]] == ["Pancakes"]
    assert "raw_content" not in detail["documents"][0]

    assert await knowledge.call("PUT", f"/knowledge/bases/{kb_id}", json={"name": "Cooking"}) == {"status": "updated"}
    renamed = (await knowledge.call("GET", f"/knowledge/bases/{kb_id}"))["knowledge_base"]
    assert renamed["name"] == "Cooking" and renamed["description"] == ""
    assert renamed["updated_at"] >= created["updated_at"]

    assert await knowledge.call("DELETE", f"/knowledge/bases/{kb_id}") == {"status": "deleted"}
    await knowledge.error("GET", f"/knowledge/bases/{kb_id}", 404, "knowledge_base_not_found")
    assert (await knowledge.call("GET", "/knowledge/bases"))["total"] == 0
    assert (await knowledge.search("pancakes"))["chunks"] == []


async def test_document_lifecycle(knowledge):
    kb_id = (await knowledge.base())["id"]
    content = "# Bicycle\n\nPump the tyres to four bar.\n\n## Chain\n\nOil the chain every month."
    document = await knowledge.note(kb_id, "Bike care", content)
    assert document["kb_id"] == kb_id and document["user_id"] == "user_alice"
    assert document["title"] == "Bike care" and document["source_type"] == "text" and document["source_ref"] == ""
    assert document["content_type"] == "text/markdown" and document["raw_content"] == content
    assert document["content_length"] == len(content)
    assert document["index_status"] == "ready" and document["index_error"] is None
    assert document["chunk_count"] == 1  # two small sections share a chunk (docs/knowledge.md, Chunking)

    listed = await knowledge.call("GET", f"/knowledge/bases/{kb_id}/documents")
    assert listed["total"] == 1 and "raw_content" not in listed["documents"][0]
    with_content = await knowledge.call("GET", f"/knowledge/bases/{kb_id}/documents?include_content=true")
    assert with_content["documents"][0] == document

    detail = await knowledge.call("GET", f"/knowledge/documents/{document['id']}")
    assert detail["document"] == document
    chunks = detail["chunks"]
    assert [chunk["position"] for chunk in chunks] == [0]
    assert chunks[0]["heading_path"] == ["Bicycle"] and chunks[0]["text"] == content
    for chunk in chunks:
        assert chunk["document_id"] == document["id"] and chunk["kb_id"] == kb_id
        assert chunk["document_title"] == "Bike care"
        assert content[chunk["start_offset"]:chunk["end_offset"]] == chunk["text"]

    assert await knowledge.call("DELETE", f"/knowledge/documents/{document['id']}") == {"status": "deleted"}
    await knowledge.error("GET", f"/knowledge/documents/{document['id']}", 404, "knowledge_document_not_found")
    await knowledge.error("DELETE", f"/knowledge/documents/{document['id']}", 404, "knowledge_document_not_found")
    assert (await knowledge.call("GET", f"/knowledge/bases/{kb_id}/documents"))["total"] == 0


@pytest.mark.parametrize("body", [{}, {"name": ""}, {"name": "   "}, {"name": 5}, {"description": "x"}])
async def test_a_base_needs_a_name(knowledge, body):
    await knowledge.error("POST", "/knowledge/bases", 400, "validation_error", json=body)
    kb_id = (await knowledge.base())["id"]
    await knowledge.error("PUT", f"/knowledge/bases/{kb_id}", 400, "validation_error", json=body)


async def test_document_bodies_are_checked(knowledge):
    kb_id = (await knowledge.base())["id"]
    path = f"/knowledge/bases/{kb_id}/documents"
    for body in ({"content": "text without a title"}, {"title": "  ", "content": "x"},
                 {"title": "t", "source_type": "video", "content": "x"}):
        await knowledge.error("POST", path, 400, "validation_error", json=body)
    # Each source needs its own field.
    await knowledge.error("POST", path, 400, "validation_error", json={"title": "t"})
    await knowledge.error("POST", path, 400, "validation_error", json={"title": "t", "content": " \n "})
    await knowledge.error("POST", path, 400, "validation_error", json={"title": "t", "source_type": "file"})
    await knowledge.error("POST", path, 400, "validation_error", json={"title": "t", "source_type": "url"})
    await knowledge.error("POST", path, 400, "invalid_json", data=b"{not json",
                          headers={"Content-Type": "application/json"})
    assert (await knowledge.call("GET", path))["total"] == 0


async def test_unknown_ids_are_404(knowledge):
    for method, path in (("GET", f"/knowledge/bases/{UNKNOWN}"), ("PUT", f"/knowledge/bases/{UNKNOWN}"),
                         ("DELETE", f"/knowledge/bases/{UNKNOWN}"), ("GET", f"/knowledge/bases/{UNKNOWN}/documents"),
                         ("POST", f"/knowledge/bases/{UNKNOWN}/documents"), ("GET", "/knowledge/bases/not-a-uuid")):
        await knowledge.error(method, path, 404, "knowledge_base_not_found", json=VALID_BODIES.get(method))
    for method in ("GET", "DELETE"):
        await knowledge.error(method, f"/knowledge/documents/{UNKNOWN}", 404, "knowledge_document_not_found")
        await knowledge.error(method, "/knowledge/documents/42", 404, "knowledge_document_not_found")


async def test_search_bodies_are_checked(knowledge):
    kb_id = (await knowledge.base())["id"]
    for body in ({}, {"query": ""}, {"query": "  "}, {"query": "x", "limit": 0}, {"query": "x", "limit": 51},
                 {"query": "x", "limit": "many"}, {"query": "x", "kb_ids": "all"}, {"query": "x", "mode": "magic"}):
        await knowledge.error("POST", "/knowledge/search", 400, "validation_error", json=body)
    for kb_ids in ([UNKNOWN], [kb_id, UNKNOWN], ["not-a-uuid"]):
        body = await knowledge.error("POST", "/knowledge/search", 400, "knowledge_base_not_found",
                                     json={"query": "x", "kb_ids": kb_ids})
        assert body["unknown_kb_ids"] == [kb_ids[-1]]
    for limit in (1, 50):
        assert (await knowledge.search("x", limit=limit, kb_ids=[kb_id])) == {"chunks": [], "total": 0, "query": "x"}


async def test_two_users_never_see_each_others_knowledge(knowledge):
    alice_base = await knowledge.base("Alice's")
    alice_note = await knowledge.note(alice_base["id"], "Safe", "The safe combination is forty two sixteen.")
    bob_base = await knowledge.base("Bob's", who="bob")
    await knowledge.note(bob_base["id"], "Boat", "The boat is moored at pier nine.", who="bob")

    assert [base["name"] for base in (await knowledge.call("GET", "/knowledge/bases", "bob"))["knowledge_bases"]] \
        == ["Bob's"]
    for method, path in (("GET", f"/knowledge/bases/{alice_base['id']}"),
                         ("PUT", f"/knowledge/bases/{alice_base['id']}"),
                         ("DELETE", f"/knowledge/bases/{alice_base['id']}"),
                         ("GET", f"/knowledge/bases/{alice_base['id']}/documents"),
                         ("POST", f"/knowledge/bases/{alice_base['id']}/documents")):
        await knowledge.error(method, path, 404, "knowledge_base_not_found", who="bob",
                              json=VALID_BODIES.get(method))
    for method in ("GET", "DELETE"):
        await knowledge.error(method, f"/knowledge/documents/{alice_note['id']}", 404,
                              "knowledge_document_not_found", who="bob")
    await knowledge.error("POST", "/knowledge/search", 400, "knowledge_base_not_found", who="bob",
                          json={"query": "safe combination", "kb_ids": [alice_base["id"]]})
    found = await knowledge.search("safe combination number", who="bob", limit=50)
    assert found["chunks"] and all(chunk["kb_id"] == bob_base["id"] for chunk in found["chunks"])
    # Bob may not even ask for Alice's.
    await knowledge.error("GET", "/knowledge/bases?user_id=user_alice", 403, "forbidden", who="bob")
    await knowledge.error("POST", "/knowledge/search?user_id=user_alice", 403, "forbidden", who="bob",
                          json={"query": "safe"})
    # Alice's knowledge is untouched.
    assert (await knowledge.call("GET", f"/knowledge/bases/{alice_base['id']}"))["knowledge_base"]["doc_count"] == 1


async def test_the_administrator_acts_for_a_user(knowledge):
    created = await knowledge.call("POST", "/knowledge/bases?user_id=user_alice", "admin", 201, json={"name": "Shared"})
    assert created["user_id"] == "user_alice"
    document = await knowledge.call("POST", f"/knowledge/bases/{created['id']}/documents", "admin", 201,
                                    json={"title": "Rota", "content": "Alice waters the plants on Mondays."})
    assert document["user_id"] == "user_alice"
    assert (await knowledge.call("GET", "/knowledge/bases"))["knowledge_bases"] == [
        {**created, "doc_count": 1, "updated_at": (await knowledge.call("GET", "/knowledge/bases"))[
            "knowledge_bases"][0]["updated_at"]}]
    assert (await knowledge.call("GET", "/knowledge/bases", "admin"))["total"] == 0
    assert (await knowledge.call("GET", "/knowledge/bases?user_id=user_alice", "admin"))["total"] == 1
    # By id without user_id the administrator reaches it; naming another owner does not.
    await knowledge.call("GET", f"/knowledge/bases/{created['id']}", "admin")
    await knowledge.error("GET", f"/knowledge/bases/{created['id']}?user_id=user_bob", 404,
                          "knowledge_base_not_found", who="admin")
    found = await knowledge.call("POST", "/knowledge/search?user_id=user_alice", "admin", 200,
                                 json={"query": "who waters the plants"})
    assert found["chunks"][0]["document_id"] == document["id"]
    assert (await knowledge.call("POST", "/knowledge/search", "admin", 200, json={"query": "plants"}))["total"] == 0
    await knowledge.call("DELETE", f"/knowledge/documents/{document['id']}", "admin")
    await knowledge.call("DELETE", f"/knowledge/bases/{created['id']}?user_id=user_alice", "admin")


async def test_authentication_is_required(knowledge):
    for method, path in (("GET", "/knowledge/bases"), ("POST", "/knowledge/search"),
                         ("GET", f"/knowledge/documents/{UNKNOWN}")):
        response = await knowledge.client.request(method, "/api/v1" + path, json={"query": "x"})
        assert response.status == 401
        assert (await response.json())["errorType"] == "unauthorized"


async def test_limits_on_bases_and_documents(make_knowledge_app):
    knowledge = await make_knowledge_app({"max_bases_per_user": 2, "max_documents_per_base": 1,
                                          "max_content_chars": 1000})
    kb_id = (await knowledge.base("one"))["id"]
    await knowledge.base("two")
    await knowledge.error("POST", "/knowledge/bases", 409, "too_many_knowledge_bases", json={"name": "three"})
    await knowledge.base("bob's own", who="bob")
    await knowledge.error("POST", f"/knowledge/bases/{kb_id}/documents", 400, "document_too_large",
                          json={"title": "long", "content": "x" * 1001})
    await knowledge.note(kb_id, "first", "short")
    await knowledge.error("POST", f"/knowledge/bases/{kb_id}/documents", 409, "too_many_documents",
                          json={"title": "second", "content": "short"})


async def test_user_id_may_come_in_the_body(knowledge):
    """The AI core's peer client names the user in the body of its POSTs."""
    created = await knowledge.call("POST", "/knowledge/bases", "admin", 201,
                                   json={"name": "Via body", "user_id": "user_bob"})
    assert created["user_id"] == "user_bob"
    document = await knowledge.call("POST", f"/knowledge/bases/{created['id']}/documents", "admin", 201,
                                    json={"title": "Boat", "content": "The boat is moored at pier nine.",
                                          "user_id": "user_bob"})
    assert document["user_id"] == "user_bob"
    found = await knowledge.call("POST", "/knowledge/search", "admin", 200,
                                 json={"query": "where is the boat", "user_id": "user_bob"})
    assert found["chunks"][0]["document_id"] == document["id"] and found["chunks"][0]["kb_name"] == "Via body"
    await knowledge.error("POST", "/knowledge/search", 403, "forbidden", json={"query": "boat", "user_id": "user_bob"})
    await knowledge.error("POST", "/knowledge/bases", 403, "forbidden", json={"name": "x", "user_id": "user_bob"})


async def test_raw_content_is_the_text_exactly_as_sent(knowledge):
    """Trailing white space, a final newline, CRLF line ends and runs of blank lines come back as
    they were sent; only the chunker's copy is normalised, and offsets point into the text as sent."""
    kb_id = (await knowledge.base())["id"]
    content = "  Shopping list:  \r\n\r\n\r\n\r\n- oat milk\t\n- lemons   \n\n"
    document = await knowledge.note(kb_id, "Shopping", content)
    assert document["raw_content"] == content and document["content_length"] == len(content)
    detail = await knowledge.call("GET", f"/knowledge/documents/{document['id']}")
    assert detail["document"]["raw_content"] == content
    assert detail["chunks"] and all(content[chunk["start_offset"]:chunk["end_offset"]] == chunk["text"]
                                    for chunk in detail["chunks"])
    assert detail["chunks"][0]["text"].startswith("Shopping list:")
    listed = await knowledge.call("GET", f"/knowledge/bases/{kb_id}/documents?include_content=true")
    assert listed["documents"][0]["raw_content"] == content


async def test_a_note_of_white_space_and_control_characters_holds_no_text(knowledge):
    kb_id = (await knowledge.base())["id"]
    path = f"/knowledge/bases/{kb_id}/documents"
    await knowledge.error("POST", path, 400, "empty_document", json={"title": "t", "content": "\u0007 \r\n\u0001"})
    assert (await knowledge.call("GET", path))["total"] == 0


async def test_a_document_cut_into_more_chunks_than_allowed_is_refused(make_knowledge_app):
    knowledge = await make_knowledge_app({"max_chunks_per_document": 3})
    kb_id = (await knowledge.base())["id"]
    paragraph = "A sentence of ordinary prose about nothing much at all. " * 10
    body = await knowledge.error("POST", f"/knowledge/bases/{kb_id}/documents", 400, "too_many_chunks",
                                 json={"title": "Long", "content": "\n\n".join([paragraph] * 4)})
    assert "4 chunks" in body["error"] and "3" in body["error"]
    await knowledge.note(kb_id, "Short", "\n\n".join([paragraph] * 3))
