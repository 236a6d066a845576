"""The modules of flux_rsa import each other without a cycle: every import
statement counts, at the top of a module or inside a function (an import
put in a function to dodge a cycle is still one).  The RAM-disk providers
are loaded by name (core.providercaps; ramdisk.disks.provider) and import no other provider."""

import ast
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(
    os.path.dirname(os.path.dirname(HERE)), "src", "python", "flux_rsa"
)


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
