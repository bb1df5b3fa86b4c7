"""Bounds on rendering a chat template: a GGUF's template is code, and a hostile one may loop, recurse
or build gigabytes; rendering stops at a step budget and a size, as the messages' error.

A template loops through `range`, through what it builds (a list multiplied, a string doubled
in a namespace) or through recursive macros; the sandbox hands every call, filter and chosen
operator to the environment first. So each render gets a budget of steps (a `range` step, a
call, a filter), no value it builds may exceed the size (checked before a string or list is
multiplied, padded or formatted wide, and after it is joined), and recursion past Python's
limit is refused too; past any, the render raises ValueError, which the caller answers as the
template rejecting the messages (a 400), and at load time as a model that cannot serve (the
load's error names the file). The templates come from the operator's GGUFs: this bounds their
cost on the request's greenlet, whoever wrote them.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterator
from typing import Any

import jinja2
import jinja2.ext
from jinja2 import Template
from jinja2.compiler import CodeGenerator, Frame
from jinja2.nodes import Concat
from jinja2.sandbox import ImmutableSandboxedEnvironment
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

STEPS = 1_000_000  # range steps in one render: real templates take a few thousand at most
CHARACTERS = 4 << 20  # a prompt's text: far beyond any context window's tokens


class TemplateLimitError(ValueError):
    """A render went past its step budget or its size."""


class _Budget(threading.local):
    left = STEPS


_budget = _Budget()


CALL = 10  # a call or a filter, in range steps: a macro call costs about ten of them to run


def _spend(steps: int = 1) -> None:
    _budget.left -= steps
    if _budget.left < 0:
        raise TemplateLimitError(f"the chat template loops past {STEPS:,} steps")


def _bounded_range(*args: int) -> Iterator[int]:
    """The sandbox's range, each step taken from this render's budget."""
    from jinja2.sandbox import safe_range

    for value in safe_range(*args):
        _spend()
        yield value


def _size(value: Any) -> int:
    """What a value weighs against CHARACTERS: a string its characters, a list 16 a item (a loop over
    it costs no step of the budget, so a list long enough is a loop long enough)."""
    if isinstance(value, str):
        return len(value)
    return 16 * len(value) if isinstance(value, list | tuple | dict) else 0


def _too_large(size: int) -> None:
    if size > CHARACTERS:
        raise TemplateLimitError(f"the chat template builds a value of more than {CHARACTERS:,} characters")


_WIDTH = re.compile(r"[0-9]+")


def _check_widths(text: Any) -> None:
    """A format string (`%` or str.format) whose widths would build a value past the size."""
    if isinstance(text, str):
        for width in _WIDTH.findall(text):
            _too_large(int(width[:12]))


def _check_binop(operator: str, left: Any, right: Any) -> None:
    if operator == "*" and isinstance(left, int) != isinstance(right, int):
        count = left if isinstance(left, int) else right
        _too_large(_size(right if isinstance(left, int) else left) * max(count, 0))
    elif operator == "+":
        _too_large(_size(left) + _size(right))
    elif operator == "**" and isinstance(left, int | float) and isinstance(right, int | float):
        if abs(right) > 256 and abs(left) > 1:
            raise TemplateLimitError("the chat template raises a number to too high a power")
    elif operator == "%":
        _check_widths(left)


def _check_arguments(name: str, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """A call's or a filter's arguments that would build a value past the size: a width (center, ljust,
    indent, format...), or a replacement that multiplies the text."""
    for argument in (*args, *kwargs.values()):
        if isinstance(argument, int) and not isinstance(argument, bool):
            _too_large(argument)
    if name in ("format", "format_map"):
        _check_widths(value)
    elif name == "replace" and isinstance(value, str) and len(args) >= 2 and isinstance(args[0], str):
        _too_large(
            len(value) + value.count(args[0]) * _size(args[1]) + (_size(args[1]) if not args[0] else 0)
        )
    elif name == "indent" and isinstance(value, str):
        width = args[0] if args and isinstance(args[0], int) else kwargs.get("width", 4)
        _too_large(len(value) + value.count("\n") * (width if isinstance(width, int) else len(str(width))))


def _guarded(name: str, function: Any) -> Any:
    """`function`, a filter, taking a step of the budget and checking its arguments first (a filter
    Jinja passes a context or an environment has it before its value)."""
    skipped = 1 if getattr(function, "jinja_pass_arg", None) is not None else 0

    @functools.wraps(function)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        _spend(CALL)
        value = args[skipped] if len(args) > skipped else None
        _check_arguments(name, value, args[skipped + 1 :], kwargs)
        return function(*args, **kwargs)

    return guarded


class _Generator(CodeGenerator):
    """Jinja's code generator, with `~` (a Concat) joined by the environment, which checks the size."""

    def visit_Concat(self, node: Concat, frame: Frame) -> None:  # noqa: N802 (Jinja's name)
        self.write("environment.joined((")
        for argument in node.nodes:
            self.visit(argument, frame)
            self.write(", ")
        self.write("))")


class _BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox llama-cpp-python renders in, each call, filter and sizing operator taken in hand."""

    code_generator_class = _Generator
    intercepted_binops = frozenset({"*", "+", "**", "%"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _check_binop(operator, left, right)
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        _spend(CALL)
        _check_arguments(getattr(__obj, "__name__", ""), getattr(__obj, "__self__", None), args, kwargs)
        return super().call(__context, __obj, *args, **kwargs)

    def wrap_str_format(self, value: Any) -> Any:
        """str.format and format_map, which the sandbox hands out at access: their widths checked."""
        wrapped = super().wrap_str_format(value)
        if wrapped is not None:
            _check_widths(value.__self__)
        return wrapped

    def guard_filters(self) -> None:
        """Every filter called through a check of its arguments: compiled templates call filters
        directly, past call_filter."""
        for name, function in list(self.filters.items()):
            self.filters[name] = _guarded(name, function)

    def joined(self, parts: tuple[Any, ...]) -> str:
        text = "".join(str(part) for part in parts)
        _too_large(len(text))
        return text


class BoundedTemplate:
    """A compiled template whose `render` keeps to the budget and the size."""

    def __init__(self, template: Template) -> None:
        self._template = template
        template.globals["range"] = _bounded_range

    def render(self, *args: Any, **kwargs: Any) -> str:
        _budget.left = STEPS
        pieces, size = [], 0
        try:
            for piece in self._template.generate(*args, **kwargs):
                size += len(piece)
                if size > CHARACTERS:
                    raise TemplateLimitError(f"the chat template writes more than {CHARACTERS:,} characters")
                pieces.append(piece)
        except RecursionError:
            raise TemplateLimitError("the chat template recurses too deeply") from None
        return "".join(pieces)


class BoundedFormatter(Jinja2ChatFormatter):
    """llama-cpp-python's chat formatter (its `_environment` is what it renders), with the template
    compiled in the bounded sandbox alone: compiled first in the formatter's own, a constant such as
    `'x' * 10**10` was folded (built) before any bound could see it."""

    def __init__(
        self, template: str, eos_token: str, bos_token: str, add_generation_prompt: bool = True
    ) -> None:
        # Jinja2ChatFormatter.__init__'s fields, without its compile; its environment's options.
        self.template, self.eos_token, self.bos_token = template, eos_token, bos_token
        self.add_generation_prompt, self.stop_token_ids = add_generation_prompt, None
        environment = _BoundedEnvironment(
            loader=jinja2.BaseLoader(),
            trim_blocks=True,
            lstrip_blocks=True,
            extensions=[Jinja2ChatFormatter.IgnoreGenerationTags, jinja2.ext.loopcontrols],
        )
        environment.filters["tojson"] = self.tojson
        environment.guard_filters()
        environment.globals.pop("lipsum", None)  # (writes as many paragraphs as asked)
        self._environment = BoundedTemplate(environment.from_string(template))  # type: ignore[assignment]
