// The Vercel AI SDK (`ai` 6) as its users write it: one tool, a multi-step tool loop, then the
// conversation continued from the SDK's own `response.messages`, streamed.
//
// argv[2]: the provider: "responses" (`openai(model)`, its default since AI SDK 5), "chat"
// (`openai.chat(model)`) or "anthropic" (`anthropic(model)`).
// Environment: CLIENT_BASE_URL (the OpenAI base URL, …/v1; for "anthropic" the Anthropic base
// URL, which holds `/v1` in this SDK), CLIENT_API_KEY, CLIENT_MODEL.
// Prints one JSON line: {generate: {text, steps, toolCalls}, stream: {text, chunks, steps}, calls}.
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";

const [, , provider] = process.argv;
const { CLIENT_BASE_URL: baseURL, CLIENT_API_KEY: apiKey, CLIENT_MODEL: name } = process.env;

function model() {
  if (provider === "anthropic") return createAnthropic({ baseURL, apiKey })(name);
  const openai = createOpenAI({ baseURL, apiKey });
  if (provider === "chat") return openai.chat(name);
  if (provider === "responses") return openai(name);
  throw new Error(`unknown provider ${provider}`);
}

const calls = [];
const tools = {
  weather: tool({
    description: "The weather in a city right now.",
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      calls.push(city);
      return `sunny, 21 degrees in ${city}`;
    },
  }),
};

const system = "Answer weather questions in one sentence.";
const first = [{ role: "user", content: "What is the weather in Oslo?" }];
const generated = await generateText({
  model: model(),
  system,
  messages: first,
  tools,
  stopWhen: stepCountIs(5),
  maxRetries: 0,
});

const history = [...first, ...generated.response.messages, { role: "user", content: "And in Bergen?" }];
const streamed = streamText({
  model: model(),
  system,
  messages: history,
  tools,
  stopWhen: stepCountIs(5),
  maxRetries: 0,
});
const chunks = [];
for await (const chunk of streamed.textStream) chunks.push(chunk);

console.log(
  JSON.stringify({
    generate: {
      text: generated.text,
      steps: generated.steps.length,
      toolCalls: generated.steps.flatMap((s) => s.toolCalls.map((c) => c.toolName)),
    },
    stream: { text: await streamed.text, chunks, steps: (await streamed.steps).length },
    calls,
  }),
);
