"""The fuzz campaign over the native boundary: generated hostile inputs for every entry point where a
client's bytes reach C or C++ code, sent to the real server while other clients stream.

Entry points: GBNF, regular expressions, Lark grammars and JSON schemas (each through every field
that carries them: native_inputs.CARRIERS), images and audio clips (valid files mutated: bits
flipped, bytes set, cut, spliced, header fields blown up), and text for the tokenizer (invalid
UTF-8, lone surrogates, NULs, the model's control tokens). A campaign is seeded, so a failure is
repeated by its seed; it counts the inputs it sent to each entry point and every status answered.
What it proves is checked by its caller: no answer a 500 or a leak, no worker dead or booted
again, every stream beside it whole.
"""

from __future__ import annotations

import base64
import io
import json
import random
import threading
from collections import Counter
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import soundfile
from PIL import Image

from harness import tiny_audio_projector, tiny_projector
from harness.servers import Server, serving_models
from tests.support.audio import tone
from tests.support.native_inputs import CARRIERS, GENERATORS
from tests.support.security import LEAKS

HEARS, SEES = "hears", "sees"  # the campaign server's two models: SmolLM2 with each projector
CONTROL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<repo_name>", "<file_sep>", "<|fim_prefix|>"]
ENTRY_POINTS = ("gbnf", "regex", "lark", "schema", "image", "audio", "text")
# Served, a client's error, or a route the model cannot serve (/infill without fill-in-the-middle
# tokens): never a 500, never a 503 from a dead worker.
ANSWERS = (200, 400, 413, 422, 501)


def campaign_server(default_model: str) -> Generator[Server, None, None]:
    """SmolLM2 twice, hearing through the tiny audio projector and seeing through the vision one, a
    worker each with two sequences (one for the stream beside the campaign)."""
    models = [
        {"id": HEARS, "path": default_model, "mmproj": str(tiny_audio_projector.cached(default_model)),
         "parallel": 2, "n_ctx": 2048},
        {"id": SEES, "path": default_model, "mmproj": str(tiny_projector.cached(default_model)),
         "parallel": 2, "n_ctx": 2048},
    ]  # fmt: skip
    limits = {
        "LLM_MAX_MEDIA_BYTES": str(2 << 20),
        "LLM_MAX_AUDIO_SECONDS": "40",
        "LLM_DEFAULT_MAX_TOKENS": "4",
    }
    with serving_models(models, 0, **limits) as server:
        yield server


@dataclass
class Tally:
    """Inputs sent per entry point, statuses answered, and the answers that broke a rule."""

    sent: Counter[str] = field(default_factory=Counter)
    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    broken: list[str] = field(default_factory=list)

    def summary(self) -> str:
        rows = [
            f"  {entry:<8} {self.sent[entry]:>6} inputs  "
            + ", ".join(
                f"{status}: {n}" for (name, status), n in sorted(self.statuses.items()) if name == entry
            )
            for entry in ENTRY_POINTS
        ]
        return "native fuzz campaign:\n" + "\n".join(rows)


def _seeds() -> dict[str, list[bytes]]:
    """Valid files of each format, to mutate."""
    base = (
        Image.open(io.BytesIO(tiny_projector.media("test-1.jpeg").read_bytes()))
        .convert("RGB")
        .resize((64, 48))
    )
    images = []
    for kind, options in (("PNG", {}), ("JPEG", {"quality": 80}), ("GIF", {}), ("BMP", {}), ("WEBP", {})):
        out = io.BytesIO()
        base.save(out, format=kind, **options)
        images.append(out.getvalue())
    wav = tone(0.5)
    samples, rate = soundfile.read(io.BytesIO(wav), dtype="float32")
    clips = [wav]
    for kind in ("FLAC", "MP3"):
        out = io.BytesIO()
        soundfile.write(out, samples, rate, format=kind)
        clips.append(out.getvalue())
    return {"image": images, "audio": clips}


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to eight mutations of a file: bits flipped, bytes set to edge values, cut, spliced, a
    region repeated, a 32-bit field (a width, a length) set huge or zero."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if not out:
            break
        at = rng.randrange(len(out))
        choice = rng.random()
        if choice < 0.3:
            out[at] ^= 1 << rng.randrange(8)
        elif choice < 0.5:
            out[at] = rng.choice([0x00, 0xFF, 0x7F, 0x80, 0x01])
        elif choice < 0.6:
            del out[rng.randrange(len(out)) :]
        elif choice < 0.7:
            out[at:at] = out[rng.randrange(len(out)) :][: rng.randint(1, 64)]
        elif choice < 0.8:
            piece = out[at : at + rng.randint(1, 32)]
            out[at:at] = piece * rng.randint(2, 64)
        else:
            value = rng.choice([0xFFFFFFFF, 0x7FFFFFFF, 0, 0x10000, 0xFFFF])
            out[at : at + 4] = value.to_bytes(4, rng.choice(["little", "big"]))
    return bytes(out)


def _text(rng: random.Random) -> tuple[str, bytes]:
    """A request for the tokenizer: a path, and its body (raw, with invalid UTF-8, or JSON)."""
    shape = rng.random()
    pieces = [*CONTROL, "\u0000", "é", "\U0001f600", "\u200b", "a", " ", "\n", "\\u0000", "<|", "|>",
              "\x1b[31m", "\u202e", "\ufeff", "\U0010ffff", "\u0301" * 5]  # fmt: skip
    if rng.random() < 0.1:
        pieces += ["\ud800", "\udfff"]  # lone surrogates: refused as the JSON they are
    text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 300)))
    if shape < 0.2:
        raw = (
            b'{"prompt": "'
            + bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
            + b'", "max_tokens": 2}'
        )
        return "/v1/completions", raw
    choices: list[tuple[str, dict[str, Any]]] = [
        ("/v1/completions", {"prompt": text, "max_tokens": 2}),
        ("/completion", {"prompt": text, "n_predict": 2}),
        ("/tokenize", {"content": text, "with_pieces": True, "add_special": True}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": text}], "max_tokens": 2}),
        ("/infill", {"input_prefix": text, "input_suffix": text[::-1], "n_predict": 2}),
        ("/detokenize", {"tokens": [rng.randint(-10, 60000) for _ in range(rng.randint(1, 20))]}),
    ]
    path, body = rng.choice(choices)
    return path, json.dumps({**body, "model": rng.choice([HEARS, SEES])}).encode()


def _media_body(kind: str, data: bytes) -> dict[str, Any]:
    if kind == "image":
        part = {
            "type": "image_url",
            "image_url": {"url": "data:image/png;base64," + base64.b64encode(data).decode()},
        }
        model = SEES
    else:
        part = {
            "type": "input_audio",
            "input_audio": {"data": base64.b64encode(data).decode(), "format": "wav"},
        }
        model = HEARS
    content = [{"type": "text", "text": "What is it?"}, part]
    return {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 2}


def requests(entry: str, count: int, rng: random.Random) -> Iterator[tuple[str, bytes]]:
    """`count` requests (a path, a JSON body as bytes) for one entry point."""
    seeds = _seeds() if entry in ("image", "audio") else {}
    for _ in range(count):
        if entry in GENERATORS:
            carrier = rng.choice([c for c in CARRIERS if c.kind == entry])
            body = carrier.body(GENERATORS[entry](rng))
            body["model"] = rng.choice([HEARS, SEES])
            yield carrier.path, json.dumps(body).encode()
        elif entry in seeds:
            data = mutate(rng.choice(seeds[entry]), rng)
            yield "/v1/chat/completions", json.dumps(_media_body(entry, data)).encode()
        else:
            yield _text(rng)


class Streams(threading.Thread):
    """Streams beside the campaign, one after another on each model, until told to stop; each must end
    whole (its finish reason `length`, every token there)."""

    def __init__(self, server: Server, tokens: int = 48) -> None:
        super().__init__(daemon=True)
        self.server, self.tokens = server, tokens
        self.stop = threading.Event()
        self.finished: Counter[str] = Counter()
        self.broken: list[str] = []

    def run(self) -> None:
        while not self.stop.is_set():
            for model in (HEARS, SEES):
                self._one(model)

    def _one(self, model: str) -> None:
        body = {"model": model, "prompt": "Once upon a time", "max_tokens": self.tokens, "stream": True,
                "ignore_eos": True, "temperature": 0.7}  # fmt: skip
        chunks: list[dict[str, Any]] = []
        try:
            with httpx.stream("POST", self.server.url + "/v1/completions", json=body, timeout=300) as answer:
                for line in answer.iter_lines():
                    if line.startswith("data: {"):
                        chunks.append(json.loads(line[6:]))
        except httpx.HTTPError as failed:
            self.broken.append(f"{model}: {failed!r}")
            return
        usage = next((c["usage"] for c in reversed(chunks) if c.get("usage")), None)
        ended = chunks and chunks[-1]["choices"] and chunks[-1]["choices"][0]["finish_reason"] == "length"
        texts = sum(1 for c in chunks if c["choices"] and c["choices"][0].get("text"))
        if (
            not ended
            or (usage is not None and usage["completion_tokens"] != self.tokens)
            or texts < self.tokens // 2
        ):
            self.broken.append(f"{model}: a stream cut short ({len(chunks)} chunks)")
        else:
            self.finished[model] += 1


def run(server: Server, seed: int, per_entry: int, on_each: Callable[[], None] | None = None) -> Tally:
    """Send `per_entry` inputs to each entry point (in a seeded order, the entry points interleaved)."""
    rng, tally = random.Random(seed), Tally()
    plan = [entry for entry in ENTRY_POINTS for _ in range(per_entry)]
    rng.shuffle(plan)
    made = {entry: requests(entry, per_entry, random.Random(f"{seed}:{entry}")) for entry in ENTRY_POINTS}
    with httpx.Client(base_url=server.url, timeout=120) as client:
        for entry in plan:
            path, body = next(made[entry])
            answer = client.post(path, content=body, headers={"Content-Type": "application/json"})
            tally.sent[entry] += 1
            tally.statuses[entry, answer.status_code] += 1
            if answer.status_code not in ANSWERS:
                tally.broken.append(f"{entry} {path}: {answer.status_code} {answer.text[:200]}")
            elif answer.status_code >= 400 and LEAKS.search(answer.text):
                tally.broken.append(f"{entry} {path}: a leak: {answer.text[:200]}")
            if on_each is not None:
                on_each()
    return tally


def campaign(server: Server, seed: int, per_entry: int) -> None:
    """A whole campaign on `server` (campaign_server's) with streams beside it, and its checks: no
    answer broke a rule, every input was sent, every stream ended whole, no worker died."""
    streams = Streams(server)
    streams.start()
    try:
        tally = run(server, seed, per_entry)
    finally:
        streams.stop.set()
        streams.join(300)
    print(f"\nseed {seed}: " + tally.summary())
    assert not tally.broken, tally.broken[:10]
    assert all(tally.sent[entry] == per_entry for entry in ENTRY_POINTS), tally.sent
    assert not streams.broken and sum(streams.finished.values()) >= 2, (streams.broken, streams.finished)
    log = server.output()
    assert log.count("Booting worker") == 2, log[-3000:]  # none died and came back
    assert "SIGSEGV" not in log and "SIGABRT" not in log and "Traceback" not in log, log[-3000:]
