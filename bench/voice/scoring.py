"""How far a recognised text is from what was said: the edit distance that word and character
error rates count, shared by the bench and the voice tests so both score alike."""
from __future__ import annotations


def edit_distance(reference: list, hypothesis: list) -> int:
    """Insertions, deletions and substitutions that turn `reference` into `hypothesis`."""
    row = list(range(len(hypothesis) + 1))
    for i, ref in enumerate(reference, 1):
        previous, row[0] = row[0], i
        for j, hyp in enumerate(hypothesis, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (ref != hyp))
    return row[-1]
