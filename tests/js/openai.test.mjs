// `channel serve` driven by the official openai npm client: models, chat (plain and
// streaming), tools and tool results, json_object, json_schema, stop / seed / max_tokens, logprobs,
// logit_bias and the presence / frequency penalties, completions, embeddings,
// named sessions, and errors (400, 401, 404, 413, 429, 503) in OpenAI's shape; a client
// that disconnects mid-stream leaves the server serving.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { execFileSync } from "node:child_process";
import { startServer, FACT, QUESTION, CHANNEL } from "./server.mjs";

let server, client;
before(async () => {
  server = await startServer(["--temp", "0", "--max-sessions", "2", "--max-body-kib", "64", "--max-prompt-tokens", "2000"]);
  client = new OpenAI({ baseURL: server.base + "/v1", apiKey: "unused", maxRetries: 0 });
});
after(async () => {
  assert.equal(await server.stop(), 0, "the server exits cleanly on SIGTERM");
});

const lookup = {
  type: "function",
  function: {
    name: "lookup",
    description: "Look a word up in the dictionary.",
    parameters: { type: "object", properties: { word: { type: "string" } }, required: ["word"] },
  },
};

test("models list the served model", async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), ["channel"]);
  const m = await client.models.retrieve("channel");
  assert.equal(m.id, "channel");
});

test("chat: the system prompt is in the anchors", async () => {
  const r = await client.chat.completions.create({
    model: "channel",
    messages: [{ role: "system", content: FACT }, { role: "user", content: QUESTION }],
  });
  assert.equal(r.object, "chat.completion");
  assert.equal(r.choices[0].message.role, "assistant");
  assert.equal(r.choices[0].message.content, "48213.");
  assert.equal(r.choices[0].finish_reason, "stop");
  assert.ok(r.usage.prompt_tokens > 10 && r.usage.completion_tokens > 0);
});

test("chat: streaming over SSE ends with [DONE]", async () => {
  const stream = await client.chat.completions.create({
    model: "channel",
    stream: true,
    stream_options: { include_usage: true },
    messages: [{ role: "system", content: FACT }, { role: "user", content: QUESTION }],
  });
  let text = "", chunks = 0, finish = null, usage = null;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.usage) usage = chunk.usage;
    if (!chunk.choices.length) continue;
    text += chunk.choices[0].delta.content ?? "";
    finish = chunk.choices[0].finish_reason ?? finish;
  }
  assert.equal(text, "48213.");
  assert.ok(chunks >= 4, `${chunks} chunks`);
  assert.equal(finish, "stop");
  assert.ok(usage && usage.completion_tokens > 0);
});

test("tools: a named tool_choice returns a structured call, and its result goes back", async () => {
  const r = await client.chat.completions.create({
    model: "channel",
    messages: [{ role: "user", content: "What does lamp mean?" }],
    tools: [lookup],
    tool_choice: { type: "function", function: { name: "lookup" } },
    max_tokens: 40,
  });
  const choice = r.choices[0];
  assert.equal(choice.finish_reason, "tool_calls");
  assert.equal(choice.message.tool_calls.length, 1);
  const call = choice.message.tool_calls[0];
  assert.equal(call.type, "function");
  assert.equal(call.function.name, "lookup");
  assert.equal(typeof JSON.parse(call.function.arguments), "object");
  // The call and its result are history now; the model answers after them.
  const r2 = await client.chat.completions.create({
    model: "channel",
    messages: [
      { role: "user", content: "What does lamp mean?" },
      { role: "assistant", content: null, tool_calls: [call] },
      { role: "tool", tool_call_id: call.id, content: "A lamp is a device that gives light." },
    ],
    tools: [lookup],
    max_tokens: 20,
  });
  assert.equal(r2.choices[0].message.role, "assistant");
  assert.ok(["stop", "length", "tool_calls"].includes(r2.choices[0].finish_reason));
  // Streaming with tools sends the call as a tool_calls delta.
  const stream = await client.chat.completions.create({
    model: "channel", stream: true, tools: [lookup], max_tokens: 40,
    tool_choice: { type: "function", function: { name: "lookup" } },
    messages: [{ role: "user", content: "Look up harbour." }],
  });
  let calls = [], finish = null;
  for await (const chunk of stream) {
    const d = chunk.choices[0]?.delta;
    if (d?.tool_calls) calls = calls.concat(d.tool_calls);
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(finish, "tool_calls");
  assert.equal(calls[0].function.name, "lookup");
  // With tools offered a reply that is text still streams, token by token, as without them.
  const ask = { model: "channel", tools: [lookup], messages: [{ role: "system", content: FACT }, { role: "user", content: QUESTION }] };
  const whole = await client.chat.completions.create(ask);
  const parts = [];
  for await (const chunk of await client.chat.completions.create({ ...ask, stream: true })) {
    const d = chunk.choices[0]?.delta;
    if (d?.content) parts.push(d.content);
    assert.equal(d?.tool_calls, undefined);
  }
  assert.equal(parts.join(""), whole.choices[0].message.content);
  assert.ok(parts.length > 1, `streamed in ${parts.length} chunk(s)`);
});

test("response_format json_object gives a JSON object", async () => {
  const r = await client.chat.completions.create({
    model: "channel",
    messages: [{ role: "user", content: "Describe a dog as JSON." }],
    response_format: { type: "json_object" },
    max_tokens: 80,
  });
  const content = r.choices[0].message.content;
  const parsed = JSON.parse(content);
  assert.equal(typeof parsed, "object");
  assert.ok(!Array.isArray(parsed));
});

test("response_format json_schema: the object the schema describes", async () => {
  const schema = {
    type: "object",
    properties: { code: { type: "integer" }, owner: { type: "string" }, kind: { enum: ["door", "safe"] } },
    required: ["code", "owner", "kind"],
    additionalProperties: false,
  };
  const r = await client.chat.completions.create({
    model: "channel",
    max_tokens: 200,  // the built-in model spends many tokens on whitespace between the parts
    messages: [{ role: "system", content: FACT }, { role: "user", content: QUESTION }],
    response_format: { type: "json_schema", json_schema: { name: "answer", strict: true, schema } },
  });
  assert.equal(r.choices[0].finish_reason, "stop", r.choices[0].message.content);
  const v = JSON.parse(r.choices[0].message.content);
  assert.deepEqual(Object.keys(v).sort(), ["code", "kind", "owner"]);
  assert.ok(Number.isInteger(v.code));
  assert.equal(typeof v.owner, "string");
  assert.ok(["door", "safe"].includes(v.kind));
  for (const [format, param] of [
    [{ type: "json_schema", json_schema: { name: "x" } }, "response_format.json_schema"],
    [{ type: "json_schema", json_schema: { name: "x", schema: { type: "array" } } }, "response_format.json_schema.schema"],
    [{ type: "json_schema", json_schema: { name: "x", schema: { type: "object", required: "code" } } }, "response_format.json_schema.schema"],
  ]) {
    await assert.rejects(
      client.chat.completions.create({ model: "channel", messages: [{ role: "user", content: "hi" }], response_format: format }),
      (e) => e.status === 400 && e.param === param);
  }
});

test("response_format json_schema as generators write it: $defs, $ref, anyOf with null", async () => {
  // pydantic's shape: a nested model behind a reference, an Optional field, a bounded list.
  const schema = {
    $defs: {
      Lock: {
        type: "object", title: "Lock",
        properties: { code: { type: "integer" }, kind: { enum: ["door", "safe"] } },
        required: ["code", "kind"], additionalProperties: false,
      },
    },
    type: "object", title: "Answer",
    properties: {
      lock: { $ref: "#/$defs/Lock" },
      owner: { anyOf: [{ type: "string" }, { type: "null" }], default: null, title: "Owner" },
      digits: { type: "array", items: { type: "integer" }, minItems: 1, maxItems: 3 },
    },
    required: ["lock", "owner", "digits"],
    additionalProperties: false,
  };
  const r = await client.chat.completions.create({
    model: "channel",
    max_tokens: 300,
    messages: [{ role: "system", content: FACT }, { role: "user", content: QUESTION }],
    response_format: { type: "json_schema", json_schema: { name: "answer", strict: true, schema } },
  });
  assert.equal(r.choices[0].finish_reason, "stop", r.choices[0].message.content);
  const v = JSON.parse(r.choices[0].message.content);
  assert.deepEqual(Object.keys(v).sort(), ["digits", "lock", "owner"]);
  assert.deepEqual(Object.keys(v.lock).sort(), ["code", "kind"]);
  assert.ok(Number.isInteger(v.lock.code));
  assert.ok(["door", "safe"].includes(v.lock.kind));
  assert.ok(v.owner === null || typeof v.owner === "string");
  assert.ok(Array.isArray(v.digits) && v.digits.length >= 1 && v.digits.length <= 3);
  assert.ok(v.digits.every(Number.isInteger));
  await assert.rejects(
    client.chat.completions.create({
      model: "channel", messages: [{ role: "user", content: "hi" }],
      response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", properties: { a: { $ref: "#/$defs/Nope" } } } } },
    }),
    (e) => e.status === 400 && e.param === "response_format.json_schema.schema" && /\$ref/.test(e.message));
});

test("embeddings: unit vectors, base64 (the client's default) and float alike", async () => {
  const cos = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0);
  // The client asks for base64 and decodes it; float is asked for by name.
  const r = await client.embeddings.create({ model: "channel", input: ["The harbour light is green.", FACT] });
  assert.equal(r.object, "list");
  assert.deepEqual(r.data.map((d) => d.index), [0, 1]);
  const [a, b] = r.data.map((d) => Array.from(d.embedding));
  assert.ok(a.length >= 32 && a.length === b.length, `${a.length} dimensions`);
  assert.ok(Math.abs(cos(a, a) - 1) < 1e-4 && Math.abs(cos(b, b) - 1) < 1e-4);
  assert.ok(cos(a, b) < 0.9999, "two texts, two vectors");
  assert.ok(r.usage.prompt_tokens > 10 && r.usage.total_tokens === r.usage.prompt_tokens);
  const f = await client.embeddings.create({ model: "channel", input: FACT, encoding_format: "float" });
  assert.equal(f.data.length, 1);
  for (let i = 0; i < b.length; i++) assert.ok(Math.abs(f.data[0].embedding[i] - b[i]) < 1e-6, `dimension ${i}`);
  // Token ids are an input too; the same text's ids give the same vector.
  const ids = await client.embeddings.create({ model: "channel", input: [[5, 6, 7], [8, 9]], encoding_format: "float" });
  assert.equal(ids.data.length, 2);
  assert.equal(ids.usage.prompt_tokens, 5);
  const same = await client.embeddings.create({ input: [5, 6, 7], encoding_format: "float", model: "channel" });
  assert.deepEqual(same.data[0].embedding, ids.data[0].embedding);
  for (const [body, param] of [
    [{ input: "" }, "input"],
    [{ input: [] }, "input"],
    [{ input: ["a", 3] }, "input[1]"],
    [{ input: [[1, -2]] }, "input[0]"],
    [{ input: [99999999] }, "input"],
    [{ input: "x", encoding_format: "hex" }, "encoding_format"],
    [{ input: "x", dimensions: 7 }, "dimensions"],
    [{ input: "x ".repeat(3000) }, "input"],
  ]) {
    await assert.rejects(client.embeddings.create({ model: "channel", ...body }), (e) => e.status === 400 && e.param === param, JSON.stringify(body).slice(0, 80));
  }
  await assert.rejects(client.embeddings.create({ model: "nope", input: "x" }), (e) => e.status === 404);
});

test("max_tokens, stop, seed and temperature", async () => {
  const base = { model: "channel", messages: [{ role: "user", content: "Tell me about the harbour." }] };
  const short = await client.chat.completions.create({ ...base, max_tokens: 3 });
  assert.equal(short.choices[0].finish_reason, "length");
  assert.equal(short.usage.completion_tokens, 3);
  const a = await client.chat.completions.create({ ...base, temperature: 1.0, top_p: 0.9, seed: 7, max_tokens: 12 });
  const b = await client.chat.completions.create({ ...base, temperature: 1.0, top_p: 0.9, seed: 7, max_tokens: 12 });
  assert.equal(a.choices[0].message.content, b.choices[0].message.content, "same seed, same text");
  const stopped = await client.chat.completions.create({
    model: "channel", messages: [{ role: "system", content: FACT }, { role: "user", content: QUESTION }], stop: ["2"],
  });
  assert.equal(stopped.choices[0].message.content, "48");
});

test("completions", async () => {
  const r = await client.completions.create({ model: "channel", prompt: "The harbour of the town", max_tokens: 6 });
  assert.equal(r.object, "text_completion");
  assert.ok(r.choices[0].text.length > 0);
  assert.equal(r.usage.completion_tokens, 6);
});

test("errors are OpenAI-shaped and the server stays up", async () => {
  await assert.rejects(
    client.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }] }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && e.code === "model_not_found");
  await assert.rejects(
    client.chat.completions.create({ model: "channel", messages: [{ role: "user", content: "hi" }], temperature: 5 }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === "temperature");
  await assert.rejects(
    client.chat.completions.create({ model: "channel", messages: [] }),
    (e) => e.status === 400 && e.param === "messages");
  await assert.rejects(
    client.chat.completions.create({ model: "channel", messages: [{ role: "wizard", content: "hi" }] }),
    (e) => e.status === 400 && e.param === "messages[0].role");
  await assert.rejects(
    client.chat.completions.create({ model: "channel", messages: [{ role: "user", content: "word ".repeat(3000) }] }),
    (e) => e.status === 400 && e.code === "context_length_exceeded");
  // Malformed JSON and an oversized body, straight over HTTP.
  let r = await fetch(server.base + "/v1/chat/completions", { method: "POST", body: "{not json" });
  assert.equal(r.status, 400);
  assert.equal((await r.json()).error.type, "invalid_request_error");
  r = await fetch(server.base + "/v1/chat/completions", { method: "POST", body: JSON.stringify({ pad: "x".repeat(100000) }) });
  assert.equal(r.status, 413);
  assert.ok((await r.json()).error.message.includes("larger"));
  r = await fetch(server.base + "/v1/nothing");
  assert.equal(r.status, 404);
  assert.ok((await r.json()).error);
  r = await fetch(server.base + "/health");
  assert.equal((await r.json()).status, "ok");
});

// The built-in model's ids of `text`'s pieces ({piece: id}), from `channel tokenize`.
function ids(text) {
  const pairs = JSON.parse(execFileSync(CHANNEL, ["tokenize", "--pieces", text], { encoding: "utf8" }));
  return Object.fromEntries(pairs.map(([id, piece]) => [piece, id]));
}

test("logprobs: chat, streamed chat and completions", async () => {
  const ask = { model: "channel", messages: [{ role: "system", content: FACT }, { role: "user", content: QUESTION }] };
  const r = await client.chat.completions.create({ ...ask, logprobs: true, top_logprobs: 3 });
  assert.equal(r.choices[0].message.content, "48213.");
  const lp = r.choices[0].logprobs.content;
  // Greedy (--temp 0): each token is its step's likeliest; the pieces spell the reply.
  assert.equal(lp.map((e) => e.token).join("").trim(), "48213.");
  for (const e of lp) {
    assert.ok(e.logprob <= 0 && e.logprob > -100);
    assert.equal(e.top_logprobs.length, 3);
    assert.equal(e.top_logprobs[0].token, e.token);
    assert.ok(Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-6);
    assert.ok(e.top_logprobs[2].logprob <= e.top_logprobs[1].logprob && e.top_logprobs[1].logprob <= e.logprob);
    assert.deepEqual(e.bytes, [...Buffer.from(e.token, "utf8")]);
  }
  const plain = await client.chat.completions.create(ask);
  assert.equal(plain.choices[0].logprobs, null, "not asked for: null");
  // Streamed: the same entries, spread over the chunks that carry their text.
  const stream = await client.chat.completions.create({ ...ask, stream: true, logprobs: true, top_logprobs: 3 });
  const streamed = [];
  for await (const c of stream) if (c.choices[0]?.logprobs?.content) streamed.push(...c.choices[0].logprobs.content);
  assert.deepEqual(streamed, lp);
  // Completions: logprobs is the number of alternatives; offsets index the returned text.
  const c = await client.completions.create({ model: "channel", prompt: "The harbour of the town", max_tokens: 4, logprobs: 2 });
  const L = c.choices[0].logprobs;
  assert.equal(L.tokens.length, 4);
  assert.equal(L.tokens.join(""), c.choices[0].text);
  let at = 0;
  L.tokens.forEach((t, i) => {
    assert.equal(L.text_offset[i], at);
    at += Buffer.byteLength(t, "utf8");
    assert.equal(Object.keys(L.top_logprobs[i]).length, 2);
    assert.ok(L.token_logprobs[i] <= 0);
  });
  await assert.rejects(client.chat.completions.create({ ...ask, top_logprobs: 2 }),
    (e) => e.status === 400 && e.param === "top_logprobs");
  await assert.rejects(client.chat.completions.create({ ...ask, logprobs: true, top_logprobs: 21 }),
    (e) => e.status === 400 && e.param === "top_logprobs");
});

test("completions: echo scores the prompt (text or token ids); max_tokens 0 generates nothing", async () => {
  // How evaluation harnesses score text: the prompt's own tokens' logprobs.
  const text = "The harbour of the town";
  const tokens = JSON.parse(execFileSync(CHANNEL, ["tokenize", text], { encoding: "utf8" }));
  const scored = await client.completions.create({ model: "channel", prompt: tokens, echo: true, logprobs: 3, max_tokens: 0 });
  const S = scored.choices[0].logprobs;
  assert.equal(scored.choices[0].finish_reason, "length");
  assert.equal(scored.usage.completion_tokens, 0);
  assert.equal(scored.usage.prompt_tokens, tokens.length);
  assert.equal(S.tokens.length, tokens.length, "token ids are echoed one for one");
  assert.equal(S.token_logprobs[0], null, "the first token has no context");
  assert.equal(S.top_logprobs[0], null);
  for (let i = 1; i < tokens.length; i++) {
    assert.ok(S.token_logprobs[i] < 0);
    assert.equal(Object.keys(S.top_logprobs[i]).length, 3);
  }
  // The scorer (a contiguous pass over the prompt) and the ring's generation agree: the
  // last token's alternatives are those the ring gives when it generates there.
  const next = await client.completions.create({ model: "channel", prompt: tokens.slice(0, -1), max_tokens: 1, logprobs: 3, temperature: 0 });
  const ring = next.choices[0].logprobs.top_logprobs[0], mine = S.top_logprobs[tokens.length - 1];
  assert.deepEqual(Object.keys(ring).sort(), Object.keys(mine).sort());
  for (const k of Object.keys(ring)) assert.ok(Math.abs(ring[k] - mine[k]) < 2e-3, `${k}: ${ring[k]} vs ${mine[k]}`);
  // Text with a continuation: the prompt's tokens (not the BOS the server added), then the
  // generated ones, offsets into the returned text.
  const both = await client.completions.create({ model: "channel", prompt: text, echo: true, logprobs: 1, max_tokens: 2 });
  const B = both.choices[0].logprobs;
  assert.ok(both.choices[0].text.startsWith(text));
  assert.equal(B.tokens.join(""), both.choices[0].text);
  assert.equal(B.tokens.length, S.tokens.length - 1 + 2);
  B.tokens.forEach((t, i) => assert.equal(B.text_offset[i], Buffer.byteLength(B.tokens.slice(0, i).join(""), "utf8")));
  for (let i = 0; i < S.tokens.length - 1; i++) assert.ok(Math.abs(B.token_logprobs[i] - S.token_logprobs[i + 1]) < 1e-4);
  // Streamed, the echo chunk carries the prompt's entries.
  const stream = await client.completions.create({ model: "channel", prompt: text, echo: true, logprobs: 1, max_tokens: 2, stream: true,
                                                  stream_options: { include_usage: true } });
  const streamed = [];
  let usage = null;
  for await (const c of stream) {
    if (c.choices[0]?.logprobs) streamed.push(...c.choices[0].logprobs.tokens);
    if (c.usage) usage = c.usage;
  }
  assert.deepEqual(streamed, B.tokens);
  assert.deepEqual(usage, both.usage, "stream_options.include_usage: the last chunk's usage");
  for (const [body, param] of [
    [{ prompt: [1, 99999999] }, "prompt"],
    [{ prompt: ["a", "b"] }, "prompt"],
    [{ prompt: [[1, 2], [3]] }, "prompt"],
    [{ prompt: [1.5] }, "prompt"],
    [{ prompt: "x", max_tokens: -1 }, "max_tokens"],
  ]) {
    await assert.rejects(client.completions.create({ model: "channel", ...body }), (e) => e.status === 400 && e.param === param, JSON.stringify(body));
  }
  await assert.rejects(client.chat.completions.create({ model: "channel", max_tokens: 0, messages: [{ role: "user", content: "hi" }] }),
    (e) => e.status === 400 && e.param === "max_tokens", "a chat reply needs a token");
});

test("logit_bias and the presence / frequency penalties", async () => {
  const ask = { model: "channel", messages: [{ role: "system", content: FACT }, { role: "user", content: QUESTION }] };
  const digits = ids("4789");
  // The answer's first digit banned: the reply no longer starts with it.
  const banned = await client.chat.completions.create({ ...ask, logit_bias: { [digits["4"]]: -100 } });
  assert.ok(!banned.choices[0].message.content.startsWith("4"), banned.choices[0].message.content);
  // One token forced: every token is it.
  const forced = await client.chat.completions.create({ ...ask, max_tokens: 3, logit_bias: { [digits["7"]]: 100 } });
  assert.equal(forced.choices[0].message.content, "777");
  // Strong penalties: no token of the reply repeats one of the last 64.
  const story = { model: "channel", max_tokens: 30, messages: [{ role: "user", content: "Tell me about the harbour." }] };
  const repeats = (r) => {
    const t = r.choices[0].logprobs.content.map((e) => e.token);
    return t.length - new Set(t).size;
  };
  const free = await client.chat.completions.create({ ...story, logprobs: true });
  const penalised = await client.chat.completions.create({ ...story, logprobs: true, presence_penalty: 2, frequency_penalty: 2 });
  assert.ok(repeats(free) > 0, "the plain reply repeats a token (else this test says nothing)");
  assert.ok(repeats(penalised) < repeats(free), `${repeats(penalised)} repeats against ${repeats(free)}`);
  for (const [body, param] of [
    [{ presence_penalty: 2.5 }, "presence_penalty"],
    [{ frequency_penalty: "a" }, "frequency_penalty"],
    [{ logit_bias: { 999999: 1 } }, "logit_bias.999999"],
    [{ logit_bias: { "x": 1 } }, "logit_bias.x"],
    [{ logit_bias: { 5: 101 } }, "logit_bias.5"],
  ]) {
    await assert.rejects(client.chat.completions.create({ ...ask, ...body }), (e) => e.status === 400 && e.param === param);
  }
});

test("a client that disconnects mid-stream leaves the server serving", async () => {
  const controller = new AbortController();
  const stream = await client.chat.completions.create(
    { model: "channel", stream: true, max_tokens: 400, temperature: 0.8, messages: [{ role: "user", content: "Tell me a long story." }] },
    { signal: controller.signal });
  let n = 0;
  try {
    for await (const chunk of stream) { if (++n === 3) controller.abort(); }
  } catch (e) {
    // the client reports the abort as an error or ends the stream; either way it is gone
  }
  assert.ok(n >= 3);
  const r = await client.chat.completions.create({
    model: "channel", messages: [{ role: "system", content: FACT }, { role: "user", content: QUESTION }],
  });
  assert.equal(r.choices[0].message.content, "48213.");
});

test("named sessions: a conversation that lives on the server", async () => {
  const post = (p, body) => fetch(server.base + p, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  let r = await post("/v1/sessions", { name: "s1", system: FACT });
  assert.equal(r.status, 201);
  const created = await r.json();
  assert.ok(created.tiers.anchors > 10);
  r = await post("/v1/sessions/s1/messages", { messages: [{ role: "user", content: QUESTION }] });
  const reply = await r.json();
  assert.equal(reply.choices[0].message.content, "48213.");
  assert.ok(reply.session.clock > created.clock);
  assert.ok(reply.session.window_spans.some((s) => s.type === "user"));
  r = await fetch(server.base + "/v1/sessions/s1");
  const state = await r.json();
  assert.equal(state.transcript.length, 2);
  assert.equal(state.tiers.slots, 4096);
  // The probe runs a thought on the ring and rolls it back.
  r = await post("/v1/sessions/s1/probe", { text: "Question: " + QUESTION + "\nAnswer:", top_k: 3 });
  const probe = await r.json();
  assert.equal(probe.rolled_back, true);
  assert.equal(probe.next.length, 3);
  assert.equal((await (await fetch(server.base + "/v1/sessions/s1")).json()).clock, state.clock);
  // Limits and unknown names.
  assert.equal((await post("/v1/sessions", { name: "s1" })).status, 400);
  assert.equal((await post("/v1/sessions", { name: "s2" })).status, 201);
  r = await post("/v1/sessions", { name: "s3" });
  assert.equal(r.status, 429);
  assert.equal((await r.json()).error.code, "too_many_sessions");
  r = await post("/v1/sessions/nope/messages", { messages: [{ role: "user", content: "hi" }] });
  assert.equal(r.status, 404);
  assert.equal((await r.json()).error.code, "session_not_found");
  r = await post("/v1/sessions/s1/save", {});
  assert.equal(r.status, 400, "no --data-dir: nowhere to save");
  assert.equal((await fetch(server.base + "/v1/sessions/s2", { method: "DELETE" })).status, 200);
  for (let i = 0; i < 3; i++) await fetch(server.base + "/probe-" + i);  // paths no route serves
  const metrics = await (await fetch(server.base + "/metrics")).text();
  assert.match(metrics, /channel_completion_tokens_total \d+/);
  // Names and unknown paths are placeholders: probing cannot grow the counters.
  assert.match(metrics, /route="\/v1\/sessions\/\{name\}\/messages",status="404"/);
  assert.match(metrics, /route="\(no route\)",status="404"\} [3-9]/);
  assert.doesNotMatch(metrics, /probe-|nope/);
  assert.match(metrics, /channel_requests_total\{route="\/v1\/chat\/completions",status="200"\} \d+/);
  assert.match(metrics, /channel_named_sessions 1/);
});

test("tokenize and detokenize (llama.cpp's endpoints)", async () => {
  const post = (path, body) => fetch(server.base + path, { method: "POST", body: JSON.stringify(body) });
  const t = await (await post("/tokenize", { content: "The harbour" })).json();
  assert.deepEqual(t.tokens, JSON.parse(execFileSync(CHANNEL, ["tokenize", "--no-bos", "The harbour"], { encoding: "utf8" })));
  assert.equal(t.count, t.tokens.length);
  const withBos = await (await post("/tokenize", { content: "The harbour", add_special: true })).json();
  assert.ok(withBos.count >= t.count);
  const pieces = await (await post("/tokenize", { prompt: "The harbour", with_pieces: true })).json();
  assert.equal(pieces.tokens.map((p) => p.piece).join(""), "The harbour");
  assert.deepEqual(pieces.tokens.map((p) => p.id), t.tokens);
  assert.equal((await (await post("/detokenize", { tokens: t.tokens })).json()).content, "The harbour");
  for (const [path, body, param] of [["/tokenize", { content: 3 }, "content"], ["/detokenize", { tokens: [-1] }, "tokens"],
                                     ["/detokenize", { tokens: "x" }, "tokens"], ["/tokenize", { content: "x", add_special: "yes" }, "add_special"]]) {
    const r = await post(path, body);
    assert.equal(r.status, 400);
    assert.equal((await r.json()).error.param, param);
  }
});

test("an API key is required when set; 503 when every generation slot is busy", async () => {
  const keyed = await startServer(["--temp", "0", "--api-key", "sekrit", "--max-concurrent", "1"]);
  try {
    const bad = new OpenAI({ baseURL: keyed.base + "/v1", apiKey: "wrong", maxRetries: 0 });
    await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    const good = new OpenAI({ baseURL: keyed.base + "/v1", apiKey: "sekrit", maxRetries: 0 });
    assert.equal((await good.models.list()).data[0].id, "channel");
    const metrics = await (await fetch(keyed.base + "/metrics", { headers: { Authorization: "Bearer sekrit" } })).text();
    assert.match(metrics, /route="\/v1\/models",status="401"\} 1\n/, "a refused request counts once");
    assert.equal((await fetch(keyed.base + "/tokenize", { method: "POST", body: "{}" })).status, 401);
    // A plain completion has no one-line stop: it runs until max_tokens.
    const long = good.completions.create({ model: "channel", max_tokens: 2000, temperature: 0.8, prompt: "The history of the harbour" });
    await new Promise((r) => setTimeout(r, 300));
    await assert.rejects(
      good.chat.completions.create({ model: "channel", messages: [{ role: "user", content: "hi" }] }),
      (e) => e.status === 503 && e.error?.type === "server_overloaded");
    await long;
  } finally {
    assert.equal(await keyed.stop(), 0);
  }
});
