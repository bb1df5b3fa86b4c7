// The official openai Node SDK against the server; prints one JSON line of what it saw.
// Usage: node sdk_client.mjs BASE_URL MODE   (MODE: stream | whole | error)
import OpenAI from "openai";

const [baseURL, mode] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });
const request = {
  model: "SmolLM2-135M-Instruct.Q4_1",
  messages: [{ role: "user", content: "Name three colours." }],
  max_tokens: 30,
  temperature: 0,
  seed: 5,
};

async function main() {
  if (mode === "whole") {
    const reply = await client.chat.completions.create(request);
    return { text: reply.choices[0].message.content, finish: reply.choices[0].finish_reason };
  }
  const stream = await client.chat.completions.create({
    ...request,
    stream: true,
    stream_options: { include_usage: true },
  });
  const seen = { text: "", chunks: 0, roles: [], finish: null, usage: null };
  try {
    for await (const chunk of stream) {
      seen.chunks += 1;
      if (chunk.usage) seen.usage = chunk.usage;
      for (const choice of chunk.choices) {
        if (choice.delta.role) seen.roles.push(choice.delta.role);
        seen.text += choice.delta.content ?? "";
        if (choice.finish_reason) seen.finish = choice.finish_reason;
      }
    }
  } catch (error) {
    seen.error = { name: error.constructor.name, isAPIError: error instanceof OpenAI.APIError, message: error.message };
  }
  return seen;
}

main().then(
  (result) => console.log(JSON.stringify(result)),
  (error) => {
    console.log(JSON.stringify({ fatal: String(error) }));
    process.exit(1);
  },
);
