// lamina serve: live updates (server-sent events) and the plot. Plain module, no inline script (CSP).
// Everything shown comes from the server as escaped HTML or as JSON put into text nodes.

const body = document.body;
const LAYERS = ["stable", "history", "current", "tail", "one_shot"];
const COLOURS = { stable: "#4c78a8", history: "#9ecae9", current: "#f58518", tail: "#54a24b", one_shot: "#e45756" };

// control and bidi characters made visible, as the server's pages and the CLI show them
const UNSAFE = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
function visible(text) {
  return String(text).replace(/\r\n/g, "\n").replace(UNSAFE, (ch) => {
    const code = ch.charCodeAt(0);
    if (code < 0x20) return String.fromCharCode(0x2400 + code);
    if (code === 0x7f) return "\u2421";
    return `<U+${code.toString(16).toUpperCase().padStart(4, "0")}>`;
  });
}

function el(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = visible(text);
  return node;
}

async function drawChart() {
  const box = document.getElementById("chart");
  if (!box) return;
  let data;
  try {
    const response = await fetch(box.dataset.api, { headers: { Accept: "application/json" } });
    if (!response.ok) throw new Error(String(response.status));
    data = await response.json();
  } catch (error) {
    box.replaceChildren(el("p", { class: "muted small" }, `plot unavailable (${error.message})`));
    return;
  }
  const requests = data.requests.filter((r) => r.on_path);
  box.replaceChildren();
  drawTable(requests, box.dataset.session, data.notes);
  if (!requests.length) {
    box.appendChild(el("p", { class: "muted small", id: "chart-empty" }, "no requests on this branch yet"));
    return;
  }
  // x: the position on the shown branch (no gap where another branch's requests were); labels: the request numbers
  const xs = requests.map((r, i) => i);
  // stacked: each series is the running total up to its layer; drawn top first, so each fill shows its own band
  const stacks = [];
  let running = requests.map(() => 0);
  for (const layer of LAYERS) {
    running = running.map((v, i) => v + (requests[i].layers[layer] || 0));
    stacks.push({ layer, values: running.slice() });
  }
  const series = [{}];
  const columns = [xs];
  for (const { layer, values } of stacks.slice().reverse()) {
    series.push({ label: layer, stroke: COLOURS[layer], fill: COLOURS[layer], width: 1, scale: "tokens", points: { show: false } });
    columns.push(values);
  }
  series.push({ label: "hit ratio (provider)", stroke: "#111", width: 2, scale: "ratio", dash: [4, 3] });
  columns.push(requests.map((r) => (r.provider ? r.provider.hit_ratio : null)));
  series.push({ label: "hit ratio (simulator)", stroke: "#8b5cf6", width: 2, scale: "ratio" });
  columns.push(requests.map((r) => r.simulated.hit_ratio));
  if (typeof window.uPlot !== "function") {
    box.appendChild(el("p", { class: "muted small" }, "plot library not loaded"));
    return;
  }
  let shownTicks = [];
  function xLabels(u, splits) {
    const labels = splits.map((v) => (Number.isInteger(v) && requests[v] ? String(requests[v].index) : ""));
    shownTicks = labels.filter((l) => l !== "");
    return labels;
  }
  const width = Math.max(box.clientWidth || 800, 320);
  const options = {
    width,
    height: 260,
    series,
    scales: {
      x: { time: false, range: (u, min, max) => (min === max ? [min - 1, max + 1] : [min, max]) },
      tokens: { range: (u, min, max) => [0, max > 0 ? max * 1.05 : 1] }, // the token axis starts at 0
      ratio: { range: [0, 1] },
    },
    axes: [
      // whole request numbers only: no tick between two requests
      { label: "request # (the shown branch's, in order)", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000], values: xLabels },
      { scale: "tokens", label: "tokens", values: (u, splits) => splits.map((v) => v.toLocaleString("en")) },
      { scale: "ratio", side: 1, label: "cache hit ratio", grid: { show: false } },
    ],
    cursor: { drag: { x: false, y: false } },
    legend: { show: false }, // one legend: the page's own, below the plot
  };
  options.hooks = {
    draw: [(u) => { // what the axes show, for the page's tests: the x labels and where the token axis starts
      box.dataset.xTicks = shownTicks.join(",");
      box.dataset.yMin = String(u.scales.tokens.min);
    }],
  };
  const plot = new window.uPlot(options, columns, box);
  box.dataset.requests = String(requests.length);
  box.classList.add("drawn");
  return plot;
}

function drawTable(requests, session, notes) {
  const holder = document.getElementById("chart-table");
  if (!holder) return;
  const table = el("table", { id: "requests-table" });
  const head = el("tr");
  for (const h of ["#", "model", ...LAYERS, "provider read / write / uncached", "simulator read / write / uncached"]) head.appendChild(el("th", {}, h));
  table.appendChild(el("thead")).appendChild(head);
  const tbody = el("tbody");
  for (const r of requests) {
    const row = el("tr", r.damage ? { "data-request": String(r.index), class: "damaged" } : { "data-request": String(r.index) });
    const link = el("a", { href: `/sessions/${encodeURIComponent(session)}/requests/${r.index}` }, `#${r.index}`);
    row.appendChild(el("td")).appendChild(link);
    row.appendChild(el("td", {}, r.model));
    if (r.damage) {
      row.appendChild(el("td", { colspan: String(LAYERS.length + 2), class: "damage" }, `damaged: ${r.damage}`));
      tbody.appendChild(row);
      continue;
    }
    for (const layer of LAYERS) row.appendChild(el("td", { class: "n" }, (r.layers[layer] || 0).toLocaleString("en")));
    const p = r.provider;
    row.appendChild(el("td", { class: "n" }, p ? `${p.read.toLocaleString("en")} / ${p.write.toLocaleString("en")} / ${p.uncached.toLocaleString("en")}` : "-"));
    const s = r.simulated;
    row.appendChild(el("td", { class: "n" }, `${s.read.toLocaleString("en")} / ${s.write.toLocaleString("en")} / ${s.uncached.toLocaleString("en")}`));
    if (r.cache_miss) row.title = `missed the cache: ${r.cache_miss}`;
    tbody.appendChild(row);
  }
  table.appendChild(tbody);
  const legend = el("p", { class: "small legend", id: "chart-legend" });
  for (const layer of LAYERS) {
    const item = legend.appendChild(el("span", { class: "legend-item" }));
    item.appendChild(el("span", { class: `legend-swatch sw-${layer}` }));
    item.appendChild(document.createTextNode(layer));
  }
  for (const [name, kind] of [["hit ratio (provider)", "provider"], ["hit ratio (simulator)", "simulator"]]) {
    const item = legend.appendChild(el("span", { class: "legend-item" }));
    item.appendChild(el("span", { class: `legend-line line-${kind}` }));
    item.appendChild(document.createTextNode(name));
  }
  const list = el("ul", { class: "notes small", id: "chart-notes" });
  for (const note of notes || []) list.appendChild(el("li", {}, note));
  holder.replaceChildren(legend, list, table);
}

function follow() {
  const session = body.dataset.session;
  const status = document.getElementById("live-status");
  if (!session || typeof EventSource !== "function") return;
  const source = new EventSource(`/sessions/${encodeURIComponent(session)}/events`);
  let busy = false;
  let again = false;
  async function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const response = await fetch(`/sessions/${encodeURIComponent(session)}/live${window.location.search}`);
      if (response.ok) {
        // server-rendered, every session text escaped by the template engine
        const region = document.getElementById("live-region");
        region.innerHTML = await response.text();
        const standing = region.querySelector("#standing"); // the status and switcher go back above the chart
        const slot = document.getElementById("standing-slot");
        if (standing && slot) slot.replaceChildren(standing);
        const now = new Date().toLocaleTimeString();
        if (status) status.textContent = `live: updated ${now}`;
        body.dataset.updates = String(Number(body.dataset.updates || "0") + 1);
        await drawChart();
      }
    } finally {
      busy = false;
      if (again) { again = false; refresh(); }
    }
  }
  source.addEventListener("open", () => { if (status) { status.textContent = "live: following"; status.className = "live on"; } body.dataset.live = "on"; });
  source.addEventListener("error", () => { if (status) { status.textContent = "live: reconnecting…"; status.className = "live off"; } });
  source.addEventListener("changed", () => { refresh(); });
  source.addEventListener("gone", () => { if (status) status.textContent = "live: the session was removed"; source.close(); });
}

// the branch switcher shows the branch chosen at once (its button stays for a page without scripts)
function switchBranches() {
  document.addEventListener("change", (event) => {
    const select = event.target;
    if (select instanceof HTMLSelectElement && select.id === "branch-select") select.form.submit();
  });
}

if (body.dataset.page === "session") {
  drawChart();
  follow();
  switchBranches();
}
