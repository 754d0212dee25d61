// `channel serve`'s Responses API driven by the official openai npm client: instructions and
// input, output_text, streaming events (and the client's stream helper), function tools and
// their outputs, previous_response_id, stored responses, text.format json_schema, and errors.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startServer, FACT, QUESTION } from "./server.mjs";

let server, client;
before(async () => {
  server = await startServer(["--temp", "0", "--max-stored-responses", "4"]);
  client = new OpenAI({ baseURL: server.base + "/v1", apiKey: "unused", maxRetries: 0 });
});
after(async () => {
  assert.equal(await server.stop(), 0, "the server exits cleanly on SIGTERM");
});

const lookup = {
  type: "function",
  name: "lookup",
  description: "Look a word up in the dictionary.",
  parameters: { type: "object", properties: { word: { type: "string" } }, required: ["word"] },
};

test("responses: instructions and input give output_text", async () => {
  const r = await client.responses.create({ model: "channel", instructions: FACT, input: QUESTION });
  assert.equal(r.object, "response");
  assert.match(r.id, /^resp_/);
  assert.equal(r.status, "completed");
  assert.equal(r.output_text, "48213.");
  assert.equal(r.output.length, 1);
  assert.equal(r.output[0].type, "message");
  assert.equal(r.output[0].role, "assistant");
  assert.equal(r.output[0].content[0].type, "output_text");
  assert.equal(r.instructions, FACT);
  assert.ok(r.usage.input_tokens > 10 && r.usage.output_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  // The same as message items, a developer message as the system prompt.
  const items = await client.responses.create({
    model: "channel",
    input: [{ role: "developer", content: FACT }, { role: "user", content: [{ type: "input_text", text: QUESTION }] }],
  });
  assert.equal(items.output_text, "48213.");
  // Log-probabilities when include asks for them (other include values are accepted).
  const lp = await client.responses.create({
    model: "channel", instructions: FACT, input: QUESTION, top_logprobs: 2,
    include: ["message.output_text.logprobs", "reasoning.encrypted_content"],
  });
  const entries = lp.output[0].content[0].logprobs;
  assert.equal(entries.map((e) => e.token).join("").trim(), "48213.");
  for (const e of entries) {
    assert.ok(e.logprob <= 0);
    assert.equal(e.top_logprobs.length, 2);
  }
  assert.equal(r.output[0].content[0].logprobs, undefined, "not asked for: absent");
  // max_output_tokens cuts it: incomplete, and says why.
  const cut = await client.responses.create({ model: "channel", input: "Tell me about the harbour.", max_output_tokens: 3 });
  assert.equal(cut.status, "incomplete");
  assert.equal(cut.incomplete_details.reason, "max_output_tokens");
  assert.equal(cut.usage.output_tokens, 3);
});

test("responses: streamed events add up to the response (and the client's stream helper agrees)", async () => {
  const stream = await client.responses.create({ model: "channel", instructions: FACT, input: QUESTION, stream: true });
  const types = [];
  let text = "", seq = -1, done = null;
  for await (const e of stream) {
    types.push(e.type);
    assert.equal(e.sequence_number, seq + 1, "sequence numbers count up");
    seq = e.sequence_number;
    if (e.type === "response.output_text.delta") text += e.delta;
    if (e.type === "response.output_text.done") assert.equal(e.text, text);
    if (e.type === "response.completed") done = e.response;
  }
  assert.deepEqual(types.slice(0, 4), ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]);
  assert.deepEqual(types.slice(-4), ["response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"]);
  assert.equal(text, "48213.");
  assert.equal(done.output[0].content[0].text, text);
  const helper = client.responses.stream({ model: "channel", instructions: FACT, input: QUESTION });
  const final = await helper.finalResponse();
  assert.equal(final.output[0].content[0].text, "48213.");
});

test("responses: function tools, their outputs, and previous_response_id", async () => {
  const r = await client.responses.create({
    model: "channel", input: "What does lamp mean?", tools: [lookup],
    tool_choice: { type: "function", name: "lookup" }, max_output_tokens: 40,
  });
  const call = r.output.find((o) => o.type === "function_call");
  assert.ok(call, JSON.stringify(r.output));
  assert.equal(call.name, "lookup");
  assert.match(call.call_id, /^call_/);
  assert.equal(typeof JSON.parse(call.arguments).word, "string");
  assert.deepEqual(r.tools[0].name, "lookup");
  // The result goes back by call_id, continuing the stored response.
  const r2 = await client.responses.create({
    model: "channel", previous_response_id: r.id, tools: [lookup], max_output_tokens: 20,
    input: [{ type: "function_call_output", call_id: call.call_id, output: "A lamp is a device that gives light." }],
  });
  assert.equal(r2.previous_response_id, r.id);
  assert.ok(["completed", "incomplete"].includes(r2.status));
  assert.ok(r2.usage.input_tokens > r.usage.input_tokens, "the earlier turn is in the prompt");
  // Or the whole history sent again, as stateless clients do: the same prompt.
  const r3 = await client.responses.create({
    model: "channel", tools: [lookup], max_output_tokens: 20,
    input: [{ role: "user", content: "What does lamp mean?" }, ...r.output,
            { type: "function_call_output", call_id: call.call_id, output: "A lamp is a device that gives light." }],
  });
  assert.equal(r3.usage.input_tokens, r2.usage.input_tokens);
  assert.equal(r3.output_text, r2.output_text);
  // Streamed, a call is an output item with its arguments.
  const stream = await client.responses.create({
    model: "channel", input: "Look up harbour.", tools: [lookup], stream: true,
    tool_choice: { type: "function", name: "lookup" }, max_output_tokens: 40,
  });
  let args = "", item = null;
  for await (const e of stream) {
    if (e.type === "response.function_call_arguments.delta") args += e.delta;
    if (e.type === "response.output_item.done" && e.item.type === "function_call") item = e.item;
  }
  assert.equal(item.name, "lookup");
  assert.equal(item.arguments, args);
  // A text reply with tools offered still streams delta by delta.
  let deltas = 0, text = "";
  for await (const e of await client.responses.create({ model: "channel", instructions: FACT, input: QUESTION, tools: [lookup], stream: true })) {
    if (e.type === "response.output_text.delta") { deltas++; text += e.delta; }
    if (e.type === "response.output_text.done") assert.equal(e.text, text);
  }
  assert.equal(text, "48213.");
  assert.ok(deltas > 1, `${deltas} delta(s)`);
});

test("responses: stored ones can be read and deleted; the store keeps the newest", async () => {
  const r = await client.responses.create({ model: "channel", input: "hello", max_output_tokens: 2 });
  const got = await client.responses.retrieve(r.id);
  assert.equal(got.id, r.id);
  assert.deepEqual(got.output, r.output);
  const unstored = await client.responses.create({ model: "channel", input: "hello", max_output_tokens: 2, store: false });
  await assert.rejects(client.responses.retrieve(unstored.id), (e) => e.status === 404);
  await client.responses.del(r.id);
  await assert.rejects(client.responses.retrieve(r.id), (e) => e.status === 404);
  const old = await client.responses.create({ model: "channel", input: "one", max_output_tokens: 1 });
  for (let i = 0; i < 4; i++) await client.responses.create({ model: "channel", input: "more", max_output_tokens: 1 });
  await assert.rejects(client.responses.create({ model: "channel", input: "x", previous_response_id: old.id }),
    (e) => e.status === 404 && e.param === "previous_response_id");
});

test("responses: text.format json_schema, and 400s that name the field", async () => {
  const schema = {
    type: "object",
    properties: { code: { type: "integer" }, owner: { type: "string" } },
    required: ["code", "owner"], additionalProperties: false,
  };
  const r = await client.responses.create({
    model: "channel", instructions: FACT, input: QUESTION, max_output_tokens: 200,
    text: { format: { type: "json_schema", name: "answer", schema, strict: true } },
  });
  const v = JSON.parse(r.output_text);
  assert.deepEqual(Object.keys(v).sort(), ["code", "owner"]);
  assert.ok(Number.isInteger(v.code));
  for (const [body, param] of [
    [{ input: [] }, "input"],
    [{ input: [{ role: "user", content: [{ type: "input_image", image_url: "x" }] }] }, "input[0].content[0]"],
    [{ input: [{ type: "function_call_output", call_id: "nope", output: "x" }] }, "input[0].call_id"],
    [{ input: [{ type: "item_reference", id: "x" }] }, "input[0].type"],
    [{ input: "x", tools: [{ type: "web_search_preview" }] }, "tools[0].type"],
    [{ input: "x", max_output_tokens: 0 }, "max_output_tokens"],
    [{ input: "x", temperature: 9 }, "temperature"],
    [{ input: "x", text: { format: { type: "json_schema", name: "a", schema: { type: "array" } } } }, "text.format.schema"],
  ]) {
    await assert.rejects(client.responses.create({ model: "channel", ...body }), (e) => e.status === 400 && e.param === param, JSON.stringify(body));
  }
});

test("responses: a client that disconnects mid-stream leaves the server serving", async () => {
  const controller = new AbortController();
  const stream = await client.responses.create(
    { model: "channel", stream: true, max_output_tokens: 400, temperature: 0.8, input: "Tell me a long story." },
    { signal: controller.signal });
  let n = 0;
  try {
    for await (const e of stream) { if (++n === 6) controller.abort(); }
  } catch (e) {
    // the client reports the abort as an error or ends the stream; either way it is gone
  }
  assert.ok(n >= 6);
  const r = await client.responses.create({ model: "channel", instructions: FACT, input: QUESTION });
  assert.equal(r.output_text, "48213.");
});
