"""LoCoMo official answer scoring on hand-worked examples, EM and binary-judge parsing."""

import pytest

from services.coordinator.judges import parse_binary_label
from services.coordinator.metrics import qa


def test_normalize_answer_official_order():
    assert qa.normalize_answer("The cat, and a dog!") == "cat dog"
    assert qa.normalize_answer("  An   apple's  ") == "apples"
    assert qa.normalize_answer(2022) == "2022"
    # 'and' inside a word stays; commas vanish without leaving a space
    assert qa.normalize_answer("Andrew,Sandy") == "andrewsandy"


def test_token_f1_stemmed():
    assert qa.token_f1("running dogs", "the dog runs") == 1.0
    assert qa.token_f1("Paris France", "Paris") == pytest.approx(2 / 3)
    assert qa.token_f1("", "Paris") == 0.0
    assert qa.token_f1("In 2022", 2022) == pytest.approx(2 / 3)
    # multiset overlap: 'dog dog' vs 'dog' -> P=1/2, R=1
    assert qa.token_f1("dog dog", "dog") == pytest.approx(2 / 3)


def test_category_1_comma_split():
    # gold parts: London -> best 1.0 (vs 'London'), Rome -> 0.0; mean 0.5
    assert qa.locomo_f1("Paris, London", "London, Rome", 1) == pytest.approx(0.5)
    # single prediction part against two gold parts
    assert qa.locomo_f1("pottery and painting", "pottery, painting", 1) == pytest.approx(2 / 3)
    # without the split rule the same pair would score differently
    assert qa.token_f1("Paris, London", "London, Rome") == pytest.approx(0.5)


def test_category_3_semicolon_rule():
    gold = "Likely yes; because she loves animals"
    assert qa.locomo_f1("likely yes", gold, 3) == 1.0
    assert qa.locomo_f1("likely yes", gold, 4) < 1.0


def test_category_5_phrases():
    assert qa.locomo_f1("That is not mentioned in the conversation.", "", 5) == 1.0
    assert qa.locomo_f1("No information available.", "whatever", 5) == 1.0
    assert qa.locomo_f1("I don't know", "", 5) == 0.0
    assert qa.locomo_f1("She went to Paris", "", 5) == 0.0


def test_exact_match():
    assert qa.exact_match("The Eiffel Tower.", "eiffel tower") == 1.0
    assert qa.exact_match("Eiffel", "eiffel tower") == 0.0


def test_binary_label_parsing_and_j():
    assert parse_binary_label('{"label": "CORRECT"}') is True
    assert parse_binary_label('{"label":"WRONG"}') is False
    assert parse_binary_label("The answer is INCORRECT") is False
    assert parse_binary_label("CORRECT") is True
    assert parse_binary_label("maybe") is None
    assert qa.binary_j([True, False, True, True]) == 0.75
    assert qa.binary_j([]) is None


def test_registered_qa_metrics_are_rates_where_higher_is_better():
    from services.coordinator.metrics.registry import get_metric

    for name, fn in (("token_f1", qa.token_f1), ("locomo_f1", qa.locomo_f1), ("exact_match", qa.exact_match),
                     ("binary_j", qa.binary_j)):
        m = get_metric(name)
        assert (m.higher_is_better, m.unit) == (True, "rate"), name
        assert m.fn is fn, name


def test_only_category_3_keeps_the_first_semicolon_part():
    # gold "paris; london": category 3 scores against "paris" alone (F1 1.0); categories 2 and 4 against both
    # tokens: P = 1, R = 1/2, F1 = 2/3
    assert qa.locomo_f1("paris", "paris; london", 3) == pytest.approx(1.0)
    for cat in (2, 4):
        assert qa.locomo_f1("paris", "paris; london", cat) == pytest.approx(2 / 3)
    # and only category 1 splits on commas: "paris, london" vs gold "paris": category 1 takes the best part (1.0),
    # category 2 the whole prediction (P = 1/2, R = 1, F1 = 2/3)
    assert qa.locomo_f1("paris, london", "paris", 1) == pytest.approx(1.0)
    assert qa.locomo_f1("paris, london", "paris", 2) == pytest.approx(2 / 3)


@pytest.mark.parametrize("cat", [0, 6, -1])
def test_locomo_f1_rejects_a_category_outside_1_to_5(cat):
    with pytest.raises(ValueError, match=f"category: {cat} is not"):
        qa.locomo_f1("no information available", "x", cat)


def test_exact_match_needs_the_same_token_set_not_a_superset_or_subset():
    assert qa.exact_match("paris london", "paris") == 0.0
    assert qa.exact_match("paris", "paris london") == 0.0
    assert qa.exact_match("London, Paris", "paris london") == 1.0
