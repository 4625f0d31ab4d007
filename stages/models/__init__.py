"""The bundled models (see README.md here) and the one way any fastText model is loaded."""
from __future__ import annotations

import os
from importlib import resources


def bundled(name: str) -> str:
    """Path of a model shipped in this package (found through importlib.resources, so it travels
    with the package to Beam workers)."""
    return str(resources.files(__name__).joinpath(name))


def load_fasttext(path: str, what: str, hint: str):
    """A fastText model, or one clear error naming the file: FileNotFoundError ("`what` not found",
    then `hint`: what to pass instead; nothing is downloaded at run time) or ValueError (the file is
    not a fastText model)."""
    import fasttext

    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what} not found: {path!r}. {hint}; nothing is downloaded at run time.")
    try:
        return fasttext.load_model(path)
    except Exception as exc:  # fastText raises bare ValueError/RuntimeError without the file name
        raise ValueError(f"cannot load fastText model {path!r}: {exc}") from exc


def positive_probability(model, texts, positive: str, negative: str) -> list[float]:
    """P(`positive`) of each (already normalized) text from a two-label fastText classifier, in one call."""
    if not texts:
        return []
    labels, probs = model.predict(list(texts), k=2)
    scores = []
    for labs, ps in zip(labels, probs):
        by_label = dict(zip(labs, ps))
        scores.append(min(float(by_label.get(positive, 1.0 - by_label.get(negative, 0.0))), 1.0))
    return scores


def load_classifier(path: str, kind: str, labels: tuple[str, str], hint: str):
    """A two-label fastText classifier (`kind`: "quality", "toxicity"), or one clear error: missing or corrupt
    file (see `load_fasttext`), or a model without `labels` (ValueError)."""
    model = load_fasttext(path, f"{kind} model", hint)
    found = set(model.get_labels())
    if not set(labels) <= found:
        raise ValueError(f"{path!r} is not a {kind} classifier: labels {sorted(found)[:5]}, "
                         f"expected {labels[0]} and {labels[1]}")
    return model
