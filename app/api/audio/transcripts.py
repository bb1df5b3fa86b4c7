"""What a transcription asks the model and how its transcript is written out: pure functions.

The request becomes a chat turn as llama-server makes it (`convert_transcriptions_to_chatcmpl`
and `common_chat_get_asr_prompt` in the pinned sdist): the client's prompt, or "Transcribe
audio to text", then " (language: xx)" when a language is named, then the clip; LFM2's
templates get their own system prompt instead. The transcript is one segment: an audio
language model gives no timestamps, so subtitles and verbose JSON span the whole clip.
"""

from __future__ import annotations

import zlib
from typing import Any

ASR_INSTRUCTION = "Transcribe audio to text"
LFM2_SYSTEM = "Perform ASR."


def asr_messages(template: str, prompt: str | None, language: str | None, clip: str) -> list[dict[str, Any]]:
    """The chat turn that asks for the transcript of `clip` (a medium's marker) under `template`."""
    lfm2 = "<|tool_list_start|>" in template and "<|tool_list_end|>" in template
    text = prompt or ("" if lfm2 else ASR_INSTRUCTION)
    if language:
        text += f" (language: {language})"
    messages: list[dict[str, Any]] = [{"role": "system", "content": LFM2_SYSTEM}] if lfm2 else []
    return [*messages, {"role": "user", "content": text + clip}]


def timestamp(seconds: float, decimal: str) -> str:
    """HH:MM:SS,mmm (SubRip) or HH:MM:SS.mmm (WebVTT)."""
    millis = round(seconds * 1000)
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{decimal}{millis:03d}"


def cue_text(text: str) -> str:
    """The transcript as a cue's text: no blank line (it would end the cue) and no arrow (a timing line)."""
    return "\n".join(line.strip() for line in text.replace("-->", "->").splitlines() if line.strip())


def subtitles(text: str, duration: float, kind: str) -> str:
    """The transcript as one cue over the whole clip, in SubRip (`srt`) or WebVTT (`vtt`)."""
    if kind == "srt":
        return f"1\n{timestamp(0, ',')} --> {timestamp(duration, ',')}\n{cue_text(text)}\n\n"
    return f"WEBVTT\n\n{timestamp(0, '.')} --> {timestamp(duration, '.')}\n{cue_text(text)}\n\n"


def compression_ratio(text: str) -> float:
    """Whisper's repetition measure: the text's bytes over their zlib-compressed bytes."""
    data = text.encode()
    return len(data) / len(zlib.compress(data)) if data else 0.0


def verbose(
    text: str,
    language: str | None,
    duration: float,
    tokens: list[int],
    logprobs: list[float],
    temperature: float,
) -> dict[str, Any]:
    """OpenAI's verbose_json: the transcript and its one segment (`language` as asked, else unknown:
    nothing detects it; `no_speech_prob` 0: nothing estimates it)."""
    segment = {
        "id": 0, "seek": 0, "start": 0.0, "end": round(duration, 3), "text": text, "tokens": tokens,
        "temperature": temperature,
        "avg_logprob": sum(logprobs) / len(logprobs) if logprobs else 0.0,
        "compression_ratio": compression_ratio(text), "no_speech_prob": 0.0,
    }  # fmt: skip
    return {
        "task": "transcribe",
        "language": language or "unknown",
        "duration": round(duration, 3),
        "text": text,
        "segments": [segment],
        "usage": {"type": "duration", "seconds": max(1, round(duration))},
    }
