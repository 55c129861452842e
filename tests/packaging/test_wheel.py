"""The wheel installs ``crawlsched`` alone: the server and its math ship inside it
(``crawlsched._server``, ``crawlsched._core``), no top-level ``service`` or
``scheduler_core`` (build_support/crawlsched_build.py).

The wheel is built from this tree and installed without its dependencies into a
fresh venv; the dependencies come from the running (development) environment's
site-packages, added after the fresh venv's own, so nothing is downloaded.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _run(cmd: list[str], cwd: Path, **env: str) -> str:
    done = subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=300, env={**os.environ, **env}
    )
    assert done.returncode == 0, f"{cmd} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed; its ``bin`` folder."""
    tmp = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip"]
    _run([*pip, "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-w", str(tmp)], tmp)
    (wheel,) = tmp.glob("crawlsched-*.whl")
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp)
    python = venv / "bin" / "python"
    _run([*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)], tmp)
    site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], tmp
        ).strip()
    )
    # the dependencies: this environment's site-packages, after the venv's own
    (site / "zz_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv / "bin"


def test_the_sdk_imports_and_no_top_level_server_package_is_installed(
    installed: Path, tmp_path: Path
) -> None:
    code = (
        "import importlib.util as u, pathlib, sysconfig\n"
        "import crawlsched\n"
        "crawlsched.Client, crawlsched.AsyncClient\n"
        "site = pathlib.Path(sysconfig.get_path('purelib'))\n"
        "assert pathlib.Path(crawlsched.__file__).is_relative_to(site), crawlsched.__file__\n"
        "for name in ('service', 'scheduler_core'):\n"
        "    assert u.find_spec(name) is None, name\n"
        "    assert not (site / name).exists(), name\n"
        "print(sorted(p.name for p in site.iterdir() if not p.name.endswith(('-info', '.pth'))))\n"
    )
    out = _run([str(installed / "python"), "-c", code], tmp_path)
    assert out.strip() == "['crawlsched']"


def test_the_installed_command_and_its_package_data(installed: Path, tmp_path: Path) -> None:
    assert (
        _run([str(installed / "crawlsched"), "--version"], tmp_path).strip() == "crawlsched 0.1.0"
    )
    out = _run([str(installed / "python"), "-m", "crawlsched._server", "--version"], tmp_path)
    assert out.strip() == "crawlsched 0.1.0"
    code = (
        "from crawlsched._server.store.redis.scripts import ScriptSet\n"
        "from crawlsched._server.loadgen.worldfile import PRESETS, preset_toml\n"
        "from crawlsched._server.loadgen import demo\n"
        "import crawlsched._server.grpc.server, crawlsched.scrapy\n"
        "assert 'lease' in ScriptSet().sources\n"
        "assert demo._SERVICE == 'crawlsched._server', demo._SERVICE\n"
        "print(all(preset_toml(name) for name in PRESETS))\n"
    )
    assert _run([str(installed / "python"), "-c", code], tmp_path).strip() == "True"
