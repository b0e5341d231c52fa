"""The shipped packages import at module level only: an import inside a function hides a
dependency from the import contracts' reader and usually holds an import cycle open (as one in
etcd_common once did)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHIPPED = ("kube_adapter", "operator_runtime", "etcd_common", "etcd_operator", "backup_operator", "restore_operator")


def function_local_imports(source: str) -> list[tuple[int, str]]:
    """(line, statement) of every import inside a function, method or lambda of `source`."""
    found: set[tuple[int, str]] = set()
    for function in ast.walk(ast.parse(source)):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    found.add((node.lineno, ast.unparse(node)))
    return sorted(found)


@pytest.mark.parametrize("package", SHIPPED)
def test_no_import_inside_a_function(package: str) -> None:
    modules = sorted((REPO / package).rglob("*.py"))
    assert modules, f"no modules found in {package}"
    local = [f"{path.relative_to(REPO)}:{line}: {statement}"
             for path in modules for line, statement in function_local_imports(path.read_text())]
    assert not local, "import at module level instead:\n" + "\n".join(local)


def test_the_check_sees_imports_in_functions_methods_and_nested_blocks() -> None:
    source = (
        "import os\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    import json\n"
        "def f():\n"
        "    from a import b\n"
        "class C:\n"
        "    async def m(self):\n"
        "        if True:\n"
        "            import c\n"
    )
    assert function_local_imports(source) == [(6, "from a import b"), (10, "import c")]
