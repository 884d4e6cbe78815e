"""Every dashboard in deploy/grafana/dashboards type-checks against Grafana's own published dashboard schema.

No Grafana server can be installed from the registries this project uses (Debian has no grafana package; PyPI
and npm carry only client libraries), so the dashboards are checked against the schema Grafana publishes as
`@grafana/schema` (npm; the `Dashboard` type generated from Grafana's CUE dashboard kind,
dist/types/raw/dashboard/x/types.gen.d.ts): each JSON file becomes an object literal with `satisfies Dashboard`,
and `tsc --strict` rejects unknown keys, missing required ones and wrong types. Skips with the reason when node or
the two npm packages are absent (`npm install --prefix deploy/grafana/schema-check`; .ci/run does it).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CHECK = REPO / "deploy" / "grafana" / "schema-check"
TSC = CHECK / "node_modules" / "typescript" / "bin" / "tsc"
TYPES = "@grafana/schema/dist/types/raw/dashboard/x/types.gen"
DASHBOARDS = sorted((REPO / "deploy" / "grafana" / "dashboards").glob("*.json"))

needs_tsc = pytest.mark.skipif(
    shutil.which("node") is None or not TSC.exists() or not (CHECK / "node_modules" / "@grafana" / "schema").exists(),
    reason="[requires:grafana-schema] node and deploy/grafana/schema-check/node_modules absent (npm install --prefix deploy/grafana/schema-check)")


def _typecheck(tmp_path: Path, dashboards: dict[str, str]) -> subprocess.CompletedProcess:
    (tmp_path / "node_modules").symlink_to(CHECK / "node_modules")
    for name, text in dashboards.items():
        (tmp_path / f"{name}.ts").write_text(
            f'import type {{ Dashboard }} from "{TYPES}";\nexport const dashboard = ({text.strip()}) satisfies Dashboard;\n')
    (tmp_path / "tsconfig.json").write_text(json.dumps({
        "compilerOptions": {"strict": True, "noEmit": True, "skipLibCheck": True, "moduleResolution": "node",
                            "module": "commonjs", "target": "es2020", "types": []},
        "include": ["*.ts"]}))
    return subprocess.run(["node", str(TSC), "-p", str(tmp_path / "tsconfig.json")], capture_output=True, text=True,
                          timeout=300)


@needs_tsc
@pytest.mark.slow
def test_every_dashboard_satisfies_grafanas_dashboard_type(tmp_path):
    r = _typecheck(tmp_path, {f.stem: f.read_text() for f in DASHBOARDS})
    assert r.returncode == 0, r.stdout + r.stderr


@needs_tsc
@pytest.mark.slow
def test_the_check_catches_a_schema_violation(tmp_path):
    d = json.loads(DASHBOARDS[0].read_text())
    d["panels"][0]["gridPos"]["w"] = "wide"  # a number in the schema
    d["schemaVersion"] = None  # required number
    d["templating"]["list"][0]["definition"] = "x"  # not in the schema (Grafana's UI writes it; it was here)
    r = _typecheck(tmp_path, {"bad": json.dumps(d)})
    assert r.returncode != 0
    assert "Type 'null' is not assignable to type 'number'" in r.stdout
    assert "Type 'string' is not assignable to type 'number'" in r.stdout
    assert "'\"definition\"' does not exist in type 'VariableModel'" in r.stdout, r.stdout
