"""A setting the engine refuses names its field itself (``RunError.field``, set where it is raised), and the
service answers with that field: nothing is recognised by the words of a message."""

from __future__ import annotations

import pytest

from anchor.predict.config import check_predict_method
from anchor.runs.errors import RunError
from anchor.serve.engine import check_method
from anchor.serve.errors import refused


@pytest.mark.parametrize(("method", "stage", "online", "field"), [
    ("no-such-method", None, False, "method"),
    ("compare", None, False, "method"),  # pairs only
    ("factor-based", None, False, "method"),  # an oracle
    ("vanilla", "pool", False, "stage"),  # no stages
    ("bird-on-anchor", None, False, "stage"),  # a stage is needed
    ("bird-on-anchor", "pool", True, "method"),  # learns from every condition: a job, not an online answer
])
def test_each_refusal_names_its_field_and_the_service_answers_with_it(method, stage, online, field):
    with pytest.raises(RunError) as caught:
        check_method(method, stage, online=online)
    assert caught.value.field == field
    answer = refused(caught.value)
    assert (answer.status, answer.field) == (422, field)
    assert "--" not in answer.message  # named as the request names it, not as a command-line flag


def test_the_field_comes_from_the_error_not_its_words():
    answer = refused(RunError("--stage is mentioned, but the method is at fault", field="method"))
    assert answer.field == "method" and answer.message == "stage is mentioned, but the method is at fault"


def test_the_command_line_keeps_its_flags():
    with pytest.raises(RunError, match="--method bird-on-anchor needs --stage") as caught:
        check_predict_method("bird-on-anchor", None)
    assert caught.value.field == "stage"
