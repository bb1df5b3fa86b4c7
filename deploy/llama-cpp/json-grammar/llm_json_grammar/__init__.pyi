def schema_to_grammar(schema: str, /) -> str:
    """GBNF (with its root rule) for JSON valid against `schema`, a JSON text; ValueError if it cannot."""

def schema_rules(names: list[str], schemas: list[str], /) -> str:
    """GBNF rules, one named after each name for the schema (a JSON text) beside it, no root rule."""
