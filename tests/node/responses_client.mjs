// The openai Node SDK's Responses API against the server; prints one JSON line of what it saw.
// Usage: node responses_client.mjs BASE_URL
import OpenAI from "openai";

const [baseURL] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });

async function main() {
  const stream = await client.responses.create({
    model: "SmolLM2-135M-Instruct.Q4_1",
    input: "Name three colours.",
    max_output_tokens: 30,
    temperature: 0,
    stream: true,
  });
  const seen = { types: [], sequence: [], text: "", final: null };
  for await (const event of stream) {
    seen.types.push(event.type);
    seen.sequence.push(event.sequence_number);
    if (event.type === "response.output_text.delta") seen.text += event.delta;
    if (event.type === "response.completed" || event.type === "response.incomplete") {
      seen.final = { id: event.response.id, status: event.response.status, output: event.response.output };
    }
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
