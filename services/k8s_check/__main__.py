"""python -m services.k8s_check [--overlays DIR] [--k8s-version 1.33.0]: render, validate, check; exit 1 on any
finding, 2 when kubectl cannot be had (the reason says what to install)."""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import yaml

from services.common.errors import InputError
from services.k8s_check import checks
from services.k8s_check.argv import argv_findings
from services.k8s_check.isolation import isolation_findings, namespace_findings
from services.k8s_check.kubectl import REPO, KubectlUnavailable, render

OVERLAYS = REPO / "deploy" / "k8s" / "overlays"


def check_objects(objs: list[dict], k8s_version: str = checks.K8S_VERSION) -> list[str]:
    """Every finding for one rendered overlay (empty = it passes)."""
    return (checks.schema_findings(objs, k8s_version) + checks.workload_findings(objs)
            + checks.service_findings(objs) + checks.secret_findings(objs) + checks.locust_findings(objs)
            + checks.prometheus_findings(objs) + argv_findings(objs) + isolation_findings(objs))


def kustomization_findings(path: Path) -> list[str]:
    """The overlay's own kustomization.yaml: no `images:` (components/image names the image once)."""
    k = yaml.safe_load((path / "kustomization.yaml").read_text()) or {}
    if k.get("images"):
        return [f"{path.name}/kustomization.yaml: sets images: (name the image once, in components/image)"]
    if not any(str(c).rstrip("/").endswith("components/image") for c in k.get("components") or []):
        return [f"{path.name}/kustomization.yaml: does not list ../../components/image (the rig's image)"]
    return []


def check_overlay(path: Path, k8s_version: str = checks.K8S_VERSION) -> tuple[list[dict], list[str]]:
    objs = render(path)
    return objs, check_objects(objs, k8s_version)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m services.k8s_check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--overlays", default=str(OVERLAYS), help="directory whose subdirectories are overlays")
    ap.add_argument("--k8s-version", default=checks.K8S_VERSION, help="Kubernetes API schemas to validate against")
    a = ap.parse_args(argv)
    dirs = sorted(p for p in Path(a.overlays).iterdir() if (p / "kustomization.yaml").exists())
    if not dirs:
        print(f"k8s-check: no overlay under {a.overlays}", file=sys.stderr)
        return 1
    bad = 0
    rendered: dict[str, list[dict]] = {}
    for d in dirs:
        t0 = time.monotonic()
        try:
            objs, findings = check_overlay(d, a.k8s_version)
            findings = kustomization_findings(d) + findings
            rendered[d.name] = objs
        except KubectlUnavailable as e:
            print(f"k8s-check: kubectl unavailable: {e}", file=sys.stderr)
            return 2
        except (InputError, RuntimeError) as e:  # an overlay that does not build, or another failure on it
            print(f"k8s-check: {d.name}: {e}", file=sys.stderr)
            bad += 1
            continue
        kinds = Counter(o["kind"] for o in objs)
        print(f"k8s-check: overlay {d.name}: {len(objs)} objects "
              f"({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}), "
              f"{len(findings)} finding(s), {time.monotonic() - t0:.1f}s")
        for f in findings:
            print(f"  {d.name}: {f}")
        bad += bool(findings)
    across = namespace_findings(rendered)
    for f in across:
        print(f"  overlays: {f}")
    bad += bool(across)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
