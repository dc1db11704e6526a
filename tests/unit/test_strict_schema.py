"""lockio/strict_schema.py on a schema of its own: every refusal names the key path it is at, in the
document's own key names, whether msgspec, a rule or a row's `problem` refused it."""

from __future__ import annotations

from typing import Annotated

import msgspec
import pytest
from envgen.lockio.strict_schema import Refusal, Rule, converted


def _no_dash(text: str) -> str | None:
    return "starts with a dash" if text.startswith("-") else None


def _one_word(text: str) -> str | None:
    return "holds a space" if " " in text else None


class Item(msgspec.Struct, forbid_unknown_fields=True, frozen=True, rename="kebab"):
    item_name: Annotated[str, Rule(_one_word)]
    size: int = 0

    def problem(self) -> str | None:
        return "a size below 0" if self.size < 0 else None


class Doc(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    items: list[Item]
    env: dict[Annotated[str, Rule(_no_dash)], str] = {}
    labels: dict[str, Annotated[str, Rule(_one_word)]] = {}
    note: Annotated[str, Rule(_one_word)] | None = None


def refused(document: object) -> Refusal:
    with pytest.raises(Refusal) as raised:
        converted(document, Doc)
    return raised.value


def test_a_document_the_schema_and_its_rules_accept_is_converted() -> None:
    doc = converted({"items": [{"item-name": "a", "size": 1}], "env": {"A": "x y"}}, Doc)
    assert doc.items[0].item_name == "a" and doc.env == {"A": "x y"} and doc.note is None


@pytest.mark.parametrize(
    ("document", "path", "kind", "message"),
    [
        ({"items": [{"item-name": "a", "colour": 1}]}, ("items", 0, "colour"), "unknown", ""),
        ({"items": [{"size": 1}]}, ("items", 0, "item-name"), "missing", "missing"),
        ({"items": [{"item-name": 5}]}, ("items", 0, "item-name"), "type", ""),
        ({"items": [], "env": {"A": "x", "B": 2}}, ("env", "B"), "type", ""),
        ({"items": [{"item-name": "two words"}]}, ("items", 0, "item-name"), "invalid", ""),
        ({"items": [], "env": {"-A": "x"}}, ("env", "-A"), "invalid", "starts with a dash"),
        ({"items": [], "labels": {"k": "x y"}}, ("labels", "k"), "invalid", "holds a space"),
        ({"items": [], "note": "x y"}, ("note",), "invalid", "holds a space"),
        ({"items": [{"item-name": "a", "size": -1}]}, ("items", 0), "invalid", "a size below 0"),
    ],
)
def test_each_refusal_names_its_key_path(
    document: object, path: tuple[str | int, ...], kind: str, message: str
) -> None:
    refusal = refused(document)
    assert (refusal.path, refusal.kind) == (path, kind)
    assert message in refusal.message
