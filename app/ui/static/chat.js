// The chat page: a conversation streamed from /v1/chat/completions as any OpenAI client streams it, or
// from /v1/responses when MCP tools are chosen (tools.js), the streams read by streams.js.
"use strict";

// html: false writes any HTML in an answer out as text; markdown-it also refuses
// javascript:, vbscript: and data: links (other than images).
const markdown = window.markdownit({ html: false, linkify: false });
const renderLink = markdown.renderer.rules.link_open ||
  ((tokens, index, options, env, self) => self.renderToken(tokens, index, options));
markdown.renderer.rules.link_open = (tokens, index, options, env, self) => {
  tokens[index].attrSet("target", "_blank"); // a link never replaces the conversation
  tokens[index].attrSet("rel", "noopener noreferrer");
  return renderLink(tokens, index, options, env, self);
};

const $ = (id) => document.getElementById(id);
const ui = {
  messages: $("messages"), notice: $("notice"), composer: $("composer"), prompt: $("prompt"),
  send: $("send"), stop: $("stop"), model: $("model"), system: $("system"),
  temperature: $("temperature"), maxTokens: $("max-tokens"), settings: $("settings"),
  settingsToggle: $("settings-toggle"), newChat: $("new-chat"), attach: $("attach"),
  attachInput: $("attach-input"), attachAudio: $("attach-audio"), attachAudioInput: $("attach-audio-input"),
  attachments: $("attachments"),
};
const conversation = []; // {role, content}: what the model is sent next time
let running = null; // the AbortController of the answer streaming now
let models = []; // /v1/models' entries: which ones see images, which ones hear
const pending = []; // {kind: "image" or "audio", url (a data URL), name}: attached to the next message

// The longest side an attached image is sent at: bigger ones are scaled down (and re-encoded as
// JPEG) in the page, so that a phone's photo fits the server's request size limit.
const LONGEST_SIDE = 1536;

function takes(modality) {
  const model = models.find((entry) => entry.id === ui.model.value) || models[0];
  return Boolean(model && model.modalities && model.modalities[modality]);
}

function showAttach() {
  ui.attach.hidden = !takes("vision");
  ui.attachAudio.hidden = !takes("audio");
}

// What chat completions' input_audio calls a clip (the server reads the bytes themselves).
const AUDIO_FORMATS = { "audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav", "audio/mpeg": "mp3",
  "audio/mp3": "mp3", "audio/flac": "flac", "audio/x-flac": "flac" };

function readAudio(file) {
  return new Promise((resolve, reject) => {
    const format = AUDIO_FORMATS[file.type] || (file.name.match(/\.(wav|mp3|flac)$/i) || [])[1];
    if (!format) return reject(new Error(`${file.name || "the clip"} is not a WAV, MP3 or FLAC file`));
    const reader = new FileReader();
    reader.onerror = () => reject(reader.error);
    reader.onload = () => resolve({ kind: "audio", url: reader.result, name: file.name, format: format.toLowerCase() });
    reader.readAsDataURL(file);
  });
}

function readImage(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onerror = () => reject(reader.error);
    reader.onload = () => {
      const picture = new Image();
      picture.onerror = () => reject(new Error(`${file.name || "the image"} is not an image the browser reads`));
      picture.onload = () => {
        const scale = Math.min(1, LONGEST_SIDE / Math.max(picture.width, picture.height));
        if (scale === 1 && file.size < 700 * 1024 && file.type !== "image/webp") return resolve(reader.result);
        const canvas = document.createElement("canvas");
        canvas.width = Math.round(picture.width * scale);
        canvas.height = Math.round(picture.height * scale);
        canvas.getContext("2d").drawImage(picture, 0, 0, canvas.width, canvas.height);
        resolve(canvas.toDataURL("image/jpeg", 0.9));
      };
      picture.src = reader.result;
    };
    reader.readAsDataURL(file);
  });
}

function showPending() {
  ui.attachments.replaceChildren(...pending.map((medium, index) => {
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "thumb";
    remove.title = `Remove this ${medium.kind === "audio" ? "clip" : "image"}`;
    if (medium.kind === "audio") {
      const label = document.createElement("span");
      label.className = "clip";
      label.textContent = `♪ ${medium.name}`;
      remove.append(label);
    } else {
      const picture = document.createElement("img");
      picture.src = medium.url;
      picture.alt = `image ${index + 1}`;
      remove.append(picture);
    }
    remove.addEventListener("click", () => {
      pending.splice(index, 1);
      showPending();
    });
    return remove;
  }));
  ui.attachments.hidden = pending.length === 0;
}

async function attach(files) {
  for (const file of files) {
    try {
      if (file.type.startsWith("image/") && takes("vision")) {
        pending.push({ kind: "image", url: await readImage(file), name: file.name });
      } else if ((file.type.startsWith("audio/") || /\.(wav|mp3|flac)$/i.test(file.name)) && takes("audio")) {
        pending.push(await readAudio(file));
      }
    } catch (error) {
      showNotice(error.message);
    }
  }
  showPending();
}

function showNotice(text) {
  ui.notice.textContent = text;
  ui.notice.hidden = !text;
}

// Follow the answer only while the reader is at the bottom: scrolling up to read stays put.
function atBottom() {
  const box = ui.messages;
  return box.scrollHeight - box.scrollTop - box.clientHeight < 40;
}

function addMessage(role, text, media = []) {
  const empty = ui.messages.querySelector(".empty");
  if (empty) empty.remove();
  const item = document.createElement("article");
  item.className = `message ${role}`;
  const body = document.createElement("div");
  body.className = "body";
  const footer = document.createElement("footer");
  footer.className = "stats";
  if (role === "user") body.textContent = text; // the user's words, exactly as typed
  for (const medium of media) {
    if (medium.kind === "audio") {
      const player = document.createElement("audio");
      player.className = "attached";
      player.controls = true;
      player.src = medium.url;
      player.title = medium.name;
      body.append(player);
      continue;
    }
    const picture = document.createElement("img");
    picture.className = "attached";
    picture.src = medium.url;
    picture.alt = "an attached image";
    body.append(picture);
  }
  item.append(body, footer);
  ui.messages.append(item);
  ui.messages.scrollTop = ui.messages.scrollHeight;
  return { item, body, footer };
}

// Render at most once per frame: a fast model sends tokens quicker than a screen redraws.
function painter(answer) {
  let text = "";
  let queued = false;
  const paint = () => {
    queued = false;
    const follow = atBottom();
    answer.body.innerHTML = markdown.render(text);
    if (follow) ui.messages.scrollTop = ui.messages.scrollHeight;
  };
  return {
    update(next) {
      text = next;
      if (!queued) {
        queued = true;
        requestAnimationFrame(paint);
      }
    },
    now(next) {
      text = next;
      paint();
    },
  };
}

function setRunning(controller) {
  running = controller;
  ui.send.hidden = controller !== null; // Send and Stop share one place: nothing moves
  ui.stop.hidden = controller === null;
  if (controller === null) ui.prompt.focus();
}

// The conversation as chat messages: a Responses answer (one that used tools) by its words alone.
function chatMessages() {
  return conversation.flatMap((entry) => {
    if (!entry.items) return [entry];
    const text = tools.textOf(entry.items);
    return text ? [{ role: "assistant", content: text }] : [];
  });
}

function sampling() {
  const chosen = {};
  const temperature = parseFloat(ui.temperature.value);
  if (!Number.isNaN(temperature)) chosen.temperature = temperature;
  const maxTokens = parseInt(ui.maxTokens.value, 10);
  if (!Number.isNaN(maxTokens)) chosen.maxTokens = maxTokens;
  return chosen;
}

function chatBody() {
  const messages = [];
  const system = ui.system.value.trim();
  if (system) messages.push({ role: "system", content: system });
  messages.push(...chatMessages());
  const { temperature, maxTokens } = sampling();
  return { model: ui.model.value || undefined, messages, stream: true, stream_options: { include_usage: true },
    temperature, max_tokens: maxTokens };
}

// With tools chosen: the Responses API, whose mcp tools the server calls itself. Nothing is stored
// on the server: the page sends the whole conversation each time, as for chat completions.
function responsesBody() {
  const { temperature, maxTokens } = sampling();
  return { model: ui.model.value || undefined, input: tools.input(conversation), tools: tools.offered(),
    instructions: ui.system.value.trim() || undefined, stream: true, store: false, temperature,
    max_output_tokens: maxTokens };
}

function describe(usage, started, firstAt, ended) {
  const parts = [];
  if (usage) parts.push(`${usage.prompt_tokens} prompt + ${usage.completion_tokens} completion tokens`);
  if (firstAt !== null) parts.push(`first token after ${Math.round(firstAt - started)} ms`);
  if (usage && firstAt !== null && ended > firstAt && usage.completion_tokens > 1) {
    // Tokens after the first over the time they took: the first one's wait is the TTFT above.
    const rate = (usage.completion_tokens - 1) / ((ended - firstAt) / 1000);
    parts.push(`${rate.toFixed(1)} tokens/s`);
  }
  return parts.join(" · ");
}

// A medium as chat completions' content part.
function part(medium) {
  if (medium.kind === "image") return { type: "image_url", image_url: { url: medium.url } };
  return { type: "input_audio", input_audio: { data: medium.url.split(",")[1], format: medium.format } };
}

async function send() {
  const text = ui.prompt.value.trim();
  if ((!text && !pending.length) || running) return;
  const heard = pending.some((medium) => medium.kind === "audio") || conversation.some((entry) =>
    Array.isArray(entry.content) && entry.content.some((piece) => piece.type === "input_audio"));
  if (heard && tools.chosenServers().length) {
    showNotice("Tools answer through the Responses API, which takes no audio: turn the tools off or start a new chat.");
    return;
  }
  showNotice("");
  ui.prompt.value = "";
  const media = pending.splice(0);
  showPending();
  const content = media.length ? [{ type: "text", text }, ...media.map(part)] : text;
  conversation.push({ role: "user", content });
  tools.retire(ui.messages);
  addMessage("user", text, media);
  await answerTurn({ text, media });
}

// The user's answer to an approval request: the server makes the call (or tells the model it may
// not) and the model goes on, in a new answer. False while another answer streams.
function decide(requestId, approve) {
  if (running) return false;
  conversation.push({ items: [{ type: "mcp_approval_response", approval_request_id: requestId, approve }] });
  answerTurn(null);
  return true;
}

// One answer, streamed: to `question` (the user's words and media; null after an approval).
async function answerTurn(question) {
  const answer = addMessage("assistant", "");
  answer.item.dataset.state = "waiting";
  answer.footer.textContent = "…";
  const controller = new AbortController();
  setRunning(controller);
  const started = performance.now();
  let firstAt = null;
  const firstWords = () => {
    if (firstAt !== null) return;
    firstAt = performance.now();
    answer.item.dataset.state = "streaming";
  };
  const withTools = tools.chosenServers().length > 0;
  const got = streams.outcome();
  try {
    const response = await fetch(withTools ? "/v1/responses" : "/v1/chat/completions", {
      method: "POST", headers: api.headers(), body: JSON.stringify(withTools ? responsesBody() : chatBody()),
      signal: controller.signal,
    });
    if (!response.ok) got.failure = await api.errorText(response);
    else {
      const view = { answer, painter, firstWords, decide };
      await (withTools ? streams.responses : streams.chat)(response, view, got);
    }
  } catch (error) {
    got.failure = error.name === "AbortError" ? null : `The connection broke: ${error.message}`;
  }
  const ended = performance.now();
  const stopped = controller.signal.aborted;
  const kept = got.items.filter((item) => item.type !== "message" || tools.textOf([item]));
  if (withTools && kept.length) conversation.push({ items: kept });
  else if (got.text) conversation.push({ role: "assistant", content: got.text }); // a stopped one's part too
  else if (question) {
    conversation.pop(); // nothing came back: the question is not part of the conversation
    if (got.failure) { // ready to send again
      ui.prompt.value = question.text;
      pending.push(...question.media);
      showPending();
    }
  }
  let note = describe(got.usage, started, firstAt, ended);
  if (stopped) note = `Stopped${note ? ` · ${note}` : ""}`;
  else if (got.finish === "length") note = `Cut at the max tokens setting · ${note}`;
  answer.footer.textContent = note;
  if (got.failure) {
    answer.item.dataset.state = "error";
    if (!got.text && !kept.length) answer.body.replaceChildren();
    const error = document.createElement("p");
    error.className = "error";
    error.textContent = got.failure;
    answer.body.append(error);
    showNotice(got.failure);
  } else {
    answer.item.dataset.state = stopped ? "stopped" : "done";
  }
  setRunning(null);
}

async function loadModels() {
  let response;
  try {
    response = await fetch("/v1/models", { headers: api.headers() });
  } catch (error) {
    showNotice(`The server cannot be reached: ${error.message}`);
    return;
  }
  if (!response.ok) {
    showNotice(await api.errorText(response));
    return;
  }
  const chosen = sessionStorage.getItem("llm-server-model");
  models = (await response.json()).data.filter((model) => model.kind !== "embedding");
  ui.model.replaceChildren(...models.map((model) => {
    const option = new Option(model.ready ? model.id : `${model.id} (loading)`, model.id);
    option.selected = model.id === chosen;
    return option;
  }));
  showAttach();
}

ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  send();
});
ui.prompt.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    send();
  }
});
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && running) running.abort();
});
ui.stop.addEventListener("click", () => running && running.abort());
ui.model.addEventListener("change", () => {
  sessionStorage.setItem("llm-server-model", ui.model.value);
  showAttach();
});
for (const input of [ui.attachInput, ui.attachAudioInput]) {
  input.addEventListener("change", () => {
    attach([...input.files]);
    input.value = ""; // the same file may be attached again
  });
}
ui.prompt.addEventListener("paste", (event) => {
  const files = [...(event.clipboardData ? event.clipboardData.files : [])];
  if (files.length && (takes("vision") || takes("audio"))) {
    event.preventDefault();
    attach(files);
  }
});
ui.newChat.addEventListener("click", () => {
  if (running) running.abort();
  conversation.length = 0;
  pending.length = 0;
  showPending();
  ui.messages.replaceChildren();
  showNotice("");
});
ui.settingsToggle.addEventListener("click", () => {
  const open = ui.settings.classList.toggle("open");
  ui.settingsToggle.setAttribute("aria-expanded", String(open));
});
document.getElementById("api-key").addEventListener("change", loadModels);
loadModels();
