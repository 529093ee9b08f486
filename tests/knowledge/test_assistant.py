"""The assistant answering from the knowledge bases: the `search_knowledge` tool of the
`knowledge_tools` plugin, in a real AI core that asks a real gateway (its knowledge plugin, on
real PostgreSQL and the embedded vector store) with the service credential acting for the person.

The language model is a small OpenAI-compatible server that, like a real model, calls
`search_knowledge` with the question and then answers from the tool result it is sent back: the
first passage and its document's title. Without a model, the offline agent answers "search my
notes for …" / "在知识库里找…" from the same search."""
from __future__ import annotations

import asyncio
import io
import json

import aiohttp
import pytest
from aiohttp import web

from gateway.app import create_app
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.ai_core import plugin as ai_core_plugin
from plugins.auth import auth_plugin, tokens_plugin
from plugins.chat import plugin as chat_plugin
from plugins.files import files_plugin
from plugins.knowledge import plugin as knowledge_plugin
from plugins.knowledge.assistant import tools_plugin
from plugins.sessions import plugin as sessions_plugin
from tests.support.fake_openai import route_to_model
from tests.support.servers import free_port

SERVICE = {"Authorization": "Bearer test-service-token"}


# ---------------------------------------------------------------- a model that cites

def sse(delta: dict, finish_reason: str | None = None) -> bytes:
    payload = {"id": "chatcmpl-citing", "object": "chat.completion.chunk", "created": 1, "model": "citing",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


class CitingModel:
    """`/v1/chat/completions`: to a question, a call of `search_knowledge` (its arguments the
    question and `extra_arguments`); to the tool's result, the first passage and its title, or
    the result's message when nothing was found."""

    def __init__(self):
        self.url = ""  # set once it listens
        self.requests: list[dict] = []
        self.extra_arguments: dict = {}
        self.app = web.Application()
        self.app.router.add_post("/v1/chat/completions", self.completions)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        last = body["messages"][-1]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if last["role"] == "user":
            arguments = json.dumps({"query": last["content"], **self.extra_arguments}, ensure_ascii=False)
            await response.write(sse({"role": "assistant", "content": None, "tool_calls": [
                {"index": 0, "id": "call_kb1", "type": "function",
                 "function": {"name": "search_knowledge", "arguments": ""}}]}))
            for start in range(0, len(arguments), 16):  # in fragments, as real providers send them
                await response.write(sse({"tool_calls": [{"index": 0, "function": {
                    "arguments": arguments[start:start + 16]}}]}))
            await response.write(sse({}, "tool_calls"))
        else:
            assert last["role"] == "tool" and last["tool_call_id"] == "call_kb1"
            result = json.loads(last["content"])
            if result.get("passages"):
                first = result["passages"][0]
                text = f"{' '.join(first['text'].split())} (source: “{first['document_title']}”)"
            else:
                text = result.get("message") or result.get("error") or "nothing"
            await response.write(sse({"role": "assistant", "content": ""}))
            for start in range(0, len(text), 20):
                await response.write(sse({"content": text[start:start + 20]}))
            await response.write(sse({}, "stop"))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


# ---------------------------------------------------------------- the two services

class Services:
    """The gateway, asked as a person's devices ask it, and where the AI core answers."""

    def __init__(self, gateway: aiohttp.ClientSession, ai_core_url: str):
        self.gateway = gateway
        self.ai_core_url = ai_core_url


@pytest.fixture
async def citing_model(aiohttp_server):
    model = CitingModel()
    server = await aiohttp_server(model.app)
    model.url = str(server.make_url("/v1")).rstrip("/")
    return model


@pytest.fixture
async def pages(aiohttp_server):
    """A small web site on loopback, for documents of source type `url`."""
    site: dict[str, str] = {}

    async def page(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in site:
            raise web.HTTPNotFound()
        return web.Response(text=site[name], content_type="text/html")

    app = web.Application()
    app.router.add_get("/{name}", page)
    server = await aiohttp_server(app)
    return site, f"http://127.0.0.1:{server.port}"


@pytest.fixture
async def make_services(database_url, aiohttp_server, make_config, pages):
    """The AI core (with `knowledge_tools`) and the gateway (with knowledge and the chat
    channel) on loopback ports, each the other's peer; `model` routes chat to a model server,
    `knowledge=False` leaves the knowledge plugin out of the gateway."""
    _, site_url = pages

    async def build(model: CitingModel | None = None, knowledge: bool = True) -> Services:
        gateway_port = free_port()
        gateway_url = f"http://127.0.0.1:{gateway_port}"
        site_port = int(site_url.rsplit(":", 1)[1])
        settings = {"database.url": database_url, "peers.gateway_url": gateway_url,
                    "auth.registration_enabled": True, "auth.chat_for_all_users": True,
                    "fetch.allow_hosts": [f"127.0.0.1:{site_port}"],
                    "plugins.ai_core": {"first_token_timeout": 10, "idle_timeout": 20, "tool_timeout": 20,
                                        "timezone": "UTC"}}
        ai_core = await aiohttp_server(create_app("ai-core", make_config(settings),
                                                  plugins=[tokens_plugin, ai_core_plugin, tools_plugin]))
        ai_core_url = str(ai_core.make_url("")).rstrip("/")
        if model is not None:
            await route_to_model(ai_core_url, model.url, SERVICE, "citing")
        gateway_plugins = [tokens_plugin, auth_plugin, sessions_plugin, files_plugin, ai_core_client_plugin,
                           chat_plugin, *([knowledge_plugin] if knowledge else [])]
        gateway_app = create_app("gateway", make_config({**settings, "peers.ai_core_url": ai_core_url}),
                                 plugins=gateway_plugins)
        await aiohttp_server(gateway_app, port=gateway_port)
        session = aiohttp.ClientSession(gateway_url)
        sessions.append(session)
        return Services(session, ai_core_url)

    sessions: list[aiohttp.ClientSession] = []
    yield build
    for session in sessions:
        await session.close()


# ---------------------------------------------------------------- what a person does

async def sign_up(services: Services, username: str) -> dict:
    """A new account's bearer header."""
    async with services.gateway.post("/api/v1/auth/register", json={
            "username": username, "password": "secret-pass", "email": f"{username}@example.org",
            "nickname": username, "verify_code": "ABC123"}) as response:
        assert response.status == 201, await response.text()
        return {"Authorization": f"Bearer {(await response.json())['token']}"}


async def create_base(services: Services, user: dict, name: str) -> str:
    async with services.gateway.post("/api/v1/knowledge/bases", headers=user,
                                     json={"name": name, "description": ""}) as response:
        assert response.status == 201, await response.text()
        return (await response.json())["id"]


async def add_document(services: Services, user: dict, base_id: str, **body) -> dict:
    async with services.gateway.post(f"/api/v1/knowledge/bases/{base_id}/documents", headers=user,
                                     json=body) as response:
        assert response.status == 201, await response.text()
        document = await response.json()
    return await indexed(services, user, document)


async def indexed(services: Services, user: dict, document: dict, timeout: float = 60.0) -> dict:
    """The document once its chunks are searchable (documents may be indexed in the background)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        async with services.gateway.get(f"/api/v1/knowledge/documents/{document['id']}", headers=user) as response:
            assert response.status == 200, await response.text()
            answer = await response.json()
        state = answer["document"]["index_status"]
        assert state != "failed", answer
        if state == "ready" and answer["document"]["chunk_count"] > 0:
            return answer["document"]
        assert asyncio.get_running_loop().time() < deadline, f"not indexed in time: {answer['document']}"
        await asyncio.sleep(0.1)


async def upload(services: Services, user: dict, name: str, data: bytes, content_type: str) -> str:
    form = aiohttp.FormData()
    form.add_field("file", data, filename=name, content_type=content_type)
    async with services.gateway.post("/api/v1/files/upload", headers=user, data=form) as response:
        assert response.status == 201, await response.text()
        return (await response.json())["id"]


async def ask(services: Services, user: dict, text: str, session_id: str = "kb-chat",
              attachments: list[dict] | None = None) -> list[dict]:
    """The frames of one turn over /ws/chat, up to its `stream_end`."""
    token = user["Authorization"].split(" ", 1)[1]
    async with services.gateway.ws_connect(f"/ws/chat?token={token}&session_id={session_id}") as ws:
        await ws.send_json({"type": "message", "content": text, "attachments": attachments or []})
        frames = []
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            frame = await asyncio.wait_for(ws.receive_json(), max(0.0, deadline - asyncio.get_running_loop().time()))
            frames.append(frame)
            if frame["type"] in ("stream_end", "error"):
                return frames


def reply_of(frames: list[dict]) -> str:
    assert frames[-1]["type"] == "stream_end", frames[-1]
    return frames[-1]["text"]


async def tool_calls(services: Services, user_id: str) -> list[dict]:
    async with aiohttp.ClientSession(headers=SERVICE) as session:
        async with session.get(f"{services.ai_core_url}/api/v1/tools/calls",
                               params={"tool_name": "search_knowledge", "user_id": user_id}) as response:
            assert response.status == 200, await response.text()
            return (await response.json())["calls"]


def manual_pdf(title: str, lines: list[str]) -> bytes:
    """A real one-page PDF, written by reportlab as PDF writers in the wild write them."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pagesize=A4)
    pdf.setTitle(title)
    pdf.setFont("Helvetica", 11)
    for index, line in enumerate(lines):
        pdf.drawString(60, 800 - 16 * index, line)
    pdf.showPage()
    pdf.save()
    return buffer.getvalue()


MANUAL_TITLE = "Zephyr X2 kettle manual"
MANUAL = manual_pdf(MANUAL_TITLE, [
    "Zephyr X2 electric kettle - owner's manual",
    "Fill the kettle between the MIN and MAX marks and close the lid before switching it on.",
    "Warranty: the manufacturer repairs or replaces the kettle free of charge for 27 months",
    "after the date of purchase. Keep the receipt as proof of purchase.",
])
NOTE = ("Tomato soup: soften an onion in butter, add a kilo of ripe tomatoes and a litre of stock, "
        "simmer twenty minutes and blend. Season with basil.")
PAGE = """<!doctype html><html><head><title>Bicycle care</title></head><body>
<nav><a href="/">Home</a> | <a href="/blog">Blog</a></nav>
<article><h1>Keeping a bicycle chain clean</h1>
<p>Wipe the chain with a dry rag after every wet ride, then put one drop of oil on each roller.
Wipe off the excess oil so that it does not collect grit.</p>
<p>A chain that is looked after lasts about five thousand kilometres.</p></article>
<footer>© 2026 The cycling blog</footer></body></html>"""


# ---------------------------------------------------------------- the tests

async def test_a_new_user_asks_over_the_chat_and_the_answer_comes_from_the_pdf(make_services, citing_model, pages):
    """Done means: a base with a note, a PDF and a web page; the answer only the PDF holds comes
    back over /ws/chat naming the document."""
    site, site_url = pages
    site["bicycle"] = PAGE
    services = await make_services(model=citing_model)
    carol = await sign_up(services, "carol")
    base_id = await create_base(services, carol, "Household")
    await add_document(services, carol, base_id, title="Tomato soup", content=NOTE, source_type="text")
    file_id = await upload(services, carol, "zephyr-manual.pdf", MANUAL, "application/pdf")
    manual = await add_document(services, carol, base_id, title=MANUAL_TITLE, source_type="file", file_id=file_id)
    await add_document(services, carol, base_id, title="Bicycle care", source_type="url", url=f"{site_url}/bicycle")

    frames = await ask(services, carol, "How long is my kettle covered if it breaks?")
    reply = reply_of(frames)
    assert "27 months" in reply and MANUAL_TITLE in reply, reply
    progress = [frame for frame in frames if frame["type"] == "tool_progress"]
    assert progress and progress[-1]["tool_progress"]["status"] == "completed", progress

    # What the model was sent: passages with their documents, the PDF's first.
    tool_message = citing_model.requests[-1]["messages"][-1]
    result = json.loads(tool_message["content"])
    assert result["status"] == "found" and result["documents"][0] == MANUAL_TITLE
    first = result["passages"][0]
    assert first["document_id"] == manual["id"] and first["chunk_id"]
    assert (first["kb_id"], first["kb_name"]) == (base_id, "Household")
    assert isinstance(first["score"], float)
    calls = await tool_calls(services, "user_carol")
    assert calls[0]["status"] == "completed" and calls[0]["model"] == "citing-model"


async def test_the_model_may_name_the_bases_to_search(make_services, citing_model):
    services = await make_services(model=citing_model)
    dana = await sign_up(services, "dana")
    kitchen = await create_base(services, dana, "Kitchen")
    garden = await create_base(services, dana, "Garden")
    await add_document(services, dana, kitchen, title="Tomato soup", content=NOTE)
    await add_document(services, dana, garden, title="Growing tomatoes",
                       content="Tomatoes need six hours of sun and a stake; water them at the foot, never the leaves.")
    citing_model.extra_arguments = {"bases": ["garden"]}
    reply = reply_of(await ask(services, dana, "tomatoes"))
    assert "Growing tomatoes" in reply, reply
    result = json.loads(citing_model.requests[-1]["messages"][-1]["content"])
    assert {passage["kb_id"] for passage in result["passages"]} == {garden}

    citing_model.extra_arguments = {"bases": ["Cellar"]}
    reply = reply_of(await ask(services, dana, "tomatoes", session_id="kb-2"))
    assert "no knowledge base named Cellar" in reply and "Kitchen" in reply, reply

    # Another person's base, by id: the gateway's refusal is what the model reads.
    eve = await sign_up(services, "eve")
    citing_model.extra_arguments = {"bases": [await create_base(services, eve, "Eve's")]}
    reply = reply_of(await ask(services, dana, "tomatoes", session_id="kb-3"))
    assert reply.startswith("the gateway answered 400: "), reply


async def test_the_offline_agent_searches_the_notes_in_english(make_services):
    services = await make_services()
    erin = await sign_up(services, "erin")
    base_id = await create_base(services, erin, "Notes")
    await add_document(services, erin, base_id, title="Tomato soup", content=NOTE)
    file_id = await upload(services, erin, "zephyr-manual.pdf", MANUAL, "application/pdf")
    await add_document(services, erin, base_id, title=MANUAL_TITLE, source_type="file", file_id=file_id)

    frames = await ask(services, erin, "Search my notes for how long the kettle guarantee lasts")
    reply = reply_of(frames)
    assert frames[-1]["finish_reason"] == "stop"
    lines = reply.splitlines()
    assert lines[0].startswith("I found ") and "27 months" in lines[1], reply
    assert lines[1].startswith("1. ") and lines[1].endswith(f"— from “{MANUAL_TITLE}”")
    assert lines[-1].startswith((f"Source: “{MANUAL_TITLE}”", f"Sources: “{MANUAL_TITLE}”"))
    calls = await tool_calls(services, "user_erin")
    assert calls[0]["arguments"] == {"query": "how long the kettle guarantee lasts"}
    assert calls[0]["model"] == "offline-agent"


async def test_the_offline_agent_searches_the_knowledge_base_in_chinese(make_services):
    services = await make_services()
    fay = await sign_up(services, "fay")
    base_id = await create_base(services, fay, "家务")
    await add_document(services, fay, base_id, title="番茄炒蛋", content=(
        "番茄炒蛋的做法：先把鸡蛋打散炒到凝固盛出，再用热油炒番茄出汁，最后把鸡蛋倒回去，加一点盐和糖翻匀即可。"))
    await add_document(services, fay, base_id, title="电热水壶保修卡", content=(
        "本电热水壶自购买之日起保修二十七个月。保修期内出现质量问题，凭购物小票免费维修或更换。"))

    reply = reply_of(await ask(services, fay, "在知识库里找水壶坏了能免费修多久"))
    assert reply.startswith("在你的知识库里找到") and "二十七个月" in reply, reply
    assert "《电热水壶保修卡》" in reply.splitlines()[1] and reply.splitlines()[-1].startswith("来源：《电热水壶保修卡》")


async def test_each_person_searches_only_their_own_knowledge(make_services):
    services = await make_services()
    gus = await sign_up(services, "gus")
    base_id = await create_base(services, gus, "Secrets")
    await add_document(services, gus, base_id, title="Safe", content="The code of the safe is 4711.")
    hal = await sign_up(services, "hal")
    reply = reply_of(await ask(services, hal, "search my notes for the code of the safe"))
    assert "4711" not in reply and reply.startswith("You have no knowledge base yet"), reply
    await create_base(services, hal, "Empty")
    reply = reply_of(await ask(services, hal, "search my notes for the code of the safe", session_id="kb-2"))
    assert reply == "I found nothing about “the code of the safe” in your knowledge bases.", reply


async def test_a_gateway_without_knowledge_gets_a_sentence_not_an_error(make_services):
    services = await make_services(knowledge=False)
    ivy = await sign_up(services, "ivy")
    frames = await ask(services, ivy, "在知识库里找保修期")
    assert reply_of(frames) == "现在无法搜索知识库：网关没有提供知识库功能。"
    calls = await tool_calls(services, "user_ivy")
    assert calls[0]["status"] == "completed" and calls[0]["result"]["status"] == "unavailable"


@pytest.mark.parametrize("text, query", [
    ("search my notes for the return policy", "the return policy"),
    ("Search my knowledge base for how long the warranty lasts?", "how long the warranty lasts"),
    ("find the warranty period in my notes", "the warranty period"),
    ("what do my notes say about tomatoes", "tomatoes"),
    ('search my documents for "kettle"', "kettle"),
    ("search my notes about the boiler", "the boiler"),
    ("find my notes about the boiler", "the boiler"),
    ("search the knowledge base for boiler pressure", "boiler pressure"),
    ("According to my notes, when is the boiler serviced?", "when is the boiler serviced"),
    ("check my notes for the wifi password", "the wifi password"),
    ("what do my notes say about Bob's car's tyres", "Bob's car's tyres"),
    ("搜索我的笔记「锅炉」", "锅炉"),
    ("在知识库里找保修期多长", "保修期多长"),
    ("从知识库中查找锅炉的压力", "锅炉的压力"),
    ("根据我的笔记，锅炉什么时候保养？", "锅炉什么时候保养"),
    ("我的笔记里有没有无线网络密码", "无线网络密码"),
    ("搜索我的笔记：番茄炒蛋的做法", "番茄炒蛋的做法"),
    ("帮我在知识库里找找退货政策", "退货政策"),
    ("查一下知识库里关于保修的内容", "保修"),
    ("知识库里有没有番茄的资料", "番茄"),
])
def test_the_offline_agent_reads_the_words_to_look_for(text, query):
    """The phrase chooses search_knowledge among the AI core's tools, and its words the query."""
    from plugins.ai_core.agent import best_match
    from plugins.knowledge.assistant import parse_arguments

    match = best_match(text, offline_tools())
    assert match is not None and match.intent == "tool:search_knowledge", match
    assert parse_arguments(text) == {"query": query}


@pytest.mark.parametrize("text, intent", [
    ("search my messages for pizza", "tool:search_messages"),
    ("搜索我的消息 披萨", "tool:search_messages"),
    ("what time is it", "tool:get_current_time"),
    ("你能做什么", "help"),
])
def test_other_intents_keep_their_phrases(text, intent):
    from plugins.ai_core.agent import best_match

    match = best_match(text, offline_tools())
    assert match is not None and match.intent == intent


def offline_tools():
    """The AI core's built-in tools and search_knowledge, as the offline agent sees them."""
    from plugins.ai_core.builtin_tools import register_builtin_tools
    from plugins.ai_core.tools import ToolRegistry
    from plugins.knowledge import assistant

    registry = ToolRegistry()
    register_builtin_tools(registry, "UTC")
    assistant.add_search_knowledge(registry)
    return registry.all()


def test_the_offline_agent_lists_the_clear_hits_and_names_their_documents():
    from plugins.knowledge.assistant import summarize

    def passage(title: str, text: str, score: float) -> dict:
        return {"document_title": title, "text": text, "score": score}

    both = 1 / 61 + 1 / 61  # first in both rankings, against found by one only
    result = {"query": "kettle", "status": "found", "count": 3, "documents": ["Manual", "Soup", "Card"],
              "passages": [passage("Manual", "Covered for\n27 months.", both), passage("Card", "Two years.", 1 / 61 + 1 / 63),
                           passage("Soup", "Tomatoes.", 1 / 62)]}
    assert summarize(result, "en") == ("I found 2 passages about “kettle” in your knowledge bases:\n"
                                       "1. Covered for 27 months. — from “Manual”\n"
                                       "2. Two years. — from “Card”\n"
                                       "Sources: “Manual”; “Card”.")
    result["passages"] = result["passages"][:1]
    assert summarize(result, "zh") == "在你的知识库里找到 1 段与「kettle」相关的内容：\n1. Covered for 27 months. ——《Manual》\n来源：《Manual》。"
    assert summarize({**result, "status": "no_match", "passages": []}, "zh") == "你的知识库里没有找到与「kettle」相关的内容。"


# ---------------------------------------------------------------- a conversation's own base

async def session_base(services: Services, user: dict, session_id: str, name: str = "Chat documents") -> tuple[int, dict]:
    async with services.gateway.post("/api/v1/knowledge/bases", headers=user,
                                     json={"name": name, "session_id": session_id}) as response:
        return response.status, await response.json()


async def test_a_sessions_base_is_searched_in_that_session_only(make_services, citing_model):
    """A PDF attached in one conversation answers there; another conversation of the same
    person, and the person's general search without a session, do not reach into it."""
    services = await make_services(model=citing_model)
    joan = await sign_up(services, "joan")
    status, base = await session_base(services, joan, "kettle-chat")
    assert status == 201 and base["session_id"] == "kettle-chat", base
    status, again = await session_base(services, joan, "kettle-chat", name="another name")
    assert (status, again["id"], again["name"]) == (200, base["id"], "Chat documents")
    file_id = await upload(services, joan, "zephyr-manual.pdf", MANUAL, "application/pdf")
    await add_document(services, joan, base["id"], title="zephyr-manual.pdf", source_type="file", file_id=file_id)
    general = await create_base(services, joan, "Kitchen")
    await add_document(services, joan, general, title="Tomato soup", content=NOTE)

    # The message carries the document (as the web client sends it): the model is not handed the
    # PDF as an image, it finds it by searching.
    document = {"type": "document", "file_id": file_id, "filename": "zephyr-manual.pdf", "kb_id": base["id"]}
    reply = reply_of(await ask(services, joan, "How long is my kettle covered if it breaks?", session_id="kettle-chat",
                               attachments=[document]))
    assert "27 months" in reply and "zephyr-manual.pdf" in reply, reply
    assert citing_model.requests[-2]["messages"][-1]["content"] == "How long is my kettle covered if it breaks?"
    sent = json.loads(citing_model.requests[-1]["messages"][-1]["content"])
    assert {passage["kb_id"] for passage in sent["passages"]} <= {base["id"], general}
    # A message of the document alone: the model reads that it was attached.
    reply_of(await ask(services, joan, "", session_id="kettle-chat", attachments=[document]))
    assert citing_model.requests[-2]["messages"][-1]["content"] == "I attached zephyr-manual.pdf."

    reply = reply_of(await ask(services, joan, "How long is my kettle covered if it breaks?", session_id="soup-chat"))
    assert "27 months" not in reply, reply
    sent = json.loads(citing_model.requests[-1]["messages"][-1]["content"])
    assert base["id"] not in {passage["kb_id"] for passage in sent["passages"]}, sent
    # Named by the model, by name or id, another session's base is still out of reach.
    citing_model.extra_arguments = {"bases": [base["id"]]}
    reply = reply_of(await ask(services, joan, "kettle warranty", session_id="soup-chat-2"))
    assert "27 months" not in reply, reply
    citing_model.extra_arguments = {"bases": ["Chat documents"]}
    reply = reply_of(await ask(services, joan, "kettle warranty", session_id="soup-chat-3"))
    assert "no knowledge base named Chat documents" in reply, reply

    # The gateway's search, by session: that session's base and the general ones.
    async def searched(**scope) -> set[str]:
        async with services.gateway.post("/api/v1/knowledge/search", headers=joan,
                                         json={"query": "kettle warranty months", "limit": 10, **scope}) as response:
            assert response.status == 200, await response.text()
            return {chunk["kb_id"] for chunk in (await response.json())["chunks"]}

    assert base["id"] in await searched(session_id="kettle-chat")
    assert base["id"] not in await searched(session_id="soup-chat")
    assert base["id"] not in await searched(session_id="")
    assert base["id"] in await searched()  # no session named: every base, as the knowledge page searches
    async with services.gateway.get("/api/v1/knowledge/bases", headers=joan,
                                    params={"session_id": "kettle-chat"}) as response:
        assert [b["id"] for b in (await response.json())["knowledge_bases"]] == [base["id"]]


async def test_the_offline_agent_finds_what_the_attached_report_says(make_services):
    services = await make_services()
    kim = await sign_up(services, "kim")
    _, base = await session_base(services, kim, "report-chat")
    file_id = await upload(services, kim, "report.pdf", MANUAL, "application/pdf")
    await add_document(services, kim, base["id"], title="report.pdf", source_type="file", file_id=file_id)

    document = {"type": "document", "file_id": file_id, "filename": "report.pdf", "kb_id": base["id"]}
    reply = reply_of(await ask(services, kim, "what does the report say about the warranty", session_id="report-chat",
                               attachments=[document]))
    assert reply.startswith("I found ") and "27 months" in reply and "“report.pdf”" in reply, reply
    async with services.gateway.get("/api/v1/sessions/report-chat/messages", headers=kim) as response:
        assert response.status == 200, await response.text()
        messages = (await response.json())["messages"]
    assert messages[0]["metadata"]["attachments"] == [document], messages[0]
    # A message of a document alone is a turn too (the AI core reads "I attached report.pdf.").
    frames = await ask(services, kim, "", session_id="report-chat", attachments=[document])
    assert frames[-1]["type"] == "stream_end", frames[-1]
    frames = await ask(services, kim, "and this?", session_id="report-chat",
                       attachments=[{**document, "type": "archive"}])
    assert frames[-1]["type"] == "error" and "type" in frames[-1]["error"], frames[-1]
    # Another person's file is no attachment of this one's.
    lee = await sign_up(services, "lee")
    frames = await ask(services, lee, "what does the report say about the warranty", session_id="lee-chat",
                       attachments=[document])
    assert frames[-1]["type"] == "error" and frames[-1]["errorType"] == "file_not_found", frames[-1]
    reply = reply_of(await ask(services, kim, "what does the report say about the warranty", session_id="other-chat"))
    assert "27 months" not in reply and reply.startswith("You have no knowledge base yet"), reply
