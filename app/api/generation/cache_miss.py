"""Why a prompt missed the cache: the first token where it leaves the cached prompt closest to it.

An agent's turns each repeat the one before, so the whole earlier prompt should be
reused; when it is not, something changed in the middle (a date in the system prompt, a
tool list in another order, a per-request id). The cached prompt sharing most with this
one is found (the engine's closest_cached), and if it leaves it before its own end, the
log says where (the token, the message it falls in, the text on both sides) and the
answer's X-Cache-Miss header says where in this prompt: the position and message only,
nothing of the cached prompt, which may be another client's (the log, the operator's, shows it).
Only prompts of the request's own cache scope are compared: another tenant's never are.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from app.api.prompting.prompt_places import Locate
from app.engine.engine import Engine
from app.engine.tokenizer import Tokenizer

HEADER = "X-Cache-Miss"
# Prompts that share no more than a template's opening are other conversations, not a miss.
MIN_SHARED = 32
log = logging.getLogger(__name__)


def explained(engine: Engine, prompt: Sequence[int], scope: str, locate: Locate | None) -> str | None:
    """The X-Cache-Miss value for `prompt` if the closest cached prompt of its cache `scope` leaves it
    before its own end (logged with the text around the token); None if the cache holds it, or
    nothing like it."""
    closest = engine.closest_cached(prompt, scope)
    if closest is None:
        return None
    shared, held = closest
    if shared < MIN_SHARED or shared >= len(held) or shared >= len(prompt) - 1:
        return None  # little in common (another conversation), or a cached prompt it extends
    place = locate(prompt, shared) if locate is not None else None
    where = f"token={shared}" + (f"; message={place.message}; role={place.role}" if place else "")
    tokenizer = engine.tokenizer
    log.info(
        "prompt cache: %d of %d prompt tokens match a cached prompt of %d, which differs from token "
        "%d%s: here %r, cached %r",
        shared,
        len(prompt),
        len(held),
        shared,
        f" (message {place.message}, {place.role})" if place else "",
        _around(tokenizer, prompt, shared),
        _around(tokenizer, held, shared),  # for the operator only: it may be another client's
    )
    return where


def _around(tokenizer: Tokenizer, tokens: Sequence[int], at: int) -> str:
    """The text of a few tokens before and after position `at` (an image's or a clip's positions hold
    negative placeholders, which are no tokens of the vocabulary: shown as such, never looked up)."""
    near = tokens[max(0, at - 6) : at + 6]
    read = iter(tokenizer.pieces([t for t in near if t >= 0]))
    pieces = [next(read) if t >= 0 else b"[media]" for t in near]
    return re.sub(r"(\[media\])+", "[media]", b"".join(pieces).decode("utf-8", errors="replace"))
