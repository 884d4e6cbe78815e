"""Adapters are found by folder (services/adapters/registry.py `discover`): every folder with a registry_entry.py
registers its backends; one whose entry does not import is named with its reason instead of vanishing."""

from __future__ import annotations

import sys

import pytest

from services.adapters import registry


def test_every_adapter_folder_with_an_entry_loads():
    folders = sorted(p.parent.name for p in registry.ADAPTERS_DIR.glob("*/registry_entry.py"))
    assert len(folders) >= 11 and "cortex" in folders and "openclaw_real" in folders
    assert registry.load_errors() == {}
    specs = registry.all_specs()
    for name in ("cortex", "openclaw", "openclaw-real", "quaid-real", "octybot-real", "http:cortex-mock"):
        assert name in specs
    # the listing order: controls, IR baselines, the port, its releases, OpenClaw itself, memory systems
    roles = [s.role for s in specs.values()]
    assert roles == sorted(roles, key=registry._ROLE_ORDER.index)
    assert registry.default_backends() == [
        "none", "full-context", "compacted", "bm25", "dense", "hybrid", "openclaw", "openclaw-2026-02",
        "openclaw-real", "openclaw-real[profile=sessions]", "openclaw-real[profile=flush-every-session]", "cortex",
        "cortex-fast"]


def test_a_folder_whose_entry_fails_is_named_with_its_reason(tmp_path, monkeypatch):
    pkg = tmp_path / "fakeadapters"
    (pkg / "good").mkdir(parents=True)
    (pkg / "broken").mkdir()
    (pkg / "no_entry").mkdir()  # a helper folder without an entry: not an adapter
    for d in (pkg, pkg / "good", pkg / "broken", pkg / "no_entry"):
        (d / "__init__.py").write_text("")
    (pkg / "good" / "registry_entry.py").write_text("LOADED = True\n")
    (pkg / "broken" / "registry_entry.py").write_text("import a_module_that_is_not_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        errors = registry.discover(pkg, "fakeadapters")
        assert errors == {"broken": "ModuleNotFoundError: No module named 'a_module_that_is_not_installed'"}
        assert sys.modules["fakeadapters.good.registry_entry"].LOADED is True
    finally:
        for m in [m for m in sys.modules if m.startswith("fakeadapters")]:
            del sys.modules[m]


def test_an_unknown_backend_names_the_folders_that_did_not_load(monkeypatch):
    registry.all_specs()
    monkeypatch.setitem(registry._LOAD_ERRORS, "mine", "SyntaxError: invalid syntax (registry_entry.py, line 3)")
    with pytest.raises(KeyError) as e:
        registry.get_spec("my-backend")
    assert "unknown backend 'my-backend'" in str(e.value)
    assert "adapter folder mine did not load (SyntaxError: invalid syntax (registry_entry.py, line 3))" in str(e.value)
