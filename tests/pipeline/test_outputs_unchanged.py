"""The outputs of two real runs, held to the digests recorded before the last refactor (tests/golden.py): the
demo's WARCs with every default, and two sources mixed with repeats and an anneal split. A change that is
meant to change what a run writes records them again (REFINERY_WRITE_GOLDEN=1) and says so in its commit."""
from tests.golden import check_against_golden


def test_demo_run_writes_what_it_wrote_before(demo_run):
    out, _ = demo_run
    check_against_golden("demo_run", out)


def test_mixed_run_writes_what_it_wrote_before(mixed_run):
    tmp, _, _ = mixed_run
    check_against_golden("mixed_run", tmp / "a")
