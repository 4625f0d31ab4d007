import pytest

from pipeline.job.config import ConfigError, RunConfig, load_config
from pipeline.job.run import build_parser, config_from_args
from tests.conftest import REPO


def test_default_yaml_equals_built_in_defaults():
    assert load_config(str(REPO / "configs" / "default.yaml")) == RunConfig()


def test_flags_override_yaml(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("langid:\n  threshold: 0.5\n  languages: [en]\nextract:\n  timeout_s: 2\n")
    args = build_parser().parse_args(["--input", "x", "--output", "o", "--config", str(cfg),
                                      "--languages", "de,fr", "--extract-timeout", "none"])
    config = config_from_args(args)
    assert config.langid.threshold == 0.5           # from YAML
    assert config.langid.languages == ("de", "fr")  # flag wins
    assert config.extract.timeout_s is None
    assert config.inputs == ("x",)


@pytest.mark.parametrize("yaml_text, message", [
    ("langid:\n  treshold: 0.5\n", "unknown setting langid.treshold"),
    ("langid:\n  threshold: high\n", "expected a number"),
    ("langid:\n  threshold: 1.5\n", r"threshold must be in \[0, 1\]"),
    ("extract:\n  timeout_s: -1\n", "timeout_s must be positive"),
    ("- a list\n", "top level must be a mapping"),
])
def test_bad_config_is_a_clear_error(tmp_path, yaml_text, message):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(yaml_text)
    with pytest.raises(ConfigError, match=message):
        load_config(str(cfg))


def test_a_config_from_a_pipe_is_read_once():
    """`--config <(envsubst < template.yaml)` is a pipe: it can be read once, and the settings must come from that
    one read (they were silently the defaults when the file was read three times)."""
    import os

    read_end, write_end = os.pipe()
    os.write(write_end, b"langid:\n  threshold: 0.42\n")
    os.close(write_end)  # a second read finds the pipe empty (and does not block)
    try:
        config = load_config(f"/dev/fd/{read_end}")
    finally:
        os.close(read_end)
    assert config.langid.threshold == 0.42 and "langid.threshold" in config.user_settings


def test_missing_input_or_output_is_an_error():
    with pytest.raises(ConfigError, match="no input"):
        config_from_args(build_parser().parse_args(["--output", "o"]))
    with pytest.raises(ConfigError, match="no output"):
        config_from_args(build_parser().parse_args(["--input", "x"]))


def test_extract_fast_and_fault_injection_flags():
    args = build_parser().parse_args(["--input", "x", "--output", "o", "--extract-fast",
                                      "--inject-error", "langid=example.com"])
    config = config_from_args(args)
    assert config.extract.fast is True and config.extract.trafilatura_options()["fast"] is True
    assert config.inject_errors == ("langid=example.com",)
    assert config_from_args(build_parser().parse_args(["--input", "x", "--output", "o"])).extract.fast is False
    with pytest.raises(ConfigError, match="STAGE=URL_SUBSTRING"):
        config_from_args(build_parser().parse_args(["--input", "x", "--output", "o", "--inject-error", "langid"]))


def test_repeated_list_options_add_up():
    """`--languages en --languages de` means both (argparse's nargs='+' alone keeps the last); the same for
    the classifier trainers' --positive/--negative files."""
    from pipeline.commands.train_quality_cli import build_parser as trainer_parser

    args, _ = build_parser().parse_known_args(["--input", "x.warc.gz", "--output", "o", "--languages", "en",
                                               "--languages", "de", "fr"])
    assert config_from_args(args).langid.languages == ("en", "de", "fr")
    parsed = trainer_parser("train-quality").parse_args(["--positive", "a", "--positive", "b", "c", "--negative", "n",
                                                         "--output", "m.ftz"])
    assert parsed.positive == ["a", "b", "c"] and parsed.negative == ["n"]


def test_the_fineweb_plus_recipe_is_the_defaults_with_paragraph_dedup():
    import dataclasses

    plus = load_config(str(REPO / "configs" / "fineweb-plus.yaml"))
    assert plus.paragraph_dedup.enabled
    assert dataclasses.replace(plus, paragraph_dedup=RunConfig().paragraph_dedup) == RunConfig()
