"""llama.cpp's JSON-schema converter, run in a process of its own: no schema a client sends can crash,
hang or exhaust a worker through it.

The converter (common/json-schema-to-grammar.cpp, compiled as llm_json_grammar) is a thousand lines
of recursive C++: a property name 200,000 characters long overflowed its stack, as did a chain of
20,000 $refs, and 3,000 optional properties took it minutes. Bounding every path in Python would mean
writing the converter again, so each worker hands schemas to a child process instead (started on
the first schema, started again after a crash), waits for it at most TIMEOUT seconds, and keeps the
last answers by request: a client that sends the same tools every turn pays once.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from pathlib import Path

from app.engine.errors import GrammarError

TIMEOUT = 10.0  # seconds one conversion may take
_REMEMBERED = 256  # answers kept, by request
_CHILD = Path(__file__).with_name("converter_child.py")


def schema_to_grammar(schema_text: str) -> str:
    """GBNF (with a root rule) for JSON valid against the schema; GrammarError for one it cannot take."""
    return _CONVERTER.ask({"op": "grammar", "schema": schema_text})


def schema_rules(names: list[str], schema_texts: list[str]) -> str:
    """GBNF rules, one named after each name, for its schema (one converter: shared rules once)."""
    return _CONVERTER.ask({"op": "rules", "names": names, "schemas": schema_texts})


class _Converter:
    """One child process per server process, asked one request at a time."""

    def __init__(self) -> None:
        self._child: subprocess.Popen[bytes] | None = None
        self._owner = 0  # the pid that made the lock and started the child (a forked worker: its own)
        self._lock = threading.Lock()
        self._answers: OrderedDict[bytes, tuple[str, bool]] = OrderedDict()

    def ask(self, request: dict[str, object]) -> str:
        line = (json.dumps(request) + "\n").encode()
        key = hashlib.sha256(line).digest()
        if self._owner != os.getpid():
            # Made in the process that asks, after gevent has patched threading: a lock made before
            # (in gunicorn's master) would block the whole hub while a greenlet waits on the child.
            self._child = None  # (a forked process's copy of its parent's child: the parent's to stop)
            self._owner, self._lock = os.getpid(), threading.Lock()
        with self._lock:
            known = self._answers.get(key)
            if known is None:
                known = self._answers[key] = self._convert(line)
                if len(self._answers) > _REMEMBERED:
                    self._answers.popitem(last=False)
            else:
                self._answers.move_to_end(key)
        text, failed = known
        if failed:
            raise GrammarError(text)
        return text

    def _convert(self, line: bytes) -> tuple[str, bool]:
        """(the grammar, False) or (why not, True)."""
        child = self._running()
        try:
            assert child.stdin is not None
            child.stdin.write(line)
            child.stdin.flush()
            reply = self._read_line(child)
        except (BrokenPipeError, OSError):
            reply = b""
        if reply is None:
            self.stop()
            return f"converting this JSON schema took longer than {TIMEOUT:g} s, so it was stopped", True
        if not reply:
            self.stop()
            return "this JSON schema made the schema converter fail (its process ended)", True
        answer = json.loads(reply)
        if "error" in answer:
            return _one_line(answer["error"]), True
        return answer["gbnf"], False

    def _running(self) -> subprocess.Popen[bytes]:
        if self._child is None or self._child.poll() is not None:
            self._child = subprocess.Popen(
                [sys.executable, "-I", str(_CHILD)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
        return self._child

    def _read_line(self, child: subprocess.Popen[bytes]) -> bytes | None:
        """The child's next line; b"" if it ended first, None if TIMEOUT passed first."""
        assert child.stdout is not None
        descriptor, received = child.stdout.fileno(), b""
        deadline = time.monotonic() + TIMEOUT
        while not received.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            readable, _, _ = select.select([descriptor], [], [], left)
            if readable:
                try:
                    chunk = os.read(descriptor, 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    return b""
                received += chunk
        return received

    def stop(self) -> None:
        if self._child is not None and self._owner == os.getpid():
            self._child.kill()
            self._child.communicate()  # waits, and closes its pipes
            self._child = None


def _one_line(message: str) -> str:
    """The converter's message without its heading line ("JSON schema conversion failed:")."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    text = " ".join(line for line in lines if line != "JSON schema conversion failed:")
    return f"this JSON schema is not supported: {text}"


_CONVERTER = _Converter()
atexit.register(_CONVERTER.stop)  # the child goes with its worker
