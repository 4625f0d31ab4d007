"""Stream the pipeline's Parquet shards as training batches, resumable at the exact next token.

Work unit = a row group of a shard (or an even slice of one, when there are fewer row groups than
readers). Every epoch the units are permuted with a seed derived from (seed, epoch), so each epoch
has a new order and every rerun the same one; reader r of R (R = ranks x DataLoader workers) takes
units r, r+R, r+2R, ... of that permutation: disjoint, and no reader sees another's rows.

A reader's position is (epoch, unit, row, offset): the next token it has not consumed. Packed mode
concatenates documents, each followed by EOS, into windows of seq_len+1 tokens (inputs and shifted
targets) and advances by seq_len, so every token is a target once. Padded mode makes one sample per
document (long ones split into seq_len pieces), pads to seq_len, and masks padded targets with
IGNORE_INDEX. Each batch carries the reader's position after it; `StreamState` collects them so a
checkpoint resumes every reader where it stopped.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from common.files import file_sha256
from common.shards import MANIFEST
from stages.formats import parse_json

IGNORE_INDEX = -100


class DataError(RuntimeError):
    """The training data cannot be read as asked (missing manifest, corrupt shard, too few units)."""


@dataclasses.dataclass(frozen=True)
class Unit:
    shard: str          # absolute path of the Parquet file
    row_group: int
    start: int          # row slice [start, stop) of that row group
    stop: int


def read_manifest(data_dir: str, flag: str = "--data") -> dict[str, Any]:
    path = os.path.join(data_dir, MANIFEST)
    if "://" in data_dir:  # each rank maps its shards' row groups: they must be files on this machine
        raise DataError(f"{flag} {data_dir} is in an object store; training and tokenizing read the shards from a "
                        f"local folder: copy the run's output first (e.g. `aws s3 sync {data_dir} refined/`)")
    if not os.path.isfile(path):
        raise DataError(f"{path} not found: point {flag} at the output directory of `refinery run` "
                        "(the manifest is written last, so a missing one also means an unfinished run)")
    try:
        with open(path, encoding="utf-8") as fh:
            manifest = parse_json(fh.read())
    except ValueError as exc:  # damaged: not JSON, or nested too deeply to parse
        raise DataError(f"{path} is not a refinery shard manifest ({exc})") from None
    if not isinstance(manifest, dict) or not str(manifest.get("format", "")).startswith("refinery-shards/"):
        raise DataError(f"{path} is not a refinery shard manifest")
    return manifest


def parquet_groups(data_dir: str, manifest: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(shard path, row group, rows) of every non-empty row group, in manifest order."""
    groups: list[tuple[str, int, int]] = []
    for shard in manifest["shards"]:
        path = os.path.join(data_dir, shard["path"])
        try:
            meta = pq.ParquetFile(path).metadata
        except (OSError, ValueError) as exc:  # pyarrow raises ArrowInvalid (a ValueError) on corrupt files
            raise DataError(f"shard {path} cannot be read: {exc}") from exc
        groups += [(path, g, meta.row_group(g).num_rows) for g in range(meta.num_row_groups)
                   if meta.row_group(g).num_rows > 0]
    return groups


def split_units(groups: list[tuple[str, int, int]], min_units: int, where: str) -> list[Unit]:
    """Row groups as units, each split evenly when there are fewer than `min_units`."""
    rows = sum(n for _, _, n in groups)
    if rows == 0:
        raise DataError(f"{where}: the shards hold no documents")
    pieces = 1
    while len(groups) * pieces < min_units and pieces < max(n for _, _, n in groups):
        pieces += 1
    units = []
    for path, g, n in groups:
        bounds = np.linspace(0, n, min(pieces, n) + 1).astype(int)
        units += [Unit(path, g, int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]
    if len(units) < min_units:
        raise DataError(f"{where}: {rows} documents cannot give each of {min_units} readers "
                        "(ranks x workers) its own rows; use fewer ranks or workers")
    return units


@dataclasses.dataclass
class DataConfig:
    data_dir: str
    seq_len: int
    micro_batch: int
    seed: int = 0
    mode: str = "packed"          # packed | padded
    text_field: str = "text"
    num_workers: int = 0
    verify_checksums: bool = True


class ShardStream(IterableDataset):
    """An endless stream of batches (epochs follow each other) for one rank; see the module docstring."""

    def __init__(self, cfg: DataConfig, tokenizer, rank: int = 0, world_size: int = 1) -> None:
        if cfg.mode not in ("packed", "padded"):
            raise ValueError(f"unknown data mode {cfg.mode!r} (packed | padded)")
        self.cfg, self.tokenizer, self.rank, self.world_size = cfg, tokenizer, rank, world_size
        self.workers = max(1, cfg.num_workers)
        self.manifest = self.read_manifest()
        self.units = split_units(self.groups(), world_size * self.workers, cfg.data_dir)
        self.checksums = {os.path.join(cfg.data_dir, s["path"]): s.get("sha256") for s in self.manifest["shards"]}
        self.start_positions: dict[int, dict[str, int]] = {}
        self.worker_shift = 0

    # -- what a subclass for another storage format replaces (training/tokens.py) ----------------
    def read_manifest(self) -> dict[str, Any]:
        return read_manifest(self.cfg.data_dir)

    def groups(self) -> list[tuple[str, int, int]]:
        return parquet_groups(self.cfg.data_dir, self.manifest)

    def load_group(self, unit: Unit) -> list[Any]:
        """The rows of a unit's row group, as `token_ids` takes them (here: texts)."""
        try:
            table = pq.ParquetFile(unit.shard).read_row_group(unit.row_group, columns=[self.cfg.text_field])
        except (OSError, ValueError, KeyError) as exc:
            raise DataError(f"shard {unit.shard} row group {unit.row_group} cannot be read: {exc}") from exc
        return table.column(0).to_pylist()

    def token_ids(self, row: Any) -> np.ndarray | list[int]:
        return self.tokenizer.encode(row or "")

    def fingerprint(self) -> dict[str, Any]:
        """What must match for a saved position to mean the same tokens."""
        shards = sorted(s.get("sha256") or s["path"] for s in self.manifest["shards"])
        return {"shards": hashlib.sha256("".join(shards).encode()).hexdigest()[:16], "seq_len": self.cfg.seq_len,
                "mode": self.cfg.mode, "seed": self.cfg.seed, "tokenizer": self.tokenizer.describe(),
                "units": len(self.units), "world_size": self.world_size, "workers": self.workers}

    def reader_units(self, reader: int, epoch: int) -> list[Unit]:
        order = np.random.default_rng([self.cfg.seed, epoch]).permutation(len(self.units))
        readers = self.world_size * self.workers
        return [self.units[i] for i in order[reader::readers]]

    # -- reading -------------------------------------------------------------------------------
    def _rows(self, unit: Unit, cache: dict[str, Any]) -> list[Any]:
        if cache.get("key") != (unit.shard, unit.row_group):
            if self.cfg.verify_checksums and unit.shard not in cache.setdefault("verified", set()):
                expected = self.checksums.get(unit.shard)
                if expected and file_sha256(unit.shard) != expected:
                    raise DataError(f"shard {unit.shard} does not match the sha256 in {MANIFEST} "
                                    "(changed or corrupted after the pipeline wrote it)")
                cache["verified"].add(unit.shard)
            cache["key"], cache["rows"] = (unit.shard, unit.row_group), self.load_group(unit)
        return cache["rows"][unit.start:unit.stop]

    def _documents(self, reader: int, pos: dict[str, int]) -> Iterator[tuple[dict[str, int], np.ndarray]]:
        """(position of the first token, tokens) from `pos` on; each document ends with EOS."""
        epoch, unit_i, row, offset = pos["epoch"], pos["unit"], pos["row"], pos["offset"]
        cache: dict[str, Any] = {}
        eos = self.tokenizer.eos_id
        while True:
            units = self.reader_units(reader, epoch)
            while unit_i < len(units):
                rows = self._rows(units[unit_i], cache)
                while row < len(rows):
                    tokens = np.append(np.asarray(self.token_ids(rows[row]), dtype=np.int64), eos)[offset:]
                    yield {"epoch": epoch, "unit": unit_i, "row": row, "offset": offset}, tokens
                    row, offset = row + 1, 0
                unit_i, row = unit_i + 1, 0
            epoch, unit_i = epoch + 1, 0

    def _packed(self, reader: int, pos: dict[str, int]) -> Iterator[tuple[np.ndarray, dict[str, int]]]:
        width = self.cfg.seq_len + 1
        docs = self._documents(reader, pos)
        buffer: list[list[Any]] = []  # [position, tokens] from the oldest unconsumed token on
        held = 0
        while True:
            while held < width:
                where, tokens = next(docs)
                if len(tokens):
                    buffer.append([dict(where), tokens])
                    held += len(tokens)
            # only the segments this window needs: a long document must not be copied per window
            parts, need = [], width
            for _, tokens in buffer:
                parts.append(tokens[:need])
                need -= len(parts[-1])
                if not need:
                    break
            window = np.concatenate(parts)
            consume = self.cfg.seq_len  # the last target is the next window's first input
            held -= consume
            while consume:
                where, tokens = buffer[0]
                if len(tokens) <= consume:
                    consume -= len(tokens)
                    buffer.pop(0)
                else:
                    buffer[0][1] = tokens[consume:]
                    where["offset"] += consume
                    consume = 0
            yield window, dict(buffer[0][0])

    def _padded(self, reader: int, pos: dict[str, int]) -> Iterator[tuple[np.ndarray, dict[str, int]]]:
        step = self.cfg.seq_len
        for where, tokens in self._documents(reader, pos):
            for start in range(0, len(tokens) - 1, step):
                after = dict(where, offset=where["offset"] + start + step)
                if start + step >= len(tokens) - 1:  # this piece ends the document: next is the next row
                    after = dict(where, row=where["row"] + 1, offset=0)
                window = np.full(step + 1, self.tokenizer.pad_id, dtype=np.int64)
                piece = tokens[start:start + step + 1]
                window[:len(piece)] = piece
                window[len(piece):] = IGNORE_INDEX  # marks padding; inputs get pad_id below
                yield window, after

    def _batches(self, reader: int, logical_worker: int) -> Iterator[dict[str, Any]]:
        pos = self.start_positions.get(logical_worker, {"epoch": 0, "unit": 0, "row": 0, "offset": 0})
        samples = self._packed(reader, pos) if self.cfg.mode == "packed" else self._padded(reader, pos)
        while True:
            windows, after = [], None
            for _ in range(self.cfg.micro_batch):
                window, after = next(samples)
                windows.append(window)
            block = torch.from_numpy(np.stack(windows))
            inputs = block[:, :-1].clone()
            inputs[inputs == IGNORE_INDEX] = self.tokenizer.pad_id
            yield {"input": inputs, "target": block[:, 1:].clone(), "worker": logical_worker, "position": after}

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        physical = info.id if info is not None else 0
        logical = (physical + self.worker_shift) % self.workers
        return self._batches(self.rank * self.workers + logical, logical)


class StreamState:
    """Iterates a rank's batches through a DataLoader and keeps what a checkpoint needs to resume."""

    def __init__(self, stream: ShardStream) -> None:
        self.stream = stream
        self.positions: dict[int, dict[str, int]] = {}
        self.next_worker = 0
        self._iter: Iterator[dict[str, Any]] | None = None

    def __iter__(self) -> StreamState:
        return self

    def __next__(self) -> dict[str, Any]:
        if self._iter is None:
            self.stream.start_positions = dict(self.positions)
            self.stream.worker_shift = self.next_worker  # DataLoader asks worker 0 first: rotate ids
            workers = self.stream.cfg.num_workers
            # Its own generator: creating a DataLoader iterator draws a seed, which from the global
            # generator would shift the training RNG (dropout) of a resumed run by one draw.
            self._iter = iter(DataLoader(self.stream, batch_size=None, num_workers=workers,
                                         persistent_workers=False, prefetch_factor=2 if workers else None,
                                         generator=torch.Generator().manual_seed(self.stream.cfg.seed)))
        batch = next(self._iter)
        self.positions[batch["worker"]] = batch["position"]
        self.next_worker = (batch["worker"] + 1) % self.stream.workers
        return batch

    def state_dict(self) -> dict[str, Any]:
        return {"positions": {str(k): dict(v) for k, v in self.positions.items()},
                "next_worker": self.next_worker, "fingerprint": self.stream.fingerprint()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Exact resume when data, tokenizer, seq_len, ranks and workers match; an error if the data
        differs; with another number of ranks or workers, the readers restart at the saved epoch."""
        saved, now = state["fingerprint"], self.stream.fingerprint()
        for key in ("shards", "seq_len", "mode", "seed", "tokenizer"):
            if saved.get(key) != now.get(key):
                raise DataError(f"checkpoint was trained on other data settings: {key} was {saved.get(key)!r}, "
                                f"now {now.get(key)!r}")
        self._iter = None
        if (saved["world_size"], saved["workers"], saved["units"]) == (now["world_size"], now["workers"], now["units"]):
            self.positions = {int(k): dict(v) for k, v in state["positions"].items()}
            self.next_worker = int(state["next_worker"])
        else:
            epoch = min((p["epoch"] for p in state["positions"].values()), default=0)
            self.positions = {w: {"epoch": epoch, "unit": 0, "row": 0, "offset": 0} for w in range(self.stream.workers)}
            self.next_worker = 0


class PhasedStream:
    """The main stream, then (from step `switch_after` + 1 on) the anneal stream: the last phase of
    training draws from high-quality data while the learning rate decays. Each stream keeps its own
    position, so a checkpoint on either side of the switch resumes exactly."""

    def __init__(self, main: StreamState, anneal: StreamState | None = None, switch_after: int | None = None) -> None:
        self.main, self.anneal, self.switch_after = main, anneal, switch_after
        self.stream = main.stream  # what the run reports (units, fingerprint)

    def phase(self, step: int) -> str:
        """The phase of the update that follows `step` completed updates."""
        return "anneal" if self.anneal is not None and step >= self.switch_after else "main"

    def next(self, step: int) -> dict[str, Any]:
        return next(self.anneal if self.phase(step) == "anneal" else self.main)

    def state_dict(self) -> dict[str, Any]:
        state = self.main.state_dict()  # the main stream's keys at the top: older checkpoints read alike
        if self.anneal is not None:
            state["anneal"] = self.anneal.state_dict()
            state["switch_after"] = self.switch_after
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.main.load_state_dict(state)
        if self.anneal is not None and "anneal" in state:
            if state.get("switch_after") != self.switch_after:
                raise DataError(f"checkpoint switched to the anneal data after step {state.get('switch_after')}, "
                                f"this run after step {self.switch_after} (same --steps and --anneal-fraction to resume)")
            self.anneal.load_state_dict(state["anneal"])
        elif self.anneal is not None or "anneal" in state:
            raise DataError("checkpoint and this run disagree on the anneal phase: resume with the same --anneal-data")
