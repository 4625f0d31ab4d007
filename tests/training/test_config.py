"""Training options from YAML and the command line end in one TrainConfig; bad files fail clearly."""
import dataclasses
import re

import pytest

from common.settings import ConfigError
from training.config import TrainConfig, parse


def write(tmp_path, text, name="train.yaml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_yaml_sets_options_and_the_command_line_overrides(tmp_path):
    path = write(tmp_path, "data: shards\nout: run\nseq-len: 64\nlr: 3e-4\nstrategy: fsdp\nbeta2: 0.99\n"
                           "spike:\n  factor: 4\n  window: 30\n".replace("window", "skip_window"))
    cfg = parse(["--config", path, "--lr", "0.002"])
    assert (cfg.data, cfg.out, cfg.seq_len, cfg.strategy, cfg.beta2) == ("shards", "run", 64, "fsdp", 0.99)
    assert cfg.lr == 0.002  # command line wins over the file's 3e-4 (a string to YAML 1.1)
    assert cfg.spike.factor == 4.0 and cfg.spike.skip_window == 30
    assert parse(["--config", path]).lr == 3e-4
    assert cfg.micro_batch == TrainConfig(data="", out="").micro_batch  # untouched options keep defaults


def test_a_runs_saved_config_repeats_the_run(tmp_path):
    original = parse(["--data", "shards", "--out", "run", "--seq-len", "32", "--precision", "bf16",
                      "--grad-checkpoint", "--inject-fault", "3:nan", "--spike-factor", "5"])
    path = write(tmp_path, original.to_json(), "train_config.json")
    assert parse(["--config", path]) == original
    assert dataclasses.asdict(parse(["--config", path, "--out", "run2"])) == dict(dataclasses.asdict(original), out="run2")


@pytest.mark.parametrize("text, message", [
    ("data: d\nout: o\nseq_lenn: 3\n", "unknown setting seq_lenn"),
    ("data: d\nout: o\nseq_len: '64'\n", "seq_len: expected an integer"),
    ("data: d\nout: o\ngrad_checkpoint: 1\n", "grad_checkpoint: expected true or false"),
    ("data: d\nout: o\nstrategy: zero\n", "--strategy must be one of"),
    ("data: d\nout: o\nspike: {factr: 3}\n", "unknown setting spike.factr"),
    ("data: d\nout: o\ninject: [[2, boom]]\n", "inject: expected"),
    ("- a\n- b\n", "top level must be a mapping"),
    ("data: d\nout: [unclosed\n", "cannot read --config"),
])
def test_bad_config_files_fail_with_the_reason(tmp_path, text, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse(["--config", write(tmp_path, text)])


def test_flags_and_set_use_the_same_checks(tmp_path):
    assert parse(["--data", "d", "--out", "o", "--set", "spike.factor=4", "--spike-window", "7"]).spike.skip_window == 7
    assert parse(["--data", "d", "--out", "o", "--set", "spike.factor=4"]).spike.factor == 4.0
    with pytest.raises(ConfigError, match="seq_len: expected an integer, got 'long'"):
        parse(["--data", "d", "--out", "o", "--seq-len", "long"])
    with pytest.raises(ConfigError, match="unknown setting spike.fctor"):
        parse(["--data", "d", "--out", "o", "--set", "spike.fctor=4"])
    with pytest.raises(ConfigError, match=r"spike: must be >= 1: skip_window"):
        parse(["--data", "d", "--out", "o", "--spike-window", "0"])


def test_data_and_out_are_required_somewhere(tmp_path):
    with pytest.raises(ConfigError, match="--out required"):
        parse(["--config", write(tmp_path, "data: d\n")])
    with pytest.raises(ConfigError, match="cannot read --config"):
        parse(["--config", str(tmp_path / "nope.yaml")])


def test_bundled_example_states_the_defaults():
    from tests.conftest import REPO

    assert parse(["--config", str(REPO / "configs" / "train.yaml")]) == TrainConfig(data="out/demo", out="out/run1")
