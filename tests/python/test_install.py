"""scripts/install-python.sh: a .pth naming the build's python dir in every matching CPython's
site-packages (idempotent), Debian's packages for an interpreter without them; and the python3
on PATH imports zenith in a clean environment once scripts/build.sh has run it."""

import os
import shutil
import subprocess
import sys

import pytest

import zenith
from conftest import SOURCE_DIR

SCRIPT = os.path.join(SOURCE_DIR, "scripts", "install-python.sh")
PYDIR = os.path.dirname(os.path.dirname(os.path.abspath(zenith.__file__)))


def fake_python(tmp_path, name, ext, has_debian):
    """An executable answering the script's questions like an interpreter would."""
    site = tmp_path / f"{name}-site"
    path = tmp_path / "bin" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' /prefix/{name} '{ext}' '{site}' "
                    f"{int(has_debian)}\n")
    path.chmod(0o755)
    return site


def run_script(tmp_path, build_dir):
    bin_dir = tmp_path / "bin"
    # only the stand-ins: the machine's interpreters (/usr/bin/python3 too) keep their .pth files
    env = dict(os.environ, PATH=f"{bin_dir}:/usr/sbin:/sbin:/bin",
               ZENITH_INSTALL_PYTHONS=f"{bin_dir / 'python3'} {bin_dir / 'python'}")
    return subprocess.run(["bash", SCRIPT, build_dir], env=env, capture_output=True, text=True,
                          timeout=60)


def test_install_script_writes_pth_files_idempotently(tmp_path):
    build = tmp_path / "build"
    (build / "python" / "zenith").mkdir(parents=True)
    ext = ".cpython-311-x86_64-linux-gnu.so"
    (build / "python" / "zenith" / f"_zenith{ext}").write_text("")
    pyenv_site = fake_python(tmp_path, "python3", ext, has_debian=False)
    other_site = fake_python(tmp_path, "python", ".cpython-312-x86_64-linux-gnu.so", False)
    first = run_script(tmp_path, str(build))
    assert first.returncode == 0, first.stderr
    assert (pyenv_site / "zenith.pth").read_text().strip() == str(build / "python")
    if os.path.isdir("/usr/lib/python3/dist-packages"):
        assert (pyenv_site / "zenith-debian-packages.pth").read_text().strip() == \
            "/usr/lib/python3/dist-packages"
    assert not other_site.exists() and "is not the module's Python" in first.stdout
    second = run_script(tmp_path, str(build))
    assert "wrote" not in second.stdout  # nothing to do the second time
    empty = run_script(tmp_path, str(tmp_path / "nothing"))
    assert empty.returncode == 0 and "skipped" in empty.stdout


def test_path_python3_imports_zenith_in_a_clean_shell():
    python3 = shutil.which("python3")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    result = subprocess.run([python3, "-c", "import zenith, numpy; print(zenith.__file__)"],
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, ("run scripts/build.sh (it installs zenith.pth): "
                                    + result.stderr)
    assert result.stdout.strip().endswith(os.path.join("python", "zenith", "__init__.py"))
