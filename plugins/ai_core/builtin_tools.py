"""The built-in tools: the current time and date, and a search of the user's own past messages
(kept by the gateway, asked through peer.py). Later plugins add device, reminder, memory and
knowledge tools."""
from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .tools import Tool, ToolCallContext, ToolFailed, ToolRegistry

WEEKDAYS_EN = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
WEEKDAYS_ZH = ["星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日"]


def zone_named(name: str) -> ZoneInfo | None:
    """The IANA zone `name`; None for the machine's own (an empty name)."""
    try:
        return ZoneInfo(name) if name else None
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolFailed(f"unknown time zone {name!r}; use an IANA name such as Asia/Shanghai") from None


def time_tool(default_timezone: str) -> Tool:
    async def handler(arguments: dict, call: ToolCallContext) -> dict:
        name = arguments.get("timezone") or default_timezone
        zone = zone_named(name)
        now = datetime.now(zone) if zone else datetime.now().astimezone()
        return {"iso": now.isoformat(timespec="seconds"), "date": now.strftime("%Y-%m-%d"),
                "time": now.strftime("%H:%M"), "weekday": WEEKDAYS_EN[now.weekday()],
                "timezone": name or str(now.tzinfo)}

    def summarize(result: dict, language: str) -> str:
        year, month, day = result["date"].split("-")
        weekday = WEEKDAYS_EN.index(result["weekday"])
        if language == "zh":
            return (f"现在是 {int(year)}年{int(month)}月{int(day)}日 {WEEKDAYS_ZH[weekday]}，"
                    f"{result['time']}（{result['timezone']}）。")
        return f"It is {result['time']} on {result['weekday']}, {result['date']} ({result['timezone']})."

    def parse_arguments(text: str) -> dict:
        match = re.search(r"\b([A-Z][A-Za-z_]+/[A-Z][A-Za-z_]+)\b", text)
        return {"timezone": match.group(1)} if match else {}

    return Tool(
        name="get_current_time",
        description="The current date, time and weekday, in the assistant's time zone or a given IANA time zone.",
        parameters={"type": "object", "properties": {"timezone": {
            "type": "string", "description": "IANA time zone such as Europe/Paris; the assistant's own when omitted"}},
            "required": []},
        handler=handler, summarize=summarize, parse_arguments=parse_arguments, owner="ai_core",
        topic={"en": "Time and date", "zh": "时间和日期"},
        help={"en": ["what time is it", "what day is it today"], "zh": ["现在几点", "今天星期几"]},
        progress={"en": "Checking the time…", "zh": "正在看时间…"},
        examples={"en": ["what time is it", "what is the time", "tell me the time", "current time",
                         "what day is it today", "what is the date today", "today's date", "what is today"],
                  "zh": ["现在几点", "几点了", "现在什么时间", "现在的时间", "今天几号", "今天星期几",
                         "今天是几月几号", "今天的日期", "今天是什么日子"]})


_SEARCH_PREFIXES = [
    r"search (?:my |our )?(?:past )?(?:messages|chats?|conversations?|history)(?: for| about)?",
    r"find (?:my |our )?(?:past )?(?:messages|chats?|conversations?)(?: about| with| for)?",
    r"what did i (?:say|tell you|write) about", r"did i (?:ever )?(?:mention|say)",
    r"搜索(?:一下)?(?:我的)?(?:历史)?(?:消息|聊天记录|记录)?(?:里|中)?(?:的|关于)?",
    r"查找(?:一下)?(?:我的)?(?:历史)?(?:消息|聊天记录|记录)?(?:里|中)?(?:的|关于)?",
    r"我(?:之前|以前)?(?:说过|提到过)(?:什么)?(?:关于)?",
]


def _search_query(text: str) -> dict:
    quoted = re.search(r"[\"“'‘「](.+?)[\"”'’」]", text)
    if quoted:
        return {"query": quoted.group(1).strip()}
    for prefix in _SEARCH_PREFIXES:
        match = re.search(prefix, text, flags=re.IGNORECASE)
        if match:
            rest = text[match.end():].strip(" ?？。.!！:：,，的")
            if rest:
                return {"query": rest}
    return {}


# The gateway's search finds both sides of a conversation; the tool is about what the person
# said, so it reads one page this large and keeps their own messages.
SEARCH_PAGE = 100


def search_messages_tool(default_timezone: str, max_results: int = 20) -> Tool:
    async def handler(arguments: dict, call: ToolCallContext) -> dict:
        query = str(arguments.get("query") or "").strip()[:200]
        if not query:
            raise ToolFailed("query is empty")
        limit = max(1, min(int(arguments.get("limit") or 5), max_results))
        await call.progress(0.5, f"正在搜索“{query}”…" if call.language == "zh" else f"Searching for “{query}”…")
        answer = await call.ask_gateway("GET", "/api/v1/messages/search",
                                        params={"q": query, "limit": SEARCH_PAGE})
        zone = zone_named(default_timezone)
        found = [{"session_id": item["session_id"], "role": item["role"], "content": item["content"],
                  "created_at": datetime.fromtimestamp(item["created_at"] / 1000).astimezone(zone)
                  .isoformat(timespec="seconds")}
                 for item in answer["results"] if item["role"] == "user"][:limit]
        return {"query": query, "count": len(found), "messages": found}

    def summarize(result: dict, language: str) -> str:
        if not result["messages"]:
            return (f"没有找到包含「{result['query']}」的消息。" if language == "zh"
                    else f"I found no message of yours containing “{result['query']}”.")
        lines = [f"- {item['created_at'][:16].replace('T', ' ')}: {item['content']}"
                 for item in result["messages"]]
        head = (f"找到 {result['count']} 条包含「{result['query']}」的消息：" if language == "zh"
                else f"I found {result['count']} message(s) of yours containing “{result['query']}”:")
        return "\n".join([head, *lines])

    return Tool(
        name="search_messages",
        description="Search the current user's own past messages to the assistant for words; newest first.",
        parameters={"type": "object", "properties": {
            "query": {"type": "string", "description": "words to look for"},
            "limit": {"type": "integer", "minimum": 1, "maximum": max_results, "default": 5}},
            "required": ["query"]},
        handler=handler, summarize=summarize, parse_arguments=_search_query, owner="ai_core",
        topic={"en": "Your past messages", "zh": "聊天记录"},
        help={"en": ["search my messages for pizza", "what did I say about the trip"],
              "zh": ["搜索我的消息：披萨", "我之前说过什么关于旅行"]},
        progress={"en": ["Searching your messages for “{query}”…", "Searching your messages…"],
                  "zh": ["正在搜索你的消息：“{query}”…", "正在搜索你的消息…"]},
        examples={"en": ["search my messages for", "find my messages about", "what did i say about"],
                  "zh": ["搜索我的消息", "查找聊天记录", "我之前说过什么关于"]})


def register_builtin_tools(registry: ToolRegistry, default_timezone: str) -> None:
    registry.register(time_tool(default_timezone))
    registry.register(search_messages_tool(default_timezone))
