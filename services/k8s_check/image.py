"""`make image`: build deploy/Dockerfile as the image deploy/k8s names, with whichever OCI builder works here.

    python -m services.k8s_check.image [--image NAME:TAG] [--torch-version V] [--offline] [--base-image REF]
                                       [--dry-run]

The name comes from deploy/k8s/components/image/kustomization.yaml (`newName:newTag` of the image `memrig`), the one
place the manifests name it; `--image` builds another name and writes it there, so the manifests follow.
Builders, in this order: docker (only when `docker info` reaches an engine), podman, buildah. Each gets the same
`build -f deploy/Dockerfile -t NAME --build-arg TORCH_VERSION=... .` from the repository root.
When none works, it prints what the build needs (a builder, and the registries the Dockerfile pulls from, or the
offline route) and exits 2: it never pretends to have built.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "deploy" / "Dockerfile"
IMAGE_COMPONENT = REPO / "deploy" / "k8s" / "components" / "image" / "kustomization.yaml"
BUILDERS = ("docker", "podman", "buildah")
# What the Dockerfile pulls from when not --offline (its ARG defaults; keep in step with deploy/Dockerfile).
BASE_IMAGE = "docker.io/library/python:3.11-slim"
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
PYPI = "https://pypi.org/simple (and files.pythonhosted.org)"
NPM = "https://registry.npmjs.org (octybot-real's pinned Bun)"


def image_name(path: Path = IMAGE_COMPONENT) -> str:
    """`newName:newTag` of the image `memrig` in the image Component."""
    text = path.read_text()
    name = re.search(r"^\s+newName:\s*\"?([^\s\"]+)\"?\s*$", text, re.M)
    tag = re.search(r"^\s+newTag:\s*\"?([^\s\"]+)\"?\s*$", text, re.M)
    if not name or not tag:
        raise ValueError(f"{path}: no newName/newTag for the image memrig")
    return f"{name.group(1)}:{tag.group(1)}"


def set_image_name(image: str, path: Path = IMAGE_COMPONENT) -> None:
    """Write NAME:TAG into the image Component (newName, newTag)."""
    name, sep, tag = image.rpartition(":")
    if not sep or not name or "/" in tag:
        raise ValueError(f"--image {image!r}: expected NAME:TAG (e.g. registry.example.com/memrig:0.1.0)")
    text = path.read_text()
    text = re.sub(r"^(\s+newName:\s*).*$", lambda m: m.group(1) + name, text, count=1, flags=re.M)
    text = re.sub(r"^(\s+newTag:\s*).*$", lambda m: m.group(1) + f'"{tag}"', text, count=1, flags=re.M)
    path.write_text(text)


def _run(argv: list[str]) -> tuple[int, str]:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return 1, f"{type(e).__name__}: {e}"
    return r.returncode, (r.stderr or r.stdout).strip()


def find_builder(which: Callable[[str], str | None] = shutil.which,
                 run: Callable[[list[str]], tuple[int, str]] = _run) -> tuple[str | None, list[str]]:
    """(the first builder that works, why each one before it did not)."""
    why = []
    for b in BUILDERS:
        path = which(b)
        if path is None:
            why.append(f"{b}: not installed")
            continue
        if b == "docker":
            code, out = run([path, "info"])
            if code != 0:
                last = [x for x in out.splitlines() if x.strip()][-1:] or ["no output"]
                why.append(f"docker: installed ({path}) but no engine answers `docker info`: {last[0].strip()}")
                continue
        return path, why
    return None, why


def build_argv(builder: str, image: str, torch_version: str, offline: bool, base_image: str | None) -> list[str]:
    sub = "build"  # docker build, podman build, buildah build (buildah's `bud` under its current name)
    argv = [builder, sub, "-f", str(DOCKERFILE.relative_to(REPO)), "-t", image,
            "--build-arg", f"TORCH_VERSION={torch_version}"]
    if offline:
        argv += ["--build-arg", "OFFLINE=1"]
    if base_image:
        argv += ["--build-arg", f"BASE_IMAGE={base_image}"]
    return argv + ["."]


def needs_message(image: str, why: list[str], offline: bool) -> str:
    lines = [f"make image: cannot build {image} here: no OCI image builder works.",
             *(f"  - {w}" for w in why),
             "It needs one of: docker with a running engine (dockerd, or Docker Desktop), podman, or buildah "
             "(apt-get install podman / buildah).",
             "The build pulls from:"]
    if offline:
        lines += ["  - BASE_IMAGE (--base-image / BASE_IMAGE=...): a python:3.11-slim image in a registry you reach",
                  "  - nothing else: every wheel from deploy/wheelhouse (fill it with `make wheelhouse` on a "
                  "connected machine)"]
    else:
        lines += [f"  - {BASE_IMAGE} (Docker Hub; BASE_IMAGE=... for a mirror)",
                  f"  - {TORCH_INDEX} (torch's CPU wheel)",
                  f"  - {PYPI} (the project's dependencies, with the embedding models as packages)",
                  f"  - {NPM}",
                  "Offline: `make wheelhouse` on a connected machine, then `make image OFFLINE=1 BASE_IMAGE=<mirror>`."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m services.k8s_check.image", description=__doc__.split("\n\n")[0])
    ap.add_argument("--image", default="", help="NAME:TAG to build and write into deploy/k8s/components/image")
    ap.add_argument("--torch-version", required=True, help="the Makefile's TORCH_VERSION (what make setup installs)")
    ap.add_argument("--offline", action="store_true", help="install only from deploy/wheelhouse (make wheelhouse)")
    ap.add_argument("--base-image", default="", help=f"the Dockerfile's base image (default {BASE_IMAGE})")
    ap.add_argument("--dry-run", action="store_true", help="print the build command instead of running it")
    a = ap.parse_args(argv)
    try:
        if a.image:
            set_image_name(a.image)
        image = image_name()
    except ValueError as e:
        ap.error(str(e))
    builder, why = find_builder()
    if builder is None:
        print(needs_message(image, why, a.offline), file=sys.stderr)
        return 2
    cmd = build_argv(builder, image, a.torch_version, a.offline, a.base_image or None)
    print("make image: " + " ".join(cmd), flush=True)
    if a.dry_run:
        return 0
    r = subprocess.run(cmd, cwd=REPO)
    if r.returncode == 0:
        print(f"make image: built {image} (the name deploy/k8s/components/image gives every rig container)")
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
