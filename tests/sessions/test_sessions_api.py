"""Every row of the spec's Sessions table, and who may see what."""
import json
import re
from urllib.parse import unquote

import pytest

from plugins.sessions import DEFAULT_TITLE
from tests.sessions.conftest import API

SESSION_FIELDS = {"id", "user_id", "title", "is_main", "created_at", "updated_at"}


async def test_create_with_an_empty_body_or_with_fields(sessions_app):
    client, _, headers = sessions_app
    response = await client.post(f"{API}/sessions", headers=headers["alice"])
    assert response.status == 201
    session = await response.json()
    assert set(session) == SESSION_FIELDS
    assert session["title"] == DEFAULT_TITLE and session["is_main"] is False
    assert session["user_id"] == "user_alice" and re.fullmatch(r"session_[a-z0-9]{12}", session["id"])
    response = await client.post(f"{API}/sessions", headers=headers["alice"],
                                 json={"session_id": "work", "title": "工作", "is_main": True})
    assert response.status == 201
    assert (await response.json())["is_main"] is True
    response = await client.post(f"{API}/sessions", headers=headers["alice"], json={"session_id": "work"})
    assert response.status == 409 and (await response.json())["errorType"] == "session_exists"
    response = await client.post(f"{API}/sessions", headers=headers["alice"], json={"is_main": "maybe"})
    assert response.status == 400 and (await response.json())["errorType"] == "validation_error"
    response = await client.post(f"{API}/sessions", headers=headers["alice"], json={"session_id": "a b/c"})
    assert response.status == 400
    assert (await client.post(f"{API}/sessions")).status == 401


@pytest.mark.parametrize(("accept_language", "title"), [
    ("en", "New chat"), ("en-GB,en;q=0.9", "New chat"), ("zh-CN,zh;q=0.9,en;q=0.8", "新对话"),
    ("fr-FR,fr;q=0.9,en;q=0.8,zh;q=0.7", "New chat"), ("zh;q=0.5,en;q=0.8", "New chat"),
    ("de, *", DEFAULT_TITLE), ("en;q=0, zh", "新对话"), ("q=;;,", DEFAULT_TITLE)])
async def test_a_new_sessions_default_title_is_in_the_callers_language(sessions_app, accept_language, title):
    """An English-speaking person's sessions are not all named 新对话 (here and in the console):
    the first language of Accept-Language there is a title for; the spec's 新对话 otherwise.
    Their first message still titles them."""
    client, conversations, headers = sessions_app
    response = await client.post(f"{API}/sessions", headers={**headers["alice"], "Accept-Language": accept_language})
    assert response.status == 201
    session = await response.json()
    assert session["title"] == title
    listed = await (await client.get(f"{API}/sessions", headers=headers["alice"])).json()
    assert [item["title"] for item in listed["sessions"]] == [title]
    named = await client.post(f"{API}/sessions", headers={**headers["alice"], "Accept-Language": accept_language},
                              json={"title": "My trip"})
    assert (await named.json())["title"] == "My trip"
    await conversations.add_message(session["id"], "user_alice", "user", "Plan a trip to Kyoto")
    assert (await conversations.get_session("user_alice", session["id"]))["title"] == "Plan a trip to Kyoto"


async def test_half_a_surrogate_pair_in_a_body_is_stored_replaced(sessions_app):
    client, _, headers = sessions_app
    response = await client.post(f"{API}/sessions", headers={**headers["alice"], "Content-Type": "application/json"},
                                 data='{"session_id": "half", "title": "cut \\ud83d emoji"}')
    assert response.status == 201
    assert (await response.json())["title"] == "cut \ufffd emoji"


async def test_list_get_and_the_administrator_acting_for_a_user(sessions_app):
    client, conversations, headers = sessions_app
    await conversations.create_session("user_alice", "a1")
    await conversations.create_session("user_alice", "a2")
    await conversations.create_session("user_bob", "b1")
    listed = await (await client.get(f"{API}/sessions", headers=headers["alice"])).json()
    assert [s["id"] for s in listed["sessions"]] == ["a2", "a1"]
    response = await client.get(f"{API}/sessions?user_id=user_bob", headers=headers["alice"])
    assert response.status == 403
    listed = await (await client.get(f"{API}/sessions?user_id=user_bob", headers=headers["admin"])).json()
    assert [s["id"] for s in listed["sessions"]] == ["b1"]
    assert (await (await client.get(f"{API}/sessions", headers=headers["admin"])).json())["sessions"] == []

    response = await client.get(f"{API}/sessions/a1", headers=headers["alice"])
    assert response.status == 200 and (await response.json())["id"] == "a1"
    assert (await client.get(f"{API}/sessions/a1", headers=headers["admin"])).status == 200
    missing = await client.get(f"{API}/sessions/nope", headers=headers["alice"])
    foreign = await client.get(f"{API}/sessions/b1", headers=headers["alice"])
    for response in (missing, foreign):
        body = await response.json()
        assert response.status == 404 and body["errorType"] == "session_not_found" and body["hint"]
    assert (await missing.json())["error"].replace("nope", "b1") == (await foreign.json())["error"]


async def test_rename_changes_the_title_only_for_the_owner(sessions_app):
    client, conversations, headers = sessions_app
    created = await conversations.create_session("user_alice", "a1")
    await conversations.create_session("user_bob", "b1")
    response = await client.patch(f"{API}/sessions/a1", json={"title": "  周末计划 "}, headers=headers["alice"])
    renamed = await response.json()
    assert response.status == 200 and renamed["title"] == "周末计划"
    assert renamed["updated_at"] == created["updated_at"]      # a new title is not activity
    foreign = await client.patch(f"{API}/sessions/b1", json={"title": "mine"}, headers=headers["alice"])
    assert foreign.status == 404 and (await foreign.json())["errorType"] == "session_not_found"
    for bad in ({"title": "   "}, {"title": "x" * 201}, {}):
        assert (await client.patch(f"{API}/sessions/a1", json=bad, headers=headers["alice"])).status == 400
    by_admin = await client.patch(f"{API}/sessions/b1?user_id=user_bob", json={"title": "Bob's"},
                                  headers=headers["admin"])
    assert by_admin.status == 200 and (await conversations.get_session("user_bob", "b1"))["title"] == "Bob's"


async def test_delete_one_and_all(sessions_app):
    client, conversations, headers = sessions_app
    for session_id in ("a1", "a2"):
        await conversations.create_session("user_alice", session_id)
        await conversations.add_message(session_id, "user_alice", "user", "hello")
    await conversations.create_session("user_bob", "b1")
    assert (await client.delete(f"{API}/sessions/b1", headers=headers["alice"])).status == 404
    response = await client.delete(f"{API}/sessions/a1", headers=headers["alice"])
    assert response.status == 200 and (await response.json())["status"] == "deleted"
    assert await conversations.get_session("user_alice", "a1") is None
    assert await conversations.list_messages("user_alice", "a1") == []
    assert (await client.delete(f"{API}/sessions/a1", headers=headers["alice"])).status == 404
    assert (await client.delete(f"{API}/sessions?user_id=user_bob", headers=headers["alice"])).status == 403
    response = await client.delete(f"{API}/sessions", headers=headers["alice"])
    assert (await response.json())["status"] == "deleted"
    assert await conversations.list_sessions("user_alice") == []
    assert await conversations.get_session("user_bob", "b1") is not None
    response = await client.delete(f"{API}/sessions?user_id=user_bob", headers=headers["admin"])
    assert response.status == 200 and await conversations.list_sessions("user_bob") == []


async def test_messages_paging_and_clearing(sessions_app):
    client, conversations, headers = sessions_app
    await conversations.create_session("user_alice", "a1")
    for n in range(60):
        await conversations.add_message("a1", "user_alice", "user" if n % 2 == 0 else "assistant", f"m{n}")
    url = f"{API}/sessions/a1/messages"
    body = await (await client.get(url, headers=headers["alice"])).json()
    assert [m["content"] for m in body["messages"]] == [f"m{n}" for n in range(50)]
    first = body["messages"][0]
    assert {"id", "session_id", "role", "msg_type", "content", "created_at"} <= set(first)
    assert isinstance(first["id"], int) and first["role"] == "user" and first["msg_type"] == "chat"
    page = await (await client.get(url + "?limit=20&offset=50", headers=headers["alice"])).json()
    assert [m["content"] for m in page["messages"]] == [f"m{n}" for n in range(50, 60)]
    assert (await (await client.get(url + "?offset=60", headers=headers["alice"])).json())["messages"] == []
    one = await (await client.get(url + "?limit=1&offset=59", headers=headers["alice"])).json()
    assert [m["content"] for m in one["messages"]] == ["m59"]
    for bad in ("limit=0", "limit=-1", "offset=-1", "limit=abc", f"limit=501"):
        response = await client.get(f"{url}?{bad}", headers=headers["alice"])
        assert response.status == 400, bad
    assert (await client.get(url, headers=headers["bob"])).status == 404
    assert (await client.delete(url, headers=headers["bob"])).status == 404
    response = await client.delete(url, headers=headers["alice"])
    assert response.status == 200 and (await response.json())["status"] == "cleared"
    assert (await (await client.get(url, headers=headers["alice"])).json())["messages"] == []
    assert await conversations.get_session("user_alice", "a1") is not None


async def test_the_newest_page_and_the_pages_before_it(sessions_app):
    """How the web client goes back to a long conversation: the newest page in one request, then
    the page just older than the oldest it shows, until `has_more` says it reached the first."""
    client, conversations, headers = sessions_app
    await conversations.create_session("user_alice", "long")
    for n in range(25):
        await conversations.add_message("long", "user_alice", "user" if n % 2 == 0 else "assistant", f"m{n}")
    url = f"{API}/sessions/long/messages"
    newest = await (await client.get(url + "?latest=true&limit=10", headers=headers["alice"])).json()
    assert [m["content"] for m in newest["messages"]] == [f"m{n}" for n in range(15, 25)]
    assert newest["has_more"] is True and newest["before_id"] is None
    read, page = [], newest
    while True:
        read = page["messages"] + read
        if not page["has_more"]:
            break
        response = await client.get(f"{url}?limit=10&before_id={page['messages'][0]['id']}", headers=headers["alice"])
        page = await response.json()
        assert page["before_id"] == read[0]["id"]
    assert [m["content"] for m in read] == [f"m{n}" for n in range(25)]
    assert len(page["messages"]) == 5
    oldest = await (await client.get(f"{url}?limit=1&before_id={read[0]['id']}", headers=headers["alice"])).json()
    assert oldest["messages"] == [] and oldest["has_more"] is False
    exact = await (await client.get(f"{url}?latest=true&limit=25", headers=headers["alice"])).json()
    assert len(exact["messages"]) == 25 and exact["has_more"] is False
    # Offset paging says whether newer messages follow.
    assert (await (await client.get(url + "?limit=24", headers=headers["alice"])).json())["has_more"] is True
    assert (await (await client.get(url + "?limit=25", headers=headers["alice"])).json())["has_more"] is False
    for bad in ("latest=true&offset=5", "before_id=3&offset=1", "before_id=3&latest=true", "before_id=0",
                f"before_id={2**63}", "latest=perhaps"):
        response = await client.get(f"{url}?{bad}", headers=headers["alice"])
        assert response.status == 400, bad
        assert (await response.json())["errorType"] == "validation_error", bad
    assert (await client.get(url + "?latest=true", headers=headers["bob"])).status == 404


@pytest.fixture
async def exported_session(sessions_app):
    client, conversations, headers = sessions_app
    await conversations.create_session("user_alice", "chat-1", "周末计划")
    await conversations.add_message("chat-1", "user_alice", "user", "周末去哪里玩？")
    await conversations.add_message("chat-1", "user_alice", "assistant", "可以去爬山。\n\n**Bring water.**",
                                    msg_type="markdown")
    return client, conversations, headers


async def download(client, headers, export_format):
    query = "" if export_format is None else f"?format={export_format}"
    response = await client.get(f"{API}/sessions/chat-1/export{query}", headers=headers)
    assert response.status == 200
    disposition = response.headers["Content-Disposition"]
    assert disposition.startswith("attachment;")
    filename = re.search(r'filename="([^"]+)"', disposition).group(1)
    title_name = unquote(re.search(r"filename\*=UTF-8''(\S+)", disposition).group(1))
    return response, filename, title_name, await response.text()


async def test_export_json_is_the_spec_shape(exported_session):
    client, conversations, headers = exported_session
    response, filename, title_name, text = await download(client, headers["alice"], None)
    assert response.content_type == "application/json" and response.charset == "utf-8"
    assert filename == "chat-1.json" and title_name == "周末计划.json"
    session = await conversations.get_session("user_alice", "chat-1")
    document = json.loads(text)
    assert document["session"] == {k: session[k] for k in ("id", "title", "created_at", "updated_at")}
    assert [(m["role"], m["content"]) for m in document["messages"]] == [
        ("user", "周末去哪里玩？"), ("assistant", "可以去爬山。\n\n**Bring water.**")]
    assert all(set(m) == {"role", "content", "created_at"} and isinstance(m["created_at"], int)
               for m in document["messages"])


async def test_export_markdown_and_text_read_back(exported_session):
    client, _, headers = exported_session
    response, filename, _, text = await download(client, headers["alice"], "markdown")
    assert response.content_type == "text/markdown" and filename == "chat-1.md"
    assert text.startswith("# 周末计划\n") and "- Session: `chat-1`" in text and "- Messages: 2" in text
    sections = re.findall(r"^### (\w+) · (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC)\n\n(.*?)\n(?=\n---|\Z)",
                          text, re.S | re.M)
    assert [(role, body) for role, _, body in sections] == [
        ("User", "周末去哪里玩？"), ("Assistant", "可以去爬山。\n\n**Bring water.**")]

    response, filename, _, text = await download(client, headers["alice"], "txt")
    assert response.content_type == "text/plain" and filename == "chat-1.txt"
    lines = text.split("\n")
    assert lines[0] == "周末计划" and lines[1] == "Session: chat-1"
    turns = re.findall(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC)\] (\w+):\n(.*?)\n(?=\n\[|\n?\Z)",
                       text, re.S | re.M)
    assert [(role, body) for _, role, body in turns] == [
        ("User", "周末去哪里玩？"), ("Assistant", "可以去爬山。\n\n**Bring water.**")]


async def test_export_refuses_bad_formats_and_other_users(exported_session):
    client, _, headers = exported_session
    response = await client.get(f"{API}/sessions/chat-1/export?format=pdf", headers=headers["alice"])
    assert response.status == 400 and "format" in (await response.json())["error"]
    response = await client.get(f"{API}/sessions/chat-1/export", headers=headers["bob"])
    assert response.status == 404 and (await response.json())["errorType"] == "session_not_found"
    assert (await client.get(f"{API}/sessions/chat-1/export?format=txt", headers=headers["admin"])).status == 200


FREE_ID = "nobody-has-this"


async def answers_for(client, headers, session_id: str) -> list[tuple[int, str, str | None]]:
    """What every sessions route answers about `session_id` (its id replaced in the texts)."""
    answers = []
    for method, path, body in [
            ("GET", f"{API}/sessions/{session_id}", None),
            ("GET", f"{API}/sessions/{session_id}/messages", None),
            ("GET", f"{API}/sessions/{session_id}/export", None),
            ("DELETE", f"{API}/sessions/{session_id}/messages", None),
            ("DELETE", f"{API}/sessions/{session_id}", None),
            ("POST", f"{API}/sessions", {"session_id": session_id, "title": "mine"})]:
        response = await client.request(method, path, headers=headers, json=body)
        text = (await response.text()).replace(session_id, "<id>")
        answer = json.loads(text)
        for volatile in ("created_at", "updated_at"):
            answer.pop(volatile, None)
        answers.append((response.status, json.dumps(answer, sort_keys=True), response.headers.get("Content-Type")))
    return answers


async def test_another_users_session_id_cannot_be_told_from_a_free_one(sessions_app):
    """Session ids are per owner: on every sessions route another user's id answers exactly as
    an id nobody has, and creating it gives the caller a session of their own."""
    client, conversations, headers = sessions_app
    await conversations.create_session("user_bob", "bobs-work", "Bob's")
    await conversations.add_message("bobs-work", "user_bob", "user", "private")
    taken = await answers_for(client, headers["alice"], "bobs-work")
    free = await answers_for(client, headers["alice"], FREE_ID)
    assert taken == free
    assert [status for status, _, _ in taken] == [404, 404, 404, 404, 404, 201]
    # Alice now has a `bobs-work` of her own; Bob's is untouched.
    alices = await (await client.get(f"{API}/sessions/bobs-work", headers=headers["alice"])).json()
    assert alices["user_id"] == "user_alice" and alices["title"] == "mine"
    assert [m["content"] for m in await conversations.list_messages("user_bob", "bobs-work")] == ["private"]
    assert (await conversations.get_session("user_bob", "bobs-work"))["title"] == "Bob's"
    # The administrator reaches either with user_id.
    for owner, title in (("user_bob", "Bob's"), ("user_alice", "mine")):
        response = await client.get(f"{API}/sessions/bobs-work?user_id={owner}", headers=headers["admin"])
        assert (await response.json())["title"] == title
    response = await client.get(f"{API}/sessions/bobs-work/messages?user_id=user_bob", headers=headers["admin"])
    assert [m["content"] for m in (await response.json())["messages"]] == ["private"]
    assert (await client.get(f"{API}/sessions/bobs-work?user_id=user_bob", headers=headers["alice"])).status == 403
