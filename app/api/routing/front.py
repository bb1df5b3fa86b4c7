"""Which worker serves a request, decided before its view runs, from the `model` it names.

As llama.cpp's router mode decides before its server context sees a request, one hook in
front of Flask's dispatch (`route_request`, a before_request after the keys, limits and body
decoding) serves the request here, relays it to the worker holding its model, has a pool
worker load an on-demand model first, or wakes a sleeping one (route.py). A view says only
where its request names the model and what the model must do (`@routed(...)`); views never
mention workers. The `model` is read from the raw request, before the view's schema: a
request the schema refuses is refused by the worker that serves its model, in the same words.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from flask import Response, current_app, request

from app.api.http.body import model_index
from app.api.routing.route import here_or_relay

View = TypeVar("View", bound=Callable[..., Any])
_DECLARED = "routing"


@dataclass(frozen=True)
class Routing:
    """Where a route's request names its model, and what the model must do."""

    use: Literal["generate", "embed"] | None = "generate"  # None: either kind of model
    source: Literal["body", "form", "query"] = "body"  # the JSON body, a multipart form, `?model=`
    streams: bool = False  # `stream: true` waits for a loading model with the 200 and keep-alives
    wakes: bool = True  # False: a sleeping start-up model stays asleep (the view answers without it)
    # False: an on-demand model no worker holds is not loaded for it (a 400 says so): a read, which
    # neither counts against a key's limits nor waits for a drain, starts no work.
    loads: bool = True
    # The family's own reading of `model` (Ollama's `name:latest`, rerank's reranker), if not the ids.
    pick: Callable[[str | None], int] | None = None
    # A request the view answers on any worker, without the model (Ollama's load and unload idiom).
    anywhere: Callable[[Mapping[str, Any]], bool] | None = None
    # How the body is read before its `model` is (an upload's own size limit, its bytes kept for a relay).
    reads: Callable[[], None] | None = None


def routed(**routing: Any) -> Callable[[View], View]:
    """Declare how the view's requests are routed (Routing's fields); views without it are served
    by whichever worker takes them."""
    declared = Routing(**routing)

    def declare(view: View) -> View:
        setattr(view, _DECLARED, declared)
        return view

    return declare


def route_request() -> Response | None:
    """The before_request hook: None to dispatch to the view here, else the serving worker's answer."""
    rule = request.url_rule
    if rule is None or request.method == "OPTIONS":
        return None
    routing: Routing | None = getattr(current_app.view_functions[rule.endpoint], _DECLARED, None)
    if routing is None:
        return None
    if routing.reads is not None:
        routing.reads()
    asked = _fields(routing.source)
    if routing.anywhere is not None and routing.anywhere(asked):
        return None
    name = asked.get("model")
    name = name if isinstance(name, str) else None  # any other type is the schema's to refuse
    index = routing.pick(name) if routing.pick is not None else model_index(name, routing.use)
    return here_or_relay(index, routing.streams and _streams(asked), routing.wakes, routing.loads)


def _fields(source: str) -> Mapping[str, Any]:
    """The request's fields where its `model` is: nothing when the body is not a JSON object."""
    if source == "query":
        return request.args
    if source == "form":
        return request.form
    try:
        body = request.get_json(force=True, silent=True)
    except RecursionError:  # nested too deeply: the view's parse says so
        return {}
    return body if isinstance(body, dict) else {}


def _streams(asked: Mapping[str, Any]) -> bool:
    """Whether the request asks for a stream (a form says it as text)."""
    stream = asked.get("stream")
    return stream is True or (isinstance(stream, str) and stream.lower() == "true")
