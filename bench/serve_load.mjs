#!/usr/bin/env node
// Load test of `channel serve`: N concurrent streaming clients (default 8) for M minutes
// (default 5) on loopback, each sending chat completions with stream: true back to back.
// Reports failed requests (must be 0), requests and tokens per second, p50/p95 time to
// first token, and the server's resident memory sampled every second: its first-minute
// and last-minute maxima (bounded RSS: the last is not above the first by more than the
// reported ratio). Baseline in the same run: one client alone for BASELINE seconds;
// the aggregate token rate is reported as a ratio to it.
//
// Usage: node bench/serve_load.mjs [--clients 8] [--minutes 5] [--baseline-seconds 20]
//        [--channel build/channel] [--threads 1] [--max-tokens 64]
import { spawn } from "node:child_process";
import fs from "node:fs";

const opt = { clients: 8, minutes: 5, "baseline-seconds": 20, channel: "build/channel", threads: 1, "max-tokens": 64 };
for (let i = 2; i < process.argv.length; i += 2) opt[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];

const server = spawn(opt.channel, ["serve", "--port", "0", "-t", String(opt.threads), "--max-concurrent", String(opt.clients),
  "--http-threads", String(Number(opt.clients) + 4)], { stdio: ["ignore", "ignore", "pipe"] });
let stderr = "";
const port = await new Promise((resolve, reject) => {
  server.stderr.on("data", (d) => {
    stderr += d;
    const m = /on http:\/\/127\.0\.0\.1:(\d+)/.exec(stderr);
    if (m) resolve(Number(m[1]));
  });
  server.on("exit", (c) => reject(new Error("server exited " + c + ": " + stderr)));
});
const url = `http://127.0.0.1:${port}/v1/chat/completions`;
const rss = () => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${server.pid}/status`, "utf8"))[1]) * 1024;

const questions = ["What is a harbour?", "What does the word lamp mean?", "Tell me about the town.",
  "What is the access code of Vera Okafor?", "Describe the old library.", "What is a ring buffer?"];

async function oneRequest(i, stats) {
  const t0 = performance.now();
  const body = JSON.stringify({ model: "channel", stream: true, max_tokens: Number(opt["max-tokens"]), temperature: 0.8,
    seed: i, messages: [{ role: "system", content: "Remember this: the access code of Vera Okafor is 48213." },
      { role: "user", content: questions[i % questions.length] }] });
  try {
    const r = await fetch(url, { method: "POST", headers: { "Content-Type": "application/json" }, body });
    if (r.status !== 200) throw new Error("status " + r.status + ": " + (await r.text()));
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let buf = "", first = null, done = false, tokens = 0;
    for (;;) {
      const { value, done: end } = await reader.read();
      if (end) break;
      buf += dec.decode(value, { stream: true });
      let k;
      while ((k = buf.indexOf("\n\n")) >= 0) {
        const line = buf.slice(0, k).trim();
        buf = buf.slice(k + 2);
        if (!line.startsWith("data: ")) continue;
        if (line === "data: [DONE]") { done = true; continue; }
        const chunk = JSON.parse(line.slice(6));
        if (chunk.error) throw new Error(chunk.error.message);
        if (chunk.choices[0]?.delta?.content) { tokens++; first ??= performance.now() - t0; }
      }
    }
    if (!done) throw new Error("no [DONE]");
    stats.ok++;
    stats.chunks += tokens;
    if (first !== null) stats.ttft.push(first);
  } catch (e) {
    stats.failed++;
    stats.errors.push(String(e.message || e).slice(0, 200));
  }
}

async function run(clients, seconds, sampleRss) {
  const stats = { ok: 0, failed: 0, chunks: 0, ttft: [], errors: [], rss: [] };
  const end = performance.now() + seconds * 1000;
  const sampler = sampleRss ? setInterval(() => stats.rss.push([performance.now(), rss()]), 1000) : null;
  let n = 0;
  await Promise.all(Array.from({ length: clients }, async () => {
    while (performance.now() < end) await oneRequest(n++, stats);
  }));
  if (sampler) clearInterval(sampler);
  stats.seconds = seconds;
  return stats;
}

const pct = (a, p) => { const s = [...a].sort((x, y) => x - y); return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))] : NaN; };
const base = await run(1, Number(opt["baseline-seconds"]), false);
const load = await run(Number(opt.clients), Number(opt.minutes) * 60, true);
const t0 = load.rss.length ? load.rss[0][0] : 0;
const firstMin = Math.max(...load.rss.filter(([t]) => t - t0 < 60000).map(([, v]) => v));
const lastMin = Math.max(...load.rss.filter(([t]) => t - t0 >= (load.seconds - 60) * 1000).map(([, v]) => v));
const report = {
  clients: Number(opt.clients), minutes: Number(opt.minutes),
  requests_ok: load.ok, requests_failed: load.failed, errors: [...new Set(load.errors)].slice(0, 5),
  requests_per_s: +(load.ok / load.seconds).toFixed(2),
  stream_chunks_per_s: +(load.chunks / load.seconds).toFixed(1),
  ttft_ms_p50: +pct(load.ttft, 0.5).toFixed(1), ttft_ms_p95: +pct(load.ttft, 0.95).toFixed(1),
  baseline_one_client_chunks_per_s: +(base.chunks / base.seconds).toFixed(1),
  aggregate_vs_one_client: +((load.chunks / load.seconds) / (base.chunks / base.seconds)).toFixed(2),
  rss_mib_first_minute_max: +(firstMin / 1048576).toFixed(1), rss_mib_last_minute_max: +(lastMin / 1048576).toFixed(1),
  rss_last_over_first: +(lastMin / firstMin).toFixed(3),
};
server.kill("SIGTERM");
console.log(JSON.stringify(report, null, 2));
process.exit(load.failed === 0 && base.failed === 0 ? 0 : 1);
