"""Rendering a chat template within bounds: a loop past the step budget or megabytes of text is the
template's refusal (a ValueError), and a real template renders exactly as without bounds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from app.engine import template_limits
from app.engine.errors import PromptRejectedError
from app.engine.tokenizer import render_chat

TEMPLATES = Path(__file__).parents[2] / "data" / "templates"
HELLO = [{"role": "user", "content": "Hello."}]


def bounded(template: str) -> Jinja2ChatFormatter:
    return template_limits.BoundedFormatter(template, eos_token="</s>", bos_token="<s>")


@pytest.mark.parametrize(
    ("template", "said"),
    [
        ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "loops past"),
        ("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}", "loops past"),
        ("{% for m in messages %}{{ m.content * 5000000 }}{% endfor %}", "more than"),
        ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "rejected"),
        # Building past the size before any of it is written (each was gigabytes, or minutes, before):
        ("{{ 'x' * 10**10 }}", "builds a value of more than"),
        ("{% for m in messages * 10**6 %}{{ m.role }}{% endfor %}", "builds a value of more than"),
        ("{% set ns = namespace(s='xx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
         "{% endfor %}{{ ns.s|length }}", "builds a value of more than"),
        ("{% set ns = namespace(s='xx') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}"
         "{% endfor %}", "builds a value of more than"),
        ("{{ 'x'|center(10**9) }}", "builds a value of more than"),
        ("{{ 'x'.ljust(10**9) }}", "builds a value of more than"),
        ("{{ '%0999999999d' % 1 }}", "builds a value of more than"),
        ("{{ '{:>999999999}'.format(1) }}", "builds a value of more than"),
        ("{{ ('x' * 4000)|replace('x', 'y' * 4000) }}", "builds a value of more than"),
        ("{{ 2 ** 1000000000 }}", "too high a power"),
        ("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}",
         "loops past"),
    ],
)  # fmt: skip
def test_a_hostile_template_is_refused_quickly(template: str, said: str) -> None:
    with pytest.raises(PromptRejectedError, match=said):
        render_chat(bounded(template), HELLO, None, None)


def test_the_budget_is_per_render() -> None:
    formatter = bounded("{% for i in range(6) %}{% for j in range(100000) %}{% endfor %}{% endfor %}ok")
    for _ in range(3):  # each render alone keeps within the budget
        assert render_chat(formatter, HELLO, None, None) == "ok"


@pytest.mark.parametrize("path", sorted(TEMPLATES.glob("*.jinja"))[:12], ids=lambda p: p.stem)
def test_real_templates_render_as_without_bounds(path: Path) -> None:
    template = path.read_text()
    plain = Jinja2ChatFormatter(template=template, eos_token="</s>", bos_token="<s>")
    messages = [{"role": "system", "content": "Be brief."}, *HELLO]
    try:
        expected = render_chat(plain, messages, None, None)
    except PromptRejectedError as refused:  # (a tool-use template wants tools): refused alike
        with pytest.raises(PromptRejectedError, match=re.escape(str(refused).split(": ", 1)[1])):
            render_chat(bounded(template), messages, None, None)
        return
    assert render_chat(bounded(template), messages, None, None) == expected
