"""The package's layout as a rule: each subpackage imports only what its layer may (every import, also
those inside functions, resolved from the AST), and says in its ``__init__`` what it holds."""
from __future__ import annotations

import ast
from pathlib import Path

import rolloutlab

LIB = Path(rolloutlab.__file__).parent

# subpackage -> what it must never import (a prefix of a dotted module), and the one exception it has
FORBIDDEN = {
    "ingest": ["analysis", "views", "exports", "capture", "demo", "cli"],
    "store": ["views", "exports", "capture", "demo", "cli"],
    "analysis": ["ingest", "views", "exports", "capture", "demo", "cli"],
    "views": ["ingest", "exports", "capture", "demo", "cli"],
    "exports": ["views", "ingest", "capture", "demo", "cli"],
    "capture": ["store", "analysis", "ingest", "views", "exports", "cli"],
    "demo": ["views", "exports", "capture", "cli"],
    "text": ["ingest", "store", "analysis", "views", "exports", "capture", "demo", "cli"],
}
# secret redaction is shared with the training-file writer and the failure labeller from its own module
ALLOWED = {"rolloutlab.capture.redaction"}
TOP_LEVEL = {"__init__.py", "config.py", "version.py"}


def _module_name(path: Path, root: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def _is_module(dotted: str, root: Path) -> bool:
    p = root.parent.joinpath(*dotted.split("."))
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


def imports_of(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, dotted module) for every import of ``path`` into the package under ``root``."""
    name, is_package = _module_name(path, root)
    package = name.split(".") if is_package else name.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == root.name]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base.split(".")[0] != root.name:
                continue
            for a in node.names:
                full = f"{base}.{a.name}"
                out.append((node.lineno, full if _is_module(full, root) else base))
    return out


def violations(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        name, _ = _module_name(path, root)
        layer = name.split(".")[1] if "." in name else None
        for line, target in imports_of(path, root):
            parts = target.split(".")
            if len(parts) < 2 or target in ALLOWED or any(target.startswith(a + ".") for a in ALLOWED):
                continue
            if parts[1] == "cli" and layer != "cli":
                found.append(f"{path.relative_to(root.parent)}:{line} imports {target}: nothing imports the CLI")
            elif layer in FORBIDDEN and parts[1] in FORBIDDEN[layer]:
                found.append(f"{path.relative_to(root.parent)}:{line} imports {target}: "
                             f"{layer} never imports {parts[1]}")
    return found


def test_no_layer_imports_what_it_must_not():
    assert violations(LIB) == []


def test_the_rule_catches_a_forbidden_import(tmp_path):
    root = tmp_path / "rolloutlab"
    for package in ("", "analysis", "views", "capture", "store"):
        (root / package).mkdir(parents=True, exist_ok=True)
        (root / package / "__init__.py").write_text('"""x"""\n')
    (root / "views" / "report.py").write_text("X = 1\n")
    (root / "capture" / "redaction.py").write_text("X = 1\n")
    (root / "analysis" / "fine.py").write_text("from ..capture import redaction\nfrom ..store import catalog\n")
    (root / "analysis" / "compare.py").write_text("def f():\n    from ..views.report import X\n    return X\n")
    (root / "capture" / "events.py").write_text("import rolloutlab.store\n")
    assert violations(root) == [
        "rolloutlab/analysis/compare.py:2 imports rolloutlab.views.report: analysis never imports views",
        "rolloutlab/capture/events.py:1 imports rolloutlab.store: capture never imports store"]


def test_the_top_level_holds_only_the_re_exports_config_and_version():
    assert {p.name for p in LIB.glob("*.py")} == TOP_LEVEL


def test_every_subpackage_says_what_it_holds_and_what_it_may_import():
    for init in LIB.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")), clean=False)
        assert doc, f"{init.parent.name}/__init__.py has no docstring"
        first = doc.split("\n\n")[0]
        assert len(first.splitlines()) == 2 and "import" in first, (
            f"{init.parent.name}/__init__.py: its first two lines say what lives there and what it may import")


def test_names_people_import_from_the_package_still_resolve():
    """Every rl.* name, and the modules the docs told people to import by name before this layout
    (``from rolloutlab import fmt, plots, report, spark, synth``), resolve — lazily, so that
    ``import rolloutlab`` stays light."""
    import subprocess
    import sys

    import rolloutlab as rl

    for name in rl.__all__:
        assert getattr(rl, name) is not None, name
    code = ("import sys, rolloutlab as rl; heavy = {'plotly', 'sklearn', 'pyspark'} & set(sys.modules); "
            "from rolloutlab import fmt, plots, report, spark, synth; "
            "assert (fmt.__name__, report.__name__, synth.__name__) == "
            "('rolloutlab.text.fmt', 'rolloutlab.views.report', 'rolloutlab.demo.synth'); print(sorted(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"  # nothing heavy loads with the package itself
