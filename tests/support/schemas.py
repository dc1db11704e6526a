"""JSON Schema validation for the tests, without the IRI grammar jsonschema would build as it is
imported."""

from __future__ import annotations

import json
import sys
from types import ModuleType
from typing import Any


def validate(instance: Any, schema: Any) -> None:
    """`jsonschema.validate(instance, schema)`, for a schema that names no "format".

    jsonschema imports rfc3987-syntax, where it is installed, for its "iri" format checker, and that
    module builds a lark grammar on import: about 2 s of CPU in each process (each xdist worker)
    that imports jsonschema. `validate` checks no format unless given a format checker, so the
    grammar is never used: jsonschema is imported without it. A schema that starts naming formats
    fails here, to be checked with a format checker instead."""
    key = json.dumps(schema, sort_keys=True)
    if key not in _validators:
        assert not _formats(schema), (
            f"the schema names formats {_formats(schema)}: check them with a format checker"
        )
        jsonschema = _jsonschema()
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        _validators[key] = cls(schema)
    # What jsonschema.validate raises, from a validator made (and its schema checked) once per
    # schema.
    error = best_match(_validators[key].iter_errors(instance))
    if error is not None:
        raise error


# One validator per schema (by its JSON text): jsonschema.validate checks the schema and builds a
# validator each call, about 0.1 s of CPU for docs/cli.schema.json.
_validators: dict[str, Any] = {}


def _formats(schema: Any) -> list[str]:
    if isinstance(schema, dict):
        own = [schema["format"]] if isinstance(schema.get("format"), str) else []
        return own + [f for value in schema.values() for f in _formats(value)]
    if isinstance(schema, list):
        return [f for value in schema for f in _formats(value)]
    return []


def best_match(errors: Any) -> Any:
    return _jsonschema().exceptions.best_match(errors)


def _jsonschema() -> ModuleType:
    if "jsonschema" not in sys.modules and "rfc3987_syntax" not in sys.modules:
        sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # an import of it raises ImportError
        try:
            import jsonschema
        finally:
            del sys.modules["rfc3987_syntax"]  # for anyone else, importable as before
    import jsonschema

    return jsonschema
