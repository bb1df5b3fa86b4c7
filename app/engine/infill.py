"""llama-server's /infill prompt: repo-level fill-in-the-middle, other files' chunks before the prefix.

The layout is llama-server's (format_prompt_infill in tools/server/server-common.cpp of the
pinned sdist), so that an editor plugin's request gives the same tokens here and there:

    [FIM_REP]myproject\\n [FIM_SEP]filename\\n chunk ... [FIM_SEP]filename\\n
    [BOS] [FIM_PRE] prefix prompt [FIM_SUF] suffix [FIM_MID]

Without the repo-level tokens, chunks are joined by a "--- snippet ---" line. The prefix
keeps its last 3/4 of a batch, the suffix its first quarter less the prompt; the chunks
fill what the context has left beyond a batch, their last tokens kept.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.engine.tokenizer import Tokenizer

SNIPPET = "\n\n--- snippet ---\n\n"  # llama-server's separator where there is no [FIM_SEP]
N_PREDICT = -1  # llama-server's server-wide default, which its formula reads


def repo_infill(
    tokenizer: Tokenizer,
    prefix: str,
    suffix: str,
    extra: Sequence[tuple[str, str]],
    prompt: str,
    n_batch: int,
    n_ctx: int,
) -> list[int]:
    """The prompt's tokens; `extra`: (filename, text) chunks of other files."""

    def plain(text: str) -> list[int]:
        return tokenizer.tokenize(text, add_special=False, parse_special=False)

    rep, sep = tokenizer.fim_repo["rep"], tokenizer.fim_repo["sep"]
    extra_tokens = [rep, *plain("myproject\n")] if rep >= 0 else []
    for filename, text in extra:
        extra_tokens += [sep, *plain(filename + "\n")] if sep >= 0 else plain(SNIPPET)
        extra_tokens += plain(text)
    if sep >= 0:
        extra_tokens += [sep, *plain("filename\n")]
    prompt_tokens = tokenizer.tokenize(prompt, add_special=False, parse_special=True)
    prefix_tokens, suffix_tokens = plain(prefix), plain(suffix)
    prefix_take = min(len(prefix_tokens), 3 * (n_batch // 4))
    suffix_take = min(len(suffix_tokens), max(0, n_batch // 4 - (2 + len(prompt_tokens))))
    extra_take = min(max(0, n_ctx - n_batch - 2 * N_PREDICT), len(extra_tokens))
    head = [tokenizer.fim["pre"], *prefix_tokens[len(prefix_tokens) - prefix_take :], *prompt_tokens]
    tail = [tokenizer.fim["suf"], *suffix_tokens[:suffix_take]]
    bos = [tokenizer.added_bos] if tokenizer.added_bos is not None else []
    extra_tail = extra_tokens[len(extra_tokens) - extra_take :]
    return [*extra_tail, *bos, *head, *tail, tokenizer.fim["mid"]]
