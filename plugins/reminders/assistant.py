"""The assistant's reminder tools, a plugin of the ai-core service (`reminder_tools`):
`create_reminder`, `list_reminders`, `complete_reminder` and `cancel_reminder`.

Reminders live in the gateway, so each tool asks the gateway's own API (`/api/v1/reminders`)
with the service credential acting for the person of the turn. A time said in words ("tomorrow at
9am", "明天早上九点", "in 20 minutes") is read by `phrases.resolve_when` on the clocks of the
person's time zone (their profile's, `GET /api/v1/profile`) at the service's clock, so that the
reminder is set for the instant the person meant and the answer names it: "I'll remind you to call
mom tomorrow (Wed 25 Nov) at 09:00." / "好的，明天（11月25日）09:00 提醒你给妈妈打电话。"

The offline agent understands the same requests in English and Chinese (`EXAMPLES`), with
relative and absolute times and repeats."""
from __future__ import annotations

import asyncio
import re
from datetime import datetime, timedelta
from typing import Any, Awaitable, Callable
from zoneinfo import ZoneInfo

from gateway.plugins import Plugin, Registrar
from gateway.schedule import REPEAT_KINDS
from gateway.text import language_of
from plugins.ai_core.contract import TOOLS, GatewayFailed, ToolCall, ToolFailed, Tools, gateway_offers

from .phrases import NotUnderstood, read_request, resolve_when

REMINDERS_PATH = "/api/v1/reminders"
PROFILE_PATH = "/api/v1/profile"
FALLBACK_ZONE = "UTC"
LISTED = 10  # reminders the offline agent lists

WEEKDAYS_EN = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
WEEKDAYS_LONG_EN = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
WEEKDAYS_ZH = ["周一", "周二", "周三", "周四", "周五", "周六", "周日"]
MONTHS_EN = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

# ---------------------------------------------------------------- create

CREATE_DESCRIPTION = (
    "Set a reminder for the user: at the time, every device of theirs shows it. Give the time either in "
    "`when`, the user's own words ('tomorrow at 9am', 'in 20 minutes', '明天早上九点'), or as `remind_at` "
    "(ISO 8601; without an offset it is read in the user's time zone). Repeats: daily, weekly, monthly, "
    "weekdays (Monday to Friday), or cron with `repeat_rule`.")
CREATE_PARAMETERS = {"type": "object", "properties": {
    "title": {"type": "string", "description": "what to remind of, short: 'call mom', '给妈妈打电话'"},
    "when": {"type": "string", "description": "when, in the user's words: 'tomorrow at 9am', 'in 20 minutes'"},
    "remind_at": {"type": "string", "description": "when, as ISO 8601 (instead of `when`)"},
    "repeat_type": {"type": "string", "enum": list(REPEAT_KINDS), "default": "none"},
    "repeat_rule": {"type": "string", "description": "five-field cron expression, for repeat_type cron"},
    "description": {"type": "string", "description": "more detail shown with the reminder"}},
    "required": ["title"]}

# Specific to setting a reminder, and longer than a device command's phrases, so that "remind me
# to turn on the oven at 6" is a reminder and not a switch.
CREATE_EXAMPLES = {
    "en": ["remind me to", "remind me in", "remind me at", "remind me tomorrow", "set a reminder",
           "set a reminder for", "create a reminder", "add a reminder", "in minutes remind me to",
           "every day remind me to", "every weekday remind me to", "remind me to turn on the",
           "remind me to turn off the", "remind me to switch on the", "remind me to switch off the",
           "remind me to turn the", "remind me to set the to", "remind me to open the", "remind me to close the",
           "remind me to lock the", "remind me to unlock the"],
    "zh": ["提醒我", "设个提醒", "设置提醒", "定个提醒", "加个提醒", "分钟后提醒我", "点提醒我", "提醒我点",
           "每天提醒我", "明天提醒我", "提醒我打开", "提醒我关掉", "提醒我关闭", "提醒我关上", "提醒我把调到度",
           "提醒我把打开", "提醒我把关掉", "提醒我把关上", "提醒我锁门"],
}


def parse_create(text: str) -> dict:
    """The offline agent's reading: {"title", "when", "repeat_type"} as said."""
    return read_request(text).arguments()


async def _zone_and_now(call: ToolCall) -> tuple[ZoneInfo, datetime]:
    """The person's zone (their profile's) and the time now (the service's clock)."""
    try:
        profile = await call.ask_gateway("GET", PROFILE_PATH)
        zone = ZoneInfo(str(profile.get("timezone") or FALLBACK_ZONE))
    except GatewayFailed as failure:
        if failure.peer_status != 404:  # someone with no profile (a webhook's user): the gateway's UTC
            raise
        zone = ZoneInfo(FALLBACK_ZONE)
    return zone, call.context.clock.now()


async def create_reminder(arguments: dict, call: ToolCall) -> dict:
    title = " ".join(str(arguments.get("title") or "").split())[:200]
    if not title:
        raise ToolFailed("title is empty: say what to remind of")
    repeat_type = str(arguments.get("repeat_type") or "none")
    if repeat_type not in REPEAT_KINDS:
        raise ToolFailed(f"repeat_type must be one of {', '.join(REPEAT_KINDS)}")
    when = " ".join(str(arguments.get("when") or "").split())
    remind_at = str(arguments.get("remind_at") or "").strip()
    zone, now = await _zone_and_now(call)
    if not remind_at:
        if not when:
            return {"status": "need_time", "title": title, "message": "Ask the user when to remind them."}
        loop = asyncio.get_running_loop()
        try:  # dateparser loads its language data on first use: off the event loop
            instant = await loop.run_in_executor(None, resolve_when, when, now, zone, repeat_type)
        except NotUnderstood:
            return {"status": "need_time", "title": title, "when": when,
                    "message": f"The time {when!r} could not be read; ask the user for a clearer one."}
        if instant < now - timedelta(minutes=1):
            return {"status": "in_the_past", "title": title, "when": when,
                    "remind_at": instant.astimezone(zone).isoformat(),
                    "message": "That time has already passed; ask the user for a later one."}
        remind_at = instant.astimezone(zone).isoformat()
    body: dict[str, Any] = {"title": title, "remind_at": remind_at, "repeat_type": repeat_type,
                            "description": str(arguments.get("description") or "")[:2000],
                            "session_id": call.session_id or "", "timezone": zone.key}
    if repeat_type == "cron":
        body["repeat_rule"] = str(arguments.get("repeat_rule") or "")
    answer = await call.ask_gateway("POST", REMINDERS_PATH, body=body)
    reminder = answer["reminder"]
    local = datetime.fromisoformat(reminder["remind_at"]).astimezone(ZoneInfo(reminder["timezone"]))
    return {"status": "created", "reminder": reminder, "local_time": local.isoformat(),
            "timezone": reminder["timezone"], "days_from_today": (local.date() - now.astimezone(zone).date()).days,
            "message": "Tell the user the reminder is set, naming the day and time."}


def _day_en(local: datetime, days: int) -> str:
    label = f"{WEEKDAYS_EN[local.weekday()]} {local.day} {MONTHS_EN[local.month - 1]}"
    if days == 0:
        return "today"
    if days == 1:
        return f"tomorrow ({label})"
    return f"on {label}"


def _day_zh(local: datetime, days: int) -> str:
    label = f"{local.month}月{local.day}日"
    if days == 0:
        return "今天"
    if days == 1:
        return f"明天（{label}）"
    if days == 2:
        return f"后天（{label}）"
    return f"{label}（{WEEKDAYS_ZH[local.weekday()]}）"


def _ordinal(day: int) -> str:
    return f"{day}{'th' if 10 <= day % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(day % 10, 'th')}"


def summarize_create(result: dict, language: str) -> str:
    status = result.get("status")
    title = result.get("title") or result.get("reminder", {}).get("title", "")
    if status == "need_time":
        return (f"好的，什么时候提醒你{title}？例如“明天早上九点”或“二十分钟后”。" if language == "zh"
                else f"When should I remind you to {title}? For example “tomorrow at 9am” or “in 20 minutes”.")
    if status == "in_the_past":
        return ("这个时间已经过去了，换一个以后的时间吧。" if language == "zh"
                else "That time has already passed; tell me a later one.")
    reminder = result["reminder"]
    local = datetime.fromisoformat(result["local_time"])
    days = int(result["days_from_today"])
    clock = local.strftime("%H:%M")
    repeat = reminder["repeat_type"]
    if language == "zh":
        day = _day_zh(local, days)
        if repeat == "none":
            return f"好的，{day}{clock} 提醒你{title}。"
        every = {"daily": "每天", "weekdays": "每个工作日", "weekly": f"每{WEEKDAYS_ZH[local.weekday()]}",
                 "monthly": f"每月{local.day}日", "cron": f"按“{reminder['repeat_rule']}”"}[repeat]
        return f"好的，从{day}起，{every} {clock} 提醒你{title}。"
    day = _day_en(local, days)
    if repeat == "none":
        return f"I'll remind you to {title} {day} at {clock}."
    every = {"daily": "every day", "weekdays": "every weekday", "weekly": f"every {WEEKDAYS_LONG_EN[local.weekday()]}",
             "monthly": f"every month on the {_ordinal(local.day)}",
             "cron": f"on the schedule “{reminder['repeat_rule']}”"}[repeat]
    starting = "today" if days == 0 else day.removeprefix("on ")
    return f"I'll remind you to {title} {every} at {clock}, starting {starting}."


# ---------------------------------------------------------------- list

LIST_DESCRIPTION = "The user's reminders, soonest first: pending ones unless a status is given."
LIST_PARAMETERS = {"type": "object", "properties": {
    "status": {"type": "string", "enum": ["pending", "completed", "cancelled"], "default": "pending"},
    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 20}}}
LIST_EXAMPLES = {
    "en": ["what are my reminders", "list my reminders", "show my reminders", "show me my reminders",
           "what reminders do i have", "do i have any reminders", "my reminders"],
    "zh": ["我有哪些提醒", "我有什么提醒", "我的提醒", "查看提醒", "查看我的提醒", "列出提醒", "看看我的提醒", "有哪些提醒"],
}


def parse_list(text: str) -> dict:
    lowered = text.lower()
    if re.search(r"\b(?:completed|done|finished)\b|已完成|完成了的", lowered):
        return {"status": "completed"}
    if re.search(r"\bcancel+ed\b|已取消|取消了的", lowered):
        return {"status": "cancelled"}
    return {}


async def list_reminders(arguments: dict, call: ToolCall) -> dict:
    status = str(arguments.get("status") or "pending")
    if status not in ("pending", "completed", "cancelled"):
        raise ToolFailed("status must be pending, completed or cancelled")
    try:
        limit = max(1, min(int(arguments.get("limit") or 20), 50))
    except (TypeError, ValueError):
        raise ToolFailed("limit must be a whole number") from None
    answer = await call.ask_gateway("GET", REMINDERS_PATH, params={"status": status, "limit": limit})
    reminders = [{"id": r["id"], "title": r["title"], "remind_at": r["remind_at"], "repeat_type": r["repeat_type"],
                  "status": r["status"], "notified": r["notified"]} for r in answer["reminders"]]
    return {"status": status, "count": len(reminders), "total": answer["total"], "reminders": reminders}


def _when_en(reminder: dict) -> str:
    local = datetime.fromisoformat(reminder["remind_at"])
    text = f"{WEEKDAYS_EN[local.weekday()]} {local.day} {MONTHS_EN[local.month - 1]} {local:%H:%M}"
    repeat = {"none": "", "daily": ", every day", "weekdays": ", every weekday", "weekly": ", every week",
              "monthly": ", every month", "cron": ", repeating"}[reminder["repeat_type"]]
    return text + repeat


def _when_zh(reminder: dict) -> str:
    local = datetime.fromisoformat(reminder["remind_at"])
    text = f"{local.month}月{local.day}日（{WEEKDAYS_ZH[local.weekday()]}）{local:%H:%M}"
    repeat = {"none": "", "daily": "，每天", "weekdays": "，每个工作日", "weekly": "，每周", "monthly": "，每月",
              "cron": "，重复"}[reminder["repeat_type"]]
    return text + repeat


def summarize_list(result: dict, language: str) -> str:
    reminders = result["reminders"][:LISTED]
    status = result["status"]
    if language == "zh":
        kind = {"pending": "待办", "completed": "已完成的", "cancelled": "已取消的"}[status]
        if not reminders:
            return f"你现在没有{kind}提醒。"
        lines = [f"你有 {result['total']} 个{kind}提醒："]
        lines += [f"{index}. {r['title']} —— {_when_zh(r)}" for index, r in enumerate(reminders, 1)]
        return "\n".join(lines)
    kind = {"pending": "pending", "completed": "completed", "cancelled": "cancelled"}[status]
    if not reminders:
        return f"You have no {kind} reminders."
    lines = [f"You have {result['total']} {kind} reminder{'s' if result['total'] != 1 else ''}:"]
    lines += [f"{index}. {r['title']} — {_when_en(r)}" for index, r in enumerate(reminders, 1)]
    return "\n".join(lines)


# ---------------------------------------------------------------- complete and cancel

WHICH_PARAMETERS = {"type": "object", "properties": {
    "reminder": {"type": "string", "description": "the reminder's id, or words of its title: 'call mom'"}},
    "required": ["reminder"]}
CANCEL_EXAMPLES = {
    "en": ["cancel the reminder", "cancel my reminder", "cancel the reminder to", "cancel my reminder to",
           "delete the reminder", "remove the reminder", "don't remind me to", "stop reminding me to"],
    "zh": ["取消提醒", "取消的提醒", "取消我的提醒", "删除提醒", "删掉提醒", "不用提醒我了", "不要提醒我", "别提醒我"],
}
COMPLETE_EXAMPLES = {
    "en": ["mark the reminder as done", "mark the reminder done", "mark my reminder as done", "complete the reminder",
           "complete my reminder", "the reminder is done", "i did the reminder"],
    "zh": ["完成提醒", "提醒完成了", "的提醒已完成", "把提醒标记为完成", "提醒标记为已完成", "的提醒完成了"],
}
_WHICH_EN = re.compile(r"\b(?:please\s+)?(?:cancel|delete|remove|complete|mark|stop\s+reminding\s+me|don'?t\s+remind\s+me|"
                       r"do\s+not\s+remind\s+me)\b(?:\s+(?:my|the|that))?(?:\s+reminders?)?(?:\s+(?:to|about|for|of))?",
                       re.I)
_WHICH_EN_TAIL = re.compile(r"\s*(?:as\s+)?(?:done|completed|complete|finished)\s*$|\s+reminders?\s*$", re.I)
_WHICH_ZH = re.compile(r"请|帮我|把|取消|删除|删掉|不用|不要|别|再|提醒我|提醒|的|标记为|标记成|已经?|完成|做完|了|吧|我的|一下")


def parse_which(text: str) -> dict:
    if language_of(text) == "zh":
        words = _WHICH_ZH.sub("", text).strip(" ，,。.!！?？")
    else:
        words = _WHICH_EN_TAIL.sub("", _WHICH_EN.sub(" ", text, count=1)).strip(" ,.!?")
        words = re.sub(r"^(?:to|about|for|of)\s+", "", words, flags=re.I)
    return {"reminder": words} if words else {}


async def _find(call: ToolCall, which: str) -> dict:
    answer = await call.ask_gateway("GET", REMINDERS_PATH, params={"status": "pending", "limit": 200})
    pending = answer["reminders"]
    by_id = [r for r in pending if r["id"] == which.strip().lower()]
    if by_id:
        return {"found": by_id[0]}
    wanted = which.casefold().strip()
    matches = [r for r in pending if wanted and (wanted in r["title"].casefold() or r["title"].casefold() in wanted)]
    if not matches:
        words = [word for word in re.split(r"\W+", wanted) if len(word) > 2]
        matches = [r for r in pending if words and all(word in r["title"].casefold() for word in words)]
    if len(matches) == 1:
        return {"found": matches[0]}
    return {"candidates": matches[:LISTED], "pending": len(pending)}


def _which_tool(status: str) -> Callable[[dict, ToolCall], Awaitable[dict]]:
    async def handler(arguments: dict, call: ToolCall) -> dict:
        which = " ".join(str(arguments.get("reminder") or "").split())
        if not which:
            raise ToolFailed("say which reminder: its id or words of its title")
        found = await _find(call, which)
        if "found" not in found:
            state = "ambiguous" if found["candidates"] else "not_found"
            return {"status": state, "reminder": which,
                    "candidates": [{"id": r["id"], "title": r["title"], "remind_at": r["remind_at"]}
                                   for r in found["candidates"]]}
        reminder = found["found"]
        answer = await call.ask_gateway("PUT", f"{REMINDERS_PATH}/{reminder['id']}", body={"status": status})
        return {"status": status, "reminder": which, "updated": answer["reminder"]}
    return handler


def _summarize_which(done_en: str, done_zh: str) -> Callable[[dict, str], str]:
    def summarize(result: dict, language: str) -> str:
        state = result["status"]
        if state == "not_found":
            return (f"没有找到与“{result['reminder']}”相符的待办提醒。" if language == "zh"
                    else f"I found no pending reminder matching “{result['reminder']}”.")
        if state == "ambiguous":
            titles = ("、".join(f"“{c['title']}”" for c in result["candidates"]) if language == "zh"
                      else ", ".join(f"“{c['title']}”" for c in result["candidates"]))
            return (f"有几个提醒都相符：{titles}。是哪一个？" if language == "zh"
                    else f"Several reminders match: {titles}. Which one?")
        updated = result["updated"]
        if language == "zh":
            return f"好的，已{done_zh}“{updated['title']}”（{_when_zh(updated)}）。"
        return f"Done: the reminder “{updated['title']}” ({_when_en(updated)}) is {done_en}."
    return summarize


# What a person reads about these tools (help and progress, docs/ai-core.md "What a person reads").
TOPIC = {"en": "Reminders", "zh": "提醒"}


async def reminders_offered(call: ToolCall) -> bool:
    return await gateway_offers(call, REMINDERS_PATH, params={"limit": 1})


def add_reminder_tools(tools: Tools, owner: str = "reminder_tools") -> None:
    tools.add("create_reminder", CREATE_DESCRIPTION, CREATE_PARAMETERS, create_reminder, owner=owner,
              examples=CREATE_EXAMPLES, parse_arguments=parse_create, summarize=summarize_create,
              topic=TOPIC, available=reminders_offered,
              help={"en": ["remind me to call mom tomorrow at 9am", "every weekday remind me to stretch at 3pm"],
                    "zh": ["明天早上九点提醒我给妈妈打电话", "每天晚上十点提醒我吃药"]},
              progress={"en": ["Setting a reminder: {title}…", "Setting a reminder…"],
                        "zh": ["正在设置提醒：{title}…", "正在设置提醒…"]})
    tools.add("list_reminders", LIST_DESCRIPTION, LIST_PARAMETERS, list_reminders, owner=owner,
              examples=LIST_EXAMPLES, parse_arguments=parse_list, summarize=summarize_list,
              topic=TOPIC, available=reminders_offered,
              help={"en": ["what are my reminders"], "zh": ["我有哪些提醒"]},
              progress={"en": "Looking at your reminders…", "zh": "正在查看你的提醒…"})
    tools.add("complete_reminder", "Mark one of the user's pending reminders as done.", WHICH_PARAMETERS,
              _which_tool("completed"), owner=owner, examples=COMPLETE_EXAMPLES, parse_arguments=parse_which,
              summarize=_summarize_which("completed", "完成提醒"), topic=TOPIC, available=reminders_offered,
              progress={"en": ["Marking “{reminder}” as done…", "Marking the reminder as done…"],
                        "zh": ["正在把“{reminder}”标记为完成…", "正在把提醒标记为完成…"]})
    tools.add("cancel_reminder", "Cancel one of the user's pending reminders.", WHICH_PARAMETERS,
              _which_tool("cancelled"), owner=owner, examples=CANCEL_EXAMPLES, parse_arguments=parse_which,
              summarize=_summarize_which("cancelled", "取消提醒"), topic=TOPIC, available=reminders_offered,
              help={"en": ["cancel the reminder to call mom"], "zh": ["取消给妈妈打电话的提醒"]},
              progress={"en": ["Cancelling “{reminder}”…", "Cancelling the reminder…"],
                        "zh": ["正在取消“{reminder}”…", "正在取消提醒…"]})


class ReminderToolsPlugin(Plugin):
    """`reminder_tools`, in the ai-core service."""
    name = "reminder_tools"
    depends = ("ai_core",)
    description = "reminder tools: the assistant sets, lists, completes and cancels the person's reminders"

    def setup(self, registrar: Registrar) -> None:
        add_reminder_tools(registrar.context.contracts.require(TOOLS), owner=self.name)


tools_plugin = ReminderToolsPlugin()
