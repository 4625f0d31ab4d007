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
