"""How well a score ranks: ROC AUC, for the quality and toxicity measurements (bench/quality_model.py,
stages/harmful/toxicity_eval.py, stages/harmful/bias.py)."""
from __future__ import annotations

from collections.abc import Sequence


def auc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """P(score of a random positive > that of a random negative), ties counted half (Mann-Whitney U); None when
    either side is empty."""
    if not positives or not negatives:
        return None
    ranked = sorted([(s, 1) for s in positives] + [(s, 0) for s in negatives])
    rank_sum, i = 0.0, 0
    while i < len(ranked):
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        rank_sum += sum(label for _, label in ranked[i:j]) * (i + j + 1) / 2  # ranks i+1 .. j share their mean
        i = j
    n_pos, n_neg = len(positives), len(negatives)
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
