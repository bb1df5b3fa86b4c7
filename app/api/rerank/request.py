"""A rerank request as its serving needs it: the query, the documents' texts and the answer's size."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RerankRequest:
    """`POST /v1/rerank` (and llama-server's other paths), validated: nothing of the body is read again."""

    query: str
    documents: tuple[str, ...]  # each document's text (given as a string, or an object's `text`)
    model: str | None = None
    top_n: int | None = None  # the most relevant this many (None: all)
    return_documents: bool = False  # each result carries its document's text
