// `channel serve`'s Anthropic Messages API (/v1/messages), driven over fetch as Anthropic's
// clients send it (x-api-key, typed content blocks, SSE events): system and messages,
// streaming events, tool_use and tool_result, count_tokens, and errors in Anthropic's shape.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, FACT, QUESTION } from "./server.mjs";

let server;
before(async () => {
  server = await startServer(["--temp", "0", "--api-key", "sekrit"]);
});
after(async () => {
  assert.equal(await server.stop(), 0, "the server exits cleanly on SIGTERM");
});

const headers = { "x-api-key": "sekrit", "anthropic-version": "2023-06-01", "content-type": "application/json" };
const post = (path, body, h = headers) => fetch(server.base + path, { method: "POST", headers: h, body: JSON.stringify(body) });
const lookup = {
  name: "lookup",
  description: "Look a word up in the dictionary.",
  input_schema: { type: "object", properties: { word: { type: "string" } }, required: ["word"] },
};

// The events of an SSE body, in order.
async function events(res) {
  const text = await res.text();
  return text.split("\n\n").filter((b) => b.trim()).map((b) => {
    const type = /^event: (.*)$/m.exec(b)[1];
    const data = JSON.parse(/^data: (.*)$/m.exec(b)[1]);
    assert.equal(data.type, type, "the event line names the data's type");
    return data;
  });
}

test("messages: system and a user turn give a text block", async () => {
  const r = await post("/v1/messages", { model: "channel", max_tokens: 20, system: FACT, messages: [{ role: "user", content: QUESTION }] });
  assert.equal(r.status, 200);
  const m = await r.json();
  assert.equal(m.type, "message");
  assert.equal(m.role, "assistant");
  assert.match(m.id, /^msg_/);
  assert.deepEqual(m.content, [{ type: "text", text: "48213." }]);
  assert.equal(m.stop_reason, "end_turn");
  assert.ok(m.usage.input_tokens > 10 && m.usage.output_tokens > 0);
  // Blocks and a list of system blocks read the same.
  const blocks = await (await post("/v1/messages", {
    model: "channel", max_tokens: 20, system: [{ type: "text", text: FACT }],
    messages: [{ role: "user", content: [{ type: "text", text: QUESTION }] }],
  })).json();
  assert.deepEqual(blocks.content, m.content);
  const cut = await (await post("/v1/messages", { model: "channel", max_tokens: 2, messages: [{ role: "user", content: "Tell me about the harbour." }] })).json();
  assert.equal(cut.stop_reason, "max_tokens");
  const stopped = await (await post("/v1/messages", { model: "channel", max_tokens: 20, system: FACT, stop_sequences: ["21"],
                                                      messages: [{ role: "user", content: QUESTION }] })).json();
  assert.deepEqual(stopped.content, [{ type: "text", text: "48" }]);  // cut before "21"
  assert.equal(stopped.stop_reason, "stop_sequence");
  assert.equal(stopped.stop_sequence, "21");
  const counted = await (await post("/v1/messages/count_tokens", { model: "channel", system: FACT, messages: [{ role: "user", content: QUESTION }] })).json();
  assert.equal(counted.input_tokens, m.usage.input_tokens);
});

test("messages: streamed events add up to the message", async () => {
  const ev = await events(await post("/v1/messages", { model: "channel", max_tokens: 20, stream: true, system: FACT, messages: [{ role: "user", content: QUESTION }] }));
  assert.deepEqual(ev.slice(0, 3).map((e) => e.type), ["message_start", "ping", "content_block_start"]);
  assert.deepEqual(ev.slice(-3).map((e) => e.type), ["content_block_stop", "message_delta", "message_stop"]);
  const text = ev.filter((e) => e.type === "content_block_delta").map((e) => e.delta.text).join("");
  assert.equal(text, "48213.");
  assert.equal(ev.at(-2).delta.stop_reason, "end_turn");
  assert.ok(ev.at(-2).usage.output_tokens > 0);
});

test("messages: tool_use, its tool_result, and tool_choice", async () => {
  const ask = { model: "channel", max_tokens: 40, tools: [lookup], tool_choice: { type: "tool", name: "lookup" },
                messages: [{ role: "user", content: "What does lamp mean?" }] };
  const m = await (await post("/v1/messages", ask)).json();
  assert.equal(m.stop_reason, "tool_use");
  const use = m.content.find((b) => b.type === "tool_use");
  assert.ok(use, JSON.stringify(m.content));
  assert.equal(use.name, "lookup");
  assert.match(use.id, /^toolu_/);
  assert.equal(typeof use.input.word, "string");
  const r2 = await post("/v1/messages", {
    model: "channel", max_tokens: 20, tools: [lookup],
    messages: [ask.messages[0], { role: "assistant", content: m.content },
               { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "A lamp is a device that gives light." }] }],
  });
  assert.equal(r2.status, 200);
  const m2 = await r2.json();
  assert.ok(["end_turn", "max_tokens", "tool_use"].includes(m2.stop_reason));
  assert.ok(m2.usage.input_tokens > m.usage.input_tokens);
  // Streamed, the call is a tool_use block whose input comes as JSON deltas.
  const ev = await events(await post("/v1/messages", { ...ask, stream: true }));
  const start = ev.find((e) => e.type === "content_block_start" && e.content_block.type === "tool_use");
  assert.equal(start.content_block.name, "lookup");
  const json = ev.filter((e) => e.type === "content_block_delta" && e.index === start.index).map((e) => e.delta.partial_json).join("");
  assert.equal(typeof JSON.parse(json).word, "string");
  assert.equal(ev.at(-2).delta.stop_reason, "tool_use");
  // A text reply with tools offered still streams delta by delta.
  const plain = await events(await post("/v1/messages", { model: "channel", max_tokens: 20, stream: true, tools: [lookup], system: FACT,
                                                          messages: [{ role: "user", content: QUESTION }] }));
  const deltas = plain.filter((e) => e.type === "content_block_delta").map((e) => e.delta.text);
  assert.equal(deltas.join(""), "48213.");
  assert.ok(deltas.length > 1, `${deltas.length} delta(s)`);
});

test("models in Anthropic's shape too", async () => {
  const list = await (await fetch(server.base + "/v1/models", { headers })).json();
  assert.equal(list.has_more, false);
  assert.equal(list.data[0].type, "model");
  assert.equal(list.data[0].id, list.first_id);
  assert.equal(typeof list.data[0].display_name, "string");
  const one = await (await fetch(server.base + "/v1/models/" + list.data[0].id, { headers })).json();
  assert.equal(one.type, "model");
});

test("messages: errors in Anthropic's shape", async () => {
  for (const [body, status] of [
    [{ model: "channel", messages: [{ role: "user", content: "hi" }] }, 400],  // max_tokens is required
    [{ model: "channel", max_tokens: 5, messages: [] }, 400],
    [{ model: "channel", max_tokens: 5, messages: [{ role: "system", content: "x" }] }, 400],
    [{ model: "channel", max_tokens: 5, messages: [{ role: "user", content: [{ type: "image", source: {} }] }] }, 400],
    [{ model: "channel", max_tokens: 5, messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "nope", content: "x" }] }] }, 400],
    [{ model: "nope", max_tokens: 5, messages: [{ role: "user", content: "hi" }] }, 404],
  ]) {
    const r = await post("/v1/messages", body);
    assert.equal(r.status, status, JSON.stringify(body));
    const e = await r.json();
    assert.equal(e.type, "error");
    assert.equal(typeof e.error.message, "string");
    assert.equal(e.error.type, status === 404 ? "not_found_error" : "invalid_request_error");
  }
  const unauthorized = await post("/v1/messages", { model: "channel", max_tokens: 5, messages: [{ role: "user", content: "hi" }] },
                                  { "x-api-key": "wrong", "content-type": "application/json" });
  assert.equal(unauthorized.status, 401);
  assert.equal((await unauthorized.json()).error.type, "authentication_error");
});

test("messages: a client that disconnects mid-stream leaves the server serving", async () => {
  const controller = new AbortController();
  const res = await fetch(server.base + "/v1/messages", {
    method: "POST", headers, signal: controller.signal,
    body: JSON.stringify({ model: "channel", max_tokens: 400, temperature: 0.8, stream: true, messages: [{ role: "user", content: "Tell me a long story." }] }),
  });
  const reader = res.body.getReader();
  let n = 0;
  try {
    while (n < 5) { const { done } = await reader.read(); if (done) break; n++; }
    controller.abort();
  } catch (e) {
    // aborted: the connection is gone
  }
  assert.ok(n >= 1);
  const m = await (await post("/v1/messages", { model: "channel", max_tokens: 20, system: FACT, messages: [{ role: "user", content: QUESTION }] })).json();
  assert.deepEqual(m.content, [{ type: "text", text: "48213." }]);
});
