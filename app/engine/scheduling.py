"""The engine's decisions, kept pure so they are tested without a model: queue order, slots, reuse,
prompt budget."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from app.engine.memory import Resumable

# A free sequence whose cache shares less than this share of a new prompt is no better
# than any other; the least recently used one is taken instead (llama-server's 0.1).
MIN_SIMILARITY = 0.1


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens `a` and `b` share."""
    limit = min(len(a), len(b))
    for i in range(limit):
        if a[i] != b[i]:
            return i
    return limit


def anywhere(prefix: int) -> int:
    """A prompt with no media may be resumed after any of its tokens."""
    return prefix


@dataclass(frozen=True)
class CacheView:
    """What the scheduler knows of one sequence: its id, the tokens its KV holds, when it was last used."""

    seq_id: int
    cached: Sequence[int]
    last_used: int
    free: bool
    resumable: Resumable | None = None  # where its cache can be picked up (None: anywhere)
    # Whether the new prompt may resume its cells at all: not if they were evaluated with other LoRA
    # scales, or hold another tenant's prompt (they still count as a cache to keep, if it can be).
    alike: bool = True
    session: str = ""  # the conversation whose prompt it holds ("": none said)

    def reusable(self, prompt: Sequence[int], most: int, cut: Callable[[int], int] = anywhere) -> int:
        """How many leading prompt tokens (at most `most`, where `cut` allows) it can resume."""
        if not self.alike:
            return 0
        shared = cut(min(common_prefix(self.cached, prompt), most))
        return shared if self.resumable is None else self.resumable.best(shared)


@dataclass(frozen=True)
class Placement:
    """Where a new request goes and which cached prefix it starts from.

    `reuse` tokens of the prompt are already in the KV cache: in the chosen sequence's own
    cells (`donor` None) or in another sequence's, shared by reference (`donor` its id).
    `shared`: how many the chosen sequence's cache held, resumable or not.
    """

    seq_id: int
    reuse: int
    donor: int | None = None
    shared: int = field(default=0, compare=False)  # for the log: what a cut-back memory lost


def place(
    views: Sequence[CacheView],
    prompt: Sequence[int],
    reuse_cache: bool,
    pooled: bool,
    borrow: bool = True,
    cut: Callable[[int], int] = anywhere,
) -> Placement:
    """Pick a free sequence for `prompt`, and the longest cached prefix it may start from.

    The free sequence whose own cache shares most of the prompt (a conversation's next
    turn) is taken if it shares enough; one holding a named session's longest prompt (its
    head) only by a prompt that keeps half of its cells or is half as long. Otherwise, among the free
    sequences that lead no session (all of them if each does): with cells of its own per sequence,
    the lowest free id whose cache is empty, else the lowest free id, because llama.cpp
    runs a batch as one graph only over consecutive sequence ids; with one `pooled`
    cache, the least recently used sequence, keeping longest the caches other
    conversations may come back to, and a longer prefix held by any other sequence,
    busy or not, is borrowed (sharing cells of one pool costs nothing) if `borrow` (a
    memory whose cells can be cut anywhere). At least one prompt token is always left to
    evaluate, so that there are logits to sample from. A prefix counts only as far as the
    sequence can resume it exactly (its `resumable`), and only where `cut` allows (a prefix
    ending inside an image resumes at the image's start).
    """
    free = [v for v in views if v.free]
    if not free:
        raise ValueError("no free sequence")
    # A session's longest prompt is its main conversation; an agent's side requests (a title, a
    # quota probe, a small model's call) come between its turns and must not take those cells.
    heads = session_heads(views)
    spare = [v for v in free if v.seq_id not in heads] or free
    # Cells per sequence: an empty sequence first (with the cache on), so a cached
    # conversation is not dropped while there is room elsewhere; then the lowest id.
    fallback = min(
        spare, key=lambda v: v.last_used if pooled else (reuse_cache and len(v.cached) > 0, v.seq_id)
    )
    if not reuse_cache or not prompt:
        return Placement(fallback.seq_id, 0)
    most = len(prompt) - 1
    shared = {v.seq_id: v.reusable(prompt, most, cut) for v in views}
    # A head is taken for what its cells share only by a prompt that keeps half of them or is half
    # as long (the session's next turn, edited or compacted): a side request is short, and shares
    # a template's first tokens with every prompt.
    kept = [
        v for v in free if v.seq_id not in heads or 2 * max(shared[v.seq_id], len(prompt)) >= len(v.cached)
    ]
    best = max(kept or free, key=lambda v: (shared[v.seq_id], -v.last_used))
    target = best if shared[best.seq_id] > MIN_SIMILARITY * len(prompt) else fallback
    held = cut(min(common_prefix(target.cached, prompt), most)) if target.alike else 0
    donor = max(views, key=lambda v: shared[v.seq_id])
    if pooled and borrow and donor.seq_id != target.seq_id and shared[donor.seq_id] > shared[target.seq_id]:
        return Placement(target.seq_id, shared[donor.seq_id], donor.seq_id, held)
    return Placement(target.seq_id, shared[target.seq_id], shared=held)


def session_heads(views: Sequence[CacheView]) -> set[int]:
    """The sequence holding each named session's longest prompt (the earliest id among equals)."""
    longest: dict[str, CacheView] = {}
    for view in views:
        if view.session and (
            view.session not in longest or len(view.cached) > len(longest[view.session].cached)
        ):
            longest[view.session] = view
    return {view.seq_id for view in longest.values()}


def prompt_budget(chunk: int, batch_room: int, streams_wait: bool) -> int:
    """Prompt tokens one step may take: a chunk while generating streams wait on the step (each
    waits at most one chunk's evaluation), all the room left in the batch when none does (as
    llama-server evaluates a prompt alone: a batch per decode, fewer steps for the same work)."""
    return max(0, min(chunk, batch_room) if streams_wait else batch_room)


def chunk_size(share: int, stops: Sequence[int]) -> int:
    """How many prompt tokens a sequence evaluates in this step: its `share` of the budget, but no
    further than the next position where it pauses for a checkpoint (`stops`, as distances)."""
    return min([share, *(d for d in stops if d > 0)])


def share_prompt(remaining: Sequence[tuple[int, int]], budget: int) -> list[tuple[int, int]]:
    """Hand the step's prompt budget out first come, first served: (seq_id, tokens) per prefill."""
    taken = []
    for seq_id, left in remaining:
        if budget <= 0:
            break
        take = min(left, budget)
        taken.append((seq_id, take))
        budget -= take
    return taken


def queue_position(waiting: Sequence[tuple[bool, int]], new: tuple[bool, int]) -> int:
    """Where a choice joins the waiting queue, given each waiting choice's (batch line, priority)
    in queue order: behind every choice that goes first or equal (interactive before batch lines,
    then the lower priority value, as vLLM's; arrival order among equals), ahead of the rest."""
    position = len(waiting)
    while position > 0 and waiting[position - 1] > new:
        position -= 1
    return position
