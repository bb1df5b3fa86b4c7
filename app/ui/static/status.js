// The status page: each worker's figures from /health/workers, every few seconds.
"use strict";

const rows = document.getElementById("workers");
const notice = document.getElementById("notice");
const updated = document.getElementById("updated");

function cell(text, className) {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function state(worker) {
  if (worker.on_demand && worker.model === null) return "unloaded";
  if (!worker.ready) return "loading";
  return worker.generating ? "generating" : "idle";
}

async function refresh() {
  let response;
  try {
    response = await fetch("/health/workers", { headers: api.headers() });
  } catch (error) {
    notice.textContent = `The server cannot be reached: ${error.message}`;
    notice.hidden = false;
    return;
  }
  if (!response.ok) {
    notice.textContent = await api.errorText(response);
    notice.hidden = false;
    return;
  }
  notice.hidden = true;
  const workers = (await response.json()).data;
  rows.replaceChildren(...workers.map((worker) => {
    const tr = document.createElement("tr");
    tr.dataset.pid = worker.pid;
    tr.dataset.state = state(worker);
    tr.append(
      cell(`#${worker.slot} (pid ${worker.pid})`),
      cell(worker.model ?? (worker.on_demand ? "none (on demand)" : "?")),
      cell(state(worker), `state ${state(worker)}`),
      cell(`${worker.running} of ${worker.sequences}`, "number"),
      cell(String(worker.waiting), "number"),
      cell(worker.tokens_per_second.toFixed(1), "number"),
      cell(kvCache(worker.kv_cache), "number"),
      cell(drafts(worker.speculative), "number"),
      cell(worker.load_seconds === null ? "–" : `${worker.load_seconds.toFixed(2)} s`, "number"),
    );
    return tr;
  }));
  if (!workers.length) {
    const none = cell("No gunicorn workers: this process runs outside gunicorn.", "muted");
    none.colSpan = 9;
    const tr = document.createElement("tr");
    tr.append(none);
    rows.replaceChildren(tr);
  }
  updated.textContent = `as of ${new Date().toLocaleTimeString()}`;
}

// "64.0 MiB q8_0/q8_0": the memory a worker's KV cache takes, and the types of its keys and values.
function kvCache(kv) {
  if (!kv) return "–";
  return `${(kv.bytes / 2 ** 20).toFixed(1)} MiB ${kv.type_k}/${kv.type_v}`;
}

// "72% of 1,204": the share of draft tokens kept (speculative decoding), and how many were verified.
function drafts(speculative) {
  if (!speculative || speculative.type === "none") return "off";
  if (!speculative.draft_tokens) return "none yet";
  const share = Math.round(100 * speculative.acceptance_rate);
  return `${share}% of ${speculative.draft_tokens.toLocaleString("en")}`;
}

document.getElementById("api-key").addEventListener("change", refresh);
refresh();
setInterval(refresh, 3000);
