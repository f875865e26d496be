// aisched console: one page, four views (#/gpus, #/queue, #/platform,
// #/sim), rendered from the console's JSON API. Every value from the
// cluster is put into the page as text (textContent), never as markup.
"use strict";

const state = { csrf: "", user: "", simulations: false, testRequests: false, page: "", events: null, platform: {}, namespace: "",
  gpus: { seq: 0, topology: "", filter: { node: "", model: "", holder: "" }, open: new Set(), nodes: new Set() } };

// el builds an element: el("td", {class: "x"}, "text", childNode, ...).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function $(id) { return document.getElementById(id); }

function say(msg, ok) {
  const s = $("status");
  s.className = ok ? "ok" : "";
  s.textContent = msg || "";
}

// api calls the console's API as the signed-in user.
async function api(method, path, body) {
  const opts = { method, credentials: "same-origin", headers: {} };
  if (method !== "GET") opts.headers["X-CSRF-Token"] = state.csrf;
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const resp = await fetch(path, opts);
  let data = null;
  if (resp.status !== 204) {
    try { data = await resp.json(); } catch (e) { data = { error: "unreadable answer (" + resp.status + ")" }; }
  }
  if (resp.status === 401 && path !== "/api/login") {
    showSignIn();
  }
  return { ok: resp.ok, status: resp.status, data };
}

// refusal turns an error answer into the line shown to the user.
function refusal(r) {
  const msg = (r.data && r.data.error) || ("error " + r.status);
  if (r.status === 403) return "Refused by the cluster: " + msg;
  return msg;
}

// ---- sign-in ----

function showSignIn() {
  closeEvents();
  state.csrf = "";
  $("nav").hidden = true;
  $("signout").hidden = true;
  $("who").textContent = "";
  $("page").replaceChildren();
  $("signin").hidden = false;
  $("token").focus();
}

function signedIn(who) {
  state.csrf = who.csrf || "";
  state.user = who.user;
  state.simulations = who.simulations;
  state.testRequests = who.testRequests;
  $("signin").hidden = true;
  $("nav").hidden = false;
  $("signout").hidden = false;
  $("who").textContent = "signed in as " + who.user;
  openEvents();
  route();
}

async function signIn(token) {
  const r = await api("POST", "/api/login", { token });
  if (!r.ok) {
    say("Sign-in failed: " + refusal(r));
    return;
  }
  say("");
  $("token").value = "";
  signedIn(r.data);
}

// ---- live updates ----

const pageKinds = {
  gpus: ["pods", "gpuinventories", "aischedtopologies"],
  queue: ["pods", "podgroups"],
  platform: ["operators", "instances", "services"],
};

function openEvents() {
  closeEvents();
  const es = new EventSource("/api/events");
  es.addEventListener("change", (ev) => {
    let kinds = [];
    try { kinds = JSON.parse(ev.data).kinds || []; } catch (e) { return; }
    redraw(kinds);
  });
  // The stream opens once the server watches every kind, and opens again
  // after a break: what changed before that is fetched again.
  es.addEventListener("open", () => redraw(pageKinds[state.page] || []));
  state.events = es;
}

// redraw draws the page again when it shows one of the kinds that changed.
function redraw(kinds) {
  const wanted = pageKinds[state.page] || [];
  // A page with an open form, or a filter being typed, is not redrawn
  // under the user's hands.
  const typing = document.activeElement && document.activeElement.closest("#page form.filters");
  if (kinds.some((k) => wanted.includes(k)) && !document.querySelector("#page form.edit") && !typing) route();
}

function closeEvents() {
  if (state.events) state.events.close();
  state.events = null;
}

// ---- routing ----

function route() {
  if (!state.csrf && !state.user) return;
  const page = (location.hash.replace(/^#\//, "") || "gpus").split("?")[0];
  state.page = page;
  for (const a of document.querySelectorAll("#nav a")) {
    if (a.dataset.page === page) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const render = { gpus: renderGPUs, queue: renderQueue, platform: renderPlatform, sim: renderSim }[page] || renderGPUs;
  render();
}

// nsFilter is the namespace box of the pages that list namespaced
// objects: empty lists all namespaces, which needs rights in all of them.
function nsFilter(render) {
  const input = el("input", { id: "ns-filter", value: state.namespace, placeholder: "all namespaces", "aria-label": "namespace" });
  const form = el("form", { class: "ns", id: "form-ns" }, el("label", { for: "ns-filter" }, "Namespace"), input,
    el("button", { type: "submit", id: "ns-apply", class: "secondary" }, "Show"));
  form.addEventListener("submit", (ev) => { ev.preventDefault(); state.namespace = input.value.trim(); render(); });
  return form;
}

function nsQuery() { return state.namespace ? "?namespace=" + encodeURIComponent(state.namespace) : ""; }

// ---- GPU map ----
// The map comes counted by domain (or by node without a topology); a
// domain opens into its nodes and a node into its cards, each fetched
// when opened. What is open and the filter survive redraws.

function pct(x) { return (Math.round(x * 10) / 10) + "%"; }
function gib(mib) { return (Math.round(mib / 102.4) / 10) + " GiB"; }

// gpuQuery is the query of the map's calls: the topology chosen, the
// filter, and extra parameters.
function gpuQuery(extra) {
  const g = state.gpus, q = new URLSearchParams(extra || {});
  if (g.topology) q.set("topology", g.topology);
  for (const k of ["node", "model", "holder"]) if (g.filter[k]) q.set(k, g.filter[k]);
  const s = q.toString();
  return s ? "?" + s : "";
}

async function renderGPUs() {
  const seq = ++state.gpus.seq;
  const r = await api("GET", "/api/gpus" + gpuQuery());
  if (state.page !== "gpus" || seq !== state.gpus.seq) return;
  const page = $("page");
  if (!r.ok) {
    page.replaceChildren(el("h1", {}, "GPU map"), gpuControls(null), el("p", { class: "refusal" }, refusal(r)));
    return;
  }
  const m = r.data, s = m.summary, c = s.counts;
  const rows = m.topology ? (m.domains || []).map(domainRow) : (m.nodes || []).map(nodeRow);
  const filtered = state.gpus.filter.node || state.gpus.filter.model || state.gpus.filter.holder;
  page.replaceChildren(
    el("h1", {}, "GPU map"),
    gpuControls(m),
    el("div", { class: "summary", id: "gpu-summary" },
      el("div", {}, el("b", {}, s.nodes), "GPU nodes"),
      el("div", {}, el("b", {}, c.total), "cards"),
      el("div", {}, el("b", { id: "free-cards" }, c.free), "cards free"),
      el("div", {}, el("b", { id: "whole-cards" }, c.whole), "held whole"),
      el("div", {}, el("b", { id: "shared-cards" }, c.shared), "shared"),
      el("div", { title: "free compute left on cards that shares hold in part, which a whole-card pod cannot use" },
        el("b", { id: "fragmentation" }, pct(s.fragmentation.percent)), "of free compute stranded on shared cards"),
      el("div", {}, el("b", {}, s.driftFindings), "drift findings")),
    m.note ? el("p", { class: "muted" }, m.note) : "",
    m.topology ? el("p", { class: "muted" }, "By " + m.levels.map((l) => l.name + " (" + l.label + ")").join(", then ") + ", from aischedtopology " + m.topology + ".") : "",
    rows.length ? el("div", { id: "gpu-map" }, ...rows) :
      el("p", { class: "muted" }, filtered ? "No card matches the filter." : "No node has GPUs."));
}

// gpuControls are the topology chooser and the filter, applied by the
// server.
function gpuControls(m) {
  const g = state.gpus;
  const input = (id, label, value, placeholder) => [el("label", { for: id }, label),
    el("input", { id, value: value || "", placeholder, maxlength: 253 })];
  const parts = [];
  if (m && m.topologies.length) {
    parts.push(el("label", { for: "gpu-topology" }, "Group by"),
      el("select", { id: "gpu-topology", onchange: () => form.requestSubmit() },
        ...m.topologies.map((t) => el("option", { value: t, selected: t === m.topology }, "topology " + t))));
  }
  parts.push(...input("gpu-node", "Node", g.filter.node, "name contains"),
    ...input("gpu-model", "Model", g.filter.model, "e.g. A100"),
    ...input("gpu-holder", "Holder", g.filter.holder, "pod, group or namespace/"),
    el("button", { type: "submit", id: "gpu-apply", class: "secondary" }, "Show"),
    el("button", { type: "button", id: "gpu-clear", class: "secondary", onclick: () => {
      g.filter = { node: "", model: "", holder: "" };
      renderGPUs();
    } }, "Clear"));
  const form = el("form", { class: "filters", id: "form-gpus" }, ...parts);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const t = $("gpu-topology");
    if (t && t.value !== (g.topology || (m && m.topology))) { g.topology = t.value; g.open.clear(); }
    g.filter = { node: val("gpu-node"), model: val("gpu-model"), holder: val("gpu-holder") };
    renderGPUs();
  });
  return form;
}

// bar draws counts as one bar: free, held whole, shared, the rest.
function bar(c) {
  const b = el("span", { class: "bar", "aria-hidden": "true" });
  const other = (c.unlocated || 0) + (c.unhealthy || 0);
  for (const [cls, n] of [["free", c.free], ["whole", c.whole], ["shared", c.shared], ["other", other]]) {
    if (!n) continue;
    const s = el("span", { class: cls });
    s.style.flexGrow = String(n); // CSSOM: allowed under style-src 'self'
    b.append(s);
  }
  return b;
}

function countsText(c) {
  let t = c.free + " free · " + c.whole + " whole · " + c.shared + " shared";
  if (c.unlocated) t += " · " + c.unlocated + " unlocated";
  if (c.unhealthy) t += " · " + c.unhealthy + " unhealthy";
  return t + " of " + c.total;
}

// openable is a <details> that fetches what it holds when opened, and is
// opened again after a redraw while its key is in set.
function openable(cls, attrs, set, key, head, load) {
  const body = el("div", { class: "inside" });
  const d = el("details", Object.assign({ class: cls }, attrs), el("summary", {}, ...head), body);
  d.addEventListener("toggle", () => {
    if (!d.open) { set.delete(key); body.replaceChildren(); return; }
    set.add(key);
    load(body);
  });
  if (set.has(key)) d.open = true; // fires toggle, which loads
  return d;
}

function domainRow(d) {
  const head = [el("span", { class: "name" }, d.outside ? d.name : d.level + " " + d.name), bar(d.counts),
    el("span", { class: "counts" }, countsText(d.counts)),
    el("span", { class: "meta" }, d.nodes + (d.nodes === 1 ? " node" : " nodes") + " · " +
      d.models.map((m) => m.model + ": " + m.counts.free + "/" + m.counts.total + " free").join(", "))];
  return openable("domain", { "data-domain": d.id }, state.gpus.open, d.id, head, async (body) => {
    if (d.domains && d.domains.length) { body.replaceChildren(...d.domains.map(domainRow)); return; }
    body.replaceChildren(el("p", { class: "muted" }, "Loading…"));
    const r = await api("GET", "/api/gpus/nodes" + gpuQuery({ domain: d.id }));
    if (!body.isConnected) return;
    body.replaceChildren(...(r.ok ? r.data.nodes.map(nodeRow) : [el("p", { class: "refusal" }, refusal(r))]));
  });
}

function nodeRow(n) {
  const head = [el("span", { class: "name" }, n.name), bar(n.counts), el("span", { class: "counts" }, countsText(n.counts)),
    el("span", { class: "meta" }, (n.ready ? "Ready" : "NotReady") + " · from " + n.source +
      (n.driftFindings ? " · " + n.driftFindings + " drift findings" : ""))];
  return openable("node", { "data-node": n.name }, state.gpus.nodes, n.name, head, async (body) => {
    body.replaceChildren(el("p", { class: "muted" }, "Loading…"));
    const q = gpuQuery();
    const r = await api("GET", "/api/gpus/nodes/" + encodeURIComponent(n.name) + q);
    if (!body.isConnected) return;
    if (!r.ok) { body.replaceChildren(el("p", { class: "refusal" }, refusal(r))); return; }
    const g = r.data;
    body.replaceChildren(el("div", { class: "cards" }, ...g.cards.map((c) => renderCard(g, c))),
      g.unlocated && g.unlocated.length ? el("p", { class: "muted" }, "Holding cards not located yet: " + g.unlocated.join(", ")) : "",
      g.drift && g.drift.length ? el("p", { class: "drift" }, "Drift (node agent): ",
        g.drift.map((d) => d.pod + " assigned [" + (d.assigned || []).join(",") + "] holds [" + (d.held || []).join(",") + "]").join("; ")) : "");
  });
}

function renderCard(n, c) {
  const holders = [];
  if (c.whole) holders.push(el("li", {}, c.whole));
  // Under DRA a share is a claim's device: a MIG device by its profile
  // and name, or a share of a shared device's capacity.
  for (const s of c.shares || []) holders.push(el("li", { title: s.claim ? "claim " + s.claim + (s.device ? ", device " + s.device : "") : "" },
    s.pod + " · " + (s.profile ? "MIG " + s.profile + " (" + s.device + ")" : (s.milli / 10) + "%" + (s.memMiB ? ", " + gib(s.memMiB) : ""))));
  const what = { whole: "held whole", unhealthy: "unhealthy" }[c.state] || ("free " + (c.freeMilli / 10) + "%, " + gib(c.freeMemMiB));
  return el("div", { class: "card " + c.state, "data-card": n.name + "/" + c.index, tabindex: "0",
    "aria-label": "card " + c.index + " of " + n.name },
    el("div", {}, el("span", { class: "idx" }, "#" + c.index), " " + c.model),
    el("div", { class: "muted" }, gib(c.memoryMiB) + (c.uuid ? " · " + c.uuid.slice(0, 12) : "")),
    el("div", {}, what),
    holders.length ? el("ul", {}, ...holders) : "",
    c.groups && c.groups.length ? el("div", { class: "muted" }, "group " + c.groups.join(", ")) : "");
}

// ---- waiting work ----

async function renderQueue() {
  const r = await api("GET", "/api/queue" + nsQuery());
  const page = $("page");
  if (!r.ok) {
    page.replaceChildren(el("h1", {}, "Waiting work"), nsFilter(renderQueue), el("p", { class: "refusal" }, refusal(r)));
    return;
  }
  const q = r.data;
  page.replaceChildren(
    el("h1", {}, "Waiting work"), nsFilter(renderQueue),
    el("h2", {}, "Team queues (GPUs)"),
    q.teamQueuesRefused ? el("p", { class: "refusal" }, q.teamQueuesRefused) :
    q.teamQueues.length === 0 ? el("p", { class: "muted" }, "No aischedqueue.") :
      el("table", { id: "teamqueues" },
        el("tr", {}, ["Queue", "Guaranteed", "Used", "", "Borrowed", "Borrows from", "Fair share", "Admitted", "Waiting"].map((h) => el("th", {}, h))),
        ...q.teamQueues.map((t) => el("tr", { "data-queue": t.name },
          el("td", { style: "padding-left: " + (0.5 + 1.5 * t.depth) + "em" }, t.name,
            t.invalid ? el("div", { class: "refusal" }, t.invalid) : ""),
          el("td", {}, t.guaranteed), el("td", {}, t.used),
          el("td", {}, el("meter", { min: 0, max: 100, value: Math.min(t.percent, 100), title: pct(t.percent) + " of the guarantee" })),
          el("td", {}, t.borrowed), el("td", {}, (t.borrowsFrom || []).join(", ")), el("td", {}, t.fairShare),
          el("td", {}, t.admitted), el("td", {}, t.waiting)))),
    el("h2", {}, "Pod groups"),
    q.groups.length === 0 ? el("p", { class: "muted" }, "No group waits.") :
      el("table", { id: "groups" },
        el("tr", {}, ["Position", "Group", "Scheduled", "Pending", "Reason", "Why", "Ahead"].map((h) => el("th", {}, h))),
        ...q.groups.map((g) => el("tr", { "data-group": g.namespace + "/" + g.name },
          el("td", {}, g.position || "–"), el("td", {}, g.namespace + "/" + g.name),
          el("td", {}, g.scheduled + " of " + g.minMember), el("td", {}, g.pending),
          el("td", { class: "reason" }, g.reason || ""), el("td", { class: "message" }, g.message || ""),
          el("td", {}, (g.ahead || []).join(", "))))),
    el("h2", {}, "Pending pods"),
    q.pods.length === 0 ? el("p", { class: "muted" }, "No pod waits.") :
      el("table", { id: "pods" },
        el("tr", {}, ["Pod", "Group", "GPUs", "Scheduler", "Reason", "Why", "Since"].map((h) => el("th", {}, h))),
        ...q.pods.map((p) => el("tr", { "data-pod": p.namespace + "/" + p.name },
          el("td", {}, p.namespace + "/" + p.name), el("td", {}, p.group || ""), el("td", {}, p.gpu || ""),
          el("td", {}, p.scheduler), el("td", { class: "reason" }, p.reason || ""), el("td", { class: "message" }, p.message || ""),
          el("td", {}, new Date(p.since).toLocaleTimeString())))),
    el("h2", {}, "Quotas"),
    q.quotas.length === 0 ? el("p", { class: "muted" }, "No ResourceQuota.") :
      el("table", { id: "quotas" },
        el("tr", {}, ["Quota", "Resource", "Used", "Hard", ""].map((h) => el("th", {}, h))),
        ...q.quotas.flatMap((qu) => qu.resources.map((x) => el("tr", {},
          el("td", {}, qu.namespace + "/" + qu.name), el("td", {}, x.name), el("td", {}, x.used), el("td", {}, x.hard),
          el("td", {}, el("meter", { min: 0, max: 100, value: Math.min(x.percent, 100), title: pct(x.percent) })))))));
}

// ---- platform ----

const kindTitles = { operators: "Operators", instances: "Operator instances", services: "AI services" };
const kindNew = { operators: "New operator", instances: "New instance", services: "New service" };

async function renderPlatform() {
  const page = $("page");
  const lists = {};
  const parts = [el("h1", {}, "Platform"), nsFilter(renderPlatform)];
  for (const kind of ["operators", "instances", "services"]) {
    const r = await api("GET", "/api/platform/" + kind + nsQuery());
    lists[kind] = r.ok ? r.data.items : [];
    parts.push(el("h2", {}, kindTitles[kind]));
    parts.push(el("div", { class: "actions" },
      el("button", { type: "button", id: "new-" + kind, onclick: () => openForm(kind, null) }, kindNew[kind])));
    if (!r.ok) {
      parts.push(el("p", { class: "refusal" }, refusal(r)));
      continue;
    }
    parts.push(platformTable(kind, lists[kind]));
  }
  // An open form survives the redraw (a change elsewhere in the cluster).
  parts.push($("form-slot") || el("div", { id: "form-slot" }));
  state.platform = lists;
  if (state.page === "platform") page.replaceChildren(...parts);
}

function readyOf(o) {
  const c = ((o.status || {}).conditions || []).find((x) => x.type === "Ready");
  return c ? (c.status === "True" ? "Ready" : c.reason) : "";
}

function platformTable(kind, items) {
  if (!items.length) return el("p", { class: "muted" }, "None.");
  const head = {
    operators: ["Name", "Display name", "Category", "Images", "GPUs", "State", ""],
    instances: ["Name", "Operator", "State", "Replicas", "Ready", ""],
    services: ["Name", "Instance", "URL", "Auth", "Endpoints", "Ready", ""],
  }[kind];
  const row = (o) => {
    const id = o.metadata.namespace + "/" + o.metadata.name, s = o.spec;
    const edit = el("button", { type: "button", class: "secondary", onclick: () => openForm(kind, o) }, "Edit");
    const del = el("button", { type: "button", class: "secondary", onclick: () => remove(kind, o) }, "Delete");
    let cells;
    if (kind === "operators") {
      cells = [s.displayName, s.category, s.containers.map((c) => c.image).join(", "),
        s.containers.map((c) => c.gpus || 0).join("+"), s.state || "Online"];
    } else if (kind === "instances") {
      const st = o.status || {};
      cells = [s.operatorRef.name, s.state || "Online", s.replicas === undefined ? 1 : s.replicas, st.readyReplicas || 0];
    } else {
      const st = o.status || {};
      cells = [s.instanceRef.name, st.url || "", (s.auth && s.auth.method) || "None", st.readyEndpoints || 0, readyOf(o)];
    }
    const actions = [edit];
    if (kind === "instances") {
      const online = (s.state || "Online") === "Online";
      actions.push(el("button", { type: "button", class: "secondary", onclick: () => setState(o, online ? "Offline" : "Online") }, online ? "Take offline" : "Bring online"));
      const rep = el("input", { type: "number", min: 0, max: 10000, value: s.replicas === undefined ? 1 : s.replicas, "aria-label": "replicas of " + id, class: "replicas" });
      actions.push(rep, el("button", { type: "button", class: "secondary", onclick: () => scale(o, rep.value) }, "Scale"));
    }
    if (kind === "services") {
      actions.push(el("button", { type: "button", class: "secondary", onclick: () => openKeys(o) }, "API keys"));
      if (state.testRequests) actions.push(el("button", { type: "button", class: "secondary", onclick: () => openTry(o) }, "Try"));
    }
    actions.push(del);
    return el("tr", { "data-object": kind + "/" + id }, el("td", {}, id), ...cells.map((c) => el("td", {}, c)), el("td", {}, el("div", { class: "actions" }, ...actions)));
  };
  return el("table", { id: "table-" + kind }, el("tr", {}, head.map((h) => el("th", {}, h))), ...items.map(row));
}

async function remove(kind, o) {
  if (!confirm("Delete " + o.metadata.namespace + "/" + o.metadata.name + "?")) return;
  const r = await api("DELETE", "/api/platform/" + kind + "/" + o.metadata.namespace + "/" + o.metadata.name);
  await renderPlatform();
  say(r.ok ? "Deleted " + o.metadata.name + "." : refusal(r), r.ok);
}

async function setState(o, st) {
  const r = await api("POST", "/api/instances/" + o.metadata.namespace + "/" + o.metadata.name + "/state", { state: st });
  await renderPlatform();
  say(r.ok ? o.metadata.name + " is " + st + "." : refusal(r), r.ok);
}

async function scale(o, n) {
  const r = await api("POST", "/api/instances/" + o.metadata.namespace + "/" + o.metadata.name + "/scale", { replicas: parseInt(n, 10) });
  await renderPlatform();
  say(r.ok ? o.metadata.name + " scaled to " + n + "." : refusal(r), r.ok);
}

// field makes a labelled input; its id is prefix-name.
function field(form, name, label, value, attrs) {
  const id = form + "-" + name;
  const a = Object.assign({ id, name }, attrs || {});
  let input;
  if (a.options) {
    const opts = a.options; delete a.options;
    input = el("select", a, ...opts.map((o) => el("option", { value: o, selected: o === value }, o)));
  } else if (a.type === "textarea") {
    delete a.type;
    input = el("textarea", a, value || "");
  } else if (a.type === "checkbox") {
    input = el("input", Object.assign(a, { checked: !!value }));
  } else {
    input = el("input", Object.assign(a, { value: value === undefined || value === null ? "" : value }));
  }
  return el("div", {}, el("label", { for: id }, label), input);
}

function val(id) { const e = $(id); return e ? e.value.trim() : ""; }
function num(id) { const v = val(id); return v === "" ? undefined : Number(v); }
function list(id) { const v = val(id); return v === "" ? undefined : v.split(/[\s,]+/).filter(Boolean); }
function prune(o) {
  for (const k of Object.keys(o)) {
    if (o[k] === undefined || o[k] === "" || (Array.isArray(o[k]) && !o[k].length)) delete o[k];
    else if (o[k] && typeof o[k] === "object" && !Array.isArray(o[k])) { prune(o[k]); if (!Object.keys(o[k]).length) delete o[k]; }
  }
  return o;
}

function formShell(id, title, fields, onsubmit) {
  const form = el("form", { class: "edit", id }, el("h2", {}, title), ...fields,
    el("div", { class: "actions" }, el("button", { type: "submit" }, "Save"),
      el("button", { type: "button", class: "secondary", onclick: () => { form.remove(); } }, "Cancel")));
  form.addEventListener("submit", (ev) => { ev.preventDefault(); onsubmit(form); });
  $("form-slot").replaceChildren(form);
  say("");
  const first = form.querySelector("input, select, textarea");
  if (first) first.focus();
  return form;
}

async function save(kind, obj, existing) {
  const r = existing
    ? await api("PUT", "/api/platform/" + kind + "/" + existing.metadata.namespace + "/" + existing.metadata.name, obj)
    : await api("POST", "/api/platform/" + kind, obj);
  if (!r.ok) { say(refusal(r)); return false; }
  $("form-slot").replaceChildren();
  await renderPlatform();
  say("Saved " + obj.metadata.namespace + "/" + obj.metadata.name + ".", true);
  return true;
}

function metaFields(f, o) {
  const m = o ? o.metadata : {};
  return el("div", { class: "grid" },
    field(f, "namespace", "Namespace", m.namespace || "default", { required: true, readonly: !!o }),
    field(f, "name", "Name", m.name, { required: true, readonly: !!o }));
}

function baseObject(kind, o, f) {
  const obj = o ? JSON.parse(JSON.stringify(o)) : { apiVersion: "platform.aisched.io/v1alpha1", kind, metadata: {}, spec: {} };
  delete obj.status;
  obj.metadata.namespace = val(f + "-namespace");
  obj.metadata.name = val(f + "-name");
  return obj;
}

function openForm(kind, o) {
  ({ operators: operatorForm, instances: instanceForm, services: serviceForm })[kind](o);
}

function containerFields(f, i, c) {
  c = c || {};
  const p = f + "-c" + i;
  const port = (c.ports && c.ports[0]) || {};
  const probe = (c.readinessProbe && c.readinessProbe.httpGet) || {};
  return el("fieldset", { class: "container", "data-index": i }, el("legend", {}, "Container " + (i + 1)),
    el("div", { class: "grid" },
      field(p, "name", "Name", c.name || (i === 0 ? "model" : ""), { required: true }),
      field(p, "image", "Image", c.image, { required: true }),
      field(p, "gpus", "GPU cards", c.gpus || 0, { type: "number", min: 0, max: 64 }),
      field(p, "port", "Port", port.port, { type: "number", min: 1, max: 65535 }),
      field(p, "cpu", "CPU", c.cpu, { placeholder: "500m" }),
      field(p, "memory", "Memory", c.memory, { placeholder: "1Gi" }),
      field(p, "ready", "Readiness probe path", probe.path, { placeholder: "/v2/health/ready" }),
      field(p, "live", "Liveness probe path", ((c.livenessProbe || {}).httpGet || {}).path, { placeholder: "/v2/health/live" })),
    field(p, "env", "Environment (NAME=value, one a line)", (c.env || []).filter((e) => e.value !== undefined).map((e) => e.name + "=" + e.value).join("\n"), { type: "textarea", rows: 2 }));
}

function readContainer(f, i, old) {
  const p = f + "-c" + i;
  const c = Object.assign({}, old || {});
  c.name = val(p + "-name");
  c.image = val(p + "-image");
  c.gpus = num(p + "-gpus") || undefined;
  c.cpu = val(p + "-cpu") || undefined;
  c.memory = val(p + "-memory") || undefined;
  const port = num(p + "-port");
  if (port) c.ports = [Object.assign({ name: "http" }, (old && old.ports && old.ports[0]) || {}, { port })];
  else delete c.ports;
  const probe = (path) => (path && port ? { httpGet: { path, port } } : undefined);
  // Variables from other sources (valueFrom) are kept; the lines replace
  // the plain ones.
  const env = (c.env || []).filter((e) => e.value === undefined);
  for (const line of val(p + "-env").split("\n")) {
    const i = line.indexOf("=");
    if (i > 0) env.push({ name: line.slice(0, i).trim(), value: line.slice(i + 1) });
  }
  c.env = env.length ? env : undefined;
  c.readinessProbe = probe(val(p + "-ready"));
  c.livenessProbe = probe(val(p + "-live"));
  return c;
}

function operatorForm(o) {
  const f = "op", s = o ? o.spec : {}, g = s.gpu || {};
  const containers = (s.containers && s.containers.length ? s.containers : [{}]);
  const holder = el("div", { id: f + "-containers" }, ...containers.map((c, i) => containerFields(f, i, c)));
  const add = el("button", { type: "button", class: "secondary", onclick: () => holder.append(containerFields(f, holder.children.length, {})) }, "Add a container");
  formShell("form-operators", o ? "Edit operator" : "New operator", [
    metaFields(f, o),
    el("div", { class: "grid" },
      field(f, "displayName", "Display name", s.displayName, { required: true }),
      field(f, "category", "Category", s.category || "AICapability", { options: ["AICapability", "Logic", "DataInput", "DataOutput"] }),
      field(f, "state", "State", s.state || "Online", { options: ["Online", "Offline"] }),
      field(f, "description", "Description", s.description)),
    holder, add,
    el("fieldset", {}, el("legend", {}, "GPU constraints, per card"),
      el("div", { class: "grid" },
        field(f, "models", "Models (comma-separated)", (g.models || []).join(", ")),
        field(f, "gpumemory", "Card memory at least", g.memory, { placeholder: "16Gi" }),
        field(f, "milli", "Share of one card (thousandths)", g.milli, { type: "number", min: 1, max: 999 }),
        field(f, "memshare", "Memory share (MiB)", g.memoryShareMiB, { type: "number", min: 1 }))),
  ], () => {
    const obj = baseObject("Operator", o, f);
    const sp = obj.spec;
    sp.displayName = val(f + "-displayName");
    sp.category = val(f + "-category");
    sp.state = val(f + "-state");
    sp.description = val(f + "-description") || undefined;
    sp.containers = [...holder.children].map((_, i) => readContainer(f, i, (s.containers || [])[i]));
    sp.gpu = prune(Object.assign({}, g, { models: list(f + "-models"), memory: val(f + "-gpumemory") || undefined, milli: num(f + "-milli"), memoryShareMiB: num(f + "-memshare") }));
    save("operators", prune(obj), o);
  });
}

function instanceForm(o) {
  const f = "inst", s = o ? o.spec : {};
  const ops = (state.platform.operators || []).map((x) => x.metadata.name);
  formShell("form-instances", o ? "Edit instance" : "New instance", [
    metaFields(f, o),
    el("div", { class: "grid" },
      field(f, "operator", "Operator", (s.operatorRef || {}).name || ops[0], { required: true, list: f + "-ops" }),
      field(f, "replicas", "Replicas", s.replicas === undefined ? 1 : s.replicas, { type: "number", min: 0, max: 10000 }),
      field(f, "state", "State", s.state || "Online", { options: ["Online", "Offline"] }),
      field(f, "scheduler", "Scheduler", s.schedulerName, { placeholder: "aisched" })),
    el("datalist", { id: f + "-ops" }, ...ops.map((n) => el("option", { value: n }))),
  ], () => {
    const obj = baseObject("OperatorInstance", o, f);
    obj.spec.operatorRef = { name: val(f + "-operator") };
    obj.spec.replicas = num(f + "-replicas");
    obj.spec.state = val(f + "-state");
    obj.spec.schedulerName = val(f + "-scheduler") || undefined;
    save("instances", prune(obj), o);
  });
}

function serviceForm(o) {
  const f = "svc", s = o ? o.spec : {};
  const a = s.access || {}, au = s.auth || {}, rq = s.request || {}, rl = s.rateLimit || {}, cb = s.circuitBreaker || {}, ks = s.killSwitch || {};
  const insts = (state.platform.instances || []).map((x) => x.metadata.name);
  formShell("form-services", o ? "Edit service" : "New service", [
    metaFields(f, o),
    el("div", { class: "grid" },
      field(f, "instance", "Instance", (s.instanceRef || {}).name || insts[0], { required: true, list: f + "-insts" }),
      field(f, "port", "Port of the pods", s.port, { type: "number", min: 1, max: 65535, required: true }),
      field(f, "protocol", "Protocol", s.protocol || "HTTP", { options: ["HTTP"] }),
      field(f, "description", "Description", s.description)),
    el("datalist", { id: f + "-insts" }, ...insts.map((n) => el("option", { value: n }))),
    el("fieldset", {}, el("legend", {}, "Authentication and access"),
      el("div", { class: "grid" },
        field(f, "auth", "Method", au.method || "None", { options: ["None", "APIKey"] }),
        field(f, "secret", "Secret of the API keys", (au.secretRef || {}).name),
        field(f, "allowCIDRs", "Allowed CIDRs", (a.allowCIDRs || []).join(", ")),
        field(f, "denyCIDRs", "Denied CIDRs", (a.denyCIDRs || []).join(", ")),
        field(f, "allowConsumers", "Allowed consumers", (a.allowConsumers || []).join(", ")),
        field(f, "denyConsumers", "Denied consumers", (a.denyConsumers || []).join(", ")))),
    el("fieldset", {}, el("legend", {}, "Requests"),
      el("div", { class: "grid" },
        field(f, "methods", "Methods", (rq.methods || []).join(", "), { placeholder: "GET, POST" }),
        field(f, "paths", "Paths", (rq.paths || []).join(", "), { placeholder: "/v2/models/*/infer" }),
        field(f, "maxBody", "Max body (bytes)", rq.maxBodyBytes, { type: "number", min: 0 }),
        field(f, "timeout", "Timeout (ms)", rq.timeoutMilliseconds, { type: "number", min: 0 }))),
    el("fieldset", {}, el("legend", {}, "Rate limits"),
      el("div", { class: "grid" },
        field(f, "qps", "QPS", rl.qps, { type: "number", min: 1 }),
        field(f, "burst", "Burst", rl.burst, { type: "number", min: 1 }),
        field(f, "perConsumerQPS", "QPS per consumer", rl.perConsumerQPS, { type: "number", min: 1 }),
        field(f, "maxConcurrency", "Max concurrency", rl.maxConcurrency, { type: "number", min: 1 }))),
    el("fieldset", {}, el("legend", {}, "Circuit breaker"),
      el("div", { class: "grid" },
        field(f, "strategy", "Strategy", cb.strategy || "", { options: ["", "ErrorRatio", "SlowCallRatio"] }),
        field(f, "threshold", "Threshold (%)", cb.thresholdPercent, { type: "number", min: 1, max: 100 }),
        field(f, "minRequests", "Min requests", cb.minRequests, { type: "number", min: 0 }),
        field(f, "openSeconds", "Open for (s)", cb.openSeconds, { type: "number", min: 0 }))),
    el("fieldset", {}, el("legend", {}, "Kill switch"),
      el("div", { class: "grid" },
        field(f, "kill", "Refuse every call", ks.enabled, { type: "checkbox" }),
        field(f, "killReason", "Reason", ks.reason))),
  ], () => {
    const obj = baseObject("AIService", o, f);
    const sp = obj.spec;
    sp.instanceRef = { name: val(f + "-instance") };
    sp.port = num(f + "-port");
    sp.protocol = val(f + "-protocol");
    sp.description = val(f + "-description") || undefined;
    sp.auth = val(f + "-auth") === "APIKey" ? { method: "APIKey", secretRef: val(f + "-secret") ? { name: val(f + "-secret") } : undefined } : undefined;
    sp.access = { allowCIDRs: list(f + "-allowCIDRs"), denyCIDRs: list(f + "-denyCIDRs"), allowConsumers: list(f + "-allowConsumers"), denyConsumers: list(f + "-denyConsumers") };
    sp.request = Object.assign({}, rq, { methods: list(f + "-methods"), paths: list(f + "-paths"), maxBodyBytes: num(f + "-maxBody"), timeoutMilliseconds: num(f + "-timeout") });
    sp.rateLimit = Object.assign({}, rl, { qps: num(f + "-qps"), burst: num(f + "-burst"), perConsumerQPS: num(f + "-perConsumerQPS"), maxConcurrency: num(f + "-maxConcurrency") });
    sp.circuitBreaker = val(f + "-strategy") ? Object.assign({}, cb, { strategy: val(f + "-strategy"), thresholdPercent: num(f + "-threshold"), minRequests: num(f + "-minRequests"), openSeconds: num(f + "-openSeconds") }) : undefined;
    sp.killSwitch = $(f + "-kill").checked ? { enabled: true, reason: val(f + "-killReason") || undefined } : undefined;
    save("services", prune(obj), o);
  });
}

// openKeys writes a service's API keys: one "consumer=key" a line. Keys
// are write-only: the console never shows the ones in place.
function openKeys(o) {
  const f = "keys";
  formShell("form-keys", "API keys of " + o.metadata.name, [
    el("p", { class: "muted" }, "One consumer=key a line. These replace the service's keys; the keys in place are never shown."),
    field(f, "lines", "Keys", "", { type: "textarea", rows: 4, autocomplete: "off", spellcheck: "false" }),
  ], async () => {
    const keys = {};
    for (const line of val(f + "-lines").split("\n")) {
      const t = line.trim();
      if (!t) continue;
      const i = t.indexOf("=");
      if (i <= 0) { say("Keys: \"" + t.slice(0, 20) + "…\" is not consumer=key"); return; }
      keys[t.slice(0, i).trim()] = t.slice(i + 1).trim();
    }
    const r = await api("PUT", "/api/services/" + o.metadata.namespace + "/" + o.metadata.name + "/keys", { keys });
    if (!r.ok) { say(refusal(r)); return; }
    say("Wrote the keys of " + r.data.consumers.join(", ") + " into Secret " + r.data.secret + ".", true);
    $("form-slot").replaceChildren();
  });
}

// openTry sends a test request through the gateway.
function openTry(o) {
  const f = "try";
  const out = el("pre", { id: "try-answer" });
  const form = formShell("form-try", "Try " + o.metadata.name + " through the gateway", [
    el("div", { class: "grid" },
      field(f, "method", "Method", "POST", { options: ["GET", "POST"] }),
      field(f, "path", "Path", "/v2/models/" + o.metadata.name + "/infer"),
      field(f, "key", "API key (not kept)", "", { type: "password", autocomplete: "off" })),
    field(f, "body", "Body", '{"inputs":[{"name":"x","shape":[4],"datatype":"FP64","data":[1,2,3,4]}]}', { type: "textarea", rows: 3 }),
    out,
  ], async () => {
    const r = await api("POST", "/api/services/" + o.metadata.namespace + "/" + o.metadata.name + "/try",
      { method: val(f + "-method"), path: val(f + "-path"), body: val(f + "-body") || undefined, apiKey: val(f + "-key") || undefined });
    if (!r.ok) { say(refusal(r)); return; }
    say("");
    out.textContent = r.data.status + " in " + r.data.millis + " ms from " + r.data.url + "\n" + r.data.body;
  });
  form.querySelector("button[type=submit]").textContent = "Send";
}

// ---- simulations ----

async function renderSim() {
  const page = $("page");
  if (!state.simulations) {
    page.replaceChildren(el("h1", {}, "Simulations"), el("p", { class: "muted" }, "Simulations are off in this console."));
    return;
  }
  const r = await api("GET", "/api/simulations");
  const scenarios = r.ok ? r.data : [];
  const out = el("div", { id: "sim-report" });
  const run = async (body, button) => {
    button.disabled = true;
    out.replaceChildren(el("p", { class: "muted" }, "Running…"));
    const res = await api("POST", "/api/simulations", body);
    button.disabled = false;
    if (!res.ok) { out.replaceChildren(); say(refusal(res)); return; }
    say("");
    const rep = res.data;
    const parts = [el("h2", {}, rep.title)];
    if (rep.description) parts.push(el("p", { class: "muted" }, rep.description));
    if (rep.rows) parts.push(resultsTable(rep));
    if (rep.text) parts.push(el("pre", {}, rep.text));
    if (rep.svg) parts.push(el("img", { class: "plot", alt: "plots of " + rep.title, src: "data:image/svg+xml;base64," + btoa(unescape(encodeURIComponent(rep.svg))) }));
    out.replaceChildren(...parts);
  };
  const runBtn = el("button", { type: "submit" }, "Run scenario");
  const scen = el("form", { id: "form-scenario" },
    field("sim", "scenario", "Shipped scenario", scenarios.length ? scenarios[0].name : "", { options: scenarios.map((s) => s.name) }),
    el("p", { class: "muted", id: "sim-desc" }, scenarios.length ? scenarios[0].description : ""), runBtn);
  scen.addEventListener("submit", (ev) => { ev.preventDefault(); run({ scenario: val("sim-scenario") }, runBtn); });
  const wiBtn = el("button", { type: "submit" }, "What if");
  const wi = el("form", { id: "form-whatif" },
    field("wi", "namespace", "Namespace", "default"),
    field("wi", "manifest", "Job manifests (Pod, Job, Deployment, PodGroup, ... as YAML)", "", { type: "textarea", rows: 10, spellcheck: "false" }), wiBtn);
  wi.addEventListener("submit", (ev) => { ev.preventDefault(); run({ manifest: $("wi-manifest").value, namespace: val("wi-namespace") }, wiBtn); });
  page.replaceChildren(el("h1", {}, "Simulations"),
    el("h2", {}, "Run a scenario"), scen,
    el("h2", {}, "When would this job run? (whatif, on a snapshot of the cluster)"), wi, out);
  // The description follows the choice as it is made (input), and as it
  // is committed (change, which some browsers fire only on blur).
  const describe = () => {
    const s = scenarios.find((x) => x.name === val("sim-scenario"));
    $("sim-desc").textContent = s ? s.description : "";
  };
  $("sim-scenario").addEventListener("input", describe);
  $("sim-scenario").addEventListener("change", describe);
}

// resultsTable renders a scenario's results: a row per metric with the
// median of each policy, which way is better, and what the metric means.
function resultsTable(rep) {
  return el("table", { id: "sim-results" },
    el("thead", {}, el("tr", {}, el("th", {}, "metric"), el("th", {}, "better"),
      ...rep.policies.map((p) => el("th", {}, p)), el("th", {}, "meaning"))),
    el("tbody", {}, ...rep.rows.map((row) => el("tr", {},
      el("td", {}, el("code", {}, row.metric)), el("td", {}, row.better),
      ...row.values.map((v) => el("td", {}, v)),
      el("td", { class: "muted" }, row.meaning)))));
}

// ---- start ----

window.addEventListener("hashchange", route);
document.addEventListener("DOMContentLoaded", async () => {
  $("signin").addEventListener("submit", (ev) => { ev.preventDefault(); signIn($("token").value); });
  $("signout").addEventListener("click", async () => { await api("POST", "/api/logout"); showSignIn(); });
  // aisched up prints a URL with #token=...: sign in with it, then drop it
  // from the address bar and the history.
  const m = location.hash.match(/token=([^&]+)/);
  if (m) {
    history.replaceState(null, "", location.pathname + "#/gpus");
    await signIn(decodeURIComponent(m[1]));
    return;
  }
  const r = await api("GET", "/api/whoami");
  if (r.ok) signedIn(r.data); else showSignIn();
});
