"""What a model's memory keeps, and from where a sequence's cached tokens can be picked up exactly.

llama.cpp gives each architecture a memory of its own (vendor/llama.cpp/src/llama-memory-*.cpp):
- plain KV cells keep every position, and a sequence can be cut back anywhere;
- sliding-window layers (Gemma 2/3, GPT-OSS, Cohere 2) keep about the last `window`
  positions unless their cache is full-size: a cut is exact only while the cells the next
  token attends to are still there (`llama_memory_seq_pos_min` says which are);
- a recurrent state (Mamba, RWKV, the convolutions of LFM2 and Granite 4.0-H) is the whole
  history folded into one cell: it cannot be cut back at all (`llama_memory_seq_rm` fails).
What cannot be cut is restored from a context checkpoint (checkpoints.py) or evaluated again.
These are the pure decisions; model.py reads the facts from llama.cpp.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MemoryKind:
    """What llama.cpp keeps for this model's sequences, read at load."""

    window: int = 0  # sliding window of the layers that forget (0: none, or a full-size cache)
    recurrent: bool = False  # some state folds the whole history (recurrent or hybrid models)
    hybrid: bool = False  # attention layers beside the recurrent ones
    swa_full: bool = False  # sliding-window layers given a full-size cache (LLM_SWA_FULL)
    sliding: int = 0  # the model's own window, full-size cache or not (llama_model_n_swa)
    experts: int = 0  # mixture of experts: experts per layer (0: dense)
    shifts: bool = False  # positions can be moved (llama_memory_can_shift): llama-server's context shift

    @property
    def name(self) -> str:
        """plain, swa, recurrent, hybrid or hybrid-swa."""
        if self.hybrid:
            return "hybrid-swa" if self.window else "hybrid"
        if self.recurrent:
            return "recurrent"
        return "swa" if self.window else "plain"

    @property
    def plain(self) -> bool:
        """Every position kept: any prefix is resumed by cutting the rest off."""
        return not self.window and not self.recurrent

    @property
    def cuts_anywhere(self) -> bool:
        """Any cached prefix of a sequence resumes exactly, whatever it went through: no recurrent
        state, and no sliding-window layers (a full-size cache for them loses all but the window
        when a sequence's state is saved and restored: see `saved_pos_min`)."""
        return not self.recurrent and not self.sliding

    @property
    def rolls_back(self) -> bool:
        """Tokens just decoded can be dropped again (refused draft tokens): not with a recurrent state."""
        return not self.recurrent

    def live_from(self, held: int, pos_min: int) -> int:
        """The shortest prefix of the `held` cached tokens that the live cells resume exactly.

        A recurrent state stands only for all of them. Sliding-window cells resume a cut at c
        while the window before c is still held: the next token, at position c, attends to
        positions c - window + 1 onward, so c must be at least pos_min + window - 1. (More
        than `held` when cells the next token needs are gone: then no cut is exact.) A
        full-size cache keeps every position (pos_min 0) unless the sequence was restored
        from a saved state, which held only the window.
        """
        if self.recurrent:
            return held
        if self.sliding and pos_min > 0:
            return pos_min + self.sliding - 1
        return 0

    def saved_pos_min(self, held: int, pos_min: int) -> int:
        """The oldest position a saved state of the sequence holds: llama.cpp saves of a sliding
        window only the cells the next token attends to (`state_write` skips masked cells), even
        from a full-size cache."""
        return max(pos_min, held - self.sliding) if self.sliding else pos_min


@dataclass(frozen=True)
class Resumable:
    """Where a sequence's `held` cached tokens can be picked up exactly: anywhere from `live_from`
    to `held` with its live cells, or at one of its checkpoints (positions, oldest first)."""

    held: int
    live_from: int = 0
    checkpoints: tuple[int, ...] = ()

    def best(self, wanted: int) -> int:
        """The longest prefix of at most `wanted` tokens that can be resumed (0: evaluate all)."""
        wanted = min(wanted, self.held)
        if wanted >= self.live_from:
            return wanted
        return max((c for c in self.checkpoints if c <= wanted), default=0)

    def from_checkpoint(self, point: int) -> bool:
        """Resuming at `point` (a result of `best`) restores a checkpoint rather than cutting cells."""
        return 0 < point < self.live_from


# llama-server's checkpoint offsets before a prompt's end (tools/server/server-context.cpp, PR #20288):
# a few tokens before it, so that the same prompt sent again resumes there and evaluates only those
# (the chat template's opening of the answer), and a micro-batch before that, for an edited last turn.
END_OFFSET = 4


def checkpoint_stops(prompt_length: int, start: int, n_ubatch: int) -> tuple[int, ...]:
    """Positions at which a prompt's evaluation from `start` pauses so a checkpoint is taken there."""
    wanted = {prompt_length - END_OFFSET - n_ubatch, prompt_length - END_OFFSET}
    return tuple(sorted(p for p in wanted if start < p < prompt_length))


def describe(memory: MemoryKind, checkpoints: int) -> str:
    """One phrase for the start-up log: the memory and how cached prefixes are resumed."""
    if memory.plain:
        window = f", sliding window {memory.sliding} in a full-size cache" if memory.swa_full else ""
        return f"{memory.name}{window} (any cached prefix resumes)"
    parts = [f"sliding window {memory.window}"] if memory.window else []
    if memory.recurrent:
        parts.append("a recurrent state")
    how = (
        f"{checkpoints} checkpoints per sequence" if checkpoints else "no checkpoints: LLM_CTX_CHECKPOINTS=0"
    )
    return f"{memory.name} ({', '.join(parts)}; {how})"


def drafts_off(memory: MemoryKind, spec_type: str) -> str:
    """Why speculative decoding cannot run on this memory ("": it can, or it is not asked for)."""
    if spec_type == "none" or memory.rolls_back:
        return ""
    return (
        f"the {memory.name} memory cannot drop refused draft tokens (its recurrent state cannot be cut back)"
    )
