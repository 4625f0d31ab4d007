"""The suite's two tiers: `job` tests run a whole job or process (a Beam pipeline, `refinery run`, torchrun, any
subprocess); the rest (the unit tier, `make test-fast`) run stages, tasks and hooks on rows in memory. A test is
in the job tier when its own code, a fixture it asks for (and theirs), or a function of ours it calls (three calls
deep) starts one of these; found from the source, so a new test needs no marker, and `make test` runs both tiers."""
from __future__ import annotations

import ast
import functools
import inspect
import re
import textwrap

JOB_STARTS = re.compile(
    r"(?<![.\w])run\(|refinery\.run\(|api\.run\(|subprocess\.|\bPopen\(|beam\.Pipeline\(|TestPipeline\(|torchrun"
    r"|\bmultiprocessing\.|\bProcessPoolExecutor\(|mp\.spawn\(|\.spawn\(|local_cluster|built_once\(")
DEPTH = 3


@functools.cache
def _source(function) -> str:
    try:
        return textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return ""


def _called_functions(source: str, namespace: dict) -> list:
    """Our functions (of tests/, pipeline/, ...: not libraries') called by name in `source`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    called = {node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    found = []
    for name in sorted(called):
        value = namespace.get(name)
        module = getattr(value, "__module__", "") or ""
        if inspect.isfunction(value) and module.split(".")[0] == "tests":
            found.append(value)
    return found


def _starts_a_job(function, depth: int = DEPTH) -> bool:
    source = _source(function)
    if JOB_STARTS.search(source):
        return True
    if depth == 0:
        return False
    return any(_starts_a_job(f, depth - 1) for f in _called_functions(source, getattr(function, "__globals__", {})))


def is_job_test(item) -> bool:
    functions = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info is not None else ()):
        functions += [d.func for d in defs]
    return any(f is not None and _starts_a_job(f) for f in functions)
