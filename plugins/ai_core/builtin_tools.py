"""The tools whose data the AI core holds today: the current time and date, and a search of the
user's own past messages. Later plugins add device, reminder, memory and knowledge tools."""
from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from . import store
from .tools import Tool, ToolCallContext, ToolFailed, ToolRegistry

WEEKDAYS_EN = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
WEEKDAYS_ZH = ["星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日"]


def time_tool(default_timezone: str) -> Tool:
    async def handler(arguments: dict, call: ToolCallContext) -> dict:
        name = arguments.get("timezone") or default_timezone
        try:
            zone = ZoneInfo(name) if name else None
        except (ZoneInfoNotFoundError, ValueError):
            raise ToolFailed(f"unknown time zone {name!r}; use an IANA name such as Asia/Shanghai") from None
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


def search_messages_tool(max_results: int = 20) -> Tool:
    async def handler(arguments: dict, call: ToolCallContext) -> dict:
        query = str(arguments.get("query") or "").strip()
        if not query:
            raise ToolFailed("query is empty")
        limit = max(1, min(int(arguments.get("limit") or 5), max_results))
        await call.progress(0.5, f"searching for {query!r}")
        found = await store.search_turns(call.context.db, call.user_id, query, limit)
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
        examples={"en": ["search my messages for", "find my messages about", "what did i say about"],
                  "zh": ["搜索我的消息", "查找聊天记录", "我之前说过什么关于"]})


def register_builtin_tools(registry: ToolRegistry, default_timezone: str) -> None:
    registry.register(time_tool(default_timezone))
    registry.register(search_messages_tool())
