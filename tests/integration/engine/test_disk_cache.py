"""The KV cache's disk tier on the real server: a conversation's cells outlive a restart, verified.

A worker that stops writes its cells to LLM_CACHE_DISK_PATH; the next server's first
request of the conversation's next turn resumes from them (cached tokens through the openai
SDK) and answers as a fresh evaluation does; a file altered or made by another model is
skipped with a log line and never loaded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from harness.real_models import gemma3_path
from harness.servers import Server

SYSTEM = (
    "You are a tour guide for the rivers of Europe. For every river you mention, give its "
    "length in kilometres, the countries it flows through, the sea it reaches, and one city "
    "on its banks. Keep each answer to a few short sentences, friendly and precise, and never "
    "invent a river. When asked about a river you do not know, say so plainly. The Danube, "
    "the Rhine, the Elbe, the Loire, the Vistula and the Po are the rivers visitors ask about "
    "most often; mention the Danube first when nothing else is asked."
)


# Gemma 3 with a window's worth of cells (LLM_SWA_FULL=0, llama-server's layout) and a history
# longer than its 512-token window: the state on disk holds the window and the checkpoints.
CASES = {
    "smollm2": ({}, SYSTEM),
    "gemma3-window": ({"LLM_MODEL_PATH": str(gemma3_path()), "LLM_SWA_FULL": "0"}, " ".join([SYSTEM] * 6)),
}


def conversation(first_answer: str | None, system: str = SYSTEM) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": "Tell me about the Danube."},
    ]
    if first_answer is not None:
        turns += [
            {"role": "assistant", "content": first_answer},
            {"role": "user", "content": "And the Rhine?"},
        ]
    return turns


def chat(server: Server, first_answer: str | None, system: str = SYSTEM) -> tuple[str, int, int]:
    """The answer, its prompt tokens and the cached ones (the openai SDK's view of usage)."""
    with openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0) as client:
        model = client.models.list().data[0].id
        answer = client.chat.completions.create(
            model=model,
            messages=conversation(first_answer, system),
            max_tokens=16,
            temperature=0,
        )
    usage = answer.usage
    assert usage is not None and usage.prompt_tokens_details is not None
    return (
        answer.choices[0].message.content or "",
        usage.prompt_tokens,
        usage.prompt_tokens_details.cached_tokens or 0,
    )


def stored(folder: Path) -> list[Path]:
    return sorted(folder.glob("fp_*/*.kv"))


@pytest.mark.parametrize("case", list(CASES))
def test_a_conversation_resumes_from_disk_after_a_restart_and_a_bad_file_is_never_used(
    tmp_path: Path, case: str
) -> None:
    folder = tmp_path / "kv"
    extra, system = CASES[case]
    env = {
        **extra,
        "LLM_WORKERS": "1",
        "LLM_PARALLEL": "1",
        "LLM_CACHE_DISK_MB": "64",
        "LLM_CACHE_DISK_PATH": str(folder),
    }
    first_answer, first_prompt, _, _ = served_once(env, None, system)
    assert len(stored(folder)) == 1  # the stopping worker wrote its cells
    assert case == "smollm2" or first_prompt > 512  # past Gemma's window

    restored, prompt_tokens, cached, said = served_once(env, first_answer, system)
    assert first_prompt <= cached < prompt_tokens  # at least the first turn's prompt came from disk
    assert f"restoring {cached} of {prompt_tokens} prompt tokens from the disk cache" in said, said
    (written,) = stored(folder)  # the longer conversation replaced the first turn's file

    # An altered file, and a copy claiming another model: both skipped, the turn evaluated afresh.
    body = written.read_bytes()
    foreign = written.with_name("0" * 32 + ".kv")
    foreign.write_bytes(with_fingerprint(body, "fp_another"))
    written.write_bytes(body[:-8] + bytes(b ^ 0xFF for b in body[-8:]))
    fresh, _, cached_again, log = served_once(env, first_answer, system)
    assert cached_again == 0 and fresh == restored  # the restored cells answer as a fresh evaluation
    assert "disk cache: skipping" in log and "checksum" in log and "another model" in log, log


def served_once(env: dict[str, str], first_answer: str | None, system: str) -> tuple[str, int, int, str]:
    """A server started, asked one turn (`chat`), and stopped (its worker writes its cells); its log too."""
    server = Server(**env).wait_ready()
    try:
        return (*chat(server, first_answer, system), server.output())
    finally:
        server.stop()


def with_fingerprint(body: bytes, fingerprint: str) -> bytes:
    magic, header, rest = body.split(b"\n", 2)
    fields = json.loads(header)
    fields["fingerprint"] = fingerprint
    return magic + b"\n" + json.dumps(fields).encode() + b"\n" + rest


def test_a_model_put_to_sleep_writes_its_cells_and_finds_them_when_it_wakes(tmp_path: Path) -> None:
    folder = tmp_path / "kv"
    server = Server(
        LLM_WORKERS="1", LLM_PARALLEL="1", LLM_CACHE_DISK_MB="64", LLM_CACHE_DISK_PATH=str(folder)
    ).wait_ready()
    try:
        first_answer, first_prompt, _ = chat(server, None)
        slept = httpx.post(server.url + "/sleep", timeout=60)  # vLLM's: the model is unloaded
        assert slept.status_code == 200, slept.text
        assert len(stored(folder)) == 1
        _, prompt_tokens, cached = chat(server, first_answer)  # wakes it
        said = server.output()
    finally:
        server.stop(wait=False)
    assert first_prompt <= cached < prompt_tokens
    assert f"restoring {cached} of {prompt_tokens} prompt tokens from the disk cache" in said, said
