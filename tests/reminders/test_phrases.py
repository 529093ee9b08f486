"""The offline agent's reading of reminder requests in English and Chinese, with a fixed clock:
what to be reminded of, the instant meant on the person's clocks, the repeat; and which tool the
agent picks among the others' phrases (a device command must not take "remind me to turn on…")."""
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from plugins.ai_core.agent import best_match
from plugins.ai_core.builtin_tools import register_builtin_tools
from plugins.ai_core.tools import ToolRegistry
from plugins.knowledge.assistant import add_search_knowledge
from plugins.memory.tools import FORGET_EXAMPLES, RECALL_EXAMPLES, REMEMBER_EXAMPLES
from plugins.reminders.assistant import add_reminder_tools, parse_create, parse_which, summarize_create
from plugins.reminders.phrases import NotUnderstood, read_request, resolve_when

SHANGHAI = ZoneInfo("Asia/Shanghai")
NEW_YORK = ZoneInfo("America/New_York")
NOW = datetime(2026, 11, 24, 14, 0, tzinfo=SHANGHAI)  # a Tuesday afternoon


def at(text, zone=SHANGHAI, now=NOW):
    words = read_request(text)
    instant = resolve_when(words.when, now, zone, words.repeat_type)
    return words, instant.astimezone(zone).replace(tzinfo=None)


@pytest.mark.parametrize("text, title, when, repeat", [
    ("remind me to call mom tomorrow at 9am", "call mom", datetime(2026, 11, 25, 9, 0), "none"),
    ("in 20 minutes remind me to take the pizza out", "take the pizza out", datetime(2026, 11, 24, 14, 20), "none"),
    ("every weekday at 7:30 remind me to take my pills", "take my pills", datetime(2026, 11, 25, 7, 30), "weekdays"),
    ("remind me to turn on the oven at 6", "turn on the oven", datetime(2026, 11, 24, 18, 0), "none"),
    ("提醒我明天早上九点给妈妈打电话", "给妈妈打电话", datetime(2026, 11, 25, 9, 0), "none"),
    ("二十分钟后提醒我关火", "关火", datetime(2026, 11, 24, 14, 20), "none"),
    ("每天早上七点提醒我吃药", "吃药", datetime(2026, 11, 25, 7, 0), "daily"),
    # More of each kind.
    ("Remind me at 5pm to call Bob", "call Bob", datetime(2026, 11, 24, 17, 0), "none"),
    ("remind me on Friday at 3pm to submit the report", "submit the report", datetime(2026, 11, 27, 15, 0), "none"),
    ("remind me tonight at 8 to water the plants", "water the plants", datetime(2026, 11, 24, 20, 0), "none"),
    ("remind me every monday at 9 to put out the bins", "put out the bins", datetime(2026, 11, 30, 9, 0), "weekly"),
    ("remind me in half an hour to check the oven", "check the oven", datetime(2026, 11, 24, 14, 30), "none"),
    ("remind me in two hours to call back", "call back", datetime(2026, 11, 24, 16, 0), "none"),
    ("remind me to pay rent on December 1st at 10am", "pay rent", datetime(2026, 12, 1, 10, 0), "none"),
    ("remind me every month on the 5th to pay the bills", "pay the bills", datetime(2026, 12, 5, 9, 0), "monthly"),
    ("remind me tomorrow morning to buy milk", "buy milk", datetime(2026, 11, 25, 9, 0), "none"),
    ("remind me to stretch at 7:30", "stretch", datetime(2026, 11, 25, 7, 30), "none"),
    ("下周五下午三点提醒我开会", "开会", datetime(2026, 12, 4, 15, 0), "none"),
    ("提醒我后天上午十点半去医院", "去医院", datetime(2026, 11, 26, 10, 30), "none"),
    ("今晚八点提醒我看球赛", "看球赛", datetime(2026, 11, 24, 20, 0), "none"),
    ("半小时后提醒我喝水", "喝水", datetime(2026, 11, 24, 14, 30), "none"),
    ("两小时后提醒我收衣服", "收衣服", datetime(2026, 11, 24, 16, 0), "none"),
    ("每周一早上9点提醒我交周报", "交周报", datetime(2026, 11, 30, 9, 0), "weekly"),
    ("每个工作日早上七点半提醒我起床", "起床", datetime(2026, 11, 25, 7, 30), "weekdays"),
    ("提醒我12月1日上午10点交房租", "交房租", datetime(2026, 12, 1, 10, 0), "none"),
    ("每月5号提醒我还信用卡", "还信用卡", datetime(2026, 12, 5, 9, 0), "monthly"),
    ("明天提醒我买牛奶", "买牛奶", datetime(2026, 11, 25, 9, 0), "none"),
    ("提醒我晚上十点把空调调到二十六度", "把空调调到二十六度", datetime(2026, 11, 24, 22, 0), "none"),
    ("提醒我中午十二点半吃饭", "吃饭", datetime(2026, 11, 25, 12, 30), "none"),
    ("remind me to call mom at 9 tomorrow", "call mom", datetime(2026, 11, 25, 9, 0), "none"),
    ("remind me to call mom at 9", "call mom", datetime(2026, 11, 24, 21, 0), "none"),
    ("set a reminder for 3pm to call the bank", "call the bank", datetime(2026, 11, 24, 15, 0), "none"),
    ("please remind me to take medicine every day at 8pm", "take medicine", datetime(2026, 11, 24, 20, 0), "daily"),
    ("remind me in 1 hour and 30 minutes to leave", "leave", datetime(2026, 11, 24, 15, 30), "none"),
    ("remind me at noon to eat", "eat", datetime(2026, 11, 25, 12, 0), "none"),
    ("一个半小时后提醒我出门", "出门", datetime(2026, 11, 24, 15, 30), "none"),
    ("明天上午提醒我开会", "开会", datetime(2026, 11, 25, 9, 0), "none"),
    ("晚上提醒我倒垃圾", "倒垃圾", datetime(2026, 11, 24, 20, 0), "none"),
    ("提醒我周五交报告", "交报告", datetime(2026, 11, 27, 9, 0), "none"),
    ("提醒我下午3:30开会", "开会", datetime(2026, 11, 24, 15, 30), "none"),
    ("提醒我明天下午两点半去接孩子", "去接孩子", datetime(2026, 11, 25, 14, 30), "none"),
    ("大后天早上八点提醒我交房租", "交房租", datetime(2026, 11, 27, 8, 0), "none"),
])
def test_phrases_resolve_to_the_instant_meant(text, title, when, repeat):
    words, local = at(text)
    assert (words.title, local, words.repeat_type) == (title, when, repeat)


def test_the_persons_zone_and_its_daylight_saving_change():
    # Said in New York on Saturday 7 March 2026, before the clocks go forward that night.
    saturday = datetime(2026, 3, 7, 20, 0, tzinfo=NEW_YORK)
    words, local = at("remind me to call mom tomorrow at 9am", NEW_YORK, saturday)
    assert local == datetime(2026, 3, 8, 9, 0)
    instant = resolve_when(words.when, saturday, NEW_YORK)
    assert instant.isoformat() == "2026-03-08T13:00:00+00:00"  # 09:00 EDT
    words, local = at("in 20 minutes remind me to take the pizza out", NEW_YORK,
                      datetime(2026, 3, 8, 1, 50, tzinfo=NEW_YORK))
    assert local == datetime(2026, 3, 8, 3, 10)  # 01:50 EST + 20 minutes is 03:10 EDT


def test_words_without_a_time():
    assert read_request("remind me to call mom").when == ""
    with pytest.raises(NotUnderstood):
        resolve_when("", NOW, SHANGHAI)
    with pytest.raises(NotUnderstood):
        resolve_when("at the weekend-ish", NOW, SHANGHAI)
    assert parse_create("remind me to call mom") == {"title": "call mom"}


def test_which_reminder_a_cancel_or_complete_names():
    assert parse_which("cancel the reminder to call mom") == {"reminder": "call mom"}
    assert parse_which("don't remind me to take the pizza out") == {"reminder": "take the pizza out"}
    assert parse_which("mark the reminder to call mom as done") == {"reminder": "call mom"}
    assert parse_which("取消给妈妈打电话的提醒") == {"reminder": "给妈妈打电话"}
    assert parse_which("把吃药的提醒标记为完成") == {"reminder": "吃药"}
    assert parse_which("cancel the reminder") == {}


def test_the_answer_names_the_time_understood():
    created = {"status": "created", "days_from_today": 1, "local_time": "2026-11-25T09:00:00+08:00",
               "reminder": {"title": "call mom", "repeat_type": "none", "repeat_rule": ""}}
    assert summarize_create(created, "en") == "I'll remind you to call mom tomorrow (Wed 25 Nov) at 09:00."
    created["reminder"]["title"] = "给妈妈打电话"
    assert summarize_create(created, "zh") == "好的，明天（11月25日）09:00 提醒你给妈妈打电话。"
    daily = {"status": "created", "days_from_today": 1, "local_time": "2026-11-25T07:00:00+08:00",
             "reminder": {"title": "吃药", "repeat_type": "daily", "repeat_rule": ""}}
    assert summarize_create(daily, "zh") == "好的，从明天（11月25日）起，每天 07:00 提醒你吃药。"
    weekdays = {"status": "created", "days_from_today": 1, "local_time": "2026-11-25T07:30:00+08:00",
                "reminder": {"title": "take my pills", "repeat_type": "weekdays", "repeat_rule": ""}}
    assert summarize_create(weekdays, "en") == ("I'll remind you to take my pills every weekday at 07:30, "
                                                "starting tomorrow (Wed 25 Nov).")
    soon = {"status": "created", "days_from_today": 0, "local_time": "2026-11-24T14:20:00+08:00",
            "reminder": {"title": "关火", "repeat_type": "none", "repeat_rule": ""}}
    assert summarize_create(soon, "zh") == "好的，今天14:20 提醒你关火。"


# The devices helper's command phrases (plugins/iot/assistant.py, OPERATE_EXAMPLES), as they are
# being written: a reminder that mentions a device must still be a reminder.
DEVICE_EXAMPLES = {
    "en": ["turn on the light", "turn off the light", "turn on light", "switch on the light", "switch off the light",
           "turn on the ac", "turn off the air conditioner", "set the air conditioner to", "set the temperature to",
           "open the curtains", "close the curtains", "lock the door", "unlock the front door"],
    "zh": ["打开灯", "关闭灯", "关掉灯", "开灯", "关灯", "打开空调", "关闭空调", "关掉空调", "空调调到度", "把空调调到度",
           "温度调到度", "打开窗帘", "关上窗帘", "锁上门", "锁门"],
}


def registry() -> ToolRegistry:
    tools = ToolRegistry()
    register_builtin_tools(tools, "UTC")
    add_search_knowledge(tools)
    add_reminder_tools(tools)

    async def unused(arguments, call):
        return {}

    for name, examples in (("remember", REMEMBER_EXAMPLES), ("recall", RECALL_EXAMPLES), ("forget", FORGET_EXAMPLES),
                           ("operate_device", DEVICE_EXAMPLES)):
        tools.add(name, name, {"type": "object", "properties": {}}, unused, examples=examples)
    return tools


@pytest.mark.parametrize("text, tool", [
    ("remind me to call mom tomorrow at 9am", "create_reminder"),
    ("in 20 minutes remind me to take the pizza out", "create_reminder"),
    ("every weekday at 7:30 remind me to take my pills", "create_reminder"),
    ("remind me to turn on the oven at 6", "create_reminder"),
    ("remind me to turn off the air conditioner at 10pm", "create_reminder"),
    ("remind me to lock the door at 11pm", "create_reminder"),
    ("提醒我明天早上九点给妈妈打电话", "create_reminder"),
    ("二十分钟后提醒我关火", "create_reminder"),
    ("每天早上七点提醒我吃药", "create_reminder"),
    ("提醒我晚上十点把空调调到二十六度", "create_reminder"),
    ("提醒我十点打开空调", "create_reminder"),
    ("what are my reminders", "list_reminders"),
    ("我有哪些提醒", "list_reminders"),
    ("cancel the reminder to call mom", "cancel_reminder"),
    ("取消给妈妈打电话的提醒", "cancel_reminder"),
    ("mark the reminder to call mom as done", "complete_reminder"),
    ("把吃药的提醒标记为完成", "complete_reminder"),
    ("turn on the light", "operate_device"),
    ("打开空调", "operate_device"),
    ("what time is it", "get_current_time"),
    ("remember that my car is blue", "remember"),
])
def test_the_offline_agent_picks_the_reminder_tools_and_leaves_the_others_theirs(text, tool):
    match = best_match(text, registry().all())
    assert match is not None and match.tool is not None and match.tool.name == tool, match
