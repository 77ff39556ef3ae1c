"use strict";
// The dashboard's page. Every string from the server is inserted as text
// (text nodes, textContent), never as markup: tool names, arguments, file
// names and diffs come from servers and workloads.

const state = { csrf: "", role: "", page: "", before: 0, detail: null };

// The session's key comes once, in the fragment of the page a login
// sends the browser to (#key=...), and is kept in this origin's storage:
// the session cookie reaches every port of the host, the key only this
// page, which sends it with every request as X-CSRF-Token, never in an
// address (which history, logs and Referer keep): the event stream and
// the patch download are fetches, not an EventSource and a link. A key
// in the fragment is kept only once the gateway
// takes it (start): any page can send the browser here with a #key= of
// its own, which must not replace a working one.
const keyItem = "mcpbox-ui-key";
let offered = "";
if (location.hash.startsWith("#key=")) {
  offered = decodeURIComponent(location.hash.slice(5));
  history.replaceState(null, "", "/ui/#approvals");
}
state.csrf = localStorage.getItem(keyItem) || "";

// visible writes the characters that render as nothing or reorder the
// text around them (controls but tab and newline, format characters such
// as bidi overrides, zero-width spaces and tag characters, line and
// paragraph separators) as \u{XXXX}, as the scanner writes them (mcpbox
// approvals and the elicitation form escape them too): an argument
// "report\u{202E}fdp.sh" must not read as "report"hs.pdf" to the approver.
const invisible = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu;
function visible(s) {
  return s.replace(invisible, (c) => (c === "\n" || c === "\t" ? c : "\\u{" + c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0") + "}"));
}

// el builds an element; string and number children become text nodes,
// with visible() applied.
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "onclick") e.addEventListener("click", v);
    else if (k === "class") e.className = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids.flat()) {
    if (k === undefined || k === null) continue;
    e.append(typeof k === "string" || typeof k === "number" ? document.createTextNode(visible(String(k))) : k);
  }
  return e;
}

function table(headers, rows) {
  return el("table", {}, el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))), el("tbody", {}, rows));
}

function status(msg) {
  const s = document.getElementById("status");
  s.textContent = msg;
  clearTimeout(status.t);
  status.t = setTimeout(() => { s.textContent = ""; }, 4000);
}

async function api(path, opts) {
  const o = Object.assign({ credentials: "same-origin" }, opts);
  o.headers = Object.assign({ "X-CSRF-Token": state.csrf }, o.headers);
  const r = await fetch("/ui/api/" + path, o);
  if (r.status === 401) {
    // A login in another tab replaced the session and the stored key:
    // take the new key once before giving up.
    const stored = localStorage.getItem(keyItem) || "";
    if (stored && stored !== state.csrf && !opts?.retried) {
      state.csrf = stored;
      return api(path, Object.assign({}, opts, { retried: true }));
    }
    location.href = "/ui/login";
    throw new Error("not logged in");
  }
  const ct = r.headers.get("Content-Type") || "";
  const body = ct.startsWith("application/json") ? await r.json() : await r.text();
  if (!r.ok) throw new Error((body && body.error) || r.statusText);
  return body;
}

function post(path, body) {
  return api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body || {}) });
}

function act(path, body, done) {
  return async (ev) => {
    if (ev.target) ev.target.disabled = true;
    try { await post(path, body); status("done"); } catch (e) { status(e.message); }
    if (done) done(); else render();
  };
}

const admin = () => state.role === "admin";
const when = (t) => (t && !t.startsWith("0001") ? new Date(t).toLocaleString() : "");
const bytes = (n) => (!n ? "" : n > 1 << 20 ? (n / (1 << 20)).toFixed(1) + " MiB" : n > 1024 ? (n / 1024).toFixed(1) + " KiB" : n + " B");
const toolOf = (r) => r.name || (r.server && r.tool ? r.server + "." + r.tool : r.tool || "");

function pretty(raw) {
  if (raw === undefined || raw === null) return "";
  try { return JSON.stringify(raw, null, 2); } catch (e) { return String(raw); }
}

// ---- approvals
async function approvals(main) {
  const d = await api("approvals");
  document.getElementById("pending-count").textContent = d.pending.length ? String(d.pending.length) : "";
  main.append(el("h2", {}, "Pending approvals"));
  if (!d.pending.length) main.append(el("p", { class: "muted", id: "no-pending" }, "Nothing is waiting for you."));
  for (const p of d.pending) {
    const trust = p.kind === "trust";
    const buttons = admin() ? el("div", { class: "actions" },
      el("button", { class: "primary approve-once", onclick: act("approvals/" + encodeURIComponent(p.id), { decision: "allow", scope: "once" }) }, trust ? "Trust this definition" : "Approve once"),
      p.kind === "trust" ? null : el("button", { class: "approve-session", onclick: act("approvals/" + encodeURIComponent(p.id), { decision: "allow", scope: "session" }) }, "For the session"),
      p.kind === "trust" ? null : el("button", { class: "approve-always", onclick: act("approvals/" + encodeURIComponent(p.id), { decision: "allow", scope: "always" }) }, "Always"),
      el("button", { class: "danger deny", onclick: act("approvals/" + encodeURIComponent(p.id), { decision: "deny" }) }, "Deny")) : el("p", { class: "muted" }, "viewer: read only");
    main.append(el("div", { class: "card approval", "data-id": p.id },
      el("h3", { class: "approval-tool" }, (p.kind === "trust" ? "Trust a changed definition: " : "") + toolOf(p)),
      el("p", { class: "muted" }, "client ", el("b", {}, p.client || "(local)"), p.rule ? " · rule " + p.rule : "", p.sandbox ? " · sandbox " + p.sandbox : "", " · asked ", when(p.time),
        p.where ? el("span", { class: "approval-where" }, " · waits at another mcpbox serve: " + p.where) : null),
      p.pin || p.annotations ? el("p", { class: "muted approval-tool-info" }, p.pin ? "pin: " + p.pin : "",
        p.annotations ? " · annotations (the server's claims): " + Object.entries(p.annotations).map(([k, v]) => k + "=" + JSON.stringify(v)).join(", ") : "") : null,
      el("pre", { class: "approval-args" }, pretty(p.arguments) || p.summary || ""),
      // A rule's when: held this call for its arguments; a wider grant is
      // for the tool, whatever the arguments (approval.WiderNote).
      p.conditional && !trust ? el("p", { class: "error approval-conditional" },
        "\u201cFor the session\u201d and \u201cAlways\u201d let every later call of " + toolOf(p) + " by this client that needs approval run without asking, whatever its arguments: the condition (when:) of the rule held back this call for its arguments only.") : null,
      trust && p.change ? changeView(p.change) : null,
      trust && !p.change ? el("p", { class: "muted" }, "No change of this definition is pending any more.") : null,
      buttons));
  }
  main.append(el("h2", {}, "Remembered decisions"));
  main.append(table(["client", "tool", "scope", "by", "since", ""], d.remembered.map((m) =>
    el("tr", { "data-id": m.id }, el("td", {}, m.client), el("td", {}, toolOf(m)), el("td", {}, m.scope), el("td", {}, m.by), el("td", {}, when(m.time)),
      el("td", {}, admin() ? el("button", { class: "danger revoke", onclick: act("approvals/remembered/" + encodeURIComponent(m.id) + "/revoke") }, "Revoke") : null)))));
}

// ---- calls
const filterKeys = ["server", "tool", "client", "decision", "outcome", "event"];
const filters = {};

async function calls(main) {
  if (state.detail) return callDetail(main, state.detail);
  const form = el("form", { class: "filters", id: "call-filters" },
    filterKeys.map((k) => el("input", { name: k, placeholder: k === "event" ? "event (call; all)" : k, value: filters[k] || "" })),
    el("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    for (const k of filterKeys) filters[k] = form.elements[k].value.trim();
    state.before = 0;
    render();
  });
  const q = new URLSearchParams();
  for (const k of filterKeys) if (filters[k]) q.set(k, filters[k]);
  if (state.before) q.set("before", state.before);
  q.set("limit", "100");
  const d = await api("calls?" + q);
  main.append(el("h2", {}, "Calls"), form);
  main.append(table(["#", "time", "event", "client", "tool", "decision", "outcome", "ms", "error"], d.records.map((r) => {
    const bad = r.decision === "deny" || r.outcome === "denied" || r.outcome === "blocked";
    return el("tr", { class: "clickable" + (bad ? " refused" : ""), "data-seq": r.seq, onclick: () => { state.detail = r.seq; render(); } },
      el("td", {}, r.seq), el("td", {}, when(r.time)), el("td", {}, r.event), el("td", {}, r.client || ""),
      el("td", { class: "call-tool" }, toolOf(r)), el("td", {}, r.decision || ""), el("td", {}, r.outcome || ""),
      el("td", {}, r.duration_ms ? r.duration_ms.toFixed(1) : ""), el("td", {}, r.error || ""));
  })));
  const nav = el("div", { class: "actions" });
  if (state.before) nav.append(el("button", { onclick: () => { state.before = 0; render(); } }, "Newest"));
  if (d.records.length === 100) nav.append(el("button", { onclick: () => { state.before = d.records[d.records.length - 1].seq; render(); } }, "Older"));
  main.append(nav);
}

async function callDetail(main, seq) {
  const { record: r } = await api("calls/" + encodeURIComponent(seq));
  main.append(el("button", { onclick: () => { state.detail = null; render(); } }, "← back to the calls"),
    el("h2", {}, "Record #" + r.seq + ": " + r.event + " " + toolOf(r)));
  main.append(el("h3", {}, "Files written"), table(["path", "size", "sha256"], (r.files || []).map((f) =>
    el("tr", {}, el("td", {}, f.path), el("td", {}, bytes(f.size)), el("td", {}, f.sha256 || "")))));
  main.append(el("h3", {}, "Hosts contacted"), table(["host", "port", "decision", "up", "down"], (r.domains || []).map((h) =>
    el("tr", { class: h.decision && h.decision !== "allow" ? "refused" : "" }, el("td", {}, h.host), el("td", {}, h.port || ""),
      el("td", {}, h.decision || ""), el("td", {}, bytes(h.bytes_up)), el("td", {}, bytes(h.bytes_down))))));
  main.append(el("h3", {}, "Full record"), el("div", { class: "card" }, el("pre", { id: "record-json" }, pretty(r))));
}

// ---- sandboxes
async function sandboxes(main) {
  const d = await api("sandboxes");
  const now = new Date(d.now);
  main.append(el("h2", {}, "Sandboxes"));
  main.append(table(["id", "server", "client", "state", "memory", "pids", "cpu s", "calls now / last call", "restarts", "output", ""], d.sandboxes.map((s) => {
    let last = s.last_call ? Math.round((now - new Date(s.last_call)) / 1000) + " s ago" : "";
    // The calls in hand: the audit shows a call only once it has ended.
    if ((s.calls || []).length) last = s.calls.map((c) => c.tool + " " + (c.waiting ? "awaits " + c.waiting : "running") + " " +
      Math.max(0, Math.round((now - new Date(c.started)) / 1000)) + " s").join("; ");
    const id = encodeURIComponent(s.id);
    // A remote server's row is the gateway's connection to it: no sandbox, nothing to control.
    const ctl = admin() && !s.remote;
    return el("tr", { "data-id": s.id }, el("td", {}, s.remote ? "remote " + s.remote : s.id), el("td", {}, s.server), el("td", {}, (s.client || "") + (s.era ? " (" + s.era + ")" : "")),
      // Why it ended, as ps shows it under EXIT.
      el("td", { class: "state" + (s.state === "failed" ? " refused" : "") }, s.state + (s.exit || s.reason ? ": " + (s.exit || s.reason) : "")),
      el("td", {}, bytes(s.memory_bytes)), el("td", {}, s.pids || ""),
      el("td", {}, s.cpu_seconds ? s.cpu_seconds.toFixed(2) : ""), el("td", { class: (s.calls || []).length ? "calls-now" : "" }, last), el("td", {}, s.restarts || ""),
      el("td", { class: "path" }, s.output || ""),
      el("td", {}, el("div", { class: "actions" },
        ctl && s.state === "running" ? el("button", { class: "pause", onclick: act("sandboxes/" + id + "/pause") }, "Pause") : null,
        ctl && s.state === "paused" ? el("button", { class: "resume", onclick: act("sandboxes/" + id + "/resume") }, "Resume") : null,
        ctl && s.state !== "stopped" ? el("button", { class: "danger stop", onclick: act("sandboxes/" + id + "/stop") }, "Stop") : null,
        ctl ? el("button", { class: "diff-view", onclick: () => showDiff(main, s.id) }, "Diff") : null,
        ctl ? el("button", { class: "patch", onclick: () => downloadPatch(s.id) }, "Patch") : null)));
  })));
}

// downloadPatch saves a sandbox's diff as a file: fetched with the key in
// its header, then handed to the browser as a blob.
async function downloadPatch(id) {
  const r = await fetch("/ui/api/sandboxes/" + encodeURIComponent(id) + "/diff?download=1", { credentials: "same-origin", headers: { "X-CSRF-Token": state.csrf } });
  if (!r.ok) { status("patch: " + ((await r.text()) || r.statusText)); return; }
  const name = (/filename="([^"]+)"/.exec(r.headers.get("Content-Disposition") || "") || [])[1] || "sandbox.patch";
  const a = el("a", { href: URL.createObjectURL(await r.blob()), download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 60000);
}

async function showDiff(main, id) {
  let text;
  try { text = await api("sandboxes/" + encodeURIComponent(id) + "/diff"); } catch (e) { status(e.message); return; }
  const pre = el("pre", { class: "diff", id: "workspace-diff" });
  for (const line of String(text).split("\n")) {
    const cls = line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff --git ") ? "hdr" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : line.startsWith("@@") ? "hunk" : "";
    pre.append(el("span", { class: cls }, line + "\n"));
  }
  main.append(el("h3", {}, "Workspace diff of " + id), el("div", { class: "card" }, text ? pre : el("p", { class: "muted" }, "No changes.")));
}

// ---- egress
async function egress(main) {
  const d = await api("egress");
  main.append(el("h2", {}, "Egress"), el("p", { class: "muted" }, "The last " + d.window + " connections, refused ones first."));
  if (!d.servers.length) main.append(el("p", { class: "muted" }, "No connections yet."));
  for (const s of d.servers) {
    main.append(el("h3", {}, s.server + " — " + s.allowed + " allowed, " + s.refused + " refused"));
    main.append(table(["host", "port", "decision", "connections", "up", "down", "last", "reason"], s.hosts.map((h) =>
      el("tr", { class: h.decision === "allow" ? "" : "refused egress-refused" }, el("td", {}, h.host), el("td", {}, h.port || ""),
        el("td", {}, h.decision), el("td", {}, h.count), el("td", {}, bytes(h.bytes_up)), el("td", {}, bytes(h.bytes_down)),
        el("td", {}, when(h.last)), el("td", {}, h.reason || "")))));
  }
}

// ---- integrity
function sideBySide(diff) {
  const grid = el("div", { class: "sbs pin-diff" });
  const cell = (cls, text) => el("div", { class: cls }, text);
  let dels = [], adds = [];
  const flush = () => {
    for (let i = 0; i < Math.max(dels.length, adds.length); i++) {
      grid.append(cell(i < dels.length ? "del" : "", i < dels.length ? dels[i] : ""), cell(i < adds.length ? "add" : "", i < adds.length ? adds[i] : ""));
    }
    dels = []; adds = [];
  };
  for (const line of (diff || "").split("\n")) {
    if (line.startsWith("---")) { grid.append(cell("hdr", line.slice(4))); continue; }
    if (line.startsWith("+++")) { grid.append(cell("hdr", line.slice(4))); continue; }
    if (line.startsWith("@@")) { flush(); grid.append(cell("hdr", line), cell("hdr", line)); continue; }
    if (line.startsWith("-")) { dels.push(line.slice(1)); continue; }
    if (line.startsWith("+")) { adds.push(line.slice(1)); continue; }
    flush();
    if (line !== "") grid.append(cell("", line.slice(1)), cell("", line.slice(1)));
  }
  flush();
  return grid;
}

// changeView is a pending definition change: the scanner's findings in
// it (and whether scan: block keeps it hidden), then its diff.
function changeView(c) {
  return el("div", { class: "change" },
    (c.findings || []).length ? el("ul", { class: "findings error" }, c.findings.map((f) => el("li", {}, "scanner: " + f))) : null,
    c.blocked ? el("p", { class: "error blocked" }, "The server has scan: block: this definition stays hidden even if trusted.") : null,
    sideBySide(c.diff));
}

async function integrity(main) {
  const d = await api("integrity");
  main.append(el("h2", {}, "Changed definitions"));
  if (!d.changes.length) main.append(el("p", { class: "muted", id: "no-changes" }, "Every definition matches its pin."));
  for (const c of d.changes) {
    main.append(el("div", { class: "card pin-change", "data-key": c.key },
      el("h3", { class: "pin-name" }, c.server + " · " + c.kind + " · " + (c.name || c.key) + " — " + c.status),
      changeView(c),
      admin() && c.new_hash ? el("div", { class: "actions" }, el("button", { class: "primary trust", onclick: act("integrity/trust", { server: c.server, key: c.kind + ":" + c.key, hashes: [c.new_hash] }) }, "Trust this definition")) : null));
  }
  if (d.pinned) {
    main.append(el("h2", {}, "Pinned definitions"));
    if (!d.pinned.length) main.append(el("p", { class: "muted", id: "no-pins" }, "Nothing is pinned yet: serve pins a server's definitions on first use; mcpbox pin pins them before."));
    else main.append(el("p", { class: "muted" }, "In " + d.lock + ", as it is now: pinned on first use, by mcpbox pin or by a trust."),
      table(["server", "server version", "tools", "prompts", "templates", "instructions"], d.pinned.map((p) =>
        el("tr", { class: "pinned", "data-server": p.server }, el("td", {}, p.server), el("td", {}, [p.info.name, p.info.version].filter(Boolean).join(" ")),
          el("td", {}, p.tools), el("td", {}, p.prompts), el("td", {}, p.templates), el("td", {}, p.instructions)))));
  }
  main.append(el("h2", {}, "Scanner findings"), table(["time", "server", "definition", "findings", "action"], d.findings.map((r) =>
    el("tr", {}, el("td", {}, when(r.time)), el("td", {}, r.server), el("td", {}, toolOf(r)), el("td", {}, (r.findings || []).join(", ")), el("td", {}, r.decision || "")))));
  // Changes (changed, new, removed, ...) are listed; definitions pinned
  // on first use, unchanged since, are folded into a count per server.
  const pinRow = (r) => el("tr", {}, el("td", {}, when(r.time)), el("td", {}, r.server), el("td", {}, toolOf(r)), el("td", {}, r.decision || ""),
    el("td", {}, Object.entries(r.detail || {}).map(([k, v]) => k + "=" + v).join(" ")));
  const pinHead = ["time", "server", "definition", "event", "detail"];
  const changed = d.pins.filter((r) => r.decision !== "pinned");
  const firstUse = new Map();
  for (const r of d.pins) {
    if (r.decision !== "pinned") continue;
    if (!firstUse.has(r.server)) firstUse.set(r.server, []);
    firstUse.get(r.server).push(r);
  }
  main.append(el("h2", {}, "Pin events"), changed.length ? table(pinHead, changed.map(pinRow)) : el("p", { class: "muted", id: "no-pin-changes" }, "No pin changes."));
  for (const [server, rs] of firstUse) {
    main.append(el("details", { class: "first-use-pins", "data-server": server, "data-fold": "first-use:" + server },
      el("summary", {}, server + ": " + rs.length + (rs.length === 1 ? " definition" : " definitions") + " pinned on first use"),
      table(pinHead, rs.map(pinRow))));
  }
}

// ---- servers
async function servers(main) {
  const d = await api("servers");
  main.append(el("h2", {}, "Servers"), table(["server", "transport", "placement", "runs", "pinned", "sandboxes", "restarts", "egress"], d.servers.map((s) =>
    el("tr", {}, el("td", {}, s.name), el("td", {}, s.transport || ""), el("td", {}, s.placement || ""),
      el("td", { class: "runs" }, [s.package || s.url, ...(s.command || [])].filter(Boolean).join(" ")),
      el("td", { class: "pinned path" }, s.pinned || ""),
      el("td", s.status ? { class: "error" } : {}, s.status ? s.status + ": " + (s.error || "") : s.sandboxes.map((x) => (x.id || "connection") + " " + x.state).join(", ")),
      el("td", {}, s.restarts), el("td", {}, (s.egress || []).join(", "))))));
}

const pages = { approvals, calls, sandboxes, egress, integrity, servers };

async function render() {
  const page = (location.hash || "#approvals").slice(1);
  const fresh = el("main", { id: "main", "data-page": page });
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.getAttribute("href") === "#" + page);
  try {
    await (pages[page] || approvals)(fresh);
  } catch (e) {
    fresh.append(el("p", { class: "error" }, e.message));
  }
  // A live refresh that changed nothing keeps the page as it is: a node
  // replaced between a user's mouse-down and mouse-up swallows the click.
  // A fold (details[data-fold]) keeps the state the user left it in.
  const current = document.getElementById("main");
  if (current.dataset.page === page) {
    for (const d of current.querySelectorAll("details[data-fold]")) {
      const f = fresh.querySelector('details[data-fold="' + CSS.escape(d.dataset.fold) + '"]');
      if (f) f.open = d.open;
    }
  }
  if (current.dataset.page !== page || current.innerHTML !== fresh.innerHTML) current.replaceWith(fresh);
  state.page = page;
}

let pendingRender = 0;
function soon() {
  clearTimeout(pendingRender);
  pendingRender = setTimeout(() => { if (!state.detail) render(); }, 250);
}

// live follows the server-sent events of /ui/api/events, read from a
// fetch (which can send the key as a header) and reconnecting after a
// pause when the stream ends.
async function live() {
  const ind = document.getElementById("live");
  for (;;) {
    const key = state.csrf;
    try {
      const r = await fetch("/ui/api/events", { credentials: "same-origin", headers: { "X-CSRF-Token": key, Accept: "text/event-stream" } });
      if (r.ok && r.body) {
        ind.textContent = "live"; ind.classList.add("on");
        await readEvents(r.body.getReader(), onEvent);
      }
    } catch (e) { /* the gateway went away: try again below */ }
    ind.textContent = "reconnecting"; ind.classList.remove("on");
    // The key changed (a login in another tab): reconnect with the new one.
    const stored = localStorage.getItem(keyItem) || "";
    if (stored && stored !== key) state.csrf = stored;
    await new Promise((done) => setTimeout(done, 3000));
  }
}

// readEvents calls on(name) for each event of an event stream until it
// ends; comments (keep-alives) and data are skipped: every event means
// "look again".
async function readEvents(reader, on) {
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const ev = block.split("\n").find((l) => l.startsWith("event: "));
      if (ev) on(ev.slice(7));
    }
  }
}

function onEvent(name) {
  if (name === "approvals") {
    api("approvals").then((d) => { document.getElementById("pending-count").textContent = d.pending.length ? String(d.pending.length) : ""; });
    if (state.page === "approvals") soon();
  } else if (name === "record" && state.page !== "approvals") soon();
}

// keyWorks says whether the gateway takes key for this browser's session.
async function keyWorks(key) {
  const r = await fetch("/ui/api/session", { credentials: "same-origin", headers: { "X-CSRF-Token": key } });
  return r.ok;
}

async function start() {
  if (offered && offered !== state.csrf && await keyWorks(offered)) {
    localStorage.setItem(keyItem, offered);
    state.csrf = offered;
  }
  if (!state.csrf) { location.href = "/ui/login"; return; }
  const s = await api("session");
  state.role = s.role;
  document.getElementById("who").textContent = s.role;
  document.getElementById("logout").addEventListener("click", async () => {
    try { await post("logout"); } catch (e) { /* gone already */ }
    localStorage.removeItem(keyItem);
    location.href = "/ui/login";
  });
  window.addEventListener("hashchange", () => { state.detail = null; state.before = 0; render(); });
  await render();
  live();
  // Memory, CPU and idle times change without audit records.
  setInterval(() => { if (state.page === "sandboxes") soon(); }, 5000);
}

start();
