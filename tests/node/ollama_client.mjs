// Ollama's own JavaScript library against the server: `node ollama_client.mjs <host> <model> whole|stream`.
// Prints one JSON line: the answer's text, whether the last part said done, and its counts.
import { Ollama } from "ollama";

const [host, model, mode] = process.argv.slice(2);
const client = new Ollama({ host });
const request = {
  model,
  messages: [{ role: "user", content: "Name a colour." }],
  options: { temperature: 0, seed: 7, num_predict: 16 },
};

try {
  if (mode === "stream") {
    let text = "";
    let last = null;
    let parts = 0;
    for await (const part of await client.chat({ ...request, stream: true })) {
      text += part.message.content;
      last = part;
      parts += 1;
    }
    console.log(JSON.stringify({ text, done: last.done, eval_count: last.eval_count, parts }));
  } else {
    const answer = await client.chat({ ...request, stream: false });
    const models = (await client.list()).models.map((m) => m.name);
    console.log(JSON.stringify({ text: answer.message.content, done: answer.done, eval_count: answer.eval_count, models }));
  }
} catch (error) {
  console.log(JSON.stringify({ error: String(error) }));
  process.exit(1);
}
