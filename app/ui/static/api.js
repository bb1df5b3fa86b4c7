// What both pages need to call the server: the API key kept for this tab, and errors put into words.
"use strict";

const api = (() => {
  const KEY = "llm-server-api-key";
  const keyField = document.getElementById("key-field");
  const keyInput = document.getElementById("api-key");

  // sessionStorage, not localStorage: the key leaves with the tab.
  keyInput.value = sessionStorage.getItem(KEY) || "";
  keyInput.addEventListener("input", () => sessionStorage.setItem(KEY, keyInput.value.trim()));

  function headers() {
    const sent = { "Content-Type": "application/json" };
    const key = sessionStorage.getItem(KEY);
    if (key) sent.Authorization = `Bearer ${key}`;
    return sent;
  }

  function askForKey() {
    keyField.hidden = false;
    keyInput.focus();
  }

  // The server's own message, with what the user can do about it.
  async function errorText(response) {
    let message = response.statusText || "no message";
    try {
      const body = await response.json();
      if (body && body.error && body.error.message) message = body.error.message;
    } catch (ignored) {
      // not JSON (a proxy's page): the status says enough
    }
    const wait = response.headers.get("Retry-After");
    switch (response.status) {
      case 401:
        askForKey();
        return `This server needs an API key (${message}) Enter it under Settings.`;
      case 429:
        return `The server is busy: try again${wait ? ` in ${wait} s` : " shortly"}. (${message})`;
      case 503:
        return `The server cannot answer yet${wait ? `: try again in ${wait} s` : ""}. (${message})`;
      default:
        return `Error ${response.status}: ${message}`;
    }
  }

  return { headers, errorText, askForKey };
})();
