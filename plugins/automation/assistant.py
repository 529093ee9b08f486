"""The assistant's door to the person's automations: the `list_automations` and `run_scene`
tools, a plugin of the ai-core service (`automation_tools`). Rules and scenes live in the
gateway, so the tools ask the gateway's own endpoints (`GET /api/v1/automation/rules`,
`/scenes`, `POST /scenes/{id}/execute`) with the service credential acting for the person of
the turn. The offline agent answers "list my automations" / "我有哪些自动化" and "run the movie
night scene" / "执行回家模式" with the same calls. Their phrases always name automations, a
scene or a mode, so "turn on the light" stays the devices' and "remind me…" the reminders'."""
from __future__ import annotations

import re
from datetime import datetime
from urllib.parse import urlsplit

from gateway.plugins import Plugin, Registrar
from gateway.schedule import zone_named
from plugins.ai_core.contract import TOOLS, Effect, GatewayFailed, ToolCall, ToolFailed, Tools, gateway_offers

RULES_PATH = "/api/v1/automation/rules"
PROFILE_PATH = "/api/v1/profile"
SCENES_PATH = "/api/v1/automation/scenes"
SHOWN = 20   # what the offline agent lists of each

LIST_DESCRIPTION = ("List the user's automation rules (what triggers each: a time, a device's state, a named "
                    "event or by hand; whether it is enabled; when it next runs, in UTC and in the user's "
                    "time zone) and their scenes.")
LIST_PARAMETERS = {"type": "object", "properties": {}}
RUN_DESCRIPTION = ("Run one of the user's scenes now, by its name (e.g. “movie night”, “回家模式”): its actions "
                   "and its rules' actions run at once; returns what each did.")
RUN_PARAMETERS = {"type": "object", "properties": {
    "name": {"type": "string", "description": "the scene's name, as the user says it"}}, "required": ["name"]}

LIST_EXAMPLES = {
    "en": ["list my automations", "show my automations", "what automations do i have", "list my automation rules",
           "show my automation rules", "which automations are set up", "list my scenes"],
    "zh": ["我有哪些自动化", "列出我的自动化", "查看我的自动化", "自动化规则有哪些", "我的自动化规则", "我有哪些场景"],
}
RUN_EXAMPLES = {
    "en": ["run the scene", "run scene", "activate the scene", "start the scene", "execute the scene",
           "run the scene called", "run my scene"],
    "zh": ["执行模式", "执行场景", "启动场景", "运行场景", "开启场景", "启动模式", "开启模式", "运行模式"],
}

_NAME_EN = [
    re.compile(r"\b(?:run|activate|start|execute|trigger|play)\s+(?:the\s+|my\s+)?scene\s+(?:called\s+|named\s+)?"
               r"(?P<name>.+)$", re.IGNORECASE),
    re.compile(r"\b(?:run|activate|start|execute|trigger|play)\s+(?:the\s+|my\s+)?(?P<name>.+?)\s+scene\b",
               re.IGNORECASE),
]
_NAME_ZH = [
    re.compile(r"(?:执行|启动|运行|开启|激活)(?:一下)?(?:场景|模式)[:：\s]*(?P<name>.+)$"),
    re.compile(r"(?:执行|启动|运行|开启|激活)(?:一下)?(?P<name>.+?(?:模式|场景))"),
]
_TRIM = " \t\n?？。.!！:：,，;；、\"'“”「」"
_SUFFIXES = (" scene", " mode", "场景", "模式")


# Words that put the scene off (a time, a repeat, a condition): `run_scene` runs it now, so such a
# request is answered with how to schedule it instead ("every day at 7 run the morning scene" must
# not run it at once).
_DEFERRED = re.compile(
    r"\bremind|\btomorrow\b|\btonight\b|\bevery\b|\bwhen(?:ever)?\b|\bif\b|\blater\b|\bafter\b|"
    r"\bin \d+ (?:seconds?|minutes?|hours?|days?)\b|\bat \d{1,2}(?::\d\d|\s*(?:am|pm|o'clock)\b|\b)|"
    r"提醒|明天|今晚|每天|每周|每逢|以后|之后|分钟后|小时后|\d+点|[一二三四五六七八九十]+点|如果|的时候|当.{1,30}时",
    re.IGNORECASE)


# What a person reads about these tools (help and progress, docs/ai-core.md "What a person reads").
TOPIC = {"en": "Scenes and automations", "zh": "场景和自动化"}


async def automation_offered(call: ToolCall) -> bool:
    return await gateway_offers(call, SCENES_PATH)

def parse_run_arguments(text: str) -> dict:
    """"run the movie night scene" → {"name": "movie night"}; "执行回家模式" → {"name": "回家模式"};
    with words that put it off, `later` holds them (the tool then runs nothing)."""
    arguments: dict = {}
    quoted = re.search(r"[\"“「『](.+?)[\"”」』]", text)
    if quoted and quoted.group(1).strip():
        arguments["name"] = quoted.group(1).strip()
    else:
        for pattern in _NAME_EN + _NAME_ZH:
            match = pattern.search(text.strip())
            if match and match.group("name").strip(_TRIM):
                arguments["name"] = match.group("name").strip(_TRIM)
                break
    later = _DEFERRED.search(text)
    if later and arguments:
        arguments["later"] = later.group(0).strip()
        arguments["name"] = _DEFERRED.split(arguments["name"])[0].strip(_TRIM) or arguments["name"]
    return arguments


def _key(name: str) -> str:
    name = " ".join(name.casefold().split())
    for suffix in _SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[:-len(suffix)].strip()
    return name.removeprefix("the ").strip()


def find_scene(scenes: list[dict], name: str) -> dict | None:
    """The scene the person named: exactly (case aside), else without "scene"/"模式", else the
    one whose name contains it, or is contained in it."""
    wanted = " ".join(name.casefold().split())
    for scene in scenes:
        if " ".join(scene["name"].casefold().split()) == wanted:
            return scene
    for scene in scenes:
        if _key(scene["name"]) == _key(name):
            return scene
    partial = [scene for scene in scenes if _key(name) and (_key(name) in _key(scene["name"])
                                                            or _key(scene["name"]) in _key(name))]
    return partial[0] if len(partial) == 1 else None


async def person_zone(call: ToolCall) -> str:
    """The person's time zone from their profile; UTC when the gateway cannot say."""
    try:
        zone = (await call.ask_gateway("GET", PROFILE_PATH)).get("timezone")
        return str(zone) if zone and zone_named(str(zone)) else "UTC"
    except (GatewayFailed, ValueError):
        return "UTC"


def local_time(instant: str | None, zone: str) -> str | None:
    """`2026-11-25T23:00:00.000Z` in Asia/Shanghai → `2026-11-26 07:00`."""
    if not instant:
        return None
    moment = datetime.fromisoformat(instant.replace("Z", "+00:00"))
    return moment.astimezone(zone_named(zone)).strftime("%Y-%m-%d %H:%M")


async def list_automations(arguments: dict, call: ToolCall) -> dict:
    try:
        rules = (await call.ask_gateway("GET", RULES_PATH))["rules"]
        scenes = (await call.ask_gateway("GET", SCENES_PATH))["scenes"]
    except GatewayFailed as failure:
        if failure.status != 404:
            raise
        return {"status": "unavailable", "rules": [], "scenes": [],
                "message": "The gateway runs no automation feature."}
    zone = await person_zone(call) if any(rule["next_run_at"] for rule in rules) else "UTC"
    return {"status": "listed", "timezone": zone,
            "rules": [{"id": rule["id"], "name": rule["name"], "trigger_type": rule["trigger_type"],
                       "enabled": rule["enabled"], "next_run_at": rule["next_run_at"],
                       "next_run_local": local_time(rule["next_run_at"], zone),
                       "description": rule["description"]} for rule in rules],
            "scenes": [{"id": scene["id"], "name": scene["name"], "icon": scene["icon"],
                        "rule_count": len(scene["rule_ids"])} for scene in scenes]}


async def run_scene(arguments: dict, call: ToolCall) -> dict:
    name = " ".join(str(arguments.get("name") or "").split())
    if not name:
        raise ToolFailed("name is empty: say which scene to run")
    if arguments.get("later"):
        return {"status": "not_now", "name": name, "later": str(arguments["later"]),
                "message": "run_scene runs a scene now; to run it later or on a condition, the user creates "
                           "an automation rule whose action is the scene (POST /api/v1/automation/rules)."}
    try:
        scenes = (await call.ask_gateway("GET", SCENES_PATH))["scenes"]
    except GatewayFailed as failure:
        if failure.status != 404:
            raise
        return {"status": "unavailable", "name": name, "message": "The gateway runs no automation feature."}
    scene = find_scene(scenes, name)
    if scene is None:
        return {"status": "not_found", "name": name, "scenes": [s["name"] for s in scenes],
                "message": f"The user has no scene named {name!r}."}
    await call.progress(0.3, f"正在启动场景“{scene['name']}”…" if call.language == "zh"
                        else f"Starting the scene “{scene['name']}”…")
    answer = await call.ask_gateway("POST", f"{SCENES_PATH}/{scene['id']}/execute")
    return {"status": "ran", "name": name, "scene": {"id": scene["id"], "name": scene["name"]},
            "message": answer["message"], "results": answer["results"]}


async def run_scene_effects(arguments: dict, call: ToolCall) -> list[Effect]:
    """What running the scene would send out of the house: its `http` actions, and those of its
    rules and of the scenes it runs (`automation.http`, confirmed first by default — a model may
    be talked into running it). Its device actions are the person's own choice: not effects here."""
    name = " ".join(str(arguments.get("name") or "").split())
    if not name or arguments.get("later"):
        return []  # nothing runs
    try:
        scenes = (await call.ask_gateway("GET", SCENES_PATH))["scenes"]
    except GatewayFailed as failure:
        if failure.status == 404:
            return []
        raise
    scene = find_scene(scenes, name)
    if scene is None:
        return []
    by_id = {item["id"]: item for item in scenes}
    rules: dict[str, dict] | None = None
    hosts: list[str] = []
    waiting, seen = [scene], set()
    while waiting:
        current = waiting.pop()
        if current["id"] in seen:
            continue
        seen.add(current["id"])
        actions = list(current.get("actions") or [])
        if current.get("rule_ids"):
            if rules is None:
                rules = {rule["id"]: rule for rule in (await call.ask_gateway("GET", RULES_PATH))["rules"]}
            for rule_id in current["rule_ids"]:
                actions += (rules.get(rule_id) or {}).get("actions") or []
        for action in actions:
            if action.get("type") == "http":
                hosts.append(urlsplit(str(action.get("url") or "")).hostname or "?")
            elif action.get("type") == "scene" and action.get("scene_id") in by_id:
                waiting.append(by_id[action["scene_id"]])
    if not hosts:
        return []
    where = ", ".join(dict.fromkeys(hosts))
    return [Effect("automation.http", {
        "en": f"Run the scene “{scene['name']}”, which sends a web request to {where}",
        "zh": f"执行场景“{scene['name']}”，它会向 {where} 发送网络请求"})]


_TRIGGERS_ZH = {"time": "定时", "device_state": "设备状态", "event": "事件", "manual": "手动"}
_TRIGGERS_EN = {"time": "at set times", "device_state": "on a device's state", "event": "on an event",
                "manual": "by hand"}


def summarize_list(result: dict, language: str) -> str:
    rules, scenes = result["rules"], result["scenes"]
    if result["status"] == "unavailable":
        return "这里没有自动化功能。" if language == "zh" else "Automations are not available here."
    if language == "zh":
        if not rules and not scenes:
            return "你还没有任何自动化规则或场景。"
        lines = [f"你有 {len(rules)} 条自动化规则、{len(scenes)} 个场景："]
        lines += [f"- {rule['name']}（{_TRIGGERS_ZH.get(rule['trigger_type'], rule['trigger_type'])}"
                  f"{'，下次 ' + rule['next_run_local'] if rule.get('next_run_local') else ''}"
                  f"{'' if rule['enabled'] else '，已停用'}）" for rule in rules[:SHOWN]]
        lines += [f"- 场景：{scene['name']}" for scene in scenes[:SHOWN]]
        return "\n".join(lines)
    if not rules and not scenes:
        return "You have no automation rules or scenes yet."
    lines = [f"You have {len(rules)} automation rule{'s' if len(rules) != 1 else ''} and "
             f"{len(scenes)} scene{'s' if len(scenes) != 1 else ''}:"]
    lines += [f"- {rule['name']} ({_TRIGGERS_EN.get(rule['trigger_type'], rule['trigger_type'])}"
              f"{', next ' + rule['next_run_local'] if rule.get('next_run_local') else ''}"
              f"{'' if rule['enabled'] else ', disabled'})" for rule in rules[:SHOWN]]
    lines += [f"- scene: {scene['name']}" for scene in scenes[:SHOWN]]
    return "\n".join(lines)


def summarize_run(result: dict, language: str) -> str:
    status = result["status"]
    if status == "not_now":
        if language == "zh":
            return (f"我只能立即执行场景。要定时或在满足条件时执行「{result['name']}」，"
                    "请创建一条自动化规则（定时或设备状态触发，动作为该场景）。")
        return (f"I can only run a scene right now. To run “{result['name']}” at a set time or on a condition, "
                "create an automation rule (a time or device-state trigger) whose action is that scene.")
    if status == "unavailable":
        return "这里没有自动化功能。" if language == "zh" else "Automations are not available here."
    if status == "not_found":
        names = result["scenes"]
        if language == "zh":
            return f"没有找到名为「{result['name']}」的场景。" + (f"你的场景有：{'、'.join(names)}。" if names else "你还没有场景。")
        return (f"You have no scene called “{result['name']}”. "
                + (f"Your scenes: {', '.join(names)}." if names else "You have no scenes yet."))
    results = result["results"]
    succeeded = sum(1 for item in results if item["ok"])
    failures = [item.get("error", "") for item in results if not item["ok"]]
    name = result["scene"]["name"]
    if language == "zh":
        text = f"已执行场景「{name}」：{len(results)} 个动作，成功 {succeeded} 个。"
        return text + (f"失败：{'；'.join(failures)}" if failures else "")
    text = f"Ran the scene “{name}”: {succeeded} of {len(results)} action{'s' if len(results) != 1 else ''} succeeded."
    return text + (f" Failed: {'; '.join(failures)}" if failures else "")


def add_automation_tools(tools: Tools, owner: str = "automation_tools") -> None:
    tools.add("list_automations", LIST_DESCRIPTION, LIST_PARAMETERS, list_automations, owner=owner,
              examples=LIST_EXAMPLES, parse_arguments=lambda text: {}, summarize=summarize_list,
              topic=TOPIC, available=automation_offered,
              help={"en": ["list my automations"], "zh": ["我有哪些自动化"]},
              progress={"en": "Looking at your automations…", "zh": "正在查看你的自动化…"})
    tools.add("run_scene", RUN_DESCRIPTION, RUN_PARAMETERS, run_scene, owner=owner,
              examples=RUN_EXAMPLES, parse_arguments=parse_run_arguments, summarize=summarize_run,
              topic=TOPIC, available=automation_offered, effects=run_scene_effects,
              help={"en": ["run the movie night scene"], "zh": ["执行回家模式"]},
              progress={"en": ["Starting the scene “{name}”…", "Starting the scene…"],
                        "zh": ["正在启动场景“{name}”…", "正在启动场景…"]})


class AutomationToolsPlugin(Plugin):
    """`automation_tools`, in the ai-core service: adds `list_automations` and `run_scene`."""
    name = "automation_tools"
    depends = ("ai_core",)
    # Registered after these: the offline agent gives a tie to the tool registered first, so "remind
    # me to run the movie scene at 8" stays a reminder and a device phrase stays the devices'.
    optional_depends = ("reminder_tools", "device_tools")
    description = "the list_automations and run_scene tools: the assistant lists rules and runs scenes"

    def setup(self, registrar: Registrar) -> None:
        add_automation_tools(registrar.context.contracts.require(TOOLS), owner=self.name)


tools_plugin = AutomationToolsPlugin()
