// Streamed answers as the page reads them: Server-sent events from a fetch body, then chat
// completions' chunks or the Responses API's typed events, each filled into one outcome.
"use strict";

const streams = (() => {
  // Server-sent events from a fetch body: each event's data lines joined, comments (keep-alives) skipped.
  async function* sseData(response) {
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    const boundary = /\r\n\r\n|\n\n|\r\r/;
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let found;
      while ((found = boundary.exec(buffer)) !== null) {
        const block = buffer.slice(0, found.index);
        buffer = buffer.slice(found.index + found[0].length);
        const data = block.split(/\r\n|\n|\r/)
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(5).replace(/^ /, ""));
        if (data.length) yield data.join("\n");
      }
    }
  }

  // What one streamed answer came to, filled in as it streams (so that a stopped answer keeps its part).
  function outcome() {
    return { text: "", usage: null, finish: null, failure: null, items: [] };
  }

  // Chat completions' chunks. `view`: the answer's element (`answer`), `painter(element)`, and
  // `firstWords()` to mark the first words' arrival; `got`: the outcome to fill.
  async function chat(response, view, got) {
    const paint = view.painter(view.answer);
    try {
      for await (const data of sseData(response)) {
        if (data === "[DONE]") break;
        const chunk = JSON.parse(data);
        if (chunk.error) { // an error after the 200: the stream says so and ends
          got.failure = `The answer broke off: ${chunk.error.message}`;
          break;
        }
        if (chunk.usage) got.usage = chunk.usage;
        for (const choice of chunk.choices || []) {
          const piece = choice.delta && choice.delta.content;
          if (piece) {
            view.firstWords();
            got.text += piece;
            paint.update(got.text);
          }
          if (choice.finish_reason) got.finish = choice.finish_reason;
        }
      }
    } finally {
      paint.now(got.text);
    }
  }

  // A Responses stream: each output item in its place (the words of each message, each tool call,
  // listing and approval request); the finished items become the conversation's next entry.
  // `view` as for chat, with `decide(id, approve)` for an approval request's buttons.
  async function responses(response, view, got) {
    const views = new Map(); // output_index -> {element, done, paint, text}
    const finished = [];
    try {
      for await (const data of sseData(response)) {
        if (data === "[DONE]") break;
        const event = JSON.parse(data);
        const place = views.get(event.output_index);
        if (event.type === "response.output_item.added") {
          let shown = tools.view(event.item, view.decide);
          if (shown === null) { // a message: its words, painted as they come
            const body = document.createElement("div");
            body.className = "words";
            shown = { element: body, paint: view.painter({ body }), text: "", done() {} };
          }
          view.answer.body.append(shown.element);
          views.set(event.output_index, shown);
        } else if (event.type === "response.output_text.delta" && place && place.paint) {
          view.firstWords();
          place.text += event.delta;
          got.text += event.delta;
          place.paint.update(place.text);
        } else if (event.type === "response.output_item.done") {
          if (place) place.done(event.item);
          finished.push(event.item);
        } else if (["response.completed", "response.incomplete"].includes(event.type)) {
          const { usage, incomplete_details: cut, output } = event.response;
          if (usage) got.usage = { prompt_tokens: usage.input_tokens, completion_tokens: usage.output_tokens };
          if (cut && cut.reason === "max_output_tokens") got.finish = "length";
          finished.splice(0, finished.length, ...output);
        } else if (event.type === "response.failed" || event.type === "error") {
          const error = event.type === "error" ? event : event.response.error || {};
          got.failure = `The answer broke off: ${error.message || "the server gave no reason"}`;
        }
      }
    } finally {
      for (const shown of views.values()) if (shown.paint) shown.paint.now(shown.text);
      got.items = finished;
    }
  }

  return { outcome, chat, responses };
})();
