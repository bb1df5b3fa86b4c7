// The Anthropic Node SDK against the server's Messages API; prints one JSON line of what it saw.
// Usage: node anthropic_client.mjs BASE_URL
import Anthropic from "@anthropic-ai/sdk";

const [baseURL] = process.argv.slice(2);
const client = new Anthropic({ baseURL, apiKey: "unused", maxRetries: 0 });
const request = {
  model: "SmolLM2-135M-Instruct.Q4_1",
  max_tokens: 30,
  temperature: 0,
  messages: [{ role: "user", content: "Name three colours." }],
};

async function main() {
  const whole = await client.messages.create(request);
  const stream = client.messages.stream(request);
  let text = "";
  stream.on("text", (piece) => {
    text += piece;
  });
  const final = await stream.finalMessage();
  return {
    whole: { text: whole.content.map((block) => block.text).join(""), stop: whole.stop_reason },
    streamed: { text, final: final.content.map((block) => block.text).join(""), stop: final.stop_reason,
                id: final.id, output_tokens: final.usage.output_tokens },
  };
}

main().then(
  (result) => console.log(JSON.stringify(result)),
  (error) => {
    console.log(JSON.stringify({ fatal: String(error) }));
    process.exit(1);
  },
);
