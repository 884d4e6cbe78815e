"""Backend variants (`name[key=value,...]`): a registered backend with config overrides, under its own name."""

from __future__ import annotations

import pytest

from services.adapters.registry import get_spec, parse_variant


def test_parse_variant():
    assert parse_variant("openclaw") == ("openclaw", {})
    assert parse_variant("openclaw[embedder=wordllama,min_score=0.25]") == (
        "openclaw", {"embedder": "wordllama", "min_score": 0.25})
    assert parse_variant("openclaw-real[min_score=0.15]") == ("openclaw-real", {"min_score": 0.15})
    with pytest.raises(KeyError, match="key=value"):
        parse_variant("openclaw[wordllama]")


def test_variant_spec_overrides_config_and_is_not_a_default():
    s = get_spec("openclaw[embedder=wordllama]")
    assert s.name == "openclaw[embedder=wordllama]"
    assert s.config == {**get_spec("openclaw").config, "embedder": "wordllama"}
    assert s.module == get_spec("openclaw").module and not s.default
    with pytest.raises(KeyError, match="unknown backend 'nope'"):
        get_spec("nope[a=1]")


def test_variant_config_is_validated_by_the_backend():
    from services.adapters.client import InProcessBackendClient

    c = InProcessBackendClient.from_spec("openclaw[min_score=0.2,embedder=hash]")
    assert c.host.backend.params["min_score"] == 0.2
    with pytest.raises(ValueError, match="min_score"):
        InProcessBackendClient.from_spec("openclaw[min_score=3]")
    with pytest.raises(ValueError, match="unknown config key"):
        InProcessBackendClient.from_spec("openclaw[minscore=0.2]")


def test_split_names_keeps_a_variants_commas():
    from services.adapters.registry import split_names

    assert split_names("bm25, openclaw-real[profile=default,context_window=32768],cortex") == [
        "bm25", "openclaw-real[profile=default,context_window=32768]", "cortex"]
    assert split_names("") == [] and split_names(None) == [] and split_names(" a ,, b ") == ["a", "b"]
    assert split_names("x[a=1,b=[2]],y") == ["x[a=1,b=[2]]", "y"]
