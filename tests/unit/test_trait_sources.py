"""Standard trait names come from os_traits, never from literals in our code."""

import ast
import pathlib

import os_traits

import virtdriver

PACKAGE = pathlib.Path(virtdriver.__file__).parent
STANDARD = frozenset(os_traits.get_traits())


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(
                    first.value, ast.Constant):
                found.add(id(first.value))
    return found


def standard_trait_literals(path: pathlib.Path,
                            root: pathlib.Path = PACKAGE.parent) -> list[str]:
    """``file:line: NAME`` for each string constant that is a trait name."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _docstrings(tree)
    hits = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in skip and node.value in STANDARD):
            hits.append(f"{path.relative_to(root)}:{node.lineno}: "
                        f"{node.value}")
    return hits


def test_no_standard_trait_literal_in_the_package():
    sources = sorted(PACKAGE.rglob("*.py"))
    assert len(sources) > 20
    hits = [hit for path in sources for hit in standard_trait_literals(path)]
    assert hits == [], "use os_traits constants instead:\n" + "\n".join(hits)


def test_the_scan_finds_a_literal(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('"""doc mentions HW_CPU_X86_AVX."""\n'
                       'TRAIT = "HW_CPU_X86_AVX"\n'
                       'PREFIX = "HW_CPU_X86_"\n')
    assert standard_trait_literals(planted, tmp_path) == [
        "planted.py:2: HW_CPU_X86_AVX"]
