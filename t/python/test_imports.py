"""The modules of flux_rsa import each other without a cycle, and each
room (a subpackage such as ``core``, or a top-level module such as
``validate``) imports only from the rooms below it in the layer list of
doc/dataflow.md: every import statement counts, at the top of a module or
inside a function (an import put in a function to dodge a cycle is still
one).  The RAM-disk providers are loaded by name (core.providercaps;
ramdisk.disks.provider) and import no other provider."""

import ast
import os
import re

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
PACKAGE = os.path.join(TOP, "src", "python", "flux_rsa")
DATAFLOW = os.path.join(TOP, "doc", "dataflow.md")


def modules():
    """{dotted name: path} of every module of flux_rsa."""
    found = {}
    top = os.path.dirname(PACKAGE)
    for dirpath, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                dotted = os.path.relpath(path, top)[:-3].replace(os.sep, ".")
                found[dotted.removesuffix(".__init__")] = path
    return found


def imports(path, known):
    """The flux_rsa modules ``path`` imports (``from P import M`` names
    module P.M when it is one, else P)."""

    def resolve(name):
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name

    out = set()
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.Import):
            out.update(resolve(a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.update(
                resolve(f"{node.module}.{a.name}") or resolve(node.module)
                for a in node.names
            )
    return {m for m in out if m and m.startswith("flux_rsa")}


def graph():
    known = modules()
    return {m: imports(p, known) - {m} for m, p in known.items()}


def cycles(edges):
    """The strongly connected components of more than one module."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def layer_list(text):
    """The rooms of the ```layers block of ``text`` (doc/dataflow.md), from
    the top down: the first word of each line that is not blank or a
    comment."""
    found = re.search(r"^```layers\n(.*?)^```", text, re.M | re.S)
    assert found, "doc/dataflow.md has no ```layers block"
    rooms = [
        line.split()[0]
        for line in found.group(1).splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert len(rooms) == len(set(rooms)), f"a room is listed twice: {rooms}"
    return rooms


def room(module):
    """The room of a dotted module name: its subpackage or top-level
    module under flux_rsa (``flux_rsa`` for the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def upward(edges, rooms):
    """The imports that break the layer list ``rooms`` (top down): from a
    room to one above it, or from or to a room the list does not name;
    one line each."""
    height = {name: len(rooms) - i for i, name in enumerate(rooms)}
    bad = []
    for module in sorted(edges):
        mine = room(module)
        if mine not in height:
            bad.append(f"{module}: room {mine!r} is not in the layer list")
            continue
        for other in sorted(edges[module]):
            theirs = room(other)
            if theirs == mine:
                continue
            if theirs not in height:
                bad.append(f"{module} -> {other}: room {theirs!r} is not in the list")
            elif height[theirs] > height[mine]:
                bad.append(f"{module} -> {other}: {mine} may not import {theirs}")
    return bad


def test_every_room_imports_only_from_the_rooms_below_it():
    rooms = layer_list(open(DATAFLOW).read())
    bad = upward(graph(), rooms)
    assert bad == [], "imports against doc/dataflow.md's layers:\n" + "\n".join(bad)


def test_the_layer_check_finds_an_import_that_runs_up_and_an_unknown_room():
    text = "intro\n```layers\n# top\nservice  the broker module\ncore\n```\n"
    rooms = layer_list(text)
    assert rooms == ["service", "core"]
    edges = {
        "flux_rsa.service.a": {"flux_rsa.core.b", "flux_rsa.service.c"},
        "flux_rsa.service.c": set(),
        "flux_rsa.core.b": {"flux_rsa.service.c"},
        "flux_rsa.stray": {"flux_rsa.core.b"},
        "flux_rsa.core.d": {"flux_rsa.stray"},
    }
    assert upward(edges, rooms) == [
        "flux_rsa.core.b -> flux_rsa.service.c: core may not import service",
        "flux_rsa.core.d -> flux_rsa.stray: room 'stray' is not in the list",
        "flux_rsa.stray: room 'stray' is not in the layer list",
    ]
    downward = {k: edges[k] for k in ("flux_rsa.service.a", "flux_rsa.service.c")}
    assert upward(downward, rooms) == []


def test_no_module_of_flux_rsa_is_part_of_an_import_cycle():
    found = cycles(graph())
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_check_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("provider", ["tmpfs", "directory", "glusterfs", "command"])
def test_a_provider_imports_no_other_provider(provider):
    edges = graph()
    mine = f"flux_rsa.ramdisk.providers.{provider}"
    others = {m for m in edges if m.startswith("flux_rsa.ramdisk.providers.")} - {
        mine,
        "flux_rsa.ramdisk.providers.base",
    }
    assert edges[mine] & others == set()


def test_no_provider_is_named_outside_the_ramdisk_package():
    """Outside flux_rsa.ramdisk, code asks core.providercaps what a provider
    can do; it never compares a provider's name."""
    from flux_rsa.core import providercaps

    names = set(providercaps.PROVIDERS)
    offenders = []
    for module, path in modules().items():
        if module.startswith("flux_rsa.ramdisk"):
            continue
        text = open(path).read()
        for node in ast.walk(ast.parse(text, path)):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            if not any(
                "provider" in (ast.get_source_segment(text, s) or "").lower()
                for s in sides
            ):
                continue  # a file's kind "dir" is no provider
            constants = [
                e
                for s in sides
                for e in (
                    s.elts if isinstance(s, (ast.Tuple, ast.List, ast.Set)) else [s]
                )
                if isinstance(e, ast.Constant)
            ]
            offenders += [
                f"{module}:{node.lineno}: {c.value!r}"
                for c in constants
                if c.value in names
            ]
    assert offenders == []
