"""llama.cpp's JSON schema to GBNF converter (common/json-schema-to-grammar.cpp), as llama-server runs it."""

from llm_json_grammar._converter import schema_rules, schema_to_grammar

__all__ = ["schema_rules", "schema_to_grammar"]
