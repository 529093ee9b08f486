"""The shared retrieval sets (BEIR layout) under ../shared/eval/retrieval beside the repository."""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# BENCH_EVAL_DIR: elsewhere (a worktree whose parent holds no shared/)
EVAL_DIR = Path(os.environ.get("BENCH_EVAL_DIR") or REPO_ROOT.parent / "shared" / "eval" / "retrieval")

# name -> (language, qrels file)
SETS = {"cranfield": ("en", "test.tsv"), "cmrc2018_zh": ("zh", "dev.tsv")}


@dataclass
class EvalSet:
    name: str
    language: str
    passage_ids: list[str]
    passages: list[str]  # title + text, as indexed
    query_ids: list[str]
    queries: list[str]
    qrels: dict[str, dict[str, int]]  # query id -> passage id -> grade (> 0 relevant)


def eval_dir() -> Path:
    if not EVAL_DIR.is_dir():
        raise SystemExit(
            f"evaluation data not found: {EVAL_DIR} (the shared/ folder beside the repository, "
            "with eval/retrieval/cranfield and eval/retrieval/cmrc2018_zh)"
        )
    return EVAL_DIR


def passage_text(record: dict) -> str:
    """Title and text, as BEIR gives both to a model; Cranfield's text already starts with its
    title, so it is not repeated."""
    title, text = (record.get("title") or "").strip(), record["text"].strip()
    if not title or text.startswith(title.rstrip(" .")):
        return text
    return f"{title}\n{text}"


def load(name: str) -> EvalSet:
    language, qrels_file = SETS[name]
    folder = eval_dir() / name
    passage_ids, passages = [], []
    with open(folder / "corpus.jsonl", encoding="utf-8") as corpus:
        for line in corpus:
            record = json.loads(line)
            passage_ids.append(str(record["_id"]))
            passages.append(passage_text(record))
    qrels: dict[str, dict[str, int]] = {}
    with open(folder / "qrels" / qrels_file, encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            grade = int(row["score"])
            if grade > 0:
                qrels.setdefault(str(row["query-id"]), {})[str(row["corpus-id"])] = grade
    query_ids, queries = [], []
    with open(folder / "queries.jsonl", encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if str(record["_id"]) in qrels:
                query_ids.append(str(record["_id"]))
                queries.append(record["text"].strip())
    return EvalSet(name, language, passage_ids, passages, query_ids, queries, qrels)


def subset(evalset: EvalSet, passages: int) -> EvalSet:
    """The first `passages` passages and the queries judged only on them (a cheaper check, e.g.
    for a model too slow to embed a whole corpus): figures are not comparable to the full set's."""
    keep = set(evalset.passage_ids[:passages])
    qrels = {q: g for q, g in evalset.qrels.items() if set(g) <= keep}
    pairs = [(q, t) for q, t in zip(evalset.query_ids, evalset.queries) if q in qrels]
    return EvalSet(
        f"{evalset.name}[:{passages}]",
        evalset.language,
        evalset.passage_ids[:passages],
        evalset.passages[:passages],
        [q for q, _ in pairs],
        [t for _, t in pairs],
        qrels,
    )
