"""Audio in: chat completions' input_audio and /v1/audio/transcriptions on the real server, with a
random-weight Qwen2-Audio type projector beside SmolLM2, the openai SDK, and llama-server built from
the same sdist answering the same requests.

The projector is random (harness/tiny_audio_projector.py), so the transcripts are nonsense: what is
compared is their equality with llama-server's at temperature 0 (the clip's tokens counted the same),
the formats and stream OpenAI's SDK reads, what the prompt cache reuses, and the errors a client can
cause. The clips: llama.cpp's own test-2.mp3 and WAV files written here.
"""

from __future__ import annotations

import base64
import io
import re
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
import soundfile

from app.api.audio import transcripts
from app.settings.values import default_model_path
from harness import llama_server, tiny_audio_projector, tiny_projector
from harness.servers import Server, Service, serving_models
from tests.support import same_media
from tests.support.audio import tone
from tests.support.clients import openai_client
from tests.support.procs import worker_holding
from tests.support.rawhttp import read_chunk, read_head, request_bytes
from tests.support.waits import wait_until

WINDOW = tiny_audio_projector.AUDIO_TOKENS  # one 30-second window's tokens
MP3 = tiny_projector.media("test-2.mp3").read_bytes()
MAX_SECONDS = 45


WAV = tone(2.5)
LONG_WAV = tone(40, 220.0)  # two windows


@pytest.fixture(scope="module")
def hearing() -> Iterator[Server]:
    """SmolLM2 with the audio projector ("smol") and with the vision one ("eyes"), a worker each."""
    path = default_model_path()
    models = [
        {"id": "smol", "path": path, "mmproj": str(tiny_audio_projector.cached(path)), "parallel": 2},
        {"id": "eyes", "path": path, "mmproj": str(tiny_projector.cached(path)), "parallel": 1},
    ]
    limits = {
        "LLM_MAX_AUDIO_SECONDS": str(MAX_SECONDS),
        "LLM_MAX_MEDIA_BYTES": str(2 * len(LONG_WAV)),
        "LLM_MAX_BODY_BYTES": str(4 * len(LONG_WAV)),  # a clip inline, as base64
    }
    # The reproducible kernels: its answers are compared with llama-server's bit for bit.
    with serving_models(models, LLM_N_CTX="4096", LLM_BATCH_INVARIANT="1", **limits) as server:
        yield server


@pytest.fixture(scope="module")
def reference() -> Iterator[Service]:
    """llama-server on the same model and projector, with the kernels ours runs by default."""
    path = default_model_path()
    extra = ("--mmproj", str(tiny_audio_projector.cached(path)))
    service = llama_server.start(path, 1, 2, 4096, extra, same_kernels=True)
    yield service
    service.stop()


@pytest.fixture
def sdk(hearing: Server) -> Iterator[openai.OpenAI]:
    with openai_client(hearing) as client:
        yield client


def listening(clip: bytes, kind: str, text: str = "What do you hear?") -> list[dict[str, Any]]:
    audio = {"data": base64.b64encode(clip).decode(), "format": kind}
    return [
        {
            "role": "user",
            "content": [{"type": "text", "text": text}, {"type": "input_audio", "input_audio": audio}],
        }
    ]


def theirs_chat(service: Service, messages: list[dict[str, Any]], tokens: int = 12) -> dict[str, Any]:
    # The samples this server decodes, as a 16 kHz float WAV: llama-server's miniaudio resamples otherwise.
    body = {"messages": same_media.messages(messages), "max_tokens": tokens, "temperature": 0}
    answer = httpx.post(service.url + "/v1/chat/completions", json=body, timeout=300)
    answer.raise_for_status()
    result: dict[str, Any] = answer.json()
    return result


def theirs_transcript(service: Service, clip: bytes, name: str, **form: str) -> dict[str, Any]:
    fields = {"temperature": "0", "max_tokens": "12", **form}
    answer = httpx.post(
        service.url + "/v1/audio/transcriptions",
        files={"file": (name, same_media.audio(clip))},
        data=fields,
        timeout=300,
    )
    answer.raise_for_status()
    result: dict[str, Any] = answer.json()
    return result


def transcribe(sdk: openai.OpenAI, clip: bytes, name: str, **options: Any) -> Any:
    extra = {"max_tokens": 12, **options.pop("extra_body", {})}
    return sdk.audio.transcriptions.create(
        model="smol", file=(name, clip), temperature=0, extra_body=extra, **options
    )


def test_the_model_says_it_hears(hearing: Server) -> None:
    listed = {m["id"]: m for m in httpx.get(hearing.url + "/v1/models", timeout=30).json()["data"]}
    assert listed["smol"]["modalities"] == {"vision": False, "audio": True}
    props = httpx.get(hearing.url + "/props", params={"model": "smol"}, timeout=30).json()
    assert props["modalities"] == {"vision": False, "audio": True} and props["audio_sample_rate"] == 16000
    shown = httpx.post(hearing.url + "/api/show", json={"model": "smol"}, timeout=30).json()
    assert "audio" in shown["capabilities"] and "vision" not in shown["capabilities"]


@pytest.mark.parametrize(("clip", "kind"), [(MP3, "mp3"), (WAV, "wav")], ids=["mp3", "wav"])
def test_an_answer_about_a_clip_equals_llama_servers_whole_and_streamed(
    sdk: openai.OpenAI, reference: Service, clip: bytes, kind: str
) -> None:
    messages = listening(clip, kind)
    expected = theirs_chat(reference, messages)
    whole = sdk.chat.completions.create(model="smol", messages=messages, max_tokens=12, temperature=0)
    assert whole.choices[0].message.content == expected["choices"][0]["message"]["content"]
    assert whole.usage.prompt_tokens == expected["usage"]["prompt_tokens"]
    text_only = sdk.chat.completions.create(
        model="smol", messages=[{"role": "user", "content": "What do you hear?"}], max_tokens=1
    )
    assert whole.usage.prompt_tokens >= text_only.usage.prompt_tokens + WINDOW
    stream = sdk.chat.completions.create(
        model="smol", messages=messages, max_tokens=12, temperature=0, stream=True
    )
    streamed = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert streamed == whole.choices[0].message.content


def test_a_transcription_equals_llama_servers(sdk: openai.OpenAI, reference: Service) -> None:
    for form in ({}, {"language": "en"}, {"prompt": "Write down what is said."}):
        expected = theirs_transcript(reference, MP3, "test-2.mp3", **form)
        ours = transcribe(sdk, MP3, "test-2.mp3", **form)
        assert ours.text == expected["text"], form
        assert ours.usage.input_tokens == expected["usage"]["input_tokens"], form
        assert ours.usage.output_tokens == expected["usage"]["output_tokens"], form
        assert ours.usage.input_token_details.audio_tokens == WINDOW


def test_a_clip_longer_than_a_window_is_two_and_a_second_question_is_served_past_it(
    sdk: openai.OpenAI, reference: Service
) -> None:
    expected = theirs_transcript(reference, LONG_WAV, "long.wav")
    ours = transcribe(sdk, LONG_WAV, "long.wav")
    assert ours.text == expected["text"]
    assert ours.usage.input_token_details.audio_tokens == 2 * WINDOW
    assert ours.usage.input_tokens == expected["usage"]["input_tokens"]
    first = listening(LONG_WAV, "wav", "Describe it.")
    answer = sdk.chat.completions.create(model="smol", messages=first, max_tokens=8, temperature=0)
    follow_up = [
        *first,
        {"role": "assistant", "content": answer.choices[0].message.content},
        {"role": "user", "content": "And its pitch?"},
    ]
    again = sdk.chat.completions.create(model="smol", messages=follow_up, max_tokens=8, temperature=0)
    assert again.usage.prompt_tokens_details.cached_tokens > 2 * WINDOW
    assert (
        again.choices[0].message.content
        == theirs_chat(reference, follow_up, 8)["choices"][0]["message"]["content"]
    )


def test_each_response_format_and_the_stream(sdk: openai.OpenAI) -> None:
    plain = transcribe(sdk, WAV, "tone.wav")
    assert plain.text and plain.usage.type == "tokens"
    assert transcribe(sdk, WAV, "tone.wav", response_format="text") == plain.text + "\n"
    verbose = transcribe(
        sdk, WAV, "tone.wav", response_format="verbose_json", timestamp_granularities=["segment"]
    )
    assert verbose.text == plain.text and verbose.duration == pytest.approx(2.5, abs=0.05)
    (segment,) = verbose.segments
    assert (segment.start, segment.end, segment.text) == (0.0, verbose.duration, plain.text)
    assert segment.tokens and segment.avg_logprob < 0
    cue = rf"00:00:00[,.]000 --> 00:00:02[,.]5\d\d\n{re.escape(transcripts.cue_text(plain.text))}\n\n"
    assert re.fullmatch(rf"1\n{cue}", transcribe(sdk, WAV, "tone.wav", response_format="srt"))
    assert re.fullmatch(rf"WEBVTT\n\n{cue}", transcribe(sdk, WAV, "tone.wav", response_format="vtt"))
    scored = transcribe(sdk, WAV, "tone.wav", include=["logprobs"])
    assert "".join(entry.token for entry in scored.logprobs) == plain.text
    events = list(transcribe(sdk, WAV, "tone.wav", stream=True))
    deltas = [e.delta for e in events if e.type == "transcript.text.delta"]
    (done,) = [e for e in events if e.type == "transcript.text.done"]
    assert "".join(deltas) == done.text == plain.text and len(deltas) > 1
    assert done.usage.output_tokens == plain.usage.output_tokens


def bad(server: Server, status: int = 400, clip: bytes = WAV, **form: str) -> dict[str, Any]:
    files = {"file": ("clip.wav", clip)} if clip else {"other": ("x.txt", b"x")}
    answer = httpx.post(
        server.url + "/v1/audio/transcriptions", files=files, data={"model": "smol", **form}, timeout=60
    )
    assert answer.status_code == status, answer.text
    error: dict[str, Any] = answer.json()["error"]
    return error


def test_what_a_client_gets_wrong_is_a_clear_error(hearing: Server) -> None:
    assert bad(hearing, clip=tiny_projector.media("test-1.jpeg").read_bytes())["param"] == "file"
    too_long = bad(hearing, clip=tone(MAX_SECONDS + 1))
    assert "LLM_MAX_AUDIO_SECONDS" in too_long["message"] and too_long["param"] == "file"
    assert "media_too_large" == bad(hearing, 413, clip=b"\0" * (2 * len(LONG_WAV) + 1))["code"]
    assert bad(hearing, clip=b"")["param"] == "file"
    assert "does not take audio" in bad(hearing, model="eyes")["message"]
    assert bad(hearing, response_format="srt", stream="true")["param"] == "stream"
    assert bad(hearing, **{"timestamp_granularities[]": "word"})["param"] == "timestamp_granularities[]"
    assert bad(hearing, response_format="mp4")["param"] == "response_format"
    assert bad(hearing, 404, model="whisper-1")["code"] == "model_not_found"
    boundary = "part-boundary"
    nameless = (
        (  # a part whose Content-Disposition names no field (the fuzzer's find: once a 500)
            f"--{boundary}\r\nContent-Disposition: form-data\r\n\r\nsmol\r\n--{boundary}\r\n"
            f'Content-Disposition: form-data; name="file"; filename="clip.wav"\r\n\r\n'
        ).encode()
        + WAV
        + f"\r\n--{boundary}--\r\n".encode()
    )
    answer = httpx.post(
        hearing.url + "/v1/audio/transcriptions",
        content=nameless,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
        timeout=60,
    )
    assert answer.status_code == 400 and "needs a name" in answer.json()["error"]["message"], answer.text
    for clip, why in (
        (b"RIFF not really", "not an audio file"),
        (tone(MAX_SECONDS + 1), "LLM_MAX_AUDIO_SECONDS"),
    ):
        chat = httpx.post(
            hearing.url + "/v1/chat/completions",
            json={"model": "smol", "messages": listening(clip, "wav"), "max_tokens": 2},
            timeout=60,
        )
        assert chat.status_code == 400, chat.text
        error = chat.json()["error"]
        assert error["param"] == "messages[0].content[1].input_audio" and why in error["message"], error


def test_a_transcription_landing_on_another_models_worker_is_relayed(hearing: Server) -> None:
    """The multipart body goes on to the worker holding the model as it came."""
    request = httpx.Request(
        "POST", hearing.url + "/v1/audio/transcriptions", files={"file": ("tone.wav", WAV)},
        data={"model": "smol", "temperature": "0", "max_tokens": "6", "response_format": "text"},
    )  # fmt: skip
    body = request.read()
    direct = httpx.post(
        hearing.url + "/v1/audio/transcriptions", content=body, headers=dict(request.headers), timeout=120
    ).text
    pattern = r"\[(\d+)\] \[INFO\] \[-\] app\.engine\.engine: model (\S+) loaded"
    models = {int(pid): model for pid, model in re.findall(pattern, hearing.output())}
    for _ in range(40):  # until a connection lands on the worker of "eyes"
        sock = socket.create_connection(("127.0.0.1", hearing.port), timeout=120)
        pid = wait_until(lambda s=sock: worker_holding(hearing.process.pid, s), what="an accepted connection")
        if models[pid] == "eyes":
            headers = {"Content-Type": request.headers["Content-Type"]}
            sock.sendall(request_bytes(hearing.port, "POST", "/v1/audio/transcriptions", body, headers))
            with sock, sock.makefile("rb") as reader:
                status, head = read_head(reader)
                if ("transfer-encoding", "chunked") in head:
                    relayed = b"".join(iter(lambda: read_chunk(reader), None)).decode()
                else:
                    relayed = reader.read().decode()
            assert status == 200 and relayed == direct, (direct, relayed)
            return
        sock.close()
    pytest.fail("no connection landed on the worker of 'eyes'")


def test_a_clip_is_decoded_by_libsndfile_never_by_llama_cpps_miniaudio(
    sdk: openai.OpenAI, reference: Service
) -> None:
    # The WAV's samples as FLAC and as 32-bit float WAV: libsndfile gives the same samples, so the same
    # answer as llama-server's on the WAV.
    samples, rate = soundfile.read(io.BytesIO(WAV), dtype="float32")
    expected = theirs_chat(reference, listening(WAV, "wav"))["choices"][0]["message"]["content"]
    for subtype, kind in (("PCM_16", "flac"), ("FLOAT", "wav")):
        out = io.BytesIO()
        soundfile.write(out, samples, rate, format=kind.upper(), subtype=subtype)
        answer = sdk.chat.completions.create(
            model="smol", messages=listening(out.getvalue(), kind), max_tokens=12, temperature=0
        )
        assert answer.choices[0].message.content == expected, kind
