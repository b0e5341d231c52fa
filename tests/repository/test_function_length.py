"""No function in the shipped packages is longer than MAX_FUNCTION_LINES (from its `def` to its
last line): a longer one is split along its concerns, as the EtcdCluster pass was (observe, plan,
act, report, write status; docs/dev/architecture.md "Inside the operators")."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("kube_adapter", "operator_runtime", "etcd_common", "etcd_operator", "backup_operator", "restore_operator")
MAX_FUNCTION_LINES = 60


class _FunctionLengths(ast.NodeVisitor):
    """Every function and method, with its qualified name (`Class.method`, `outer.inner`)."""

    def __init__(self) -> None:
        self.scope: list[str] = []
        self.lengths: list[tuple[str, int, int]] = []  # (qualified name, first line, lines)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._enter(node.name, node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._function(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        assert node.end_lineno is not None
        self.lengths.append((".".join([*self.scope, node.name]), node.lineno, node.end_lineno - node.lineno + 1))
        self._enter(node.name, node)

    def _enter(self, name: str, node: ast.AST) -> None:
        self.scope.append(name)
        self.generic_visit(node)
        self.scope.pop()


def functions_over(limit: int, root: Path) -> list[str]:
    """`path:line name (N lines)` of every function under `root` longer than `limit` lines."""
    offenders = []
    for path in sorted(root.rglob("*.py")):
        visitor = _FunctionLengths()
        visitor.visit(ast.parse(path.read_text(), str(path)))
        offenders += [f"{path.relative_to(root.parent)}:{line} {name} ({lines} lines)"
                      for name, line, lines in visitor.lengths if lines > limit]
    return offenders


@pytest.mark.parametrize("package", SHIPPED)
def test_no_shipped_function_is_longer_than_the_limit(package: str) -> None:
    offenders = functions_over(MAX_FUNCTION_LINES, ROOT / package)
    assert not offenders, (f"over {MAX_FUNCTION_LINES} lines; split along their concerns: "
                           + "; ".join(offenders))


def test_a_long_function_is_named_with_its_class_and_length(tmp_path: Path) -> None:
    package = tmp_path / "package"
    package.mkdir()
    body = "".join(f"        x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES - 1))
    (package / "module.py").write_text(f"class Pass:\n    def short(self) -> None:\n        pass\n\n"
                                       f"    def long(self) -> None:\n{body}        x = 0\n")
    assert functions_over(MAX_FUNCTION_LINES, package) == [
        f"package/module.py:5 Pass.long ({MAX_FUNCTION_LINES + 1} lines)"]
    (package / "module.py").write_text(f"def exactly_at_the_limit() -> None:\n{body}")
    assert functions_over(MAX_FUNCTION_LINES, package) == []
