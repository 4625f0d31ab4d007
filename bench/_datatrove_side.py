"""The datatrove half of bench/vs_datatrove.py; runs in datatrove's own virtual environment (see
bench/vs_datatrove.py for how to make it). Prints one JSON object: documents read, kept, wall seconds,
seconds per step. Its language filter loads the bundled lid.176.ftz instead of downloading a model.

    DTVENV/bin/python bench/_datatrove_side.py WARC LID_MODEL WORKDIR
"""
import json
import os
import sys
import time

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.extractors import Trafilatura
from datatrove.pipeline.filters import GopherQualityFilter, GopherRepetitionFilter, LanguageFilter
from datatrove.pipeline.readers import WarcReader
from datatrove.pipeline.writers import JsonlWriter
from datatrove.utils.lid import FT176LID


class LocalFT176(FT176LID):
    """lid.176 from a local file (the stock class downloads lid.176.bin at first use)."""

    def __init__(self, path, languages=None):
        super().__init__(languages)
        self.path = path

    @property
    def model(self):
        if self._model is None:
            from fasttext.FastText import _FastText

            self._model = _FastText(self.path)
        return self._model


class LocalLanguageFilter(LanguageFilter):
    def __init__(self, model_path, **kwargs):
        super().__init__(**kwargs)
        self.model = LocalFT176(model_path, self.languages)


def main(warc, lid_model, workdir):
    folder, name = os.path.split(os.path.abspath(warc))
    pipeline = [
        WarcReader(folder, glob_pattern=name),
        Trafilatura(favour_precision=True, timeout=1.0),  # FineWeb's settings
        LocalLanguageFilter(lid_model, language_threshold=0.65),
        GopherRepetitionFilter(),
        GopherQualityFilter(),
        JsonlWriter(os.path.join(workdir, "output")),
    ]
    started = time.perf_counter()
    LocalPipelineExecutor(pipeline=pipeline, tasks=1, workers=1, logging_dir=os.path.join(workdir, "logs")).run()
    wall = time.perf_counter() - started
    with open(os.path.join(workdir, "logs", "stats.json")) as fh:
        stats = json.load(fh)
    steps = {}
    for step in stats:
        t = step.get("time_stats", {})
        steps[step["name"]] = {"seconds": t.get("total", 0.0), "stats": step.get("stats", {})}
    print(json.dumps({"wall_s": wall, "steps": steps}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
