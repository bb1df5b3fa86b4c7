"""The JSON-schema converter's own process: a schema that crashes or exhausts it costs this process only.

Run by schema_converter.py as `python -I <this file>`, so that it imports nothing of the server (no
app package, no llama.cpp): requests in, one JSON object a line on stdin, answers out the same way.
Its memory is capped, so a schema that would fill it fails here (MemoryError, or bad_alloc caught by
the converter) instead of swapping the machine.
"""

from __future__ import annotations

import json
import resource
import sys
from typing import Any

MEMORY_BYTES = 1 << 30


def answer(request: dict[str, Any]) -> dict[str, str]:
    import llm_json_grammar  # the C++ converter: imported in the child alone

    try:
        if request["op"] == "grammar":
            return {"gbnf": llm_json_grammar.schema_to_grammar(request["schema"])}
        return {"gbnf": llm_json_grammar.schema_rules(request["names"], request["schemas"])}
    except (ValueError, MemoryError) as exc:
        return {"error": str(exc) if not isinstance(exc, MemoryError) else "the conversion ran out of memory"}


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    for line in sys.stdin:
        sys.stdout.write(json.dumps(answer(json.loads(line))) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
