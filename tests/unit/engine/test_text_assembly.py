"""Stop strings and UTF-8 boundaries in streamed text."""

from __future__ import annotations

from app.engine.text_assembly import TextAssembler


def run(pieces: list[bytes], stop: list[str]) -> tuple[list[str], bool]:
    assembler = TextAssembler(stop)
    out = [assembler.feed(p) for p in pieces]
    out.append(assembler.finish())
    return out, assembler.stopped


def test_stop_string_split_over_tokens_is_never_sent() -> None:
    out, stopped = run([b"Hello", b" wor", b"ld", b"!"], ["world"])
    assert stopped and "".join(out) == "Hello " and all("w" not in piece for piece in out)


def test_held_back_prefix_is_released_when_it_is_not_a_stop() -> None:
    out, stopped = run([b"a", b"EN", b"x"], ["END"])
    assert not stopped and out == ["a", "", "ENx", ""]


def test_held_back_prefix_is_released_at_the_end() -> None:
    out, stopped = run([b"a", b"EN"], ["END"])
    assert not stopped and "".join(out) == "aEN" and out[-1] == "EN"


def test_earliest_of_several_stops_wins() -> None:
    out, _ = run([b"one two three"], ["three", "two"])
    assert "".join(out) == "one "


def test_multibyte_character_split_over_tokens() -> None:
    snowman = "☃".encode()
    out, _ = run([b"x", snowman[:1], snowman[1:], b"y"], [])
    assert out == ["x", "", "☃", "y", ""]


def test_invalid_bytes_become_replacement_characters() -> None:
    out, _ = run([b"a\xff", b"\xe2\x98"], [])
    assert "".join(out) == "a\ufffd\ufffd"


def test_the_stop_string_that_matched_is_known() -> None:
    assembler = TextAssembler(["END", "\n\n"])
    assert assembler.feed(b"one two\n") == "one two"
    assert assembler.feed(b"\nmore") == ""
    assert assembler.stopped and assembler.matched == "\n\n"
    assert TextAssembler(["x"]).matched is None


def test_unarmed_text_passes_stop_strings_through() -> None:
    assembler = TextAssembler(["END"])
    assembler.armed = False  # min_tokens not reached yet
    assert assembler.feed(b"the END") == "the END" and not assembler.stopped
    assembler.armed = True
    assert assembler.feed(b" of it. END") == " of it. " and assembler.matched == "END"


def feed_all(assembler: TextAssembler, pieces: list[str]) -> str:
    out = ""
    for piece in pieces:
        out += assembler.feed(piece.encode())
        if assembler.stopped:
            return out
    return out + assembler.finish()


def test_a_line_indented_less_than_n_indent_ends_the_text_before_it() -> None:
    # llama-server's n_indent: the first line is free; then each line needs the indentation.
    body = TextAssembler([], n_indent=4)
    assert (
        feed_all(body, ["x = 1", "\n    y", " = 2\n", "  ", "  z\n", "w = 3"]) == "x = 1\n    y = 2\n    z\n"
    )
    assert body.stopped and body.cut_short and body.matched is None
    blank = TextAssembler([], n_indent=4)
    assert feed_all(blank, ["a\n", "    b\n", "\n", "    c"]) == "a\n    b\n"  # an empty line ends it too
    assert blank.cut_short


def test_a_stop_string_before_the_short_line_wins() -> None:
    assembler = TextAssembler(["END"], n_indent=4)
    assert feed_all(assembler, ["a\n    bEND\nc"]) == "a\n    b"
    assert assembler.matched == "END" and not assembler.cut_short
