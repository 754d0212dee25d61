// The web view's page: the conversation of the "web" session on the left; on the right a
// live picture of its slot geometry (anchors, window, recall slots, the spans by type and
// what the last turn evicted) and of its memory store (episodes, what was recalled and
// why). Everything is drawn from /v1/events, so tokens and evictions show as they happen.
#include "server/web_page.h"

namespace channel::server {

const std::string& web_page_html() {
  static const std::string page = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Channel</title>
<style>
  body { font: 14px/1.45 system-ui, sans-serif; margin: 0; display: flex; height: 100vh; color: #222; }
  #left { flex: 3; display: flex; flex-direction: column; border-right: 1px solid #ddd; min-width: 0; }
  #right { flex: 2; padding: 12px 16px; overflow-y: auto; background: #fafafa; }
  header { padding: 10px 16px; border-bottom: 1px solid #ddd; font-weight: 600; }
  #conversation { flex: 1; overflow-y: auto; padding: 12px 16px; }
  .msg { margin: 8px 0; padding: 8px 12px; border-radius: 8px; white-space: pre-wrap; max-width: 85%; }
  .msg.user { background: #e3efff; margin-left: auto; }
  .msg.assistant { background: #f0f0f0; }
  .msg.tool { background: #fff4d6; font-family: monospace; }
  .msg.streaming::after { content: "▍"; color: #888; }
  form { display: flex; gap: 8px; padding: 10px 16px; border-top: 1px solid #ddd; }
  #input { flex: 1; min-height: 44px; font: inherit; padding: 6px; }
  h2 { font-size: 13px; text-transform: uppercase; color: #666; margin: 16px 0 6px; }
  #tiers { display: flex; height: 26px; border: 1px solid #bbb; border-radius: 4px; overflow: hidden; }
  #tiers div { display: flex; align-items: center; justify-content: center; font-size: 11px; color: #fff; overflow: hidden; white-space: nowrap; }
  #tier-anchors { background: #7b4bb7; } #tier-window { background: #3b7dd8; } #tier-free { background: #ccc; color: #555 !important; } #tier-recall { background: #2f9e6e; }
  #spans { display: flex; flex-wrap: wrap; gap: 2px; margin-top: 8px; }
  .span { height: 14px; min-width: 3px; border-radius: 2px; }
  .span[data-type=system] { background: #7b4bb7; } .span[data-type=user] { background: #3b7dd8; }
  .span[data-type=response_sentence] { background: #8fb4ea; } .span[data-type=tool_call] { background: #e08a2e; }
  .span[data-type=tool_result] { background: #f2c14e; } .span[data-type=turn_end] { background: #555; }
  .span[data-type=thought] { background: #c45ca8; }
  .span.evicted { background: #e55 !important; opacity: .6; }
  dl { display: grid; grid-template-columns: auto 1fr; gap: 2px 10px; margin: 8px 0; }
  dt { color: #666; } dd { margin: 0; font-variant-numeric: tabular-nums; }
  ul { margin: 4px 0; padding-left: 18px; } li { margin: 2px 0; }
  #status { font-size: 12px; color: #666; font-weight: normal; margin-left: 8px; }
</style>
</head>
<body>
<div id="left">
  <header>Channel <span id="status">connecting…</span></header>
  <div id="conversation"></div>
  <form id="composer"><textarea id="input" placeholder="Message (Enter sends, Shift+Enter for a new line)"></textarea><button id="send" type="submit">Send</button></form>
</div>
<div id="right">
  <h2>Slot geometry</h2>
  <div id="tiers"><div id="tier-anchors"></div><div id="tier-window"></div><div id="tier-free"></div><div id="tier-recall"></div></div>
  <dl>
    <dt>clock</dt><dd id="clock">0</dd>
    <dt>slots</dt><dd id="slots">–</dd>
    <dt>anchors</dt><dd id="anchors">–</dd>
    <dt>window</dt><dd id="window-live">–</dd>
    <dt>recall slots</dt><dd id="recall">–</dd>
    <dt>spans evicted</dt><dd id="evicted-count">0</dd>
    <dt>last eviction</dt><dd id="last-evicted">none</dd>
  </dl>
  <h2>Spans (anchors, then the window, oldest first)</h2>
  <div id="spans"></div>
  <h2>Memory</h2>
  <div id="memory-status">no memory attached</div>
  <ul id="episodes"></ul>
  <h2>Recalled for the last message</h2>
  <ul id="recalls"><li>nothing</li></ul>
</div>
<script>
const SESSION = "web";
const params = new URLSearchParams(location.search);
const key = params.get("key") || "";
const headers = {"Content-Type": "application/json"};
if (key) headers["Authorization"] = "Bearer " + key;
const $ = (id) => document.getElementById(id);
let streaming = null;

function addMessage(role, text) {
  const div = document.createElement("div");
  div.className = "msg " + role;
  div.textContent = text;
  $("conversation").appendChild(div);
  $("conversation").scrollTop = 1e9;
  return div;
}

function renderState(s) {
  if (s.name !== SESSION) return;
  const t = s.tiers, total = t.slots;
  const pct = (n) => (100 * n / total) + "%";
  $("tier-anchors").style.width = pct(t.anchors); $("tier-anchors").textContent = t.anchors ? "anchors" : "";
  $("tier-window").style.width = pct(t.window.live); $("tier-window").textContent = t.window.live ? "window" : "";
  $("tier-free").style.width = pct(total - t.anchors - t.window.live - t.recall.slots);
  $("tier-recall").style.width = pct(t.recall.slots); $("tier-recall").textContent = t.recall.slots ? "recall" : "";
  $("clock").textContent = s.clock;
  $("slots").textContent = total;
  $("anchors").textContent = t.anchors + " tokens, " + s.anchor_spans.length + " spans";
  $("window-live").textContent = t.window.live + " / " + t.window.capacity + " (oldest clock " + t.window.oldest + ")";
  $("recall").textContent = t.recall.used + " / " + t.recall.slots + " used, " + t.recall.episodes + " episodes";
  $("evicted-count").textContent = s.evicted_spans;
  if (s.last_evicted.length) {
    const a = s.last_evicted[0], b = s.last_evicted[s.last_evicted.length - 1];
    $("last-evicted").textContent = s.last_evicted.length + " spans, clocks " + a.start + "–" + b.end +
      " (" + [...new Set(s.last_evicted.map((e) => e.type))].join(", ") + ")";
  }
  const spans = $("spans");
  spans.textContent = "";
  for (const sp of s.last_evicted.concat(s.anchor_spans, s.window_spans)) {
    const d = document.createElement("div");
    d.className = "span" + (s.last_evicted.includes(sp) ? " evicted" : "");
    d.dataset.type = sp.type;
    d.style.width = Math.max(3, Math.min(60, sp.end - sp.start)) + "px";
    d.title = sp.type + " [" + sp.start + ", " + sp.end + ")";
    spans.appendChild(d);
  }
  const m = s.memory;
  if (m.attached) {
    $("memory-status").textContent = m.episodes_stored + " episodes stored, " + m.recalls + " recalls";
    const eps = $("episodes"); eps.textContent = "";
    for (const e of m.episodes) {
      const li = document.createElement("li");
      li.textContent = "#" + e.id + " (" + e.tokens + " tokens, recalled " + e.recalled + "×): " + e.summary.slice(0, 80);
      eps.appendChild(li);
    }
    const rec = $("recalls"); rec.textContent = "";
    for (const r of m.last_recalls) {
      const li = document.createElement("li");
      li.textContent = "#" + r.episode + " score " + r.score.toFixed(3) + " for “" + r.cue + "”: " + r.summary.slice(0, 60);
      rec.appendChild(li);
    }
    if (!m.last_recalls.length) rec.innerHTML = "<li>nothing</li>";
  }
  if (s.transcript && !$("conversation").children.length) {
    for (const e of s.transcript) addMessage(e.role, e.content);
  }
}

function connect() {
  const es = new EventSource("/v1/events" + (key ? "?key=" + encodeURIComponent(key) : ""));
  es.addEventListener("hello", () => { $("status").textContent = "live"; });
  es.addEventListener("state", (ev) => renderState(JSON.parse(ev.data)));
  es.addEventListener("token", (ev) => {
    const d = JSON.parse(ev.data);
    if (d.session !== SESSION) return;
    if (!streaming) { streaming = addMessage("assistant", ""); streaming.classList.add("streaming"); }
    streaming.textContent += streaming.textContent ? d.text : d.text.replace(/^ +/, "");
    $("conversation").scrollTop = 1e9;
  });
  es.addEventListener("turn", (ev) => {
    const d = JSON.parse(ev.data);
    if (d.session !== SESSION) return;
    if (d.role === "assistant") {
      if (!streaming) streaming = addMessage("assistant", "");
      streaming.classList.remove("streaming");
      streaming.textContent = d.content + (d.tool_calls ? "\n" + d.tool_calls.map((c) => "→ " + c.function.name + " " + c.function.arguments).join("\n") : "");
      streaming.dataset.finish = d.finish_reason;
      streaming = null;
      $("send").disabled = false;
    } else {
      addMessage(d.role, d.content);
    }
  });
  es.onerror = () => { $("status").textContent = "reconnecting…"; };
}

async function ensureSession() {
  let r = await fetch("/v1/sessions/" + SESSION, {headers});
  if (r.ok) return;
  r = await fetch("/v1/sessions", {method: "POST", headers, body: JSON.stringify({name: SESSION, memory: true})});
  if (!r.ok) await fetch("/v1/sessions", {method: "POST", headers, body: JSON.stringify({name: SESSION})});
}

async function send(text) {
  $("send").disabled = true;
  const r = await fetch("/v1/sessions/" + SESSION + "/messages", {method: "POST", headers,
    body: JSON.stringify({messages: [{role: "user", content: text}], max_tokens: 200})});
  if (!r.ok) {
    const e = await r.json().catch(() => ({error: {message: r.statusText}}));
    addMessage("tool", "error: " + e.error.message);
    $("send").disabled = false;
  }
}

$("composer").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("input").value.trim();
  if (!text) return;
  $("input").value = "";
  send(text);
});
$("input").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("composer").requestSubmit(); }
});
ensureSession().then(connect);
</script>
</body>
</html>
)HTML";
  return page;
}

}  // namespace channel::server
