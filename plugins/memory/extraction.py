"""Learning from conversations: after each chat turn, the facts the person told about themself
become memories (docs/memory.md, "Learning from conversations").

A listener of the AI core's `TURN_FINISHED` (so it runs in the ai-core service, as a job of its
scheduler, after the answer went out: it never delays or fails a turn) hands the exchange — the
person's words, the reply, the last few messages before them, and the person's memories nearest
to what they said — to a language model of the routing purpose `memory` (`MODELS`; without a
route or model tagged `memory`, the chat models), asking for durable facts as strict JSON. Each
fact is applied through the `MEMORY` contract with source `extracted` and the turn's session and
message: the memory service merges a near-duplicate and supersedes a contradicted memory; a fact
the model marks as an update of a memory it was shown, and that the service did not already
resolve, replaces that memory.

Without a language model (none configured, or every one failed) explicit statements are still
caught by rules in English and Chinese (statements.py). An answer of the model that holds no
readable list of facts stores nothing."""
from __future__ import annotations

import asyncio
import json
import logging
import re
from dataclasses import dataclass, replace
from typing import Any, Literal

from gateway.context import Context
from gateway.plugins import Registrar
from plugins.ai_core.contract import MODELS, TURN_FINISHED, FinishedTurn, Models

from .contract import CATEGORIES, MEMORY, MemoryServiceError, MemoryStore, Source
from .settings import ExtractionSettings
from .rules import same_words
from .person import neutral
from .statements import explicit_statements, speaks_of_self

log = logging.getLogger("plugins.memory.extraction")

PURPOSE = "memory"
LISTENER = "memory_extraction"
MAX_FACT_CHARS = 500          # a fact is one short sentence; longer is not a fact but a transcript
REPLY_CHARS = 1500            # what the model reads of the reply
HISTORY_MESSAGE_CHARS = 500   # ... and of each earlier message
KNOWN_MEMORY_CHARS = 300

Action = Literal["add", "update", "ignore"]

# What a model may call a category, read as ours.
CATEGORY_ALIASES = {
    "personal": "identity", "profile": "identity", "name": "identity", "location": "identity",
    "home": "identity", "biography": "identity", "bio": "identity", "preferences": "preference",
    "like": "preference", "likes": "preference", "diet": "preference", "food": "preference",
    "hobby": "preference", "hobbies": "preference", "interest": "preference", "interests": "preference",
    "medical": "health", "allergy": "health", "allergies": "health", "family": "relationship",
    "relationships": "relationship", "relatives": "relationship", "friends": "relationship",
    "pet": "relationship", "pets": "relationship", "people": "relationship", "job": "work",
    "career": "work", "occupation": "work", "profession": "work", "routine": "schedule",
    "routines": "schedule", "habit": "schedule", "habits": "schedule", "calendar": "schedule",
}

SYSTEM_PROMPT = """You maintain the long-term memory of a personal assistant about its user.
From the conversation you are shown, extract durable facts the USER stated or clearly confirmed
about themself or the people and pets in their life: identity (name, age, birthday, where they
live), preferences (likes, dislikes, diet, how they want answers), health (allergies, conditions,
medication), relationships (family, friends, pets and their names), work (job, employer,
projects), schedule (routines, recurring appointments).

Do not extract: what the assistant said (unless the user confirmed it), questions, hypotheticals,
jokes, quotes of other people, one-off requests or tasks, passing moods ("I'm tired"), general
knowledge, or anything already known unless it changed.

Write each fact as one short sentence in the user's language about "the user" (in Chinese "用户"),
whatever person the user spoke in: "The user is allergic to peanuts.", "The user's sister is
called Lena.", "The user lives in Berlin.", "用户住在上海。"
One fact per item.

Answer with JSON only, no prose, in this shape:
{"facts": [{"content": "...", "category": "identity|preference|health|relationship|work|schedule|other",
"priority": 0-10, "action": "add|update|ignore", "memory": "m1"}]}
- priority: 9-10 health and safety, 7-8 identity and close people, 5 ordinary preferences, 1-3 trivia.
- action "add": a new fact. "update": it changes or contradicts a known memory; give that
  memory's id in "memory" and the whole new fact in "content". "ignore": already known as is.
- Nothing worth remembering: {"facts": []}."""


@dataclass(frozen=True)
class Fact:
    content: str
    category: str
    priority: int
    action: Action
    memory: str | None = None     # the reference ("m2") of the known memory an update replaces
    source: Source = "extracted"


# ---------------------------------------------------------------- the model's answer

_THINKING = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def _json_values(answer: str) -> list[Any]:
    """The JSON values in a model's answer: a fenced block first, then every top-level array or
    object found in the text (a model may wrap the JSON in words)."""
    text = _THINKING.sub("", answer)
    candidates = [block.strip() for block in _FENCE.findall(text)] + [text.strip()]
    decoder = json.JSONDecoder()
    values: list[Any] = []
    for candidate in candidates:
        index = 0
        while True:
            starts = [i for i in (candidate.find("{", index), candidate.find("[", index)) if i >= 0]
            if not starts:
                break
            start = min(starts)
            try:
                value, end = decoder.raw_decode(candidate, start)
            except ValueError:
                index = start + 1
                continue
            values.append(value)
            index = end
        if values:
            return values
    return values


def _items(value: Any) -> list[Any] | None:
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        for key in ("facts", "memories", "items", "results"):
            items = value.get(key)
            if isinstance(items, list):
                return items
        if "content" in value:
            return [value]
    return None


def _category(value: Any) -> str:
    name = str(value or "").strip().lower()
    if name in CATEGORIES:
        return name
    return CATEGORY_ALIASES.get(name, "other")


def _priority(value: Any) -> int:
    try:
        number = int(float(value))
    except (TypeError, ValueError):
        return 5
    return min(10, max(0, number))


def _fact(item: Any) -> Fact | None:
    if not isinstance(item, dict):
        return None
    content = item.get("content", item.get("fact"))
    if not isinstance(content, str):
        return None
    content = neutral(content)   # "I live in Berlin" from a model that did not listen
    if not content or len(content) > MAX_FACT_CHARS:
        return None
    action = str(item.get("action") or "add").strip().lower()
    if action in ("new", "create", "insert"):
        action = "add"
    elif action in ("replace", "supersede", "change", "modify"):
        action = "update"
    elif action in ("skip", "none", "keep", "duplicate"):
        action = "ignore"
    if action not in ("add", "update", "ignore"):
        return None
    reference = item.get("memory", item.get("memory_id", item.get("id")))
    return Fact(content, _category(item.get("category")), _priority(item.get("priority", 5)),
                action,  # type: ignore[arg-type]
                str(reference).strip() if reference not in (None, "") else None)


def parse_facts(answer: str) -> list[Fact] | None:
    """The facts of a model's answer, in order; None when it holds no readable list of facts
    (prose, broken JSON, another shape): then nothing is stored. Items that are not facts are
    left out, the others kept."""
    for value in _json_values(answer):
        items = _items(value)
        if items is not None:
            return [fact for fact in map(_fact, items) if fact is not None]
    return None


# ---------------------------------------------------------------- the request

def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit].rstrip() + "…"


def extraction_messages(turn: FinishedTurn, known: dict[str, dict], history_messages: int) -> list[dict]:
    """The request to the model: the instructions, then the known memories, the messages before
    this turn and the exchange itself."""
    parts = []
    if known:
        parts.append("Known memories:\n" + "\n".join(
            f"- {reference}: {_clip(memory['content'], KNOWN_MEMORY_CHARS)}"
            for reference, memory in known.items()))
    earlier = [m for m in turn.history
               if m.get("role") in ("user", "assistant") and isinstance(m.get("content"), str)]
    if history_messages and earlier:
        parts.append("Earlier in the conversation:\n" + "\n".join(
            f"{m['role']}: {_clip(m['content'], HISTORY_MESSAGE_CHARS)}" for m in earlier[-history_messages:]))
    parts.append("The exchange to extract from:\n"
                 f"user: {turn.user_text.strip()}\nassistant: {_clip(turn.reply_text, REPLY_CHARS)}")
    return [{"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": "\n\n".join(parts) + "\n\nAnswer with the JSON only."}]


# ---------------------------------------------------------------- applying

def _same_subject(memory: dict, fact: Fact) -> bool:
    """An update replaces only a memory of its own category (or of none): a model that names the
    wrong reference adds a fact instead of deleting an unrelated one."""
    return "other" in (memory.get("category"), fact.category) or memory.get("category") == fact.category


async def apply_facts(memory: MemoryStore, user_id: str, facts: list[Fact], known: dict[str, dict], *,
                      session_id: str | None, message_id: str | None) -> list[dict]:
    """Store the facts (`ignore` ones are left out); the memory service's answers, in order. An
    `update` naming a known memory that the service did not already merge or supersede replaces
    it: the new memory is kept (with its source) and the named one deleted. Stops at the first
    failure of the memory service (logged)."""
    answers = []
    for fact in facts:
        if fact.action == "ignore":
            continue
        try:
            answer = await memory.create(user_id, fact.content, category=fact.category, priority=fact.priority,
                                         source=fact.source, session_id=session_id, message_id=message_id)
            answers.append(answer)
            replaced = known.get(fact.memory) if fact.action == "update" and fact.memory else None
            if (replaced is not None and answer.get("action") == "created"
                    and answer["memory"]["id"] != replaced["id"] and _same_subject(replaced, fact)):
                await memory.delete(user_id, replaced["id"])
                answer["replaced"] = replaced["content"]
        except MemoryServiceError as error:
            log.warning("memory extraction for %s stopped: %s (%s)", user_id, error, error.error_type)
            break
    return answers


# ---------------------------------------------------------------- the listener

class Extraction:
    """The TURN_FINISHED listener: facts from the model or, without one, from the rules."""

    def __init__(self, context: Context, settings: ExtractionSettings) -> None:
        self.context = context
        self.settings = settings
        # Bursts of turns queue here rather than each asking the model at once.
        self.running = asyncio.Semaphore(settings.extraction_concurrency)

    async def __call__(self, turn: FinishedTurn) -> None:
        await self.extract(turn)

    def worth_reading(self, turn: FinishedTurn) -> bool:
        text = turn.user_text.strip()
        return (self.settings.extraction_enabled and bool(turn.user_id)
                and self.settings.extraction_min_chars <= len(text) <= self.settings.extraction_max_chars
                and (speaks_of_self(text) or not self.settings.extraction_only_about_self))

    async def extract(self, turn: FinishedTurn) -> list[dict]:
        """The memory service's answers for what this turn taught (empty when nothing)."""
        if not self.worth_reading(turn):
            return []
        memory = self.context.contracts.get(MEMORY)
        if memory is None:
            return []
        async with self.running:
            known = await self.known_memories(memory, turn)
            facts = await self.facts(turn, known)
            if not facts:
                return []
            facts = facts[:self.settings.extraction_max_facts]
            answers = await apply_facts(memory, turn.user_id, facts, known, session_id=turn.session_id,
                                        message_id=turn.user_message_id)
            log.info("memory extraction for %s (session %s): %s", turn.user_id, turn.session_id,
                     ", ".join(answer.get("action", "?") for answer in answers) or "nothing stored")
            return answers

    async def known_memories(self, memory: MemoryStore, turn: FinishedTurn) -> dict[str, dict]:
        """The person's memories nearest to what they said, by reference ("m1"…), for the model
        to update rather than repeat; none when the memory service cannot say."""
        limit = self.settings.extraction_known_memories
        if not limit or self.context.contracts.get(MODELS) is None:
            return {}
        try:
            found = await memory.search(turn.user_id, turn.user_text.strip()[:1000], limit=limit, mode="dense",
                                        min_relevance=-1.0)  # the nearest, to update rather than repeat
        except MemoryServiceError as error:
            log.info("memory extraction without known memories: %s", error)
            return {}
        return {f"m{index}": hit for index, hit in enumerate(found, 1)}

    async def facts(self, turn: FinishedTurn, known: dict[str, dict]) -> list[Fact]:
        models: Models | None = self.context.contracts.get(MODELS)
        answer = None
        if models is not None:
            answer = await models.complete(
                PURPOSE, extraction_messages(turn, known, self.settings.extraction_history_messages),
                max_tokens=self.settings.extraction_max_tokens, temperature=0)
        said = explicit_statements(turn.user_text, self.settings.extraction_max_facts)
        if answer is None:
            return [Fact(s.content, s.category, s.priority, "add", source="explicit" if s.explicit else "extracted")
                    for s in said]
        facts = parse_facts(answer)
        if facts is None:
            # The answer may quote the person: its words only at debug level.
            log.warning("memory extraction: the model's answer (%d characters) holds no list of facts; "
                        "nothing stored", len(answer))
            log.debug("the unreadable answer: %r", answer[:500])
            return []
        # What the person asked to be remembered ("remember that …") keeps that source when the
        # model writes it in the same words.
        asked = [s.content for s in said if s.explicit]
        return [replace(fact, source="explicit") if any(same_words(fact.content, a) for a in asked) else fact
                for fact in facts]


def register_extraction(registrar: Registrar[ExtractionSettings]) -> None:
    """Add the extraction listener to the AI core's TURN_FINISHED (from the `memory_assistant`
    plugin's setup, in the ai-core service), with the `extraction_*` keys of its section."""
    settings = registrar.settings
    extraction = Extraction(registrar.context, settings)
    registrar.context.contracts.require(TURN_FINISHED).add(LISTENER, extraction)
