"""Reading a scrape in tests: samples by name, and one sample's value by its labels."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

# sample name -> [(labels, value)]
Found = dict[str, list[tuple[dict[str, str], float]]]


def parse(text: str) -> Found:
    found: Found = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found.setdefault(s.name, []).append((s.labels, s.value))
    return found


def value(found: Found, name: str, **labels: str) -> float | None:
    """The first sample of `name` whose labels include `labels`."""
    for got, number in found.get(name, []):
        if all(got.get(k) == v for k, v in labels.items()):
            return number
    return None
