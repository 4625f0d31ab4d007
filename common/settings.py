"""One config mechanism for every command: YAML file -> typed dataclasses -> command-line flags.

A setting is a dataclass field; its help text is the comment beside (or right above) it, so the
dataclass is the only place a default and its reason are written. From there come the flags
(`--section-field`, help and default included), the generic `--set section.field=value`, the
commented default YAML file, and type checks with one error style. Validation of values lives in
each config's `__post_init__` (raising `ConfigError`). Both `pipeline/` and `training/` use this
module, so it imports neither.
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import inspect
import io
import math
import textwrap
import tokenize
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import yaml

FLAG_PREFIX = "setting:"  # argparse dest of a generated flag: "setting:<dotted key>"


class ConfigError(ValueError):
    """A setting is wrong: one line that names it."""


def error_text(exc: BaseException) -> str:
    """An error as one line for a terminal: an OSError as "PATH: what happened" (not Python's "[Errno 2] No such
    file or directory: 'PATH'"), anything else as its message; long ones cut."""
    if isinstance(exc, OSError) and exc.strerror:
        what = exc.strerror[:1].lower() + exc.strerror[1:]
        text = f"{exc.filename}: {what}" if exc.filename is not None else what
        if exc.filename2 is not None:
            text += f" (and {exc.filename2})"
    else:
        text = str(exc) or type(exc).__name__
    text = " ".join(text.split())
    return text if len(text) < 2000 else text[:2000] + " ..."


def check(condition: bool, message: str) -> None:
    """For `__post_init__`: raise ConfigError(message) unless condition holds."""
    if not condition:
        raise ConfigError(message)


def check_not_negative(config: Any) -> None:
    """For rule configs: every number (and every number inside a tuple) is >= 0."""
    bad = [f.name for f in dataclasses.fields(config) if _has_negative(getattr(config, f.name))]
    check(not bad, f"must not be negative: {', '.join(bad)}")


def _has_negative(value: Any) -> bool:
    if isinstance(value, tuple):
        return any(_has_negative(v) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0


def split_commas(items: Iterable[str]) -> tuple[str, ...]:
    """("en,de", "fr") -> ("en", "de", "fr"): for list settings whose items never hold a comma."""
    return tuple(part.strip() for item in items for part in str(item).split(",") if part.strip())


@functools.cache
def per_language(items: tuple[str, ...], setting: str, what: str, low: float = 0.0,
                 high: float = float("inf")) -> dict[str, float]:
    """("de=15", "ja=30") -> {"de": 15.0, "ja": 30.0}: a setting's per-language overrides; an entry without a
    language or with a number outside [low, high] is a ConfigError naming `setting` and `what` the number is."""
    out = {}
    for item in items:
        lang, _, text = str(item).partition("=")
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        bounds = f"a number >= {low:g}" if high == float("inf") else f"a number in [{low:g}, {high:g}]"
        check(bool(lang.strip()) and low <= value <= high,
              f"{setting}: expected LANG={what} ({bounds}), got {item!r}")
        out[lang.strip()] = value
    return out


# ---------------------------------------------------------------- help text from the source

@functools.cache
def field_help(cls: type) -> dict[str, str]:
    """field name -> help: the comment after the field (with the comment-only lines below it that are
    indented further than the field), else the comment block right above it."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):  # made at run time (make_dataclass): no source
        source = ""
    names = {f.name for f in dataclasses.fields(cls)}
    comments, code_lines = _comments(source)
    helps: dict[str, str] = {}
    for number, line in enumerate(source.splitlines(), start=1):
        name = line.strip().split(":", 1)[0].strip()
        if name in names and name not in helps and line[:1].isspace():
            indent = len(line) - len(line.lstrip())
            helps[name] = " ".join(p for p in _comment_of(number, indent, comments, code_lines) if p)
    for base in cls.__mro__[1:]:  # inherited fields keep their help
        if dataclasses.is_dataclass(base):
            for name, text in field_help(base).items():
                helps.setdefault(name, text)
    return helps


def _comments(source: str) -> tuple[dict[int, tuple[int, str, bool]], set]:
    """line -> (column, text, alone on its line) for every comment; the lines holding code."""
    comments: dict[int, tuple[int, str, bool]] = {}
    code_lines = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                alone = tok.line[:tok.start[1]].strip() == ""
                comments[tok.start[0]] = (tok.start[1], tok.string.lstrip("#").strip(), alone)
            elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                code_lines.add(tok.start[0])
    except (tokenize.TokenError, IndentationError):
        pass
    return comments, code_lines


def _comment_of(number: int, indent: int, comments, code_lines) -> list[str]:
    """The comment of the field on line `number`: after it (with the comment-only lines below that are
    indented further than the field), else the comment block right above it."""
    parts: list[str] = []
    if number in comments and not comments[number][2]:
        parts.append(comments[number][1])
        follow = number + 1
        while follow in comments and comments[follow][2] and comments[follow][0] > indent:
            parts.append(comments[follow][1])
            follow += 1
        return parts
    above = number - 1
    while above in comments and comments[above][2] and above not in code_lines:
        parts.insert(0, comments[above][1])
        above -= 1
    return parts


# ---------------------------------------------------------------- building typed configs

def default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return None


def build(cls: type, values: Mapping[str, Any], where: str = "") -> Any:
    """`cls(**values)` with every key known and every value of its field's type; a problem is one
    ConfigError naming the setting (`langid.threshold: expected a number, got 'high'`)."""
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where or 'config'}: expected a mapping, got {type(values).__name__}")
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls) if f.init]
    kwargs = {}
    for key, value in values.items():
        name = str(key).replace("-", "_")
        if name not in known:
            raise ConfigError(f"unknown setting {_join(where, str(key))}; known: {', '.join(sorted(known))}")
        kwargs[name] = coerce(hints[name], value, _join(where, name))
    try:
        return cls(**kwargs)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}" if where and not str(exc).startswith(where) else str(exc)) from None
    except TypeError as exc:  # a required field missing
        raise ConfigError(f"{where or 'config'}: {exc}") from None


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def unoptional(hint: Any) -> tuple[Any, bool]:
    """(X, True) for Optional[X] or `X | None`; (hint, False) for anything else."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(rest) == 1:
            return rest[0], True
    return hint, False


def coerce(hint: Any, value: Any, where: str) -> Any:
    """`value` as `hint` requires, or ConfigError. Numbers may not be bools; floats accept ints and
    numeric strings (YAML 1.1 reads `3e-4` as a string); tuples accept lists (a string is one item)."""
    if dataclasses.is_dataclass(hint):
        return value if isinstance(value, hint) else build(hint, {} if value is None else value, where)
    hint, optional = unoptional(hint)
    if value is None and optional:
        return None
    if typing.get_origin(hint) is tuple:
        return _coerce_tuple(typing.get_args(hint), value, where)
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if hint in (int, float):
        return _coerce_number(hint, value, where)
    if hint is str and not isinstance(value, str):
        raise ConfigError(f"{where}: expected a string, got {value!r}")
    return value


def _coerce_tuple(args: tuple[Any, ...], value: Any, where: str) -> tuple:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"{where}: expected a list, got {value!r}")
    if len(args) == 2 and args[1] is Ellipsis:  # Tuple[X, ...]
        return tuple(coerce(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
    if args and len(args) != len(value):
        raise ConfigError(f"{where}: expected {len(args)} items, got {value!r}")
    return tuple(coerce(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value))) if args else tuple(value)


def _coerce_number(hint: type, value: Any, where: str):
    if hint is float and isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where}: expected {'an integer' if hint is int else 'a number'}, got {value!r}")
    if not math.isfinite(value):
        raise ConfigError(f"{where}: expected a finite number, got {value!r}")
    if hint is int and value != int(value):
        raise ConfigError(f"{where}: expected an integer, got {value!r}")
    return hint(value)


def read_yaml(path: str, flag: str = "--config", fast: bool = False) -> dict[str, Any]:
    """A YAML (or JSON) file's top-level mapping; unreadable or malformed files are one ConfigError.
    `fast`: libyaml's parser where installed (4x faster on large generated files; no line numbers in errors)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader) if fast else yaml.SafeLoader
    try:
        with open(path, encoding="utf-8") as fh:
            values = yaml.load(fh, Loader=loader)  # noqa: S506 - a safe loader
    except OSError as exc:
        raise ConfigError(f"cannot read {flag} {path}: {exc.strerror or exc}") from None
    except RecursionError:  # PyYAML composes nested collections recursively
        raise ConfigError(f"cannot read {flag} {path}: not valid YAML: nested too deeply") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"cannot read {flag} {path}: not valid YAML{at}: "
                          f"{getattr(exc, 'problem', None) or exc}") from None
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ConfigError(f"{flag} {path}: the top level must be a mapping of setting: value, not a {type(values).__name__}")
    return values


def set_dotted(values: dict[str, Any], dotted: str, value: Any) -> None:
    """values["a"]["b"] = value for "a.b", creating (or replacing non-mapping) parents."""
    node = values
    *parents, leaf = dotted.replace("-", "_").split(".")
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[leaf] = value


def load(cls: type, yaml_path: str | None = None, overrides: Mapping[str, Any] | None = None) -> Any:
    """Defaults <- the YAML file <- `overrides` ({"section.key": value}) -> a checked `cls`."""
    return load_values(cls, read_yaml(yaml_path) if yaml_path else {}, overrides)


def load_values(cls: type, values: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> Any:
    """Defaults <- `values` (a YAML file's, already read: a pipe reads once) <- `overrides` -> a checked `cls`."""
    values = copy.deepcopy(dict(values))
    for dotted, value in (overrides or {}).items():
        set_dotted(values, dotted, value)
    return build(cls, values)


# ---------------------------------------------------------------- command-line flags

def flag_name(dotted: str) -> str:
    """"langid.threshold" -> "--langid-threshold"; a section's `enabled` is the section's own flag."""
    parts = dotted.split(".")
    if len(parts) > 1 and parts[-1] == "enabled":
        parts = parts[:-1]
    return "--" + "-".join(parts).replace("_", "-")


def add_flags(parser: argparse.ArgumentParser, cls: type, *, section: str = "", skip: Iterable[str] = (),
              title: str | None = None, aliases: Mapping[str, Sequence[str]] = {}) -> None:
    """One flag per field of `cls` (nested dataclasses recurse, as `--section-field`), with the
    field's help and default. Values stay text until `flag_values` types them, so a bad value is
    the same one-line error as in a YAML file. `aliases`: dotted key -> extra flag names."""
    target = parser.add_argument_group(title) if title else parser
    hints = typing.get_type_hints(cls)
    helps = field_help(cls)
    for f in dataclasses.fields(cls):
        dotted = _join(section, f.name)
        if dotted in skip or not f.init:
            continue
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            doc = (inspect.getdoc(hint) or "").split("\n\n")[0].replace("\n", " ")
            add_flags(parser, hint, section=dotted, skip=skip, aliases=aliases,
                      title=f"{dotted}: {doc}" if doc else dotted)
            continue
        names = [flag_name(dotted), *aliases.get(dotted, ())]
        default = default_of(f)
        text = helps.get(f.name, "")
        text = (text + " " if text else "") + f"(default: {format_value(default)})"
        kwargs: dict[str, Any] = dict(dest=FLAG_PREFIX + dotted, default=argparse.SUPPRESS,
                                      help=text.replace("%", "%%"))
        if hint is bool:
            target.add_argument(*names, action=argparse.BooleanOptionalAction, **kwargs)
        elif _is_tuple(hint):  # --languages en de, or en,de, or '[en, de]'; repeated, they add up
            target.add_argument(*names, nargs="+", action="extend", metavar=_metavar(hint), **kwargs)
        else:
            target.add_argument(*names, metavar=_metavar(hint), **kwargs)


def _is_tuple(hint: Any) -> bool:
    return typing.get_origin(unoptional(hint)[0]) is tuple


def _metavar(hint: Any) -> str:
    hint, optional = unoptional(hint)
    name = {int: "N", float: "X", str: "TEXT"}.get(hint, "LIST" if typing.get_origin(hint) is tuple else "VALUE")
    return f"{name}|none" if optional else name


def parse_flag_text(hint: Any, text: Any) -> Any:
    """A flag's text as a YAML value ("0.5" -> 0.5, "none" -> None, "[a, b]" -> list); plain text
    for string settings and comma lists ("en,de")."""
    if isinstance(text, list):  # a list flag's words
        if len(text) == 1:
            return parse_flag_text(hint, text[0])
        base = unoptional(hint)[0]
        item = typing.get_args(base)[0] if typing.get_args(base) else str
        return [parse_flag_text(item, word) for word in text]
    if not isinstance(text, str):
        return text  # a boolean flag
    base, optional = unoptional(hint)
    if optional and text.strip().lower() in ("none", "null", "~"):
        return None
    if base is str:
        return text
    if typing.get_origin(base) is tuple and not text.lstrip().startswith("["):
        return [text]  # one item; a config may split "en,de" itself
    try:
        return yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError):
        return text  # coerce names the setting and the expected type


def flag_values(namespace: argparse.Namespace, cls: type) -> dict[str, Any]:
    """{dotted key: value} of the generated flags given on the command line."""
    out = {}
    for dest, text in vars(namespace).items():
        if dest.startswith(FLAG_PREFIX):
            dotted = dest[len(FLAG_PREFIX):]
            out[dotted] = parse_flag_text(hint_of(cls, dotted), text)
    return out


def hint_of(cls: type, dotted: str) -> Any:
    """The type of setting `dotted` in `cls`, or ConfigError if there is no such setting."""
    hint: Any = cls
    for part in dotted.split("."):
        if not dataclasses.is_dataclass(hint):
            raise ConfigError(f"unknown setting {dotted}")
        hints = typing.get_type_hints(hint)
        if part not in hints or part not in {f.name for f in dataclasses.fields(hint)}:
            known = ", ".join(sorted(f.name for f in dataclasses.fields(hint)))
            raise ConfigError(f"unknown setting {dotted}; known at that level: {known}")
        hint = hints[part]
    return hint


def add_set_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", dest="set_values",
                        help="set any setting, e.g. --set langid.threshold=0.5 --set dedup.bands=20 "
                             "(VALUE is YAML: none, true, [a, b]); applied after --config, before the other flags")


def set_values(items: Sequence[str], cls: type) -> dict[str, Any]:
    """`--set KEY=VALUE` items -> {dotted key: typed value}."""
    out = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ConfigError(f"--set {item!r}: expected SECTION.KEY=VALUE")
        out[key] = parse_flag_text(hint_of(cls, key), text)
    return out


# ---------------------------------------------------------------- the commented default file

def format_value(value: Any) -> str:
    if dataclasses.is_dataclass(value):
        return "{...}"
    if isinstance(value, tuple):
        value = _plain(value)
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text[:-4].strip() if text.endswith("\n...") or text.endswith(" ...") else text.replace("\n...", "")


def _plain(value: Any) -> Any:
    return [_plain(v) for v in value] if isinstance(value, (tuple, list)) else value


def to_yaml(config: Any, header: str = "", comment_column: int = 36) -> str:
    """`config` as a YAML file with each setting's help as a comment (sections in field order)."""
    out: list[str] = [f"# {line}".rstrip() for line in header.splitlines()]
    _emit(config, out, indent="", comment_column=comment_column)
    return "\n".join(out) + "\n"


def _emit(config: Any, out: list[str], indent: str, comment_column: int) -> None:
    helps = field_help(type(config))
    for f in dataclasses.fields(config):
        if not f.init:
            continue
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            doc = (inspect.getdoc(type(value)) or "").split("\n\n")[0]
            for line in textwrap.wrap(" ".join(doc.split()), 100 - len(indent)) if doc else ():
                out.append(f"{indent}# {line}")
            out.append(f"{indent}{f.name}:")
            _emit(value, out, indent + "  ", comment_column)
            continue
        line = f"{indent}{f.name}: {format_value(value)}"
        text = helps.get(f.name, "")
        if not text:
            out.append(line)
        elif len(line) + 2 > comment_column:  # a long value: its comment goes above it
            out.extend(f"{indent}# {part}" for part in textwrap.wrap(text, 108 - len(indent)))
            out.append(line)
        else:
            wrapped = textwrap.wrap(text, 108 - comment_column)
            out.append(line.ljust(comment_column) + "# " + wrapped[0])
            out.extend(" " * comment_column + "# " + more for more in wrapped[1:])
