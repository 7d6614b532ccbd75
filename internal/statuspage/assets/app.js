// cozy-aio status page: plain DOM, no build step. Every text from the
// cluster goes through textContent, never innerHTML: tenants write it.
"use strict";

const KINDS = ["GitRepository", "OCIRepository", "ArtifactGenerator", "ExternalArtifact", "Kustomization", "HelmRelease"];
const STATES = ["ready", "progressing", "failed", "suspended"];
const page = { overview: null, route: null, list: null, detail: null, updates: 0, overviewTimer: null };

// h builds an element: h("td", {class: "num"}, "3", child...).
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function refPath(r) { return [r.kind, r.namespace, r.name].map(encodeURIComponent).join("/"); }
function refText(r) { return r.kind + "/" + r.namespace + "/" + r.name; }
function objLink(r) { return h("a", { href: "#/object/" + refPath(r), "data-ref": refText(r) }, refText(r)); }
function stateEl(s) { return h("span", { class: "state state-" + s, "data-state": s }, s); }
function ago(t) {
  if (!t) return "";
  const s = Math.max(0, (Date.now() - new Date(t).getTime()) / 1000);
  return dur(s) + " ago";
}
function dur(s) {
  if (!s) return "0s";
  if (s < 60) return Math.round(s) + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + Math.round(s % 60) + "s";
  return Math.floor(s / 3600) + "h" + Math.floor((s % 3600) / 60) + "m";
}

class Unauthorized extends Error {}

async function api(path, opts) {
  const r = await fetch("api/v1/" + path, Object.assign({ credentials: "same-origin" }, opts || {}));
  if (r.status === 401) throw new Unauthorized((await r.json().catch(() => ({}))).error || "unauthorized");
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

function showLogin(msg) {
  document.getElementById("main").hidden = true;
  document.getElementById("login").hidden = false;
  document.getElementById("login-error").textContent = msg || "";
}

document.getElementById("login-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const token = document.getElementById("token").value.trim();
  try {
    const r = await fetch("api/v1/session", { method: "POST", credentials: "same-origin", headers: { Authorization: "Bearer " + token } });
    const body = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(body.error || r.statusText);
    document.getElementById("login").hidden = true;
    document.getElementById("main").hidden = false;
    start();
  } catch (e) {
    document.getElementById("login-error").textContent = e.message;
  }
});

function setMain(...children) {
  const m = document.getElementById("main");
  m.replaceChildren(...children);
}

// ---- overview ----

function countsTable(kinds) {
  return h("table", { id: "counts" },
    h("thead", {}, h("tr", {}, h("th", {}, "Kind"), STATES.map((s) => h("th", { class: "num" }, s)), h("th", { class: "num" }, "total"))),
    h("tbody", {}, kinds.map((k) => h("tr", { "data-kind": k.kind },
      h("td", {}, h("a", { href: "#/objects?kind=" + k.kind }, k.kind)),
      STATES.map((s) => h("td", { class: "num" }, h("a", { class: "count-link state-" + s, href: "#/objects?kind=" + k.kind + "&state=" + s, "data-count": k.kind + "/" + s }, k[s]))),
      h("td", { class: "num", "data-count": k.kind + "/total" }, k.total)))));
}

function chain(links) {
  // Root cause first, as one reads it: "source failed → … → waiting".
  const out = h("div", { class: "chain" });
  [...links].reverse().forEach((l, i) => {
    if (i > 0) out.append(h("span", { class: "arrow" }, "→"));
    out.append(h("span", { class: "chip", title: l.message || "" }, objLink(l), " ", stateEl(l.state), l.reason ? " " + l.reason : "", l.waiting ? " · " + dur(l.waiting) : ""));
  });
  return out;
}

function renderOverview() {
  const ov = page.overview;
  if (!ov) return;
  const b = ov.bootstrap;
  const boot = h("div", { class: "card", id: "bootstrap" }, h("h2", {}, "Bootstrap"),
    h("dl", { class: "kv" },
      h("dt", {}, "phase"), h("dd", { "data-phase": b.phase || "" }, b.phase ? b.phase + (b.phase === "network" ? " (only the network's units run)" : " (every unit runs)") : "no bootstrap (engine only)"),
      h("dt", {}, "CRDs established"), h("dd", {}, b.kindsWatched + " of " + b.kindsTotal + " kinds watched"),
      b.nodesTotal ? [h("dt", {}, "nodes with a network"), h("dd", {}, b.withNetwork + " of " + b.nodesTotal)] : null,
      h("dt", {}, "running since"), h("dd", {}, ago(ov.started))),
    b.nodes && b.nodes.length ? h("table", {}, h("tbody", {}, b.nodes.slice(0, 50).map((n) => h("tr", {}, h("td", {}, n.name), h("td", {}, n.network ? stateEl("ready") : stateEl("progressing")), h("td", { class: "msg muted" }, n.reason || ""))))) : null,
    h("h2", {}, "Critical path"),
    b.criticalPath.length ? chain(b.criticalPath) : h("p", { class: "muted" }, "Nothing waits on anything that is not Ready."));
  const counts = h("div", { class: "card" }, h("h2", {}, "Objects"), countsTable(ov.kinds),
    h("p", { class: "muted" }, "Plans kept: " + ov.plans.kept + ", risky: " + ov.plans.risky + ", held: " + ov.plans.held));
  const fails = h("div", { class: "card wide", id: "failures" }, h("h2", {}, "Failures (" + ov.failuresTotal + ")"),
    ov.failures.length ? h("table", {}, h("tbody", {}, ov.failures.map((f) => h("tr", { "data-failure": refText(f.object) },
      h("td", {}, objLink(f.object), h("div", { class: "muted" }, f.object.reason || "")),
      h("td", { class: "msg" }, f.object.message || "", f.why.length > 1 ? h("div", { class: "muted" }, "why: ", chain(f.why)) : null))))) :
      h("p", { class: "muted" }, "No failures."));
  setMain(h("h1", {}, "Overview"), h("div", { class: "grid" }, counts, boot, fails));
}

async function loadOverview() {
  page.overview = await api("overview");
  const phase = document.getElementById("phase");
  phase.textContent = page.overview.bootstrap.phase ? "phase: " + page.overview.bootstrap.phase : "";
  document.getElementById("user").textContent = page.overview.user || "";
}

// refreshOverview re-reads the overview (failures, critical path,
// shards) at most once a second while changes come in, every 3 s past
// 1,000 objects; the counts are patched at once from each change.
function refreshOverview() {
  if (page.overviewTimer) return;
  const total = page.overview ? page.overview.kinds.reduce((n, k) => n + k.total, 0) : 0;
  page.overviewTimer = setTimeout(async () => {
    page.overviewTimer = null;
    try {
      await loadOverview();
      if (["overview", "shards", "clusters"].includes(page.route.name)) render();
    } catch (e) { /* shown on the next navigation */ }
  }, total > 1000 ? 3000 : 1000);
}

// ---- objects ----

async function renderObjects(params) {
  const q = new URLSearchParams(params);
  if (!q.get("limit")) q.set("limit", "100");
  page.list = await api("objects?" + q.toString());
  const sel = (name, values) => h("select", { name, onchange: (ev) => { const p = new URLSearchParams(params); if (ev.target.value) p.set(name, ev.target.value); else p.delete(name); p.delete("continue"); location.hash = "#/objects?" + p; } },
    h("option", { value: "" }, "any " + name), values.map((v) => h("option", { value: v, selected: q.get(name) === v }, v)));
  const search = h("input", { type: "search", placeholder: "namespace/name or message", value: q.get("q") || "" });
  search.addEventListener("change", () => { const p = new URLSearchParams(params); if (search.value) p.set("q", search.value); else p.delete("q"); p.delete("continue"); location.hash = "#/objects?" + p; });
  const ns = h("input", { type: "text", placeholder: "namespace", value: q.get("namespace") || "" });
  ns.addEventListener("change", () => { const p = new URLSearchParams(params); if (ns.value) p.set("namespace", ns.value); else p.delete("namespace"); p.delete("continue"); location.hash = "#/objects?" + p; });
  const offset = parseInt(q.get("continue") || "0", 10);
  const pager = h("div", { class: "pager" },
    h("span", { class: "muted", id: "list-total" }, (page.list.total ? (offset + 1) + "–" + (offset + page.list.items.length) + " of " : "") + page.list.total),
    offset > 0 ? h("a", { href: "#/objects?" + withParam(params, "continue", Math.max(0, offset - parseInt(q.get("limit"), 10))) }, "previous") : null,
    page.list.continue ? h("a", { href: "#/objects?" + withParam(params, "continue", page.list.continue) }, "next") : null);
  setMain(h("h1", {}, "Objects"), h("div", { class: "filters" }, sel("kind", KINDS), sel("state", STATES), ns, search),
    h("div", { class: "card" }, h("table", { id: "objects" },
      h("thead", {}, h("tr", {}, h("th", {}, "Object"), h("th", {}, "State"), h("th", {}, "Reason"), h("th", {}, "Message"), h("th", {}, "Since"))),
      h("tbody", {}, page.list.items.map(objectRow))), pager));
}

function withParam(params, k, v) { const p = new URLSearchParams(params); p.set(k, v); return p.toString(); }

function objectRow(o) {
  return h("tr", { "data-row": refText(o) }, h("td", {}, objLink(o)), h("td", {}, stateEl(o.state)), h("td", {}, o.reason || ""),
    h("td", { class: "msg" }, o.message || ""), h("td", { class: "muted" }, ago(o.since)));
}

// ---- one object ----

async function renderObject(kind, ns, name) {
  const d = await api("objects/" + [kind, ns, name].map(encodeURIComponent).join("/"));
  page.detail = d;
  const o = d.object;
  const reconcile = h("button", { id: "reconcile", onclick: async () => {
    reconcile.disabled = true;
    try { await api("objects/" + refPath(o) + "/reconcile", { method: "POST", headers: { "X-Cozy-Aio-Action": "reconcile" } }); reconcile.textContent = "Requested"; }
    catch (e) { reconcile.textContent = e.message; }
  } }, "Reconcile now");
  const conds = h("table", { id: "conditions" }, h("thead", {}, h("tr", {}, h("th", {}, "Type"), h("th", {}, "Status"), h("th", {}, "Reason"), h("th", {}, "Message"), h("th", {}, "Changed"))),
    h("tbody", {}, d.conditions.map((c) => h("tr", { "data-condition": c.type }, h("td", {}, c.type), h("td", {}, c.status), h("td", {}, c.reason), h("td", { class: "msg" }, c.message), h("td", { class: "muted" }, ago(c.lastTransitionTime))))));
  const links = (title, ls) => h("div", { class: "card" }, h("h2", {}, title + " (" + ls.length + ")"),
    ls.length ? h("table", {}, h("tbody", {}, ls.map((l) => h("tr", {}, h("td", {}, objLink(l)), h("td", {}, stateEl(l.state)), h("td", { class: "msg muted" }, l.reason || ""))))) : h("p", { class: "muted" }, "None."));
  const parts = [
    h("h1", {}, refText(o), " ", stateEl(o.state), " ", reconcile),
    h("div", { class: "grid" },
      h("div", { class: "card wide" }, h("h2", {}, "Why"), d.why.length > 1 ? chain(d.why) : h("p", { class: "muted", id: "why" }, o.state === "ready" ? "Ready." : (o.message || o.reason || "")),
        h("dl", { class: "kv" }, h("dt", {}, "revision"), h("dd", {}, o.revision || "-"), o.tenant ? [h("dt", {}, "tenant"), h("dd", {}, o.tenant)] : null,
          o.cluster ? [h("dt", {}, "cluster"), h("dd", {}, o.cluster)] : null, h("dt", {}, "generation"), h("dd", {}, d.generation),
          h("dt", {}, "reconcile request handled"), h("dd", { id: "handled" }, o.handled || "-"),
          d.queue ? [h("dt", {}, "Helm work"), h("dd", { id: "queue", "data-queue": d.queue.state }, queueText(d.queue))] : null)),
      h("div", { class: "card wide" }, h("h2", {}, "Conditions"), conds),
      links("Depends on", d.dependsOn), links("Dependents", d.dependents),
      d.plan ? planCard(d.plan) : null,
      h("div", { class: "card" }, h("h2", {}, "History"), d.history ? h("pre", {}, JSON.stringify(d.history, null, 2)) : h("p", { class: "muted" }, "None.")),
      h("div", { class: "card" }, h("h2", {}, "Inventory (" + d.inventoryTotal + ")"), d.inventory.length ? h("table", { id: "inventory" }, h("tbody", {}, d.inventory.map((i) =>
        h("tr", { "data-inventory": i.id }, h("td", {}, i.id), h("td", {}, i.status ? h("span", { class: "state state-" + health(i.status), "data-health": i.status }, i.status) : ""), h("td", { class: "msg muted" }, i.message || ""))))) : h("p", { class: "muted" }, "None.")),
      h("div", { class: "card wide" }, h("h2", {}, "Events"), d.eventsError ? h("p", { class: "error" }, d.eventsError) : null,
        d.events.length ? h("table", {}, h("tbody", {}, d.events.map((e) => h("tr", {}, h("td", {}, e.type), h("td", {}, e.reason), h("td", { class: "msg" }, e.message), h("td", { class: "muted" }, ago(e.last)))))) : h("p", { class: "muted" }, "None.")))];
  setMain(...parts);
}

function queueText(q) {
  const failures = q.failures ? " after " + q.failures + " failure" + (q.failures > 1 ? "s" : "") + " in a row" : "";
  switch (q.state) {
    case "running": return "running now (tenant " + q.tenant + ")";
    case "queued": return "queued on shard " + q.shard + ", position " + q.position + " of the tenant's " + q.tenantQueued + " (" + q.shardQueued + " on the shard), waited " + dur(q.waited) + ": " + q.reason;
    case "waiting": return "next retry " + new Date(q.due).toLocaleTimeString() + " (in " + dur(Math.max(0, (new Date(q.due) - Date.now()) / 1000)) + ")" + failures;
    default: return "idle: nothing to run (tenant " + q.tenant + ")";
  }
}

// health maps kstatus onto the page's colours.
function health(s) {
  return { Current: "ready", InProgress: "progressing", Failed: "failed", NotFound: "failed", Terminating: "progressing" }[s] || "hidden";
}

function planCard(p) {
  const pl = p.plan || {};
  const risks = pl.risks || [];
  return h("div", { class: "card wide", id: "plan" }, h("h2", {}, "Last upgrade plan" + (p.held ? " (held for approval)" : "")),
    h("p", { class: "muted" }, (pl.hash || "") + " · " + ago(p.at)),
    risks.length ? h("ul", {}, risks.map((r) => h("li", {}, h("span", { class: "risk" }, r.code), " ", r.object ? r.object.Kind + "/" + (r.object.Namespace || "") + "/" + r.object.Name : "", ": ", r.message || ""))) : h("p", {}, "No risks."),
    h("table", {}, h("tbody", {}, (pl.objects || []).filter((x) => x.action !== "unchanged").slice(0, 200).map((x) => h("tr", {},
      h("td", {}, x.action), h("td", {}, x.ref.Kind + "/" + (x.ref.Namespace || "") + "/" + x.ref.Name),
      h("td", { class: "msg muted" }, (x.changes || []).slice(0, 10).map((c) => c.path + ": " + (c.old || "∅") + " → " + (c.new || "∅")).join("; ")))))));
}

// ---- tenants, shards, clusters, timeline ----

function renderShards() {
  const ov = page.overview;
  const maxLoad = Math.max(1, ...ov.shards.map((s) => s.load));
  const bar = (load) => { const el = h("div", { class: "load" }); el.style.width = Math.round(100 * load / maxLoad) + "%"; return el; };
  setMain(h("h1", {}, "Tenants & shards"),
    ov.replica ? h("p", { id: "replica" }, "Replica " + (ov.replica.id || "-") + ": " + (ov.replica.leader ? "leader" : "not leader") + ", shards [" + (ov.replica.shards || []).join(", ") + "]" +
      (ov.replica.live && ov.replica.live.length ? "; replicas alive: " + ov.replica.live.join(", ") : "")) : null,
    h("div", { class: "grid" },
      h("div", { class: "card" }, h("h2", {}, "Shards"), h("table", { id: "shards" },
        h("thead", {}, h("tr", {}, ["shard", "held by", "load", "", "tenants", "workers", "queued", "waiting", "running"].map((t) => h("th", {}, t)))),
        h("tbody", {}, ov.shards.map((s) => h("tr", {}, h("td", {}, s.id), h("td", {}, holder(ov, s)), h("td", { class: "num" }, s.load), h("td", {}, bar(s.load)),
          h("td", { class: "num" }, s.tenants), h("td", { class: "num" }, s.workers), h("td", { class: "num" }, s.queued), h("td", { class: "num" }, s.waiting), h("td", { class: "num" }, s.running)))))),
      h("div", { class: "card" }, h("h2", {}, "Tenants (" + ov.tenantsTotal + ", busiest first)"), h("table", { id: "tenants" },
        h("thead", {}, h("tr", {}, ["tenant", "shard", "releases", "queued", "waiting", "running", "ok", "failed", "max wait"].map((t) => h("th", {}, t)))),
        h("tbody", {}, ov.tenants.map((t) => h("tr", {}, h("td", {}, h("a", { href: "#/objects?kind=HelmRelease&q=" + encodeURIComponent(t.id.split("/")[0] + "/") }, t.id)), h("td", { class: "num" }, t.shard), h("td", { class: "num" }, t.weight),
          h("td", { class: "num" }, t.queued), h("td", { class: "num" }, t.waiting), h("td", { class: "num" }, t.running), h("td", { class: "num" }, t.succeeded), h("td", { class: "num" }, t.failed), h("td", { class: "num" }, dur(t.waitMax)))))))));
}

// holder names the replica that runs a shard's work.
function holder(ov, s) {
  const held = ov.replica && ov.replica.holders && ov.replica.holders[s.id];
  if (held) return held;
  return s.owned ? "this replica" : "-";
}

function renderClusters() {
  const cs = page.overview.clusters;
  setMain(h("h1", {}, "Remote clusters"), h("div", { class: "card" }, cs.length ? h("table", { id: "clusters" },
    h("thead", {}, h("tr", {}, ["cluster", "ready", "reachable", "last contact", "requests", "errors"].map((t) => h("th", {}, t)))),
    h("tbody", {}, cs.map((c) => h("tr", {}, h("td", {}, c.name), h("td", { class: "num" }, c.ready + "/" + c.total), h("td", {}, c.unreachable ? stateEl("failed") : stateEl("ready")),
      h("td", { class: "muted" }, ago(c.metrics.lastContact)), h("td", { class: "num" }, c.metrics.requests), h("td", { class: "num" }, c.metrics.errors))))) :
    h("p", { class: "muted" }, "No unit deploys to a remote cluster.")));
}

async function renderTimeline() {
  const t = await api("timeline");
  const now = Date.now();
  const buckets = Array.from({ length: 60 }, () => ({ ready: 0, failed: 0, progressing: 0 }));
  const changes = {};
  for (const e of t.entries) {
    const i = 59 - Math.floor((now - new Date(e.at).getTime()) / 60000);
    if (i >= 0 && i < 60 && buckets[i][e.to] !== undefined) buckets[i][e.to]++;
    const k = refText(e);
    changes[k] = (changes[k] || 0) + 1;
  }
  const max = Math.max(1, ...buckets.map((b) => b.ready + b.failed + b.progressing));
  const bars = h("div", { class: "bars", id: "timeline-bars" }, buckets.map((b, i) => {
    const col = h("div", { class: "bar", title: (60 - i) + " min ago: " + b.ready + " ready, " + b.progressing + " progressing, " + b.failed + " failed" });
    for (const s of ["ready", "progressing", "failed"]) {
      const seg = h("span", { class: "b-" + s });
      seg.style.height = (80 * b[s] / max) + "px";
      col.append(seg);
    }
    return col;
  }));
  const flapping = Object.entries(changes).sort((a, b) => b[1] - a[1]).slice(0, 15);
  const latest = h("table", { id: "timeline" }, h("tbody", {}, t.entries.slice(-200).reverse().map((e) =>
    h("tr", {}, h("td", { class: "muted" }, new Date(e.at).toLocaleTimeString()), h("td", {}, objLink(e)),
      h("td", {}, e.from ? e.from + " → " : "", stateEl(e.to)), h("td", { class: "muted" }, e.reason || "")))));
  const top = h("table", {}, h("tbody", {}, flapping.map(([k, n]) => {
    const [kind, ns, ...rest] = k.split("/");
    return h("tr", {}, h("td", {}, objLink({ kind, namespace: ns, name: rest.join("/") })), h("td", { class: "num" }, n));
  })));
  setMain(h("h1", {}, "Timeline (last hour)"), h("div", { class: "grid" },
    h("div", { class: "card wide" }, h("h2", {}, "State changes per minute: ready, progressing, failed"), bars),
    h("div", { class: "card" }, h("h2", {}, "Most changes (slow or flapping)"), top),
    h("div", { class: "card" }, h("h2", {}, "Latest (" + t.total + ")"), latest)));
}

// ---- routing and live updates ----

function parseRoute() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, query] = hash.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "object" && parts.length === 4) return { name: "object", args: parts.slice(1) };
  if (["objects", "shards", "clusters", "timeline"].includes(parts[0])) return { name: parts[0], query: query || "" };
  return { name: "overview" };
}

async function render() {
  const r = page.route;
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", a.dataset.nav === (r.name === "object" ? "objects" : r.name));
  try {
    switch (r.name) {
      case "object": await renderObject(...r.args); break;
      case "objects": await renderObjects(r.query); break;
      case "shards": renderShards(); break;
      case "clusters": renderClusters(); break;
      case "timeline": await renderTimeline(); break;
      default: renderOverview();
    }
  } catch (e) {
    if (e instanceof Unauthorized) { showLogin(e.message); return; }
    setMain(h("h1", {}, "Error"), h("p", { class: "error", id: "error" }, e.message));
  }
}

// applyChange patches what is on screen from one batch of changes.
function applyChange(c) {
  page.updates++;
  document.body.dataset.updates = page.updates;
  if (page.overview) page.overview.kinds = c.kinds;
  const counts = document.getElementById("counts");
  if (counts) counts.replaceWith(countsTable(c.kinds));
  const rows = document.getElementById("objects");
  if (rows && page.list) {
    for (const o of c.objects) {
      const row = rows.querySelector('tr[data-row="' + CSS.escape(refText(o)) + '"]');
      if (row) row.replaceWith(objectRow(o));
    }
  }
  if (page.route.name === "object" && page.detail) {
    const me = refText(page.detail.object);
    if (c.objects.some((o) => refText(o) === me) || c.removed.some((o) => refText(o) === me)) render();
  }
  refreshOverview();
}

function connect() {
  const live = document.getElementById("live");
  const es = new EventSource("api/v1/watch", { withCredentials: true });
  es.addEventListener("hello", () => { live.className = "live on"; live.textContent = "live"; });
  es.addEventListener("change", (ev) => applyChange(JSON.parse(ev.data)));
  es.addEventListener("reset", async () => { await loadOverview().catch(() => {}); render(); });
  es.onerror = () => { live.className = "live off"; live.textContent = "reconnecting"; };
}

async function start() {
  try {
    await loadOverview();
  } catch (e) {
    if (e instanceof Unauthorized) { showLogin(); return; }
    setMain(h("p", { class: "error" }, e.message));
    return;
  }
  page.route = parseRoute();
  await render();
  connect();
}

window.addEventListener("hashchange", () => { page.route = parseRoute(); render(); });
start();
