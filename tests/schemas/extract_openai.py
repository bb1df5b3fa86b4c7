"""Keep the part of OpenAI's OpenAPI document that the schema tests need (run by hand, output committed).

    python tests/schemas/extract_openai.py path/to/openai-openapi/openapi.json

The source is github.com/openai/openai-openapi; the commit used is written into the output.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOTS = [
    "CreateChatCompletionResponse",
    "CreateChatCompletionStreamResponse",
    "CreateCompletionResponse",
    "ListModelsResponse",
    "Model",
    "Response",
    "ResponseStreamEvent",
    "TokenCountsResource",
]


def references(node: Any) -> set[str]:
    """The component names `node` refers to."""
    if isinstance(node, dict):
        found = set()
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith("#/components/schemas/"):
                found.add(value.rsplit("/", 1)[1])
            else:
                found |= references(value)
        return found
    if isinstance(node, list):
        return set().union(*(references(item) for item in node)) if node else set()
    return set()


def main() -> None:
    source = Path(sys.argv[1])
    document = json.loads(source.read_text())
    schemas = document["components"]["schemas"]
    keep, todo = set(), list(ROOTS)
    while todo:
        name = todo.pop()
        if name not in keep:
            keep.add(name)
            todo.extend(references(schemas[name]) - keep)
    subset = {
        "source": "https://github.com/openai/openai-openapi " + (sys.argv[2] if len(sys.argv) > 2 else ""),
        "components": {"schemas": {name: schemas[name] for name in sorted(keep)}},
    }
    out = Path(__file__).with_name("openai-subset.json")
    out.write_text(json.dumps(subset, indent=0, sort_keys=True) + "\n")
    print(f"{len(keep)} schemas, {out.stat().st_size // 1024} KiB -> {out}")


if __name__ == "__main__":
    main()
