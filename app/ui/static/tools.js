// The chat page's MCP tools: the servers the operator configured (GET /tools) to choose from, the
// conversation as the Responses API's input, and each call, listing and approval request shown in
// the answer. The server makes the calls (/v1/responses' mcp tools); the page only asks the user.
"use strict";

const tools = (() => {
  const CHOSEN = "llm-server-mcp-servers";
  const field = document.getElementById("tools-field");
  const list = document.getElementById("mcp-servers");
  const ask = document.getElementById("mcp-approve");

  // Each server with its tools' names, from llama-server's GET /tools list (403: none configured).
  async function load() {
    let response;
    try {
      response = await fetch("/tools", { headers: api.headers() });
    } catch (ignored) {
      return; // the chat works without tools; loadModels tells of an unreachable server
    }
    if (!response.ok) {
      field.hidden = true;
      return;
    }
    const servers = new Map();
    for (const entry of await response.json()) {
      const name = entry.server;
      if (!servers.has(name)) servers.set(name, []);
      servers.get(name).push(entry.tool.slice(name.length + 1));
    }
    const chosen = new Set(JSON.parse(sessionStorage.getItem(CHOSEN) || "[]"));
    list.replaceChildren(...[...servers].map(([name, names]) => {
      const box = document.createElement("input");
      box.type = "checkbox";
      box.value = name;
      box.checked = chosen.has(name);
      box.addEventListener("change", () => sessionStorage.setItem(CHOSEN, JSON.stringify(chosenServers())));
      const label = document.createElement("label");
      label.className = "check";
      const which = document.createElement("small");
      which.textContent = names.join(", ");
      label.append(box, ` ${name} `, which);
      return label;
    }));
    field.hidden = servers.size === 0;
  }

  function chosenServers() {
    return [...list.querySelectorAll("input:checked")].map((box) => box.value);
  }

  // The request's mcp tools: every chosen server, each call asked about first unless the user said not.
  function offered() {
    const policy = ask.checked ? "always" : "never";
    return chosenServers().map((label) => ({ type: "mcp", server_label: label, require_approval: policy }));
  }

  // The page's conversation ({role, content} messages, and {items} a Responses answer gave) as input items.
  function input(conversation) {
    return conversation.flatMap((entry) => {
      if (entry.items) return entry.items;
      if (typeof entry.content === "string") return [{ role: entry.role, content: entry.content }];
      return [{ role: entry.role, content: entry.content.map((part) => (part.type === "text"
        ? { type: "input_text", text: part.text }
        : { type: "input_image", image_url: part.image_url.url })) }];
    });
  }

  // The answer's words in a Responses answer's items (what a chat completions request carries over).
  function textOf(items) {
    return items.filter((item) => item.type === "message")
      .flatMap((item) => item.content.map((part) => part.text || "")).join("");
  }

  function card(kind, title) {
    const box = document.createElement("details");
    box.className = `tool ${kind}`;
    const summary = document.createElement("summary");
    summary.textContent = title;
    box.append(summary);
    return box;
  }

  function block(label, text) {
    const part = document.createElement("div");
    const name = document.createElement("span");
    name.className = "muted";
    name.textContent = label;
    const pre = document.createElement("pre");
    pre.textContent = text; // a tool's words are shown as text, never as HTML
    part.append(name, pre);
    return part;
  }

  // An output item's place in the answer: a listing, a call (its arguments, then its output or
  // error) or an approval request (`decide(id, approve)` when the user answers). Null for a message.
  function view(item, decide) {
    if (item.type === "mcp_list_tools") {
      const box = card("listing", `${item.server_label}: listing its tools…`);
      return { element: box, done(final) {
        box.querySelector("summary").textContent = final.error
          ? `${final.server_label}: its tools could not be listed`
          : `${final.server_label}: ${final.tools.length} tools`;
        if (final.error) box.append(block("Error", final.error));
      } };
    }
    if (item.type === "mcp_call") {
      const box = card("call", `Calling ${item.server_label} · ${item.name}…`);
      box.dataset.state = "calling";
      return { element: box, done(final) {
        box.dataset.state = final.error ? "failed" : "done";
        box.open = true;
        box.querySelector("summary").textContent = `${final.error ? "Failed" : "Called"} ${final.server_label} · ${final.name}`;
        box.append(block("Arguments", final.arguments), final.error ? block("Error", final.error) : block("Output", final.output || ""));
      } };
    }
    if (item.type === "mcp_approval_request") {
      const box = card("approval", `${item.server_label} · ${item.name} waits for your approval`);
      box.open = true;
      box.append(block("Arguments", item.arguments));
      const buttons = document.createElement("div");
      buttons.className = "decision";
      for (const [text, approve] of [["Approve", true], ["Deny", false]]) {
        const button = document.createElement("button");
        button.type = "button";
        button.className = approve ? "approve" : "quiet deny";
        button.textContent = text;
        button.addEventListener("click", () => {
          if (!decide(item.id, approve)) return; // an answer is still streaming: not now
          buttons.replaceChildren(approve ? "Approved" : "Denied");
          box.dataset.state = approve ? "approved" : "denied";
        });
        buttons.append(button);
      }
      box.append(buttons);
      return { element: box, done() {} };
    }
    return null;
  }

  // Approval requests of earlier answers can no longer be answered once the conversation moved on.
  function retire(container) {
    for (const buttons of container.querySelectorAll(".tool.approval .decision")) {
      if (buttons.querySelector("button")) buttons.replaceChildren("Not answered");
    }
  }

  document.getElementById("api-key").addEventListener("change", load);
  load();
  return { chosenServers, offered, input, textOf, view, retire };
})();
