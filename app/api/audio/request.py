"""A transcription request as its serving needs it: the form's fields, checked, and the clip."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TranscriptionRequest:
    """`POST /v1/audio/transcriptions`, validated: nothing of the form is read again."""

    clip: bytes  # the audio file, within LLM_MAX_MEDIA_BYTES
    model: str | None = None
    language: str | None = None
    prompt: str | None = None  # text the transcript continues (names, spellings)
    response_format: str = "json"
    temperature: float = 0.0  # OpenAI's default: the most likely transcript
    stream: bool = False
    max_tokens: int | None = None
    logprobs: bool = False  # include[]=logprobs

    @property
    def scored(self) -> bool:
        """Whether each token's log-probability is needed (verbose_json's segments read them too)."""
        return self.logprobs or self.response_format == "verbose_json"
