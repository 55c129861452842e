"""The build backend: setuptools', except that a wheel ships the server inside the
``crawlsched`` package.

The repository keeps three top-level packages: ``crawlsched`` (the SDK and the Scrapy
scheduler), ``service`` and ``scheduler_core`` (the server and its math).  Installed
under those names, ``service`` and ``scheduler_core`` would shadow any other
distribution's modules of the same name.  So :func:`build_wheel` builds from a staged
copy of the tree in which ``service/`` is ``crawlsched/_server/`` and
``scheduler_core/`` is ``crawlsched/_core/``, their imports rewritten to match (as
pip vendors its dependencies), and the console script pointed there.  Editable
installs (``pip install -e .``) and sdists use the tree as it is.

See docs/operations.md, "Packaging".
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import (  # noqa: F401  (the rest of the PEP 517/660 hooks)
    build_editable,
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
)

#: Repository package -> where the wheel puts it.
MOVES = {"service": "crawlsched._server", "scheduler_core": "crawlsched._core"}
#: Files copied besides the packages.
TOP_FILES = ("pyproject.toml", "README.md", "LICENSE", "setup.cfg", "MANIFEST.in")

_IMPORT = re.compile(
    r"^(?P<lead>[ \t]*(?:>>> |\.\.\. )?)(?P<kw>from|import)[ \t]+"
    r"(?P<pkg>service|scheduler_core)(?P<rest>(?:\.\w+)*)(?P<tail>[ \t]+(?:import|as)\b|[ \t]*$)",
    re.MULTILINE,
)


def rewrite_imports(source: str, moves: Mapping[str, str] = MOVES) -> str:
    """Point the imports of the moved packages at their new names.

    ``import service`` alone binds the old name to the new package.

    Examples
    --------
    >>> rewrite_imports("from service.grpc import a as b\\n")
    'from crawlsched._server.grpc import a as b\\n'
    >>> rewrite_imports("    >>> import scheduler_core.params as p\\n")
    '    >>> import crawlsched._core.params as p\\n'
    >>> rewrite_imports("import service\\n")
    'import crawlsched._server as service\\n'
    """

    def new(m: re.Match[str]) -> str:
        target = moves[m["pkg"]] + m["rest"]
        if m["kw"] == "import" and not m["rest"] and not m["tail"].strip():
            return f"{m['lead']}import {target} as {m['pkg']}{m['tail']}"
        if m["kw"] == "import" and m["rest"] and not m["tail"].strip():
            raise ValueError(f"cannot rewrite {m[0].strip()!r}: import it with 'as' or 'from'")
        return f"{m['lead']}{m['kw']} {target}{m['tail']}"

    return _IMPORT.sub(new, source)


def _rewrite_pyproject(text: str) -> str:
    edits = [
        ('crawlsched = "service.cli:main"', 'crawlsched = "crawlsched._server.cli:main"'),
        ('include = ["crawlsched*", "scheduler_core*", "service*"]', 'include = ["crawlsched*"]'),
        ("\nservice = [", '\n"crawlsched._server" = ['),
        ("\nscheduler_core = [", '\n"crawlsched._core" = ['),
    ]
    for old, new in edits:
        if old not in text:
            raise RuntimeError(f"pyproject.toml no longer holds {old!r}: update {__file__}")
        text = text.replace(old, new)
    return text


def stage(root: Path, out: Path) -> None:
    """Copy the tree at ``root`` to ``out`` as the wheel ships it."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in TOP_FILES:
        if (root / name).is_file():
            shutil.copy2(root / name, out / name)
    shutil.copytree(root / "crawlsched", out / "crawlsched", ignore=ignore)
    for old, new in MOVES.items():
        shutil.copytree(root / old, out.joinpath(*new.split(".")), ignore=ignore)
    for path in (out / "crawlsched").rglob("*.py*"):
        if path.suffix in (".py", ".pyi"):
            path.write_text(rewrite_imports(path.read_text("utf-8")), "utf-8")
    pyproject = out / "pyproject.toml"
    pyproject.write_text(_rewrite_pyproject(pyproject.read_text("utf-8")), "utf-8")


@contextmanager
def _staged() -> Iterator[None]:
    root = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="crawlsched-wheel-") as tmp:
        stage(root, Path(tmp))
        os.chdir(tmp)
        try:
            yield
        finally:
            os.chdir(root)


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: dict[str, Any] | None = None
) -> str:
    """The wheel's metadata (its entry point names the moved package)."""
    target = os.path.abspath(metadata_directory)
    with _staged():
        return str(_setuptools.prepare_metadata_for_build_wheel(target, config_settings))


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    """Build the wheel from the staged tree (see the module docstring)."""
    target = os.path.abspath(wheel_directory)
    with _staged():
        return str(_setuptools.build_wheel(target, config_settings, None))
