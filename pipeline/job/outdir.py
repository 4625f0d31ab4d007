"""The output folder: one run at a time (an exclusive lock), only our own files, old outputs replaced safely.

The lock is a file holding an exclusive flock(2) for the run's lifetime (OutputLock), naming the run's
host, pid and start time. A lock file whose flock is free belongs to a run that is gone: it is reported
as stale with what clears it; a held one refuses the second run. Object stores (gs://, s3://) have no
locks: there the lock is not taken, and the report says so.
"""
from __future__ import annotations

import fcntl
import fnmatch
import glob
import json
import os
import shutil
import socket
import sys
import time

from apache_beam.io.filesystems import FileSystems

from common import files
from pipeline import storage
from pipeline.job.config import ConfigError
from stages.formats import parse_json

LOCK_FILE = ".refinery.lock"
PREPARED_DIR = "prepared"
# Phase 1's parts (pipeline/job/prepare.py): kept across failures, reused by --resume, removed by --overwrite.
PREPARED_PATTERNS = ("prepared/*.docs.parquet", "prepared/*.ledger.parquet", "prepared/*.done.json",
                     "prepared/.*.tmp")
# Phase 2's finished parts (pipeline/job/finish.py): removed when the run ends.
FINISHED_PATTERNS = ("_finished/*.parquet", "_finished/.*.tmp")
# The output folder's layout.
DATA_DIR, LEDGER_DIR, VALID_DIR, ANNEAL_DIR = "data", "ledger", "valid", "anneal"
EDITS_DIR = "edits"  # the edit book: what stages cut from documents they kept
SIGNATURES_DIR = "signatures"  # each output part's originals' signatures (a later run's --dedup-against)
REPORT_FILE, HTML_REPORT_FILE = "report.json", "report.html"
SPLITS = (ANNEAL_DIR, VALID_DIR)  # folders beside data/ with the same layout (pipeline/job/run.py writes them)
# What a complete run publishes. `--overwrite`/`--resume` over a complete output set these aside in
# PREVIOUS_DIR (manifest first) until the new run publishes, and put them back if it does not.
CARD_FILE = "README.md"  # the dataset card (pipeline/reports/card.py)
PUBLISHED = ("manifest.json", "data", "ledger", EDITS_DIR, "signatures", *SPLITS, "report.json", "report.html",
             CARD_FILE)
PREVIOUS_DIR = ".previous"
FAILED_REPORTS = {"report.json": "report.failed.json", "report.html": "report.failed.html"}
# Everything a run (or an interrupted one) writes, relative to the output folder.
OWN_PATTERNS = (
    "data/part-*.parquet", "data/.part-*.tmp", "ledger/part-*.parquet", "ledger/beam-temp-*",
    "edits/part-*.parquet", "edits/beam-temp-*",
    "report.json", "report.html", CARD_FILE, "manifest.json", ".manifest.json.tmp", "_shard_stats/*",
    "signatures/part-*.parquet", "signatures/.part-*.tmp", LOCK_FILE, *PREPARED_PATTERNS, *FINISHED_PATTERNS,
    *FAILED_REPORTS.values(),
    *(f"{split}/{pattern}" for split in SPLITS for pattern in ("data/part-*.parquet", "data/.part-*.tmp",
                                                                "_shard_stats/*", "manifest.json", ".manifest.json.tmp")),
)


# What a batch executor writes beside a run (`refinery slurm`: its scripts, state and logs): not foreign to
# the folder, and never removed by a run (phase 2 runs in it while they are being written).
EXECUTOR_PATTERNS = ("slurm", "slurm/*", "slurm/logs", "slurm/logs/*")


class OutputError(ConfigError):
    """The output folder cannot be used as asked (held by another run, foreign files, not a folder)."""


def is_local(path: str) -> bool:
    return "://" not in path


class OutputLock:
    """`with OutputLock(folder):` holds the folder for one run; released on every exit path.

    The lock file holds an exclusive flock(2) for the whole run, and names the run (host, pid, start). The
    kernel drops a flock when its process dies, however it dies, so a lock file whose flock is free is a
    dead run's (stale): only `--resume` takes it over, and only the one process that gets the flock can,
    so several runs started together on a dead run's lock cannot all take it over. A run that got the
    flock checks that the path still names the file it locked (a run ending at that moment unlinks it).
    Where the filesystem has no flock (some FUSE mounts), the file is created with O_EXCL and a stale
    one must be deleted by hand. In S3 the lock is an object created with a conditional write (If-None-Match),
    which one run of several wins; nothing drops it when its run dies, so `--resume` takes it over, saying
    whose it was (an object store cannot tell a dead run's lock from a live one's). Other object stores
    (gs://) are not locked: the report says so."""

    def __init__(self, folder: str, take_stale: bool = False):
        self.path = (os.path.join(folder, LOCK_FILE) if is_local(folder)
                     else FileSystems.join(folder, LOCK_FILE) if folder.startswith("s3://") else None)
        self._fd: int | None = None
        self._held, self._take_stale = False, take_stale

    def __enter__(self) -> OutputLock:
        if self.path is None:
            return self
        owner = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        if not is_local(self.path):
            return self._object_lock(owner)
        folder = os.path.dirname(self.path)
        if os.path.exists(folder) and not os.path.isdir(folder):
            raise OutputError(f"--output {folder} is a file, not a folder")
        os.makedirs(folder or ".", exist_ok=True)
        for _ in range(100):  # another run may unlink the file between our open and flock: open it again
            fd = files.open_fd(self.path, readable=True)  # never a planted link, FIFO or device
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise OutputError(self._held_message(_read_owner(self.path), stale=False)) from None
            except OSError:  # no flock on this filesystem
                os.close(fd)
                return self._exclusive_create(owner)
            if _same_file(fd, self.path):
                break
            os.close(fd)
        else:
            raise OutputError(f"cannot take the lock {self.path}: it keeps being replaced")
        previous = os.read(fd, 1 << 16)
        if previous.strip():  # a run held this flock and died without removing its lock
            if not self._take_stale:
                os.close(fd)
                raise OutputError(self._held_message(_parse_owner(previous), stale=True))
            print(f"[refinery] the stale lock of a run that is gone ({_who(_parse_owner(previous))}) is taken over "
                  "by --resume", file=sys.stderr)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(owner).encode(), 0)
        self._fd, self._held = fd, True
        return self

    def _exclusive_create(self, owner: dict) -> OutputLock:
        try:
            fd = files.open_fd(self.path, new=True)
        except FileExistsError:
            raise OutputError(self._held_message(_read_owner(self.path), stale=None)) from None
        with os.fdopen(fd, "w") as fh:
            json.dump(owner, fh)
        self._held = True
        return self

    def _object_lock(self, owner: dict) -> OutputLock:
        if not storage.create_if_absent(self.path, json.dumps(owner).encode()):
            found = storage.read_json(self.path)
            if not self._take_stale:
                raise OutputError(self._held_message(found, stale=None))
            print(f"[refinery] --resume takes over the lock of {_who(found)}: an object store cannot tell whether "
                  "that run is gone; if it still runs, stop one of the two", file=sys.stderr)
            storage.write_atomically(self.path, json.dumps(owner).encode())
        self._held = True
        return self

    def __exit__(self, *exc) -> None:
        if self._held and not is_local(self.path):
            self._held = False
            try:
                FileSystems.delete([self.path])
            except Exception:  # noqa: BLE001 (the run's own outcome matters more; a left lock names its run)
                pass
        if self._held:
            try:
                os.remove(self.path)  # while the flock is held: a run waiting on this file retries
            except FileNotFoundError:
                pass
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self._held = False

    def _held_message(self, owner: dict | None, stale: bool | None) -> str:
        folder = self.path.rsplit("/", 1)[0]
        if owner is None:
            return (f"{folder} holds a lock file refinery cannot read ({self.path}); if no refinery run is using "
                    f"this folder, delete {self.path} and rerun (or pass --resume to take it over)")
        if stale:
            waiting = (f"; the previous complete output waits in {os.path.join(folder, PREVIOUS_DIR)}/ and the next "
                       "run in this folder puts it back first" if os.path.isdir(os.path.join(folder, PREVIOUS_DIR))
                       else "")
            return (f"{folder} has a stale lock from a run that is gone ({_who(owner)}): pass --resume to "
                    f"continue that run (its finished input files are not read again), or delete {self.path} "
                    f"and rerun{waiting}")
        held = f"{folder} is in use by another refinery run ({_who(owner)}); wait for it or choose another --output"
        if stale is None and not is_local(self.path):
            held += f" (if that run is gone, pass --resume to take its lock over, or delete {self.path})"
        elif stale is None:  # no flock here: a dead run's lock cannot be told from a live one's
            held += f" (if that run is gone, delete {self.path})"
        return held


def _same_file(fd: int, path: str) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    return (st.st_dev, st.st_ino) == (os.fstat(fd).st_dev, os.fstat(fd).st_ino)


def _parse_owner(raw: bytes) -> dict | None:
    """The lock's owner, or None when the file is not a lock refinery wrote."""
    try:
        owner = parse_json(raw.decode("utf-8"))
    except ValueError:
        return None
    return owner if isinstance(owner, dict) else None


def _read_owner(path: str) -> dict | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # a FIFO must not make us wait
    except OSError:
        return {}
    try:
        raw = os.read(fd, 1 << 16) if files.kind(os.fstat(fd).st_mode) is None else b""
    except OSError:
        raw = b""
    finally:
        os.close(fd)
    return _parse_owner(raw) if raw.strip() else {}


def _who(owner: dict | None) -> str:
    owner = owner or {}
    return f"pid {owner.get('pid', '?')} on {owner.get('host', '?')} since {owner.get('started', '?')}"


def is_card(path: str) -> bool:
    """Is the file at `path` a dataset card a run wrote (pipeline/reports/card.py: a YAML header tagged `refinery`)?
    A README.md of the user's is not, and a run must neither replace nor remove it."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            head = fh.read(8192)
    except OSError:
        return False
    header = head.split("\n---\n", 1)[0] if head.startswith("---\n") else ""
    return "\ntags:\n" in header and "\n- refinery\n" in header + "\n"


def foreign_files(folder: str) -> list[str]:
    """Files under a local `folder` that no refinery run writes (relative paths); a README.md that is not a run's
    dataset card is one."""
    if not is_local(folder) or not os.path.isdir(folder):
        return []
    foreign = []
    for root, dirs, names in os.walk(folder):
        rel_root = os.path.relpath(root, folder)
        if rel_root != "." and any(fnmatch.fnmatch(rel_root, p) for p in (*OWN_PATTERNS, *EXECUTOR_PATTERNS)):
            dirs[:] = []  # inside one of our temp folders (ledger/beam-temp-*)
            continue
        for name in names:
            rel = os.path.normpath(os.path.join(rel_root, name))
            if not any(fnmatch.fnmatch(rel, p) for p in (*OWN_PATTERNS, *EXECUTOR_PATTERNS)):
                foreign.append(rel)
            elif rel == CARD_FILE and not is_card(os.path.join(root, name)):
                foreign.append(rel)
    return sorted(foreign)


def prepare_output(output: str, overwrite: bool, resume: bool = False) -> int:
    """Refuse a file, a folder with files we did not write, or an earlier run's outputs without
    --overwrite or --resume. With them, a complete earlier output (it has a manifest) is set aside, its
    manifest first, so the folder never claims to be complete while this run goes on, and it comes back
    if this run does not publish (`restore_previous`); other earlier files are removed: all with
    --overwrite, all but the prepared parts with --resume. Returns how many prepared parts are kept."""
    refuse_unsafe_entries(output)
    recover_previous(output)
    foreign = foreign_files(output)
    if CARD_FILE in foreign:  # the run writes its dataset card there
        raise OutputError(f"--output {output} holds a {CARD_FILE} refinery did not write, where a run writes its "
                          "dataset card: move it out, or choose another --output")
    existing = _matching(output, [p for p in OWN_PATTERNS if p != LOCK_FILE])
    # Beside a run's outputs, a file of the user's (a screenshot of report.html, notes) stays where it is and is never
    # removed; inside the folders readers glob (data/, ledger/, ...) it would pass for output, and a folder with no
    # output of ours is someone else's: both are refused.
    beside = [f for f in foreign if "/" not in f] if existing else []
    refused = [f for f in foreign if f not in beside]
    if refused:
        shown = ", ".join(refused[:5]) + (f" and {len(refused) - 5} more" if len(refused) > 5 else "")
        if existing:
            raise OutputError(f"--output {output} holds files refinery did not write in the folders it writes "
                              f"({shown}); move them out, or choose another --output")
        raise OutputError(f"--output {output} holds files refinery did not write ({shown}); "
                          "choose an empty or new folder")
    if beside:
        print(f"[refinery] {output} also holds {', '.join(beside[:5])}{' and more' if len(beside) > 5 else ''}, "
              "which refinery did not write: left in place", file=sys.stderr)
    prepared = _matching(output, PREPARED_PATTERNS)
    parts = sum(1 for p in prepared if p.endswith(".done.json"))
    manifests = [p for p in existing if os.path.basename(p) == "manifest.json"]
    if existing and not (overwrite or resume):
        if parts and not manifests:
            raise OutputError(f"{output} holds the prepared parts of an unfinished run ({parts} input file(s) done): "
                              "pass --resume to reuse them (same inputs and settings), --overwrite to start over, "
                              "or choose another --output")
        raise OutputError(f"{output} already holds a run's outputs ({len(existing)} files); pass --overwrite to "
                          "replace them, --resume to rerun reusing its prepared parts, or choose another --output")
    if is_local(output) and os.path.exists(os.path.join(output, "manifest.json")):
        _set_aside(output, with_prepared=overwrite)
        existing = _matching(output, [p for p in OWN_PATTERNS if p != LOCK_FILE])
    kept = set(prepared) if resume else set()
    _delete(manifests if not is_local(output) else [])
    _delete([p for p in existing if p not in manifests and p not in kept])
    if is_local(output):
        os.makedirs(output, exist_ok=True)
    return parts if resume else 0


def refuse_unsafe_entries(output: str) -> None:
    """A run writes only regular files it creates: a symbolic link or a special file anywhere in the output folder
    (someone else's, on a shared filesystem) is refused before anything is written."""
    if not is_local(output):
        return
    found = files.unsafe_entries(output)
    if found:
        path, what = found[0]
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise OutputError(f"--output {output} holds {what} at {path}{more}; refinery writes only regular files it "
                          "creates in its output folder and never through a link: remove it, or choose another "
                          "--output")


def _set_aside(output: str, with_prepared: bool) -> None:
    """The complete output into PREVIOUS_DIR, manifest first; with --overwrite its prepared parts too (a failed
    overwrite puts back an output whose phase 2 can still be rerun with --resume); --resume reuses them in place."""
    previous = os.path.join(output, PREVIOUS_DIR)
    os.makedirs(previous)
    for name in (*PUBLISHED, *((PREPARED_DIR,) if with_prepared else ())):  # manifest.json first: from here on the
        if os.path.lexists(os.path.join(output, name)):                      # folder does not claim to be complete
            os.rename(os.path.join(output, name), os.path.join(previous, name))


def restore_previous(output: str) -> bool:
    """This run did not publish: its partial outputs go and a complete earlier output set aside comes back
    (its report too; this run's report, if it wrote one, is kept as report.failed.json/.html). True if one
    came back."""
    previous = os.path.join(output, PREVIOUS_DIR) if is_local(output) else None
    if previous is None or not os.path.isdir(previous):
        return False
    for name, failed in FAILED_REPORTS.items():
        if os.path.exists(os.path.join(output, name)):
            os.replace(os.path.join(output, name), os.path.join(output, failed))
    replaced = [*PUBLISHED, *((PREPARED_DIR,) if os.path.lexists(os.path.join(previous, PREPARED_DIR)) else ())]
    _delete([os.path.join(output, name) for name in replaced if os.path.lexists(os.path.join(output, name))])
    for name in reversed(replaced):  # the manifest last: the folder claims completeness once all is back
        if os.path.lexists(os.path.join(previous, name)):
            os.rename(os.path.join(previous, name), os.path.join(output, name))
    os.rmdir(previous)
    return True


def discard_previous(output: str) -> None:
    """This run published: the earlier output set aside is no longer needed."""
    if is_local(output):
        shutil.rmtree(os.path.join(output, PREVIOUS_DIR), ignore_errors=True)


def recover_previous(output: str) -> None:
    """A run that died (kill -9) after setting an earlier output aside: if it had published (a manifest is
    there), the earlier output goes; if not, it comes back, as that run would have done."""
    if not is_local(output) or not os.path.isdir(os.path.join(output, PREVIOUS_DIR)):
        return
    if os.path.exists(os.path.join(output, "manifest.json")):
        discard_previous(output)
    else:
        remove_partial(output)
        restore_previous(output)


def refuse_missing_plugins(output: str) -> None:
    """--resume: the earlier run's manifest and prepared parts name the stage packages they were made with; one
    this installation lacks would leave its filtering out of a corpus published in place of theirs, so the run is
    refused (one line naming each). Another version of a package redoes the parts (their digest holds it)."""
    from stages.table import missing_plugin_stages

    recorded: dict[str, set[str]] = {}
    for path in _matching(output, ["manifest.json", f"{PREVIOUS_DIR}/manifest.json", f"{PREPARED_DIR}/*.done.json"]):
        found = storage.read_json(path) or {}
        for name, stages in (found.get("plugins") or {}).items():
            recorded.setdefault(name, set()).update(stages)
    missing = missing_plugin_stages({name: sorted(stages) for name, stages in recorded.items()})
    if missing:
        package = missing[0].split(" of ", 1)[1].split(" (", 1)[0].replace(" ", "==")
        raise OutputError(f"--resume into {output}: its run was made with {'; '.join(missing)}: install "
                          f"{package} (pip install '{package}'), or pass --overwrite to start over without it")


def lock_note(output: str) -> str | None:
    return (None if is_local(output) or output.startswith("s3://")
            else "output on an object store without conditional writes: no exclusive lock was taken")


def remove_finished(output: str) -> None:
    """Phase 2's intermediate copies of the finished documents, once the shards are written."""
    _delete(_matching(output, FINISHED_PATTERNS))
    folder = os.path.join(output, "_finished")
    if is_local(output) and os.path.isdir(folder) and not os.listdir(folder):
        os.rmdir(folder)


def remove_partial(output: str) -> None:
    """After an interrupted or failed job: our temporary files go; finished shards stay until --overwrite."""
    try:
        _delete(_matching(output, ["ledger/beam-temp-*", "data/.part-*.tmp", "_shard_stats", ".manifest.json.tmp",
                                   "signatures/.part-*.tmp", "prepared/.*.tmp", *FINISHED_PATTERNS,
                                   *(f"{split}/{p}" for split in SPLITS for p in ("_shard_stats", "data/.part-*.tmp"))]))
    except Exception:  # best effort: the interrupted run's message matters more
        pass


def _matching(output: str, patterns) -> list[str]:
    """Paths (files and folders) under `output` matching `patterns`. Beam's local match lists files only,
    which would leave Beam's own temp folders behind."""
    if is_local(output):
        return sorted({p for pattern in patterns for p in glob.glob(os.path.join(output, pattern))})
    # An object store has no folders: a pattern that names one (Beam's temp folders, _shard_stats) matches the
    # objects below it through `/**` (a `*` of Beam's patterns stops at `/`).
    found = FileSystems.match([FileSystems.join(output, p + tail) for p in patterns for tail in ("", "/**")])
    return sorted({m.path for r in found for m in r.metadata_list})


def _delete(paths: list[str]) -> None:
    for path in paths:
        if is_local(path) and os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        elif is_local(path):
            os.remove(path)
        else:
            FileSystems.delete([path])


def compare_outputs(expected: str, found: str) -> list[str]:
    """What differs between two runs' local outputs: shard files byte for byte (data/ and the splits), ledger
    and edit book rows in any order (bundle order decides those files' row order), and the report's funnel,
    kept, held-out, dedup and edits figures. [] when they match."""
    import hashlib

    import pyarrow.parquet as pq

    def digests(folder: str) -> dict[str, str]:
        return {os.path.basename(p): hashlib.sha256(open(p, "rb").read()).hexdigest()
                for p in sorted(glob.glob(os.path.join(folder, "part-*.parquet")))}

    def ledger_rows(out: str, book: str = LEDGER_DIR) -> list:
        paths = sorted(glob.glob(os.path.join(out, book, "part-*.parquet")))
        return sorted(repr(sorted(row.items())) for p in paths for row in pq.read_table(p).to_pylist())

    def figures(out: str) -> dict:
        with open(os.path.join(out, "report.json"), encoding="utf-8") as fh:
            report = json.load(fh)
        return {"funnel": [{k: f[k] for k in ("stage", "in", "kept", "dropped_by_reason", "notes") if k in f}
                           for f in report["funnel"]],
                **{k: report.get(k) for k in ("kept", "held_out", "ledger", "dedup", "edits")}}

    differences = []
    for folder in ("data", *(f"{split}/data" for split in SPLITS)):
        a, b = digests(os.path.join(expected, folder)), digests(os.path.join(found, folder))
        if a != b:
            differing = sorted(name for name in a.keys() | b.keys() if a.get(name) != b.get(name))
            differences.append(f"{folder}/: {len(a)} vs {len(b)} shard files; differing: {', '.join(differing[:5])}")
    for book in (LEDGER_DIR, EDITS_DIR):
        if ledger_rows(expected, book) != ledger_rows(found, book):
            differences.append(f"{book} rows differ")
    a, b = figures(expected), figures(found)
    differences += [f"report.json {key} differs" for key in a if a[key] != b[key]]
    return differences
