"""A large, varied message history written straight into the sessions plugin's tables, for the
search plan test and the benchmark. Generated inside PostgreSQL (INSERT ... SELECT in batches), so
100,000 messages take seconds, not minutes."""
from __future__ import annotations

from gateway.database import execute

# Phrases mixed per message; an md5 fragment keeps messages distinct so trigrams spread out.
CHINESE = ["今天的天气怎么样", "帮我安排明天的会议", "提醒我下午三点喝水", "我想听一首轻松的音乐",
           "把客厅的灯打开", "最近有什么好看的电影", "周末去爬山吧", "晚饭吃什么比较好",
           "这段代码为什么报错", "给妈妈打个电话"]
ENGLISH = ["what is the weather like today", "schedule a meeting for tomorrow", "turn on the kitchen lights",
           "play some relaxing music", "why does this function raise an error", "remind me to call mom",
           "summarise the news for me", "book a table for two", "how far is the airport",
           "translate this sentence"]
# Rare needles the searches look for, placed in a known number of messages.
NEEDLES = {"紫色的长颈鹿": 3, "quarterly budget": 5}
BATCH = 10_000


async def fill(db, user_id: str, messages: int, sessions: int = 200) -> None:
    """`messages` messages of `user_id` over `sessions` sessions, plus the needles, and ANALYZE."""
    await execute(db,
                  "INSERT INTO chat_sessions (id, user_id, title) "
                  "SELECT 'bench_' || s, %s, '会话 ' || s FROM generate_series(1, %s) AS s",
                  (user_id, sessions))
    # In batches: each statement (the trigram index grows with it) well inside the pool's
    # statement timeout, even on a busy machine.
    for first in range(1, messages + 1, BATCH):
        await execute(db,
                      "INSERT INTO chat_messages (session_id, user_id, role, content) "
                      "SELECT 'bench_' || (1 + i %% %s), %s, "
                      "       CASE WHEN i %% 2 = 0 THEN 'user' ELSE 'assistant' END, "
                      "       (%s::text[])[1 + i %% 10] || '，' || (%s::text[])[1 + (i / 10) %% 10] || ' ' "
                      "       || substr(md5(i::text), 1, 12) || ' ' || (%s::text[])[1 + (i / 100) %% 10] "
                      "FROM generate_series(%s, %s) AS i",
                      (sessions, user_id, CHINESE, ENGLISH, CHINESE, first, min(first + BATCH - 1, messages)))
    for needle, count in NEEDLES.items():
        await execute(db,
                      "INSERT INTO chat_messages (session_id, user_id, role, content) "
                      "SELECT 'bench_1', %s, 'user', '我在找 ' || %s || ' number ' || n "
                      "FROM generate_series(1, %s) AS n", (user_id, needle, count))
    await execute(db, "ANALYZE chat_sessions")
    await execute(db, "ANALYZE chat_messages")
