"""Element selectors compiled from XPath text into Python loops (for trafilatura's selectors).

trafilatura finds boilerplate and content containers with ~20 XPath expressions over attribute
values (`re:test(@class, '…')`, `contains(@id, '…')`). lxml runs every `re:test` as a Python
callback that first turns the attribute node-set into Python strings and element proxies, for every
candidate element: on real pages that was half of extraction time. The same predicates as a Python
loop over `iterdescendants(tags)` with `el.get` select the same elements in the same order several
times faster.

Nothing is hand-translated: `compile_selector` parses the small XPath subset trafilatura uses and
returns None for anything else, which then stays an lxml XPath (stages/extraction/trafilatura_speedups.py
swaps them in). tests/stages/extraction/test_xpath_compiler.py checks, expression by expression on real pages
and on generated attribute combinations, that both select the same elements in the same order.

Semantics kept exactly (XPath 1.0 as libxml2 and lxml implement it):
- `.//*[…]` = the descendants of the context element, document order; `(…)[1]` = the first of
  them; `.//*[…][1]` = every match that is the first matching child of its parent.
- a node-set used as a string (`contains(@id|@class, …)`, `re:test(@id, …)`) is the value of
  its first node in document order, which for attributes is their order on the element; an
  empty node-set is ''. `@a='v'` is true if any node of the set has that value.
- `re:test(s, p, flags)` is lxml's EXSLT: `re.compile(p, re.I if 'i' in flags).search(s)`.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence

from lxml import etree

EXSLT_REGEXP = "http://exslt.org/regular-expressions"

_TOKEN = re.compile(r"""\s*(?:
    (?P<string>'[^']*'|"[^"]*")
  | (?P<number>\d+)
  | (?P<symbol>\.//|//|::|[()\[\]|,=@*])
  | (?P<name>[A-Za-z_][\w.-]*(?::[A-Za-z_][\w.-]*)?)
)""", re.X)


class Unsupported(Exception):
    """The expression uses XPath this compiler does not handle; keep lxml's."""


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens, pos, end = [], 0, len(text.rstrip())
    while pos < end:
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise Unsupported(f"cannot read {text[pos:pos + 20]!r}")
        kind = m.lastgroup
        tokens.append((kind, m.group(kind)))
        pos = m.end()
    return tokens


class _Expr:
    """A compiled sub-expression. Attribute node-sets stay symbolic (`names`) until used."""

    def __init__(self, source: str, kind: str, literal: bool = False, variables: Sequence[str] = (),
                 names: Sequence[str] = (), self_tags: list[str] | None = None):
        self.source, self.kind, self.literal = source, kind, literal
        self.variables, self.names = list(variables), list(names)
        # set when the expression is nothing but `self::a or self::b …`: a tag filter for the loop
        self.self_tags = self_tags

    def boolean(self) -> str:
        if self.kind == "bool":
            return self.source
        if self.kind == "attrs":  # a node-set is true when it is not empty
            return "(" + " or ".join(f"{v} is not None" for v in self.variables) + ")"
        raise Unsupported("a string used as a condition")

    def string(self) -> str:
        if self.kind == "str":
            return self.source
        if self.kind == "attrs":
            if len(self.variables) == 1:
                return f"({self.variables[0]} or '')"
            if len(self.variables) == 2:  # only when both are present does their order matter
                a, b = self.variables
                return (f"({a} if {b} is None else {b} if {a} is None else "
                        f"_first(el, {tuple(self.names)!r}, ({a}, {b})))")
            return f"_first(el, {tuple(self.names)!r}, ({', '.join(self.variables)},))"
        raise Unsupported("a condition used as a string")

    def string_test(self, test: str, true_on_empty: bool) -> str:
        """`test` (Python source with {} for this string) with the absent-attribute case decided
        up front: an absent attribute set is '', whose result `true_on_empty` is known."""
        if self.kind != "attrs":
            return test.format(self.string())
        absent = " and ".join(f"{v} is None" for v in self.variables)
        if true_on_empty:
            return f"(({absent}) or {test.format(self.string())})"
        return f"(not ({absent}) and {test.format(self.string())})"


class _Path:
    """`.//tag[pred]…` with an optional final `[1]` (first match per parent), or `(…)[1]`."""

    def __init__(self, tag: str, predicates: list[_Expr], first_per_parent: bool, first: bool = False):
        self.tag, self.predicates = tag, predicates
        self.first_per_parent, self.first = first_per_parent, first


class _Parser:
    """Recursive descent over trafilatura's XPath subset, emitting Python source."""

    def __init__(self, text: str, namespaces: dict[str, str]):
        self.tokens = _tokenize(text)
        self.pos = 0
        self.namespaces = namespaces
        self.constants: dict[str, object] = {}
        self.attribute_variables: dict[str, str] = {}  # attribute name -> local variable

    def peek(self, offset: int = 0) -> tuple[str, str]:
        i = self.pos + offset
        return self.tokens[i] if i < len(self.tokens) else ("end", "")

    def take(self, value: str | None = None, kind: str | None = None) -> str:
        tok_kind, tok_value = self.peek()
        if (value is not None and tok_value != value) or (kind is not None and tok_kind != kind) or tok_kind == "end":
            raise Unsupported(f"expected {value or kind}, found {tok_value!r}")
        self.pos += 1
        return tok_value

    def accept(self, value: str) -> bool:
        if self.peek()[0] in ("symbol", "name") and self.peek()[1] == value:
            self.pos += 1
            return True
        return False

    def constant(self, value: object) -> str:
        name = f"_c{len(self.constants)}"
        self.constants[name] = value
        return name

    # paths
    def union(self) -> list[_Path]:
        paths = [self.path()]
        while self.accept("|"):
            paths.append(self.path())
        return paths

    def path(self) -> _Path:
        if self.accept("("):
            inner = self.union()
            self.take(")")
            self.take("[")
            if self.take(kind="number") != "1" or len(inner) != 1:
                raise Unsupported("only (path)[1]")
            self.take("]")
            return _Path(inner[0].tag, inner[0].predicates, inner[0].first_per_parent, first=True)
        self.take(".//")
        tag = self.take("*") if self.peek()[1] == "*" else self.take(kind="name")
        if ":" in tag:
            raise Unsupported("a prefixed element name")
        predicates, first_per_parent = [], False
        while self.accept("["):
            if first_per_parent:
                raise Unsupported("a predicate after [1]")
            if self.peek()[0] == "number":
                if self.take() != "1":
                    raise Unsupported("a position other than [1]")
                first_per_parent = True
            else:
                predicates.append(self.or_expr())
            self.take("]")
        return _Path(tag, predicates, first_per_parent)

    # predicates
    def or_expr(self) -> _Expr:
        parts = [self.and_expr()]
        while self.accept("or"):
            parts.append(self.and_expr())
        if len(parts) == 1:
            return parts[0]
        tags = [t for p in parts for t in p.self_tags or ()] if all(p.self_tags for p in parts) else None
        return _Expr("(" + " or ".join(p.boolean() for p in parts) + ")", "bool", self_tags=tags)

    def and_expr(self) -> _Expr:
        parts = [self.comparison()]
        while self.accept("and"):
            parts.append(self.comparison())
        return parts[0] if len(parts) == 1 else _Expr("(" + " and ".join(p.boolean() for p in parts) + ")", "bool")

    def comparison(self) -> _Expr:
        left = self.primary()
        if not self.accept("="):
            return left
        right = self.primary()
        if left.kind != "attrs" or not right.literal:
            raise Unsupported("a comparison other than @attr='literal'")
        return _Expr("(" + " or ".join(f"{v} == {right.source}" for v in left.variables) + ")", "bool")

    def primary(self) -> _Expr:
        kind, value = self.peek()
        if kind == "string":
            self.pos += 1
            return _Expr(self.constant(value[1:-1]), "str", literal=True)
        if value == "@":
            return self.attributes()
        if value == "(":
            self.take("(")
            inner = self.or_expr()
            self.take(")")
            return inner
        if value == ".//":  # existence of a descendant, as in not(.//h1)
            self.take(".//")
            name = self.take(kind="name")
            if ":" in name or self.peek()[1] in ("[", "/", "//", ".//"):
                raise Unsupported("a nested path with steps or predicates")
            return _Expr(f"(el.find({self.constant('.//' + name)}) is not None)", "bool")
        if kind == "name" and self.peek(1)[1] == "::":
            axis = self.take()
            self.take("::")
            name = self.take(kind="name")
            if axis != "self" or ":" in name:
                raise Unsupported(f"the {axis} axis")
            return _Expr(f"(tag == {self.constant(name)})", "bool", self_tags=[name])
        if kind == "name" and self.peek(1)[1] == "(":
            return self.function(self.take())
        raise Unsupported(f"unexpected {value!r}")

    def attributes(self) -> _Expr:
        names = []
        while True:
            self.take("@")
            names.append(self.take(kind="name"))
            if not (self.peek()[1] == "|" and self.peek(1)[1] == "@"):
                break
            self.take("|")
        if any(":" in n for n in names):
            raise Unsupported("a namespaced attribute")
        variables = [self.attribute_variables.setdefault(n, f"a{len(self.attribute_variables)}") for n in names]
        return _Expr("", "attrs", variables=variables, names=names)

    def function(self, name: str) -> _Expr:
        self.take("(")
        args = [self.or_expr()]
        while self.accept(","):
            args.append(self.or_expr())
        self.take(")")
        if name == "not" and len(args) == 1:
            return _Expr(f"(not {args[0].boolean()})", "bool")
        if name in ("contains", "starts-with") and len(args) == 2:
            test = "({} in {{}})" if name == "contains" else "{{}}.startswith({})"
            if not args[1].literal:
                return _Expr(test.format(args[1].string()).format(args[0].string()), "bool")
            true_on_empty = self.constants[args[1].source] == ""
            return _Expr(args[0].string_test(test.format(args[1].source), true_on_empty), "bool")
        if name == "translate" and len(args) == 3 and args[1].literal and args[2].literal:
            source, target = self.constants[args[1].source], self.constants[args[2].source]
            table: dict[int, str | None] = {}
            for i, char in enumerate(source):  # XPath: the first occurrence of a character decides
                table.setdefault(ord(char), target[i] if i < len(target) else None)
            return _Expr(f"{args[0].string()}.translate({self.constant(table)})", "str")
        prefix, _, local = name.rpartition(":")
        if prefix and self.namespaces.get(prefix) == EXSLT_REGEXP and local == "test" and len(args) in (2, 3) \
                and all(a.literal for a in args[1:]):
            flags = self.constants[args[2].source] if len(args) == 3 else ""
            if set(flags) - {"i", "g"}:
                raise Unsupported(f"regular-expression flags {flags!r}")
            pattern = re.compile(self.constants[args[1].source], re.UNICODE | (re.IGNORECASE if "i" in flags else 0))
            # Pages repeat their class and id values many times: a memo in front of the regex
            # answers repeats in C (lru_cache), the regex runs once per distinct value.
            test = f"{self.constant(functools.lru_cache(maxsize=_MEMO_SIZE)(_searcher(pattern)))}({{}})"
            return _Expr(args[0].string_test(test, pattern.search("") is not None), "bool")
        raise Unsupported(f"the function {name} with {len(args)} arguments")


_MEMO_SIZE = 4096  # per test; pages repeat a few hundred values, and a bound keeps workers small


def _searcher(pattern: re.Pattern) -> Callable[[str], bool]:
    search = pattern.search
    return lambda value: search(value) is not None


def _first(el, names: tuple[str, ...], values: tuple[str | None, ...]) -> str:
    """String value of an attribute node-set: the first present attribute in the element's order."""
    present = [v for v in values if v is not None]
    if len(present) <= 1:
        return present[0] if present else ""
    for key in el.keys():
        if key in names:
            return values[names.index(key)]
    return ""


def _path_source(path: _Path, index: int, attribute_variables: dict[str, str]) -> str:
    """Python source of `def _pN(tree) -> list` for one path."""
    predicates = list(path.predicates)
    tag_filter = "_Element"  # elements only: no comments, processing instructions or entities
    if path.tag != "*":
        tag_filter = repr(path.tag)
    elif predicates and predicates[0].self_tags:
        tag_filter = "*" + repr(tuple(predicates[0].self_tags))
        predicates = predicates[1:]
    condition = " and ".join(p.boolean() for p in predicates) or "True"
    used = [(name, var) for name, var in attribute_variables.items() if re.search(rf"\b{var}\b", condition)]
    lines = [f"def _p{index}(tree):", "    out = []"]
    if path.first_per_parent:
        lines.append("    parents = set()")
    lines.append(f"    for el in tree.iterdescendants({tag_filter}):")
    if re.search(r"\btag\b", condition):
        lines.append("        tag = el.tag")
    if used:
        lines.append("        get = el.get")
        lines.extend(f"        {var} = get({name!r})" for name, var in used)
    lines.append(f"        if {condition}:")
    if path.first_per_parent:
        lines += ["            parent = el.getparent()", "            if parent in parents:",
                  "                continue", "            parents.add(parent)"]
    lines.append("            out.append(el)")
    if path.first:
        lines.append("            break")
    lines.append("    return out")
    return "\n".join(lines)


class CompiledSelector:
    """Callable like an lxml XPath on an element: returns the matching elements in document order."""

    def __init__(self, path_text: str, function: Callable, source: str, xpath: etree.XPath):
        self.path = path_text  # the XPath text, as lxml's XPath.path
        self.source = source  # the generated Python, for reading and debugging
        self._function = function
        self._xpath = xpath  # for what the loop does not cover: a document as context, XPath variables

    def __call__(self, tree, **variables) -> list:
        if variables or not isinstance(tree, etree._Element):
            return self._xpath(tree, **variables)
        return self._function(tree)

    def __repr__(self) -> str:
        return f"CompiledSelector({' '.join(self.path.split())[:60]!r}…)"


def _union(tree, results: list[list]) -> list:
    non_empty = [r for r in results if r]
    if len(non_empty) <= 1:
        return non_empty[0] if non_empty else []
    elements = list(tree.iter())  # held, so that no id() is reused while the positions are in use
    position = {id(el): i for i, el in enumerate(elements)}
    merged = {id(el): el for r in non_empty for el in r}
    return [merged[k] for k in sorted(merged, key=position.__getitem__)]


def compile_selector(path_text: str, namespaces: dict[str, str] | None = None) -> CompiledSelector | None:
    """A Python selector equal to the XPath `path_text`, or None if it uses unsupported XPath."""
    try:
        xpath = etree.XPath(path_text, namespaces=namespaces)
        parser = _Parser(path_text, namespaces or {})
        paths = parser.union()
        if parser.pos != len(parser.tokens):
            raise Unsupported(f"trailing {parser.peek()[1]!r}")
    except (Unsupported, re.error, etree.XPathSyntaxError):
        return None
    source = "\n".join(_path_source(p, i, parser.attribute_variables) for i, p in enumerate(paths))
    if len(paths) == 1:
        source += "\nselect = _p0\n"
    else:
        calls = ", ".join(f"_p{i}(tree)" for i in range(len(paths)))
        source += f"\ndef select(tree):\n    return _union(tree, [{calls}])\n"
    namespace = dict(parser.constants, _Element=etree.Element, _first=_first, _union=_union)
    exec(compile(source, "<trafilatura selector>", "exec"), namespace)
    return CompiledSelector(path_text, namespace["select"], source, xpath)

