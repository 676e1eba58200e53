"""Every stream says what it carries: the topic -> payload model map of contracts.payloads."""

from __future__ import annotations

import inspect

from contracts import events
from contracts.events import Event
from contracts.payloads import PAYLOADS, REPLY_PAYLOAD
from contracts.topics import Topic


def test_every_topic_has_a_payload_model() -> None:
    missing = sorted(str(topic) for topic in Topic if topic not in PAYLOADS)
    assert not missing, f"add the payload model of {missing} to contracts.payloads.PAYLOADS"
    assert set(PAYLOADS) == set(Topic), "PAYLOADS names only topics of contracts.topics"


def test_payloads_are_events_of_the_contracts() -> None:
    carried: dict[str, type[Event]] = {str(topic): model for topic, model in PAYLOADS.items()}
    carried["reply.<instance>"] = REPLY_PAYLOAD
    for topic, model in carried.items():
        assert inspect.isclass(model), topic
        assert issubclass(model, Event), topic
        assert model is not Event, f"{topic}: the envelope alone is no payload"
        assert getattr(events, model.__name__) is model, f"{topic}: not in contracts.events"


def test_each_topic_carries_a_model_of_its_own() -> None:
    # One model per stream: a consumer can tell an entry's stream from its model.
    models = [*PAYLOADS.values(), REPLY_PAYLOAD]
    assert len({model.__name__ for model in models}) == len(models)
