"""The speculation benchmark's workloads: a code edit whose answer repeats its prompt, and texts to score."""

from __future__ import annotations

import http.client
import json

from bench.measure import Stream, Tally

# A module of plain Python (~700 tokens): the edit asks for it back with one name changed,
# so most of the answer is the prompt again, as in a coding assistant's edits.
CODE = '''"""Orders and their invoices."""

from dataclasses import dataclass, field


@dataclass
class Item:
    name: str
    price: float
    quantity: int = 1


@dataclass
class Order:
    customer: str
    items: list[Item] = field(default_factory=list)
    discount: float = 0.0

    def add(self, item: Item) -> None:
        for existing in self.items:
            if existing.name == item.name:
                existing.quantity += item.quantity
                return
        self.items.append(item)

    def remove(self, name: str) -> None:
        self.items = [item for item in self.items if item.name != name]

    def subtotal(self) -> float:
        total = 0.0
        for item in self.items:
            total += item.price * item.quantity
        return total

    def total(self, tax_rate: float) -> float:
        subtotal = self.subtotal() * (1 - self.discount)
        return round(subtotal * (1 + tax_rate), 2)


def cheapest(items: list[Item]) -> Item | None:
    best = None
    for item in items:
        if best is None or item.price < best.price:
            best = item
    return best


def invoice_lines(order: Order, tax_rate: float) -> list[str]:
    lines = [f"Invoice for {order.customer}"]
    for item in order.items:
        lines.append(f"{item.quantity} x {item.name} at {item.price:.2f}")
    lines.append(f"Subtotal: {order.subtotal():.2f}")
    lines.append(f"Total with tax: {order.total(tax_rate):.2f}")
    return lines
'''
NAMES = ("entries", "products", "goods", "articles", "lines", "wares", "things", "units")

# Texts to score token by token (the KV cache types' agreement): prose, code, a list, dialogue.
TEXTS = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk. He trimmed the wick, "
    "polished the great lens and watched the ships pass far out on the grey water. In winter the "
    "storms came in from the west, and for days he saw nothing but rain against the glass.",
    CODE[:900],
    "Shopping list: two loaves of bread, a dozen eggs, a litre of milk, three apples, a bag of rice, "
    "olive oil, black pepper, a block of cheese, tomatoes, onions, garlic and fresh basil.",
    "- Where are you going?\n- To the market, before it closes.\n- Can I come with you?\n- Of course, "
    "but we have to hurry. Bring the basket, and do not forget the money this time.",
    "Photosynthesis is the process by which green plants use sunlight to turn water and carbon "
    "dioxide into sugar and oxygen. It takes place in the chloroplasts, and chlorophyll absorbs mostly "
    "red and blue light, which is why leaves look green to us.",
    "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n"
    "for number in range(10):\n    print(number, fibonacci(number))\n",
)


def edit_request(index: int, max_tokens: int, lines: int = 0, **fields: object) -> dict[str, object]:
    """Edit number `index`: its own name to rename to (no server answers it from its cache), on the
    module's first `lines` lines (0: all of it)."""
    name = NAMES[index % len(NAMES)]
    ask = (
        f"Request {index}. Rename `items` to `{name}` everywhere in this module; reply with the whole module:"
    )
    code = "".join(CODE.splitlines(keepends=True)[: lines or None])
    return {
        "messages": [{"role": "user", "content": f"{ask}\n\n```python\n{code}```"}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,  # exactly max_tokens from both servers
        "stream": True,
        "stream_options": {"include_usage": True},
        **fields,
    }


class ChatTally(Tally):
    """A Tally of chat chunks: text arrives as `delta.content`."""

    @staticmethod
    def text_of(choice: dict) -> str | None:
        return (choice.get("delta") or {}).get("content")


def chat_stream(url: str, body: dict[str, object], tally: ChatTally | None = None) -> Stream:
    """One streamed chat completion, read by a blocking client that costs little CPU (into `tally`,
    a new ChatTally if none)."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=600)
    tally = tally or ChatTally()
    connection.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 200, (response.status, response.read()[:300])
    for line in response:
        tally.feed(line)
    connection.close()
    result = tally.result()
    assert result is not None, "no text came"
    return result


def top_tokens(url: str, text: str) -> list[str]:
    """The likeliest token after each prefix of `text` (scored by the server, nothing generated)."""
    body = {"prompt": text, "max_tokens": 0, "echo": True, "logprobs": 1, "temperature": 0}
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=600)
    connection.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    assert response.status == 200, answer
    tops = answer["choices"][0]["logprobs"]["top_logprobs"]
    return [max(top, key=top.get) if top else "" for top in tops[1:]]  # the first token: nothing predicted it
