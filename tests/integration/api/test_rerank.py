"""`/v1/rerank` on a real reranking GGUF (a tiny BERT cross-encoder, random weights) beside other models."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import cohere
import httpx
import pytest
from gguf import PoolingType

from app.settings.values import default_model_path
from harness.servers import Server, serving_models
from tests.support import tiny_bert

DOCUMENTS = ["the cat sat on the mat", "quick brown fox", "hello world", "the lazy dog on the river bank"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    reranker = tiny_bert.write(tmp_path_factory.mktemp("rerank") / "tiny-reranker.gguf", PoolingType.RANK)
    models = [
        {"id": "chat", "path": default_model_path()},
        # An embedding model first: a request that names no model is still the reranker's.
        {"id": "embed", "path": default_model_path(), "embedding": True, "pooling": "mean", "n_ctx": 512},
        {"id": "reranker", "path": str(reranker), "embedding": True},  # pooling: rank, from the GGUF
    ]
    with serving_models(models, answers=9) as instance:
        yield instance


def rerank(server: Server, path: str = "/v1/rerank", **body: Any) -> httpx.Response:
    return httpx.post(server.url + path, json={"model": "reranker", "query": "the cat", **body}, timeout=60)


def test_documents_come_back_most_relevant_first(server: Server) -> None:
    answer = rerank(server, documents=DOCUMENTS)
    assert answer.status_code == 200, answer.text
    ranked = answer.json()
    assert ranked["model"] == "reranker" and ranked["object"] == "list"
    scores = [result["relevance_score"] for result in ranked["results"]]
    assert scores == sorted(scores, reverse=True)
    assert sorted(result["index"] for result in ranked["results"]) == list(range(len(DOCUMENTS)))
    assert ranked["usage"]["prompt_tokens"] > 0
    # Each pair is scored on its own: the same score alone as among the others.
    for result in ranked["results"]:
        alone = rerank(server, documents=[DOCUMENTS[result["index"]]]).json()["results"][0]
        assert alone["relevance_score"] == pytest.approx(result["relevance_score"], abs=1e-4)


def test_a_request_that_names_no_model_goes_to_the_reranker_its_gguf_makes(server: Server) -> None:
    body = {"query": "the cat", "documents": DOCUMENTS}
    answer = httpx.post(server.url + "/v1/rerank", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.json()["model"] == "reranker"
    assert answer.json()["results"] == rerank(server, documents=DOCUMENTS).json()["results"]


def test_top_n_documents_and_every_path(server: Server) -> None:
    full = rerank(server, documents=DOCUMENTS).json()["results"]
    as_objects = [{"text": text} for text in DOCUMENTS]  # Cohere's and Jina's other form
    for path in ("/v1/rerank", "/rerank", "/v1/reranking", "/reranking"):
        top = rerank(server, path, documents=as_objects, top_n=2, return_documents=True).json()["results"]
        assert [r["index"] for r in top] == [r["index"] for r in full[:2]]
        assert [r["document"]["text"] for r in top] == [DOCUMENTS[r["index"]] for r in top]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "chat", "documents": DOCUMENTS}, "model"),  # a generating model
        ({"model": "embed", "documents": DOCUMENTS}, "model"),  # embeddings, not scores
        ({"documents": []}, "documents"),
        ({"documents": [""]}, "documents"),
        ({"documents": DOCUMENTS, "top_n": 0}, "top_n"),
        ({"documents": DOCUMENTS, "query": ""}, "query"),
        ({"documents": ["the cat " * 100]}, "documents"),  # past the reranker's 128-token context
    ],
)
def test_what_cannot_be_reranked_is_a_400_naming_it(server: Server, body: dict[str, Any], param: str) -> None:
    answer = rerank(server, **body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == param


def test_coheres_sdk_reranks_against_it(server: Server) -> None:
    """A real client of this API shape, unchanged, pointed at the server."""
    with httpx.Client(timeout=60) as connection:
        client = cohere.Client(base_url=server.url, api_key="unused", httpx_client=connection)
        answer = client.rerank(model="reranker", query="the cat", documents=DOCUMENTS, top_n=3)
    ours = rerank(server, documents=DOCUMENTS, top_n=3).json()["results"]
    assert [(r.index, round(r.relevance_score, 4)) for r in answer.results] == [
        (r["index"], round(r["relevance_score"], 4)) for r in ours
    ]


def test_a_reranker_asked_for_embeddings_is_a_400_in_each_protocols_shape(server: Server) -> None:
    # Its rank pooling makes one score per input, no vector (and a vector of one number is none).
    openai_style = httpx.post(
        server.url + "/v1/embeddings", json={"model": "reranker", "input": "cat"}, timeout=60
    )
    assert openai_style.status_code == 400, openai_style.text
    error = openai_style.json()["error"]
    assert error["param"] == "model" and "reranker" in error["message"] and "/v1/rerank" in error["message"]
    for path, body in (("/api/embed", {"input": "cat"}), ("/api/embeddings", {"prompt": "cat"})):
        ollama_style = httpx.post(server.url + path, json={"model": "reranker", **body}, timeout=60)
        assert ollama_style.status_code == 400 and "/v1/rerank" in ollama_style.json()["error"], path
    vectors = httpx.post(server.url + "/v1/embeddings", json={"model": "embed", "input": "cat"}, timeout=60)
    assert vectors.status_code == 200 and len(vectors.json()["data"][0]["embedding"]) > 1
