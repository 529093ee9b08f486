"""The memory tools of the AI core: `remember`, `recall` and `forget`, for the person of the call
(`ToolCall.user_id`; the memory client asks the memory service with the service credential
acting for them). The offline agent understands the same intents in English and Chinese
("remember that …", "what do you remember about …", "forget …", "记住…", "你记得…吗", "忘记…/忘掉…").

Forgetting by description is deliberately careful, since it deletes: the memory must be the
best match by meaning at or above `forget_min_score` that also says every topic word of the
description (the embedding model alone rates "my mother's name" closest to "我妹妹叫莉娜", and
"my sister's job" closest to "My sister is called Lena"); one memory per call, and the answer
says which. Otherwise nothing is deleted and the nearest memories are named."""
from __future__ import annotations

import asyncio
import re
from datetime import datetime, timezone
from typing import Any

from gateway.lexical import Tokenizer
from gateway.text import HAN
from plugins.ai_core.contract import Effect, ToolCall, ToolFailed, Tools

from .person import neutral, second_person
from .contract import CATEGORIES, MemoryServiceError, MemoryStore, MemoryUnavailable
from .settings import MemoryAssistantSettings

MAX_CONTENT_CHARS = 2000
MAX_QUERY_CHARS = 500
RECALL_LIMIT, RECALL_MAX = 5, 20
FORGET_CANDIDATES = 5


def _memory(memory: dict, score: float | None = None) -> dict:
    """A memory as the model reads it."""
    shown = {"id": memory["id"], "content": second_person(memory["content"]), "category": memory["category"],
             "priority": memory["priority"], "source": memory["source"],
             "created_at": datetime.fromtimestamp(memory["created_at"] / 1000, timezone.utc).isoformat(
                 timespec="seconds")}
    if score is not None:
        shown["score"] = round(score, 3)
    return shown


def _unavailable(error: MemoryServiceError) -> ToolFailed:
    if isinstance(error, MemoryUnavailable):
        return ToolFailed(f"the memory service is unavailable right now ({error}); try again later")
    return ToolFailed(f"the memory service refused: {error}")


# ---------------------------------------------------------------- the offline agent's words

_TRIM = " \t\n?？。.!！:：,，;；、\"“”「」'"


def _clean(text: str) -> str:
    text = text.strip(_TRIM)
    if text and not HAN.match(text[0]):
        text = text[0].upper() + text[1:]
    return text


_REMEMBER = [re.compile(p, re.IGNORECASE) for p in (
    r"^(?:please\s+|can you\s+|could you\s+)?(?:remember|memorize|memorise|note|keep in mind)"
    r"(?:\s+(?:that|this|:))?\s*(?P<fact>.+)$",
    r"^(?:请|帮我)?(?:记住|记下|记一下|记着)(?:一下)?(?:[:：，,]|这个|这件事)?\s*(?P<fact>.+)$")]


def remember_arguments(text: str) -> dict:
    for pattern in _REMEMBER:
        match = pattern.search(text.strip())
        if match:
            fact = _clean(match.group("fact"))
            if fact:
                return {"content": fact, "category": guess_category(fact)}
    return {}


_CATEGORY_WORDS = [
    ("health", r"allerg|过敏|diabet|asthma|medic|药|病|pregnan|怀孕"),
    ("relationship", r"\b(?:wife|husband|partner|sister|brother|mother|mom|mum|father|dad|son|daughter|"
                     r"friend|girlfriend|boyfriend|child|children|kids?|cat|dog|pet)\b|妻子|老婆|丈夫|老公|"
                     r"妹妹|姐姐|哥哥|弟弟|妈妈|母亲|爸爸|父亲|儿子|女儿|朋友|孩子|猫|狗"),
    ("work", r"\b(?:work|job|boss|colleague|office|employer)\b|工作|上班|老板|同事|公司"),
    ("preference", r"vegetarian|vegan|\b(?:like|love|prefer|hate|dislike|favou?rite)\b|素|喜欢|爱吃|讨厌|最爱"),
    ("schedule", r"every (?:day|morning|evening|week|monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
                 r"|每天|每周|每个月"),
    ("identity", r"\b(?:my name|call me|i live|i am \d+|years old|birthday)\b|我叫|名字|住在|生日|岁"),
]


def guess_category(fact: str) -> str:
    """The category of a fact the offline agent was told (the models choose their own)."""
    for category, words in _CATEGORY_WORDS:
        if re.search(words, fact, re.IGNORECASE):
            return category
    return "other"


_RECALL = [re.compile(p, re.IGNORECASE) for p in (
    r"what (?:do|did) you (?:remember|know|recall) about\s*(?P<topic>.*)$",
    r"(?:do|did) you (?:remember|recall)\s*(?P<topic>.*)$",
    r"what do you remember\s*(?P<topic>.*)$",
    r"关于(?P<topic>.+?)(?:你)?(?:还)?(?:记得|知道)(?:什么|哪些)",
    r"(?:你)?(?:还)?记得(?P<topic>.*?)(?:吗|么|嘛)?[?？。]*$",
    r"(?:你)?(?:都)?知道(?:关于)?(?P<topic>.*?)(?:的)?(?:什么|哪些)(?:事|事情)?(?:吗)?[?？。]*$",
)]
_ABOUT_ME = {"", "me", "myself", "about me", "我", "我的事", "我的事情", "关于我", "我什么", "什么", "我哪些"}


def recall_arguments(text: str) -> dict:
    for pattern in _RECALL:
        match = pattern.search(text.strip())
        if match:
            topic = match.group("topic").strip(_TRIM)
            topic = re.sub(r"^(?:关于|about)\s*", "", topic, flags=re.IGNORECASE).strip(_TRIM)
            return {} if topic.lower() in _ABOUT_ME else {"query": topic}
    return {}


_FORGET = [re.compile(p, re.IGNORECASE) for p in (
    r"^(?:please\s+|can you\s+|could you\s+)?(?:forget|delete|remove|erase)\s+(?:about\s+|that\s+|the memory\s+"
    r"(?:of|about|that)\s+)?(?P<what>.+)$",
    r"^(?:请|帮我)?(?:把)?(?:忘记|忘掉|忘了|删除|删掉)(?:关于)?(?P<what>.+?)(?:吧|的记忆|这件事)?$",
    r"^(?:请|帮我)?把(?P<what>.+?)(?:忘记|忘掉|忘了|删除|删掉)(?:吧)?$",
)]


def forget_arguments(text: str) -> dict:
    for pattern in _FORGET:
        match = pattern.search(text.strip())
        if match:
            what = _clean(match.group("what"))
            if what:
                return {"description": what}
    return {}


# ---------------------------------------------------------------- does a memory say what is described

_TOKENIZER = Tokenizer()
# Beyond the search's stop words: the persons, which every memory of someone names.
_PERSONS = frozenset("我 你 他 她 它 我们 你们 自己 user users".split())
# Words naming an attribute that a memory states without the word ("my sister's name" /
# "My sister is called Lena"): the attribute counts as said when one of its cues is there.
_NAME, _JOB = r"call|name|叫|名字", r"work|job|profession|occupation|工作|职业|上班"
_BIRTHDAY, _HOME, _AGE = r"born|birthday|生日|出生", r"live|home|address|住", r"years old|\bage\b|岁|年龄"
_ATTRIBUTE_CUES = {"name": _NAME, "名字": _NAME, "job": _JOB, "work": _JOB, "工作": _JOB, "职业": _JOB,
                   "birthday": _BIRTHDAY, "生日": _BIRTHDAY, "home": _HOME, "address": _HOME, "住址": _HOME,
                   "地址": _HOME, "age": _AGE, "年龄": _AGE}


def topic_words(text: str) -> set[str]:
    """The words of `text` that say what it is about (blocking: jieba; run it in an executor)."""
    return {token for token in _TOKENIZER.tokens(text) if token not in _PERSONS}


def _said(word: str, content: str, words: set[str]) -> bool:
    if word in words:
        return True
    if HAN.search(word):
        if word in content:
            return True
    elif len(word) >= 5 and any(other[:5] == word[:5] for other in words):  # allergy / allergic
        return True
    cue = _ATTRIBUTE_CUES.get(word)
    return bool(cue and re.search(cue, content, re.IGNORECASE))


def says_all_of(description: str, content: str) -> bool:
    """Whether the memory `content` says every topic word of `description` (blocking)."""
    described = topic_words(description)
    words = topic_words(content)
    return bool(described) and all(_said(word, content, words) for word in described)


# ---------------------------------------------------------------- the tools

class MemoryTools:
    def __init__(self, memory: MemoryStore, settings: MemoryAssistantSettings):
        self.memory = memory
        self.recall_min_score = settings.recall_min_score
        self.forget_min_score = settings.forget_min_score

    async def remember(self, arguments: dict, call: ToolCall) -> dict:
        content = neutral(str(arguments.get("content") or ""))
        if not content:
            raise ToolFailed("content is empty: say the fact to remember")
        if len(content) > MAX_CONTENT_CHARS:
            raise ToolFailed(f"content is longer than {MAX_CONTENT_CHARS} characters: store one short fact")
        category = str(arguments.get("category") or "other")
        if category not in CATEGORIES:
            category = "other"
        try:
            priority = max(0, min(10, int(arguments.get("priority", 5))))
        except (TypeError, ValueError):
            priority = 5
        try:
            written = await self.memory.create(call.user_id, content, category, priority, "explicit",
                                               session_id=call.session_id)
        except MemoryServiceError as error:
            raise _unavailable(error) from None
        return {"status": written["action"], "memory": _memory(written["memory"]), "replaced": written["replaced"]}

    async def recall(self, arguments: dict, call: ToolCall) -> dict:
        query = " ".join(str(arguments.get("query") or "").split())[:MAX_QUERY_CHARS]
        try:
            limit = max(1, min(int(arguments.get("limit") or RECALL_LIMIT), RECALL_MAX))
        except (TypeError, ValueError):
            limit = RECALL_LIMIT
        try:
            if query:
                hits = await self.memory.search(call.user_id, query, limit, "dense")
                found = [_memory(hit, hit["score"]) for hit in hits if hit["score"] >= self.recall_min_score]
            else:
                page = await self.memory.list(call.user_id, limit=limit)
                found = [_memory(memory) for memory in page["memories"]]
        except MemoryServiceError as error:
            raise _unavailable(error) from None
        return {"query": query, "count": len(found), "memories": found}

    async def forget(self, arguments: dict, call: ToolCall) -> dict:
        memory_id = str(arguments.get("memory_id") or "").strip()
        description = " ".join(str(arguments.get("description") or "").split())[:MAX_QUERY_CHARS]
        try:
            if memory_id:
                return await self._forget_id(call.user_id, memory_id)
            if not description:  # e.g. the offline agent heard "I forgot my keys"
                return {"status": "unspecified", "message": "Nothing was forgotten: say what to forget "
                                                            "(a description, or the memory_id from recall)."}
            return await self._forget_described(call.user_id, description)
        except MemoryServiceError as error:
            raise _unavailable(error) from None

    async def forget_effects(self, arguments: dict, call: ToolCall) -> list[Effect]:
        """What a `forget` call would delete (`memory.delete`, confirmed first by default: a model
        may be talked into it by what it reads); nothing when it would find nothing to delete."""
        memory_id = str(arguments.get("memory_id") or "").strip()
        description = " ".join(str(arguments.get("description") or "").split())[:MAX_QUERY_CHARS]
        if memory_id:
            target = await self.memory.get(call.user_id, memory_id)
        elif description:
            matching, _ = await self._described(call.user_id, description)
            target = matching[0] if matching else None
        else:
            target = None
        if target is None:
            return []
        content = _unstopped(second_person(target["content"]))
        return [Effect("memory.delete", {"en": f"Forget “{content}”", "zh": f"忘记“{content}”"})]

    async def _forget_id(self, user_id: str, memory_id: str) -> dict:
        memory = await self.memory.get(user_id, memory_id)
        if memory is None or not await self.memory.delete(user_id, memory_id):
            return {"status": "not_found", "message": f"no memory of this person has the id {memory_id}"}
        return {"status": "forgotten", "forgotten": _memory(memory)}

    async def _described(self, user_id: str, description: str) -> tuple[list[dict], list[dict]]:
        """The memories that say what is described, closest first, and the nearest whatever their
        relevance (named when none is the one described)."""
        dense = await self.memory.search(user_id, description, FORGET_CANDIDATES, "dense", min_relevance=-1.0)
        close = [hit for hit in dense if hit["score"] >= self.forget_min_score]
        loop = asyncio.get_running_loop()
        matching = [hit for hit in close
                    if await loop.run_in_executor(None, says_all_of, description, hit["content"])]
        return matching, dense

    async def _forget_described(self, user_id: str, description: str) -> dict:
        matching, dense = await self._described(user_id, description)
        for hit in matching:
            if not await self.memory.delete(user_id, hit["id"]):
                continue  # deleted meanwhile
            return {"status": "forgotten", "description": description, "forgotten": _memory(hit, hit["score"])}
        nearest = [_memory(hit, hit["score"]) for hit in dense[:3]]
        return {"status": "no_match", "description": description, "nearest": nearest,
                "message": "Nothing was forgotten: no memory matches the description closely. Call forget "
                           "with the memory_id of one of `nearest` if the person meant it."}


# ---------------------------------------------------------------- what the offline agent says

def _unstopped(content: str) -> str:
    """A memory inside the offline agent's sentence: without its own full stop."""
    return content[:-1] if content.endswith((".", "。")) else content


def summarize_remember(result: dict, language: str) -> str:
    content = _unstopped(result["memory"]["content"])
    replaced = result.get("replaced")
    if language == "zh":
        if result["status"] == "superseded" and replaced:
            return f"好的，我记住了：{content}（替换了之前的“{replaced}”）。"
        return f"好的，我记住了：{content}。" if result["status"] == "created" else f"这个我已经记得了：{content}。"
    if result["status"] == "superseded" and replaced:
        return f"Got it, I'll remember: {content} (instead of “{replaced}”)."
    return (f"Got it, I'll remember: {content}." if result["status"] == "created"
            else f"I already knew that: {content}.")


def summarize_recall(result: dict, language: str) -> str:
    memories = result["memories"]
    if not memories:
        if language == "zh":
            return f"关于“{result['query']}”，我什么都不记得。" if result["query"] else "我还没有记住关于你的任何事。"
        return (f"I don't remember anything about “{result['query']}”." if result["query"]
                else "I don't remember anything about you yet.")
    lines = [f"- {memory['content']}" for memory in memories]
    if language == "zh":
        head = f"关于“{result['query']}”，我记得：" if result["query"] else "我记得这些关于你的事："
    else:
        head = f"About “{result['query']}”, I remember:" if result["query"] else "Here is what I remember about you:"
    return "\n".join([head, *lines])


def summarize_forget(result: dict, language: str) -> str:
    if result["status"] == "forgotten":
        content = _unstopped(result["forgotten"]["content"])
        return f"好的，我已经忘记了：{content}。" if language == "zh" else f"Done, I've forgotten: {content}."
    if result["status"] == "unspecified":
        return ("你想让我忘记什么？例如：“忘记我妹妹的名字”。" if language == "zh"
                else "What should I forget? For example: “forget my sister's name”.")
    if result["status"] == "not_found":
        return "我没有找到这条记忆。" if language == "zh" else "I couldn't find that memory."
    nearest = [memory["content"] for memory in result.get("nearest", [])]
    if language == "zh":
        tail = ("最接近的是：" + "；".join(f"“{text}”" for text in nearest) + "。要忘记其中一条，请说：忘记“…”。"
                if nearest else "")
        return f"我没有找到与“{result['description']}”相符的记忆，什么都没有删除。{tail}"
    tail = (" The closest are: " + "; ".join(f"“{text}”" for text in nearest)
            + ". To forget one of them, say: forget “…”." if nearest else "")
    return f"I found no memory matching “{result['description']}”, so nothing was forgotten.{tail}"


# ---------------------------------------------------------------- registration

REMEMBER_EXAMPLES = {"en": ["remember that", "please remember", "remember this", "keep in mind that"],
                     "zh": ["记住", "请记住", "帮我记住", "记一下"]}
RECALL_EXAMPLES = {"en": ["what do you remember about", "what do you know about me", "do you remember",
                          "what do you remember"],
                   "zh": ["你记得吗", "你还记得", "你都知道我什么", "关于我你记得什么"]}
FORGET_EXAMPLES = {"en": ["forget", "forget that", "forget about", "delete the memory about"],
                   "zh": ["忘记", "忘掉", "把忘掉", "删除记忆"]}


# What a person reads about these tools (help and progress, docs/ai-core.md "What a person reads").
TOPIC = {"en": "Things to remember", "zh": "记住的事"}


def add_memory_tools(tools: Tools, memory: MemoryStore, settings: MemoryAssistantSettings, owner: str) -> MemoryTools:
    handlers = MemoryTools(memory, settings)
    categories: dict[str, Any] = {"type": "string", "enum": list(CATEGORIES)}
    tools.add(
        "remember",
        "Store a lasting fact about the user in long-term memory (one short fact per call, written about "
        "the user, e.g. \"The user's sister is called Lena\"). Use it when the user asks you to remember "
        "something or states a durable fact about themself; a repeat is merged, a contradiction replaces "
        "the old fact.",
        {"type": "object", "properties": {
            "content": {"type": "string", "description": "the fact, one sentence"},
            "category": {**categories, "description": "what kind of fact; `other` when unsure"},
            "priority": {"type": "integer", "minimum": 0, "maximum": 10, "default": 5,
                         "description": "0 trivia … 10 must never be forgotten (allergies: 8 or more)"}},
         "required": ["content"]},
        handlers.remember, owner=owner, examples=REMEMBER_EXAMPLES, parse_arguments=remember_arguments,
        summarize=summarize_remember, topic=TOPIC,
        help={"en": ["remember that my sister is called Lena"], "zh": ["记住我对花生过敏"]},
        progress={"en": "Making a note of that…", "zh": "正在记下来…"})
    tools.add(
        "recall",
        "Search the user's long-term memories by meaning (any language), or list them when no query is "
        "given. Returns each memory's id, content, category, priority, source and date.",
        {"type": "object", "properties": {
            "query": {"type": "string", "description": "what to look for; omit to list the user's memories"},
            "limit": {"type": "integer", "minimum": 1, "maximum": RECALL_MAX, "default": RECALL_LIMIT}},
         "required": []},
        handlers.recall, owner=owner, examples=RECALL_EXAMPLES, parse_arguments=recall_arguments,
        summarize=summarize_recall, topic=TOPIC,
        help={"en": ["what do you remember about me"], "zh": ["关于我你记得什么"]},
        progress={"en": "Looking through what I remember…", "zh": "正在回想…"})
    tools.add(
        "forget",
        "Delete one of the user's long-term memories when they ask you to forget something: by "
        "`memory_id` (from recall), or by a `description` of it (e.g. \"my sister's name\"), which deletes "
        "the single closest memory only when it clearly matches and says which one; otherwise nothing is "
        "deleted and the nearest memories are returned.",
        {"type": "object", "properties": {
            "description": {"type": "string", "description": "what to forget, in the user's words"},
            "memory_id": {"type": "string", "description": "the id of the memory to delete"}},
         "required": []},
        handlers.forget, owner=owner, examples=FORGET_EXAMPLES, parse_arguments=forget_arguments,
        effects=handlers.forget_effects,
        summarize=summarize_forget, topic=TOPIC,
        help={"en": ["forget my sister's name"], "zh": ["忘掉我妹妹的名字"]},
        progress={"en": "Forgetting that…", "zh": "正在忘掉这件事…"})
    return handlers
