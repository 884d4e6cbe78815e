"""`make image` (services/k8s_check/image.py) and deploy/Dockerfile: the image installs what `make setup` installs (the
same torch pin, the same extras, mem0ai the same way), the builder is whichever of docker/podman/buildah works, and
without one the command says what it needs and exits 2. No builder runs here: the builders are stand-ins."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from services.k8s_check import image

REPO = Path(__file__).resolve().parents[1]
MAKEFILE = (REPO / "Makefile").read_text()
DOCKERFILE = (REPO / "deploy" / "Dockerfile").read_text()


def _setup_recipe() -> str:
    return MAKEFILE.split("$(STAMP): pyproject.toml", 1)[1].split("\n\n", 1)[0]


def test_the_dockerfile_installs_what_make_setup_installs():
    setup = _setup_recipe()
    torch_make = re.search(r"^TORCH_VERSION \?= (\S+)$", MAKEFILE, re.M).group(1)
    torch_docker = re.search(r"^ARG TORCH_VERSION=(\S+)$", DOCKERFILE, re.M).group(1)
    assert torch_docker == torch_make
    assert '"torch==$(TORCH_VERSION)"' in setup and '"torch==${TORCH_VERSION}"' in DOCKERFILE

    def extras(text: str) -> list[str]:
        return re.findall(r'-e "\.\[([^\]]*)\]"', text)

    assert extras(setup) == extras(DOCKERFILE) == ["dev,ann,mem0-oss"]
    no_deps = re.findall(r'--no-deps "([^"]+)"', setup)
    assert no_deps == re.findall(r'--no-deps "([^"]+)"', DOCKERFILE) == ["mem0ai==2.2.1"]
    # torch goes first in both, so nothing pulls a CUDA build
    assert setup.index("torch==") < setup.index('-e ".[')
    assert DOCKERFILE.index("torch==") < DOCKERFILE.index('-e ".[')
    # make image passes the Makefile's pin to the build
    assert "--torch-version $(TORCH_VERSION)" in MAKEFILE.split("\nimage:", 1)[1].split("\n\n", 1)[0]


def test_the_dockerfile_pulls_from_what_make_image_says():
    assert re.search(r"^ARG BASE_IMAGE=(\S+)$", DOCKERFILE, re.M).group(1) == image.BASE_IMAGE
    assert re.search(r"^ARG TORCH_INDEX=(\S+)$", DOCKERFILE, re.M).group(1) == image.TORCH_INDEX
    assert re.findall(r"^USER (\S+)$", DOCKERFILE, re.M) == ["10001"]


def test_the_image_name_is_the_one_the_manifests_give():
    assert image.image_name() == "memrig:0.1.0"


def test_set_image_name_rewrites_the_component(tmp_path):
    p = tmp_path / "kustomization.yaml"
    shutil.copy(image.IMAGE_COMPONENT, p)
    image.set_image_name("registry.example.com:5000/team/memrig:0.2.0", p)
    assert image.image_name(p) == "registry.example.com:5000/team/memrig:0.2.0"
    assert '    newTag: "0.2.0"' in p.read_text()
    for bad in ("memrig", "registry.example.com:5000/memrig", ":x"):
        with pytest.raises(ValueError, match="NAME:TAG"):
            image.set_image_name(bad, p)


def test_the_first_working_builder_is_chosen():
    def which(present):
        return lambda b: f"/usr/bin/{b}" if b in present else None

    def run(code, out=""):
        return lambda argv: (code, out)

    assert image.find_builder(which(set()), run(0)) == (None, ["docker: not installed", "podman: not installed",
                                                               "buildah: not installed"])
    b, why = image.find_builder(which({"docker", "buildah"}), run(1, "Client:\n x\nCannot connect to the Docker daemon"))
    assert b == "/usr/bin/buildah"
    assert why == ["docker: installed (/usr/bin/docker) but no engine answers `docker info`: Cannot connect to the "
                   "Docker daemon", "podman: not installed"]
    assert image.find_builder(which({"docker", "podman"}), run(0)) == ("/usr/bin/docker", [])
    assert image.build_argv("/usr/bin/podman", "memrig:0.1.0", "2.13.0", True, "mirror/python:3.11-slim") == [
        "/usr/bin/podman", "build", "-f", "deploy/Dockerfile", "-t", "memrig:0.1.0", "--build-arg",
        "TORCH_VERSION=2.13.0", "--build-arg", "OFFLINE=1", "--build-arg", "BASE_IMAGE=mirror/python:3.11-slim", "."]


def test_without_a_builder_it_says_what_it_needs_and_exits_2(monkeypatch, capsys):
    monkeypatch.setattr(image, "find_builder", lambda: (None, ["docker: not installed"]))
    assert image.main(["--torch-version", "2.13.0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("make image: cannot build memrig:0.1.0 here: no OCI image builder works.\n  - docker: not")
    for need in ("docker.io/library/python:3.11-slim", "https://download.pytorch.org/whl/cpu", "https://pypi.org/simple",
                 "https://registry.npmjs.org", "make wheelhouse"):
        assert need in err
    monkeypatch.setattr(image, "find_builder", lambda: ("/usr/bin/buildah", []))
    assert image.main(["--torch-version", "2.13.0", "--dry-run"]) == 0
    assert capsys.readouterr().out.strip() == ("make image: /usr/bin/buildah build -f deploy/Dockerfile -t memrig:0.1.0 "
                                               "--build-arg TORCH_VERSION=2.13.0 .")
