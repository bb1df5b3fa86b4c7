"""Templates that print today's date render with it, as llama-server renders them (strftime_now...)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from flask.testing import FlaskClient

from app import create_app
from tests.unit.conftest import FakeEngine, make_config

TEMPLATES = Path(__file__).parents[3] / "data" / "templates"
# firefunction-v2's opening, as llama-server's tests render it: it fails without `datetime`.
FIREFUNCTION = "{{ bos_token }}Today is {{ datetime }}.{% for m in messages %}{{ m['content'] }}{% endfor %}"


def rendered(template: str) -> str:
    engine = FakeEngine()
    engine.tokenizer.chat_template = template
    client: FlaskClient = create_app(make_config(LLM_N_CTX="8192"), engine=engine).test_client()
    answer = client.post("/apply-template", json={"messages": [{"role": "user", "content": "Hi"}]})
    assert answer.status_code == 200, answer.get_data(as_text=True)
    prompt: str = answer.get_json()["prompt"]
    return prompt


def test_strftime_now_date_string_and_datetime_give_today() -> None:
    today = datetime.now()
    granite = rendered((TEMPLATES / "ibm-granite-granite-3.3-2B-Instruct.jinja").read_text())
    assert f"Today's Date: {today.strftime('%B %d, %Y')}" in granite  # strftime_now
    llama = rendered((TEMPLATES / "meta-llama-Llama-3.1-8B-Instruct.jinja").read_text())
    assert f"Today Date: {today.strftime('%d %b %Y')}" in llama  # date_string
    assert f"Today is {today.strftime('%b %d %Y')}." in rendered(FIREFUNCTION)  # datetime
