"""The coding agents (Claude Code, Codex CLI, opencode), installed once per machine and run headless.

Each installs from npm (harness/agents/package.json, pinned by its package-lock.json) into
~/.cache/llm-server/agents/<lock hash>, outside any timed test (`make agents`). A run is
one agent turn as a user types it, pointed at a server URL with the configuration the
Agents page of the docs gives, in a home folder of its own (each writes its settings and
sessions there), so that a second turn continues the first and nothing reaches out.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from harness.files import machine_cache

PACKAGE = Path(__file__).with_name("agents")
AGENTS = ("claude", "codex", "opencode")


def installed() -> Path:
    """The folder whose node_modules/.bin holds the agents, installed on first use (about a minute)."""
    lock = (PACKAGE / "package-lock.json").read_bytes()
    target = machine_cache("agents") / hashlib.sha256(lock).hexdigest()[:16]
    if not all((target / "node_modules" / ".bin" / name).exists() for name in AGENTS):
        assert shutil.which("npm"), (
            "npm is needed to install the coding agents (.ci/system-packages installs it)"
        )
        partial = target.with_suffix(".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(PACKAGE / name, partial / name)
        # Not `npm ci`: npm takes a lock holding another platform's optional packages (opencode's) as
        # out of date; with --no-save, `npm install` installs the locked versions and writes nothing.
        subprocess.run(
            ["npm", "install", "--no-save", "--no-audit", "--no-fund"], cwd=partial, check=True, timeout=900
        )
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    return target


@dataclass(frozen=True)
class Session:
    """One agent's session against a server: its home and working folders, and how to run a turn."""

    agent: str
    home: Path
    work: Path
    base_url: str  # the server (or a proxy in front of it), without /v1
    model: str
    api_key: str = "sk-local"
    window: int = 32768  # the model's context window, told to the agent

    def command(self, prompt: str, again: bool) -> list[str]:
        """A headless turn: the first of a session, or (`again`) one that continues it."""
        binary = str(installed() / "node_modules" / ".bin" / self.agent)
        if self.agent == "claude":
            return [binary, *(["-c"] if again else []), "-p", prompt, "--model", self.model]
        if self.agent == "codex":
            resume = ["resume", "--last"] if again else []
            return [binary, "exec", "--skip-git-repo-check", *resume, prompt]
        return [binary, "run", *(["-c"] if again else []), prompt]

    def environment(self) -> dict[str, str]:
        """The variables the agent reads, each as the docs' Agents page sets them."""
        # PWD too: opencode takes its project folder (and so its opencode.json) from it, not the cwd.
        env = {**os.environ, "HOME": str(self.home), "PWD": str(self.work), "NO_COLOR": "1"}
        if self.agent == "claude":
            env.update(
                ANTHROPIC_BASE_URL=self.base_url,
                ANTHROPIC_API_KEY=self.api_key,
                CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                DISABLE_TELEMETRY="1",
                DISABLE_AUTOUPDATER="1",
                CLAUDE_CODE_MAX_CONTEXT_TOKENS=str(self.window),
                # Room for the prompt: Claude Code reserves its output size out of the window.
                CLAUDE_CODE_MAX_OUTPUT_TOKENS=str(min(4096, self.window // 8)),
            )
        elif self.agent == "codex":
            env.update(CODEX_HOME=str(self.home / ".codex"), LOCAL_API_KEY=self.api_key)
        return env

    def configure(self) -> None:
        """Write the agent's configuration for this server (Codex's config.toml, opencode's JSON)."""
        self.work.mkdir(parents=True, exist_ok=True)
        if self.agent == "codex":
            (self.home / ".codex").mkdir(parents=True, exist_ok=True)
            (self.home / ".codex" / "config.toml").write_text(
                codex_config(self.base_url, self.model, self.window)
            )
        elif self.agent == "opencode":
            config = opencode_config(self.base_url, self.model, self.api_key, self.window)
            (self.work / "opencode.json").write_text(json.dumps(config))

    def turn(
        self, prompt: str, again: bool = False, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """Run one turn; its exit status and what it printed."""
        self.configure()
        return subprocess.run(
            self.command(prompt, again),
            cwd=self.work,
            env=self.environment(),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )


def codex_config(base_url: str, model: str, window: int) -> str:
    """Codex's config.toml for a server: a provider speaking the Responses API."""
    return (
        f'model = "{model}"\n'
        'model_provider = "local"\n'
        f"model_context_window = {window}\n"
        "[model_providers.local]\n"
        'name = "local"\n'
        f'base_url = "{base_url}/v1"\n'
        'wire_api = "responses"\n'
        'env_key = "LOCAL_API_KEY"\n'
    )


def opencode_config(base_url: str, model: str, api_key: str, window: int) -> dict[str, object]:
    """opencode's opencode.json for a server: an OpenAI-compatible provider with the model's window."""
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "local",
        "options": {"baseURL": f"{base_url}/v1", "apiKey": api_key},
        "models": {model: {"name": model, "limit": {"context": window, "output": 512}}},
    }
    return {
        "provider": {"local": provider},
        "model": f"local/{model}",
    }


if __name__ == "__main__":  # make agents: installed outside any timed test
    print(installed())
