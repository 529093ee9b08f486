"""The assistant's door to the knowledge bases: the `search_knowledge` tool, a plugin of the
ai-core service (`knowledge_tools`). The bases live in the gateway, so the tool asks the
gateway's own search (`POST /api/v1/knowledge/search`) with the service credential acting for
the person of the turn, as every tool reaching the gateway does, and hands the model the
passages with their document titles so that it can cite them. The offline agent answers "search
my notes for …" / "在知识库里找…" with the same call, listing the passages and naming the
documents."""
from __future__ import annotations

import re
from typing import Any

from gateway.plugins import Plugin, Registrar
from plugins.ai_core.contract import TOOLS, GatewayFailed, ToolCall, ToolFailed, Tools, gateway_offers

SEARCH_PATH = "/api/v1/knowledge/search"
BASES_PATH = "/api/v1/knowledge/bases"
DEFAULT_LIMIT = 5
MAX_LIMIT = 20              # the gateway allows 50; more passages than this drown a model's context
MAX_QUERY_CHARS = 500
MAX_PASSAGE_CHARS = 1500    # what the model reads of one passage
EXCERPT_CHARS = 800         # what the offline agent shows of one passage: a whole chunk of the default size
SHOWN_PASSAGES = 3          # how many the offline agent lists
# The offline agent lists the passages scoring at least this share of the best one's. The
# search sums two rankings' contributions (lexical and semantic; by reciprocal rank or by scaled
# score, `[vectors] fusion`), so a passage only one of them found scores about half of one both
# put at the top: the person reads the clear hits, not the rest of the page.
SHOWN_SCORE_SHARE = 0.6

_UUID = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")

DESCRIPTION = ("Search the user's knowledge bases (their notes, uploaded documents and saved web pages, and "
               "the documents attached in this conversation) by meaning, in any language; returns the best "
               "passages with the title of the document each comes from. Use it when the user asks about "
               "something they may have written down, saved or attached, and name the documents you answer from.")

PARAMETERS = {"type": "object", "properties": {
    "query": {"type": "string", "description": "what to look for: a question or a few words; a paraphrase "
                                               "finds passages that share no word with it"},
    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT,
              "description": "how many passages to return"},
    "bases": {"type": "array", "items": {"type": "string"},
              "description": "names or ids of the knowledge bases to search; all of the user's when omitted"}},
    "required": ["query"]}

EXAMPLES = {
    "en": ["search my notes for", "search my notes", "search my knowledge base", "search the knowledge base",
           "search my documents", "find in my notes", "find my notes about", "check my notes",
           "what do my notes say about", "look up in my knowledge base", "according to my notes",
           "what does the document say about", "what does the report say about", "search the attached pdf for"],
    "zh": ["在知识库里找", "搜索我的笔记", "搜索知识库", "在我的笔记里找", "从知识库中查找", "查一下知识库",
           "知识库里有没有", "我的笔记里有没有", "根据我的笔记"],
}

# What the person says before (or around) the words to look for, in the offline agent.
# "the report", "the PDF", "the attachment": a document attached in the conversation.
_PLACES_EN = r"(?:notes?|knowledge[ -]?bases?|knowledge|kb|documents?|docs|files|reports?|pdfs?|attachments?)"
_QUERY_FIRST_EN = re.compile(
    rf"^(?:please\s+)?(?:find|look\s+up|look\s+for|search\s+for)\s+(?P<query>.+?)\s+in\s+(?:my|our|the)\s+{_PLACES_EN}\b",
    re.IGNORECASE)
_PREFIXES_EN = [
    rf"(?:search|look\s+through|look\s+in|check|find|look\s+up)\s+(?:in\s+|through\s+)?"
    rf"(?:my|our|the)\s+{_PLACES_EN}(?:\s+(?:for|about|on))?",
    rf"what\s+(?:do|does)\s+(?:my|our|the)\s+{_PLACES_EN}\s+say\s+(?:about|on)",
    rf"(?:according\s+to|in)\s+(?:my|our|the)\s+{_PLACES_EN}",
]
_PLACES_ZH = r"(?:知识库|笔记|文档|资料)"
_VERBS_ZH = r"(?:搜一下|查一下|找一下|找找|搜搜|查查|搜索|查找|查询|看看|搜|查|找)"
_PREFIXES_ZH = [
    rf"(?:在|从)?(?:我的)?{_PLACES_ZH}(?:里面|里|中)?(?:有没有|有什么|{_VERBS_ZH})(?:一下)?(?:关于|有关)?",
    rf"{_VERBS_ZH}(?:一下)?(?:我的)?{_PLACES_ZH}(?:里面|里|中)?(?:的|关于|有关)?",
    rf"(?:根据|按照)(?:我的)?{_PLACES_ZH}",
]
_PREFIXES = [re.compile(prefix, re.IGNORECASE) for prefix in _PREFIXES_EN + _PREFIXES_ZH]
_TRIM = " \t\n?？。.!！:：,，;；、的"
_ZH_TAILS = ("的内容", "的资料", "的信息", "相关内容", "吗", "呢")


def parse_arguments(text: str) -> dict:
    """The offline agent's reading of "search my notes for X" / "在知识库里找X": {"query": X}."""
    # Double quotes and corner brackets only: an apostrophe ("Bob's car") is no quotation mark.
    quoted = re.search(r"[\"“「『](.+?)[\"”」』]", text)
    if quoted and quoted.group(1).strip():
        return {"query": quoted.group(1).strip()}
    text = text.strip()
    match = _QUERY_FIRST_EN.search(text)
    if match:
        return {"query": match.group("query").strip(_TRIM)}
    for prefix in _PREFIXES:
        found = prefix.search(text)
        if found is None:
            continue
        query = text[found.end():].strip(_TRIM) or text[:found.start()].strip(_TRIM)
        for tail in _ZH_TAILS:
            if query.endswith(tail) and len(query) > len(tail):
                query = query[:-len(tail)].strip(_TRIM)
        if query:
            return {"query": query}
    return {}


def _passage(chunk: dict) -> dict:
    """One search hit (the gateway's SearchChunkResult) as the model reads it: the text and
    where it comes from."""
    text = chunk["text"]
    if len(text) > MAX_PASSAGE_CHARS:
        text = text[:MAX_PASSAGE_CHARS].rstrip() + "…"
    passage = {"document_title": chunk["document_title"], "text": text, "document_id": chunk["document_id"],
               "chunk_id": chunk["id"], "kb_id": chunk["kb_id"], "kb_name": chunk["kb_name"],
               "score": round(float(chunk["score"]), 4), "position": chunk["position"]}
    if chunk.get("heading_path"):
        passage["heading_path"] = chunk["heading_path"]
    if chunk.get("source_type") == "url":
        passage["url"] = chunk["source_ref"]
    return passage


def _in_session(bases: list[dict], session_id: str | None) -> list[dict]:
    """The bases a turn of this session may search: general ones and the session's own."""
    return [base for base in bases if base.get("session_id") in (None, session_id)]


async def _base_ids(call: ToolCall, bases: list[str]) -> list[str]:
    """The ids of the bases the model named, by id or by name (case-insensitive)."""
    wanted = [str(base).strip() for base in bases if str(base).strip()]
    if all(_UUID.match(base) for base in wanted):
        return wanted
    known = _in_session((await call.ask_gateway("GET", BASES_PATH))["knowledge_bases"], call.session_id)
    by_name = {base["name"].casefold(): base["id"] for base in known}
    ids, unknown = [], []
    for base in wanted:
        if _UUID.match(base):
            ids.append(base)
        elif base.casefold() in by_name:
            ids.append(by_name[base.casefold()])
        else:
            unknown.append(base)
    if unknown:
        names = ", ".join(base["name"] for base in known) or "none"
        raise ToolFailed(f"no knowledge base named {', '.join(unknown)}; the user's bases are: {names}")
    return ids


async def search_knowledge(arguments: dict, call: ToolCall) -> dict:
    query = " ".join(str(arguments.get("query") or "").split())[:MAX_QUERY_CHARS]
    if not query:
        raise ToolFailed("query is empty")
    try:
        limit = max(1, min(int(arguments.get("limit") or DEFAULT_LIMIT), MAX_LIMIT))
    except (TypeError, ValueError):
        raise ToolFailed("limit must be a whole number") from None
    bases = arguments.get("bases") or arguments.get("kb_ids") or []
    if isinstance(bases, str):
        bases = [bases]
    result: dict[str, Any] = {"query": query, "count": 0, "passages": [], "documents": []}
    try:
        # Searched as in this conversation: the person's general bases and this session's own
        # (its attached documents), never another session's.
        body: dict[str, Any] = {"query": query, "limit": limit, "session_id": call.session_id or ""}
        if bases:
            body["kb_ids"] = await _base_ids(call, list(bases))
        await call.progress(0.3, f"正在文档中查找“{query}”…" if call.language == "zh"
                            else f"Searching your documents for “{query}”…")
        answer = await call.ask_gateway("POST", SEARCH_PATH, body=body)
    except GatewayFailed as failure:
        if failure.status != 404:
            raise
        # The gateway runs no knowledge plugin (an unknown base is a 400): an answer, not a failure.
        return {**result, "status": "unavailable",
                "message": "The knowledge bases cannot be searched here: the gateway has none to offer."}
    passages = [_passage(chunk) for chunk in answer["chunks"]][:limit]
    if not passages:
        if not _in_session((await call.ask_gateway("GET", BASES_PATH))["knowledge_bases"], call.session_id):
            return {**result, "status": "no_bases",
                    "message": "The user has no knowledge base yet; they can create one and add notes, "
                               "files or web pages to it."}
        return {**result, "status": "no_match", "message": f"Nothing in the user's knowledge bases matches {query!r}."}
    titles = list(dict.fromkeys(p["document_title"] for p in passages if p["document_title"]))
    return {**result, "status": "found", "count": len(passages), "passages": passages, "documents": titles,
            "message": "Answer from these passages and name the document title of each one you use."}


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[:EXCERPT_CHARS].rstrip() + "…"


def shown_passages(passages: list[dict]) -> list[dict]:
    """The passages the offline agent lists: the best, and those scoring near it."""
    if not passages:
        return []
    floor = passages[0]["score"] * SHOWN_SCORE_SHARE
    return [passage for passage in passages if passage["score"] >= floor][:SHOWN_PASSAGES]


def summarize(result: dict, language: str) -> str:
    """The offline agent's reply: the passages, each with its document, then the documents."""
    query, status = result["query"], result.get("status")
    shown = shown_passages(result["passages"])
    titles = list(dict.fromkeys(p["document_title"] for p in shown if p["document_title"]))
    if language == "zh":
        if status == "unavailable":
            return "现在无法搜索知识库：网关没有提供知识库功能。"
        if status == "no_bases":
            return "你还没有知识库。先创建一个知识库，再添加笔记、文件或网页，我就能在里面帮你找。"
        if status != "found":
            return f"你的知识库里没有找到与「{query}」相关的内容。"
        lines = [f"在你的知识库里找到 {len(shown)} 段与「{query}」相关的内容："]
        lines += [f"{index}. {_excerpt(p['text'])} ——《{p['document_title'] or '无标题'}》"
                  for index, p in enumerate(shown, 1)]
        lines.append("来源：" + "、".join(f"《{title}》" for title in titles) + "。")
        return "\n".join(lines)
    if status == "unavailable":
        return "Your knowledge bases cannot be searched right now: the gateway offers none."
    if status == "no_bases":
        return ("You have no knowledge base yet. Create one and add notes, files or web pages, "
                "and I can search them for you.")
    if status != "found":
        return f"I found nothing about “{query}” in your knowledge bases."
    lines = [f"I found {len(shown)} passage{'s' if len(shown) > 1 else ''} about “{query}” in your knowledge bases:"]
    lines += [f"{index}. {_excerpt(p['text'])} — from “{p['document_title'] or 'untitled'}”"
              for index, p in enumerate(shown, 1)]
    lines.append(("Sources: " if len(titles) > 1 else "Source: ") + "; ".join(f"“{title}”" for title in titles) + ".")
    return "\n".join(lines)


async def knowledge_offered(call: ToolCall) -> bool:
    return await gateway_offers(call, BASES_PATH)


def add_search_knowledge(tools: Tools, owner: str = "knowledge_tools") -> None:
    tools.add("search_knowledge", DESCRIPTION, PARAMETERS, search_knowledge, owner=owner,
              examples=EXAMPLES, parse_arguments=parse_arguments, summarize=summarize,
              topic={"en": "Your documents and notes", "zh": "文档和笔记"}, available=knowledge_offered,
              help={"en": ["search my notes for the warranty", "what do my notes say about the lease"],
                    "zh": ["在知识库里找保修期", "根据我的笔记，租约什么时候到期"]},
              progress={"en": ["Searching your documents for “{query}”…", "Searching your documents…"],
                        "zh": ["正在文档中查找“{query}”…", "正在查找你的文档…"]})


class KnowledgeToolsPlugin(Plugin):
    """`knowledge_tools`, in the ai-core service: adds `search_knowledge` to the tools."""
    name = "knowledge_tools"
    depends = ("ai_core",)
    description = "the search_knowledge tool: the assistant searches the person's knowledge bases"

    def setup(self, registrar: Registrar) -> None:
        add_search_knowledge(registrar.context.contracts.require(TOOLS), owner=self.name)


tools_plugin = KnowledgeToolsPlugin()
