// Tessera dashboard: polls the read-only JSON API and redraws. Plain modern JS, no build step,
// nothing fetched from anywhere but this server (the Content-Security-Policy allows only self).
// docs/dashboard.md says what each panel shows and where its numbers come from.
'use strict';

const POLL_MS = 1500;
const HISTORY_POINTS = 400;  // about ten minutes of samples at POLL_MS
const EVENTS_KEPT = 300;

// On-demand list prices in US$ per GPU-hour: the defaults docs/dashboard.md documents (the
// API has no price list). Types not listed cost DEFAULT_PRICE.
const PRICES = {
  'H200-141GB': 5.0, 'H100-80GB': 4.0, 'A100-80GB': 2.5, 'A100-40GB': 1.8, 'L40S': 1.6,
  'A30': 1.0, 'A10': 0.9, 'L4': 0.8, 'V100-32GB': 1.2, 'V100-16GB': 1.0, 'T4': 0.5,
  'P100-16GB': 0.6,
};
const DEFAULT_PRICE = 2.0;
const PALETTE = ['#4f8cff', '#36c6a0', '#f2b134', '#c678dd', '#ef7a5b', '#56c2e6', '#a3d65c',
  '#e06c9f', '#d4a373', '#8e9cff'];

const state = {
  afterSeq: 0,
  events: [],         // newest last, at most EVENTS_KEPT
  history: [],        // {memReserved, memUsed, busy, costTotal, costIdle}
  desired: new Map(),  // deployment -> [desired replicas per sample]
  colors: new Map(),   // model -> colour
  settings: {},
};

// ---- DOM helpers: text is always set as text, never parsed as HTML.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'style') Object.assign(el.style, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
const SVG_NS = 'http://www.w3.org/2000/svg';
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}
function replace(id, ...children) {
  document.getElementById(id).replaceChildren(...children.flat());
}

const gib = (mib) => (mib / 1024).toFixed(mib >= 10240 ? 0 : 1);
const pct = (x) => `${Math.round(x * 100)} %`;
const dollars = (x) => `$${x.toFixed(x >= 100 ? 0 : 2)}`;
// Events carry Unix time in milliseconds: shown as the browser's local time of day.
function clock(ms) {
  return new Date(ms).toLocaleTimeString([], {hour12: false});
}

function colorOf(model) {
  if (!state.colors.has(model)) {
    state.colors.set(model, PALETTE[state.colors.size % PALETTE.length]);
  }
  return state.colors.get(model);
}

async function getJson(path) {
  const res = await fetch(path, {cache: 'no-store', headers: {Accept: 'application/json'}});
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  return res.json();
}

// ---- fleet map

// What each GPU holds: node -> gpu id -> [{replica, model, chargedMib, mode, phase, mig}].
function slicesByGpu(replicas, deployments) {
  const phases = new Map();
  for (const d of deployments) {
    for (const r of d.replicas || []) phases.set(r.replica, r.phase);
  }
  const out = new Map();
  for (const r of replicas) {
    let phase = r.phase === 'loaded' ? 'ready' : 'loading';
    const p = phases.get(r.replica);
    if (p && p.startsWith('draining')) phase = 'draining';
    for (const g of r.gpus || []) {
      const key = `${r.node}/${g.id}`;
      if (!out.has(key)) out.set(key, []);
      out.get(key).push({
        replica: r.replica, model: r.model, deployment: r.deployment, chargedMib: g.chargedMib,
        mode: r.mode, phase, mig: g.migProfile,
      });
    }
  }
  for (const list of out.values()) list.sort((a, b) => a.replica.localeCompare(b.replica));
  return out;
}

function gpuView(node, gpu, slices) {
  const total = Math.max(1, gpu.memoryMib);
  const segs = [];
  for (const sl of slices) {
    const width = Math.max(0.5, (100 * sl.chargedMib) / total);
    const cls = ['seg', sl.phase, sl.mode === 'exclusive' ? 'exclusive' : ''].join(' ');
    const label = sl.mig ? `${sl.replica} (${sl.mig})` : sl.replica;
    segs.push(h('div', {
      class: cls, 'data-replica': sl.replica,
      title: `${sl.replica} · ${sl.model} · ${gib(sl.chargedMib)} GiB charged · ${sl.mode}` +
        `${sl.mig ? ' · MIG ' + sl.mig : ''} · ${sl.phase}`,
      style: {width: `${width}%`, background: colorOf(sl.model)},
    }, label));
  }
  if (gpu.foreignMib > 0) {
    segs.push(h('div', {
      class: 'seg foreign', title: `${gib(gpu.foreignMib)} GiB used outside Tessera`,
      style: {width: `${(100 * gpu.foreignMib) / total}%`},
    }, 'other'));
  }
  // The GPU's own figure: the sum of its replicas' charges (the same numbers as the segments).
  const charged = gpu.chargedMib;
  const used = gpu.usedMib;
  const tags = [];
  if (gpu.migEnabled) tags.push(h('span', {class: 'tag'}, 'MIG'));
  if (gpu.exclusive) tags.push(h('span', {class: 'tag'}, 'exclusive'));
  else if (slices.length > 1) tags.push(h('span', {class: 'tag'}, `shared ×${slices.length}`));
  if (!gpu.healthy) tags.push(h('span', {class: 'tag bad'}, 'unhealthy'));
  const usage = [`${gib(charged)}/${gib(gpu.memoryMib)} GiB charged`];
  if (used !== null && used !== undefined) usage.push(`${gib(used)} used`);
  if (gpu.utilization !== null && gpu.utilization !== undefined) {
    usage.push(`${pct(gpu.utilization)} busy`);
  }
  return h('div', {class: 'gpu', 'data-gpu': `${node.name}/${gpu.id}`},
    h('div', {class: 'gpu-label'},
      h('span', {}, `GPU ${gpu.id} · ${gpu.type}`, tags),
      h('span', {}, usage.join(' · '))),
    h('div', {class: 'bar'}, segs),
    h('div', {class: 'used', title: 'memory used, as the node last reported'},
      h('div', {style: {width: `${used ? Math.min(100, (100 * used) / total) : 0}%`}})));
}

function renderFleet(nodes, slices) {
  const cards = nodes.map((n) => {
    const tags = [];
    if (n.cordoned) tags.push(h('span', {class: 'tag warn'}, 'cordoned'));
    if (!n.healthy) tags.push(h('span', {class: 'tag bad'}, 'unhealthy'));
    const types = [...new Set(n.gpus.map((g) => g.type))].join(', ');
    const cls = ['node', n.cordoned ? 'cordoned' : '', n.healthy ? '' : 'unhealthy'].join(' ');
    return h('div', {class: cls, 'data-node': n.name},
      h('div', {class: 'node-head'},
        h('div', {}, h('span', {class: 'node-name'}, n.name), tags),
        h('div', {class: 'node-meta'},
          `${n.gpus.length} × ${types} · ${n.replicas.length} replica` +
          `${n.replicas.length === 1 ? '' : 's'}`)),
      n.gpus.map((g) => gpuView(n, g, slices.get(`${n.name}/${g.id}`) || [])));
  });
  replace('fleet', cards.length ? cards : h('p', {class: 'empty'},
    'No node is registered yet (POST /api/v1/nodes, or start with --demo).'));
}

function renderLegend(models) {
  const items = models.map((m) => h('span', {}, h('i', {style: {background: colorOf(m.name)}}),
    `${m.name} (${gib(m.memoryPerGpuMib)} GiB/GPU${m.gpusPerReplica > 1 ? ' × ' +
      m.gpusPerReplica : ''})`));
  items.push(h('span', {}, 'faded: loading · striped: draining · outlined: exclusive'));
  replace('legend', items);
}

// ---- fleet totals and the two charts

function totals(nodes) {
  const t = {nodes: nodes.length, gpus: 0, mem: 0, reserved: 0, used: 0, busy: 0, costTotal: 0,
    costIdle: 0, holding: 0};
  for (const n of nodes) {
    for (const g of n.gpus) {
      if (!g.healthy) continue;
      const price = PRICES[g.type] ?? DEFAULT_PRICE;
      const util = g.utilization ?? 0;
      t.gpus += 1;
      t.mem += g.memoryMib;
      t.reserved += g.chargedMib;
      t.used += g.usedMib ?? 0;
      t.busy += util;
      t.costTotal += price;
      t.costIdle += price * (1 - util);
      if (g.replicas.length > 0) t.holding += 1;
    }
  }
  return t;
}

function renderSummary(t, replicas, deployments) {
  const pending = deployments.reduce((a, d) => a + (d.status.pending || 0), 0);
  const stat = (value, label, testid) => h('div', {class: 'stat', 'data-stat': testid},
    h('b', {}, value), h('span', {}, label));
  replace('summary',
    stat(t.nodes, 'nodes', 'nodes'),
    stat(t.gpus, 'GPUs', 'gpus'),
    stat(replicas.length, 'replicas', 'replicas'),
    stat(pending, 'pending', 'pending'),
    stat(t.mem ? pct(t.reserved / t.mem) : '–', 'memory charged', 'reserved'),
    stat(t.gpus ? pct(t.busy / t.gpus) : '–', 'compute busy', 'busy'),
    stat(`${dollars(t.costIdle)}/h`, 'paid, idle', 'idle-cost'));
}

// A line chart of `series` ({name, color, values}) on a 0..yMax scale.
function lineChart(svg, series, yMax, format) {
  const W = 600, H = 200, left = 44, right = 8, top = 10, bottom = 36;
  // The time axis spans what was gathered (at least a minute's worth), newest on the right.
  const n = Math.max(2, ...series.map((x) => x.values.length));
  const span = Math.max(n, 40);
  const x = (i) => left + ((W - left - right) * (i + span - n)) / (span - 1);
  const y = (v) => top + (H - top - bottom) * (1 - Math.min(1, v / yMax));
  const parts = [];
  for (let k = 0; k <= 4; k++) {
    const v = (yMax * k) / 4;
    parts.push(s('line', {class: 'grid', x1: left, x2: W - right, y1: y(v), y2: y(v)}));
    parts.push(s('text', {x: left - 6, y: y(v) + 4, 'text-anchor': 'end'}, format(v)));
  }
  let lx = left;
  for (const ser of series) {
    if (ser.values.length > 0) {
      const pts = ser.values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`);
      if (ser.fill) {
        const first = x(0).toFixed(1), last = x(ser.values.length - 1).toFixed(1);
        parts.push(s('polygon', {class: 'area', fill: ser.color,
          points: `${first},${y(0)} ${pts.join(' ')} ${last},${y(0)}`}));
      }
      parts.push(s('polyline', {class: 'series', stroke: ser.color, points: pts.join(' ')}));
    }
    const latest = ser.values.length ? format(ser.values[ser.values.length - 1]) : '–';
    parts.push(s('rect', {x: lx, y: H - 16, width: 10, height: 10, fill: ser.color}));
    const label = s('text', {x: lx + 14, y: H - 7}, `${ser.name} ${latest}`);
    parts.push(label);
    lx += 14 + 7.2 * (ser.name.length + latest.length + 1) + 16;
  }
  svg.replaceChildren(...parts);
}

function renderCharts(t) {
  state.history.push({
    memReserved: t.mem ? t.reserved / t.mem : 0,
    memUsed: t.mem ? t.used / t.mem : 0,
    busy: t.gpus ? t.busy / t.gpus : 0,
    costTotal: t.costTotal,
    costIdle: t.costIdle,
  });
  if (state.history.length > HISTORY_POINTS) state.history.shift();
  const col = (k) => state.history.map((p) => p[k]);
  lineChart(document.getElementById('util-chart'), [
    {name: 'memory charged', color: '#4f8cff', values: col('memReserved'), fill: true},
    {name: 'memory used', color: '#36c6a0', values: col('memUsed')},
    {name: 'compute busy', color: '#f2b134', values: col('busy')},
  ], 1, (v) => `${Math.round(v * 100)}%`);
  const maxCost = Math.max(1, ...col('costTotal'));
  const top = Math.ceil(maxCost / 10) * 10;
  lineChart(document.getElementById('cost-chart'), [
    {name: 'fleet', color: '#8d97ad', values: col('costTotal')},
    {name: 'paid but idle', color: '#ef5b5b', values: col('costIdle'), fill: true},
  ], top, (v) => `$${Math.round(v)}`);
}

// ---- pending replicas and autoscaling

function renderPending(deployments) {
  const rows = deployments.filter((d) => d.status.pending > 0).map((d) =>
    h('tr', {'data-pending': d.name},
      h('td', {}, h('span', {class: 'dot', style: {background: colorOf(d.model)}}), d.name),
      h('td', {class: 'num'}, d.status.pending),
      h('td', {class: 'reason'}, d.status.pendingReason || 'no reason given')));
  const recent = state.events.filter((e) => e.type === 'ReplicaPending' ||
    e.type === 'ReplicaUnplaceable').slice(-5).reverse();
  const parts = [];
  if (rows.length) {
    parts.push(h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'deployment'),
      h('th', {}, 'waiting'), h('th', {}, 'why it does not fit'))), h('tbody', {}, rows)));
  } else {
    parts.push(h('p', {class: 'empty'}, 'No replica is waiting for room.'));
  }
  if (recent.length) {
    parts.push(h('h2', {}, h('small', {}, 'recent refusals')));
    parts.push(h('ul', {class: 'scale-events'}, recent.map((e) =>
      h('li', {}, `${clock(e.timeMs)} ${e.subject}: ${e.message}`))));
  }
  replace('pending', parts);
}

function sparkline(values, maxValue, color) {
  const W = 120, H = 28;
  const n = values.length;
  const pts = values.map((v, i) => `${(n < 2 ? 0 : (W * i) / (n - 1)).toFixed(1)},` +
    `${(H - 2 - ((H - 4) * v) / Math.max(1, maxValue)).toFixed(1)}`);
  return s('svg', {class: 'spark', viewBox: `0 0 ${W} ${H}`},
    s('polyline', {class: 'series', stroke: color, points: pts.join(' ')}));
}

function renderScaling(deployments) {
  const rows = deployments.map((d) => {
    const hist = state.desired.get(d.name) || [];
    const events = state.events.filter((e) => e.subject === d.name &&
      (e.type === 'ScaledUp' || e.type === 'ScaledDown')).slice(-3).reverse();
    const st = d.status;
    return h('tr', {'data-deployment': d.name},
      h('td', {},
        h('div', {}, h('span', {class: 'dot', style: {background: colorOf(d.model)}}),
          h('b', {}, d.name)),
        h('div', {class: 'reason'}, `${d.model} · ${d.recommender}`)),
      h('td', {class: 'num', title: 'desired (min..max)'},
        `${st.desired}`, h('div', {class: 'reason'}, `${d.minReplicas}..${d.maxReplicas}`)),
      h('td', {class: 'num'}, `${st.ready} / ${st.loading} / ${st.draining} / ${st.pending}`),
      h('td', {}, sparkline(hist, d.maxReplicas, colorOf(d.model)),
        h('ul', {class: 'scale-events'}, events.map((e) =>
          h('li', {class: e.type === 'ScaledUp' ? 'up' : 'down'},
            `${clock(e.timeMs)} ${e.type === 'ScaledUp' ? '▲' : '▼'} ` +
            `${e.message}`)))));
  });
  replace('scaling', rows.length ? h('table', {},
    h('thead', {}, h('tr', {}, h('th', {}, 'deployment'), h('th', {}, 'desired'),
      h('th', {}, 'ready / loading / draining / pending'), h('th', {}, 'desired over time'))),
    h('tbody', {}, rows)) : h('p', {class: 'empty'},
    'No deployment yet (POST /api/v1/deployments).'));
}

function renderEvents() {
  const items = state.events.slice(-80).reverse().map((e) => {
    const cls = ['type', e.type === 'ScaledUp' ? 'up' : '',
      e.type === 'ReplicaPending' || e.type === 'ReplicaUnplaceable' ? 'warn' : ''].join(' ');
    return h('li', {'data-seq': e.seq},
      h('span', {class: 't'}, clock(e.timeMs)),
      h('span', {class: cls}, e.type), ` ${e.subject}`, e.message ? ` · ${e.message}` : '');
  });
  replace('events', items);
}

// ---- polling

async function pollEvents() {
  for (let round = 0; round < 20; round++) {
    const page = await getJson(`/api/v1/events?after=${state.afterSeq}&limit=1000`);
    for (const e of page.events) {
      state.afterSeq = Math.max(state.afterSeq, e.seq);
      state.events.push(e);
    }
    if (state.events.length > EVENTS_KEPT) state.events.splice(0, state.events.length - EVENTS_KEPT);
    if (page.events.length < 1000) break;
  }
}

function setStatus(text, ok) {
  const el = document.getElementById('status');
  el.textContent = text;
  el.className = `status ${ok ? 'ok' : 'error'}`;
}

async function poll() {
  try {
    const [nodes, replicas, deployments, models] = await Promise.all([
      getJson('/api/v1/nodes'), getJson('/api/v1/replicas'), getJson('/api/v1/deployments'),
      getJson('/api/v1/models'), pollEvents()]);
    for (const m of models.models) colorOf(m.name);
    for (const d of deployments.deployments) {
      const hist = state.desired.get(d.name) || [];
      hist.push(d.status.desired);
      if (hist.length > HISTORY_POINTS) hist.shift();
      state.desired.set(d.name, hist);
    }
    const t = totals(nodes.nodes);
    renderLegend(models.models);
    renderFleet(nodes.nodes, slicesByGpu(replicas.replicas, deployments.deployments));
    renderSummary(t, replicas.replicas, deployments.deployments);
    renderCharts(t);
    renderPending(deployments.deployments);
    renderScaling(deployments.deployments);
    renderEvents();
    document.body.dataset.updated = String(Date.now());
    setStatus(`updated ${new Date().toLocaleTimeString()}`, true);
  } catch (err) {
    setStatus(`cannot read the API: ${err.message}`, false);
  }
  setTimeout(poll, POLL_MS);
}

async function start() {
  try {
    state.settings = await getJson('/ui/settings.json');
  } catch (err) {
    state.settings = {};
  }
  if (state.settings.demo) {
    document.getElementById('demo-badge').hidden = false;
    document.getElementById('demo-note').hidden = false;
    document.title = 'Tessera (demo): fleet dashboard';
  }
  if (state.settings.version) {
    document.getElementById('version').textContent = `tessera ${state.settings.version}`;
  }
  poll();
}

document.addEventListener('DOMContentLoaded', start);
