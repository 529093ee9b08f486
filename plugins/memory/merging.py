"""Which existing memory a new text merges into (a duplicate) or supersedes (a contradiction):
the same slot first (rules.py), then the nearest memories by meaning, judged by the rules'
guards and `duplicate_similarity` (docs/memory.md, "Merging and superseding")."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

import aiopg

from . import rules
from .counterpart_store import memories_among, newest_in_slot

if TYPE_CHECKING:
    from gateway.vectors import VectorIndex

@dataclass(frozen=True)
class SlotReading:
    slots: list[rules.Slot]   # every slot the text states
    slot: str | None          # the one slot it states and nothing else (the memory's `slot`)


def read_slots(content: str) -> SlotReading:
    return SlotReading(rules.slots(content), slot_of(content))


def nearest_counterpart(content: str, candidates: list[dict], similarity: dict[str, float],
                        threshold: float) -> tuple[str, dict] | None:
    """Among the nearest memories (`similarity`: passage against passage): the same words merge,
    a negation flip supersedes, else the most similar one the guards let merge, from `threshold`."""
    for row in candidates:
        if rules.same_words(row["content"], content):
            return "merged", row
    for row in candidates:
        if rules.negation_flip(row["content"], content):
            return "superseded", row
    mergeable = [row for row in candidates if rules.may_merge(row["content"], content)]
    if not mergeable:
        return None
    best = max(mergeable, key=lambda row: similarity[row["id"]])
    return ("merged", best) if similarity[best["id"]] >= threshold else None


def slot_of(content: str) -> str | None:
    slot = rules.slot_statement(content)
    return slot.key if slot else None


async def find_counterpart(cursor: aiopg.Cursor, vectors: VectorIndex, collection: str, owner: str,
                          content: str, vector: list[float], reading: SlotReading, *, limit: int,
                          threshold: float) -> tuple[str, dict] | None:
    """The existing memory a new text (`vector`: its passage embedding) merges into
    ("merged") or replaces ("superseded"), if any, among the `limit` nearest (in the store's
    `collection`) and its own slot."""
    # 1. The same slot: same value, a duplicate; another value, a contradiction.
    if len(reading.slots) == 1:
        slot = reading.slots[0]
        for row in await newest_in_slot(cursor, owner, slot.key):
            old = await asyncio.to_thread(rules.slot_statement, row["content"])
            same = old is not None and old.value == slot.value
            return ("merged" if same else "superseded"), row
    # 2. The nearest memories by meaning, passage against passage (both sides as stored): the
    # scores are the similarities `duplicate_similarity` is measured in.
    hits = await vectors.nearest(collection, vector, where={"user_id": owner}, limit=limit)
    if not hits:
        return None
    similarity = {hit.id: hit.score for hit in hits}
    candidates = await memories_among(cursor, owner, list(similarity))
    return await asyncio.to_thread(nearest_counterpart, content, candidates, similarity, threshold)
