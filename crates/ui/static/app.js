// The troupe view. Everything a model, a tool or a person wrote is put in the page with
// textContent, never parsed as markup: a model's output is hostile input. The server folds the team's
// events into the state; this page only replaces what a patch names and appends streamed text.
'use strict';

const token = new URLSearchParams(location.search).get('token') || '';
const LOG_ROWS = 200;

const state = {
  version: -1, readOnly: false, marks: null, saidCap: 32768, missed: 0, lagged: 0,
  agents: new Map(), approvals: [], compactions: new Map(), events: [], conversation: null,
};
// Longer texts are folded: their first characters show, the rest opens on a click.
const FOLD = 600;
// Timings for the browser test: how long the page takes to take in and draw the feed.
const stats = { patches: 0, snapshots: 0, renders: 0, renderMs: 0, maxRenderMs: 0, applyMs: 0 };
window.troupeStats = stats;
let dirty = { agents: new Set(), all: true };
let scheduled = false;

const STATE_TEXT = {
  idle: 'idle', working: 'working', calling_model: 'calling the model', running_tool: 'running a tool',
  waiting_for_approval: 'waiting for approval', paused_by_budget: 'paused by a budget',
  compacting: 'compacting', stopped: 'stopped',
};

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function fmt(n) { return n === null || n === undefined ? '?' : Number(n).toLocaleString('en-US'); }

function setStatus(text) { document.getElementById('status').textContent = text; }

function schedule() {
  if (scheduled) return;
  scheduled = true;
  requestAnimationFrame(render);
}

function applySnapshot(s) {
  const t0 = performance.now();
  state.version = s.version;
  state.readOnly = s.read_only;
  state.marks = s.marks;
  state.saidCap = s.said_cap;
  state.missed = s.missed;
  state.agents = new Map(s.agents.map(a => [a.name, a]));
  state.approvals = s.approvals;
  state.compactions = new Map(s.compactions.map(c => [c.n, c]));
  state.events = s.events.slice();
  state.conversation = s.conversation || null;
  stats.snapshots++;
  stats.applyMs += performance.now() - t0;
  dirty.all = true;
  schedule();
}

function applyPatch(p) {
  if (p.version <= state.version) return;
  const t0 = performance.now();
  state.version = p.version;
  if (p.record) {
    state.events.push(p.record);
    if (state.events.length > 10000) state.events.splice(0, state.events.length - 10000);
  }
  if (p.agent) { state.agents.set(p.agent.name, p.agent); dirty.agents.add(p.agent.name); }
  if (p.append !== undefined && p.record) {
    const a = state.agents.get(p.record.event.agent);
    if (a) {
      a.said += p.append;
      if (a.said.length > state.saidCap) a.said = a.said.slice(-state.saidCap);
      dirty.agents.add(a.name);
    }
  }
  if (p.approvals) { state.approvals = p.approvals; dirty.approvals = true; }
  if (p.compaction) {
    state.compactions.set(p.compaction.n, p.compaction);
    if (state.compactions.size > 500) state.compactions.delete(state.compactions.keys().next().value);
    dirty.compactions = true;
  }
  dirty.log = true;
  stats.patches++;
  stats.applyMs += performance.now() - t0;
  schedule();
}

function render() {
  scheduled = false;
  const t0 = performance.now();
  const d = dirty;
  dirty = { agents: new Set(), all: false };
  document.getElementById('mode').textContent = state.readOnly ? 'finished run (read-only)' : 'live';
  if (d.all) {
    const box = document.getElementById('agents');
    box.replaceChildren(...[...state.agents.values()].map(agentCard));
  } else {
    for (const name of d.agents) {
      const a = state.agents.get(name);
      const old = document.querySelector(`.card[data-agent="${CSS.escape(name)}"]`);
      const card = agentCard(a);
      if (old) old.replaceWith(card); else document.getElementById('agents').append(card);
    }
  }
  if (d.all || d.approvals) renderApprovals();
  if (d.all || d.compactions) renderCompactions();
  if (d.all || d.log) renderLog();
  if (d.all) renderConversation();
  const ms = performance.now() - t0;
  stats.renders++;
  stats.renderMs += ms;
  stats.maxRenderMs = Math.max(stats.maxRenderMs, ms);
}

function agentCard(a) {
  const card = el('div', 'card');
  card.dataset.agent = a.name;
  const h = el('h3');
  h.append(el('span', 'name', a.name));
  const st = el('span', 'state', STATE_TEXT[a.state] || a.state);
  st.dataset.state = a.state;
  h.append(st);
  card.append(h);
  card.append(el('div', 'model', a.model ? `model: ${a.model}` : 'model: not called yet'));
  card.append(meter(a));
  card.append(chart(a));
  if (a.tool) card.append(el('div', 'detail', `tool: ${a.tool}`));
  if (a.compacting) {
    card.append(el('div', 'detail compacting',
      `compacting (${a.compacting.trigger}, ${a.compacting.mode}) from ${fmt(a.compacting.tokens)} tokens`));
  }
  if (a.paused) {
    const p = a.paused;
    card.append(el('div', 'detail paused', `paused: ${p.scope} budget spent (${JSON.stringify(p.spent)} of ${JSON.stringify(p.limit)})`));
  }
  if (a.error) card.append(el('div', 'detail error', `error: ${a.error}`));
  card.append(el('div', 'detail', `model calls: ${a.model_calls}`));
  if (a.said) {
    const said = el('pre', 'said', a.said);
    card.append(said);
  }
  return card;
}

function usable(a) { return a.window ? Math.max(1, a.window - (a.output_reserve || 0)) : null; }

function meter(a) {
  const box = el('div');
  const bar = el('div', 'meter');
  const use = usable(a);
  const text = el('div', 'detail meter-text');
  if (use && a.tokens !== null) {
    const fill = el('div', 'fill');
    fill.style.width = `${Math.min(100, 100 * a.tokens / a.window)}%`;
    bar.append(fill);
    for (const kind of ['warning', 'trigger', 'target']) {
      const m = el('div', `mark ${kind}`);
      m.style.left = `${100 * use * state.marks[kind] / a.window}%`;
      m.title = `${kind}: ${fmt(Math.round(use * state.marks[kind]))} tokens`;
      bar.append(m);
    }
    text.textContent = `context: ${fmt(a.tokens)} / ${fmt(a.window)} tokens (${Math.round(100 * a.tokens / use)}% of usable; trigger at ${fmt(Math.round(use * state.marks.trigger))})`;
  } else {
    text.textContent = a.tokens !== null ? `context: ${fmt(a.tokens)} tokens` : 'context: not measured yet';
  }
  box.append(bar, text);
  return box;
}

const SVG = 'http://www.w3.org/2000/svg';
function chart(a) {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('class', 'chart');
  svg.setAttribute('viewBox', '0 0 240 36');
  svg.setAttribute('preserveAspectRatio', 'none');
  const pts = a.meter || [];
  const top = Math.max(a.window || 0, ...pts.map(p => p.tokens), 1);
  if (pts.length > 1) {
    const line = document.createElementNS(SVG, 'polyline');
    line.setAttribute('points', pts.map((p, i) =>
      `${(240 * i / (pts.length - 1)).toFixed(1)},${(36 - 34 * p.tokens / top).toFixed(1)}`).join(' '));
    svg.append(line);
  }
  const use = usable(a);
  if (use) {
    const y = (36 - 34 * use * state.marks.trigger / top).toFixed(1);
    const t = document.createElementNS(SVG, 'line');
    t.setAttribute('class', 'trigger');
    t.setAttribute('x1', '0'); t.setAttribute('x2', '240'); t.setAttribute('y1', y); t.setAttribute('y2', y);
    svg.append(t);
  }
  return svg;
}

function renderApprovals() {
  const box = document.getElementById('approvals');
  document.getElementById('no-approvals').classList.toggle('hidden', state.approvals.length > 0);
  box.replaceChildren(...state.approvals.map(ap => {
    const row = el('div', 'approval');
    row.dataset.approval = ap.id;
    row.append(el('div', 'who', `${ap.agent} wants to run ${ap.tool}`));
    row.append(el('pre', 'arguments', ap.arguments));
    if (!state.readOnly) {
      const yes = el('button', 'approve', 'Approve');
      yes.addEventListener('click', () => answer('approve', ap.id, row));
      const no = el('button', 'deny', 'Deny');
      no.addEventListener('click', () => answer('deny', ap.id, row));
      row.append(yes, no);
    }
    row.append(el('span', 'detail outcome'));
    return row;
  }));
}

async function answer(decision, id, row) {
  for (const b of row.querySelectorAll('button')) b.disabled = true;
  const body = decision === 'deny' ? { id, reason: 'denied in the troupe view' } : { id };
  try {
    const r = await fetch(`api/approvals/${decision}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-troupe-token': token },
      body: JSON.stringify(body),
    });
    if (!r.ok) row.querySelector('.outcome').textContent = `not taken: ${await r.text()}`;
  } catch (e) {
    row.querySelector('.outcome').textContent = `not sent: ${e}`;
  }
}

function renderCompactions() {
  const box = document.getElementById('compactions');
  const list = [...state.compactions.values()].reverse();
  document.getElementById('no-compactions').classList.toggle('hidden', list.length > 0);
  box.replaceChildren(...list.map(c => {
    const row = el('div', c.failed ? 'compaction failed' : 'compaction');
    row.dataset.compaction = String(c.n);
    row.dataset.agent = c.agent;
    const when = new Date(c.at_ms).toLocaleTimeString();
    row.append(el('div', 'who', `${c.agent} · ${c.trigger || 'compaction'} · ${when}`));
    if (c.failed) {
      row.append(el('div', 'detail', `failed: ${c.failed}`));
      return row;
    }
    const r = c.report;
    if (r) {
      row.append(el('div', 'tokens', `${fmt(r.tokens_before)} → ${fmt(r.tokens_after)} tokens (target ${fmt(r.target_tokens)}, window ${fmt(r.context_window)})`));
      const t = r.tiers || {};
      row.append(el('div', 'detail tiers',
        `tiers: ${t.truncated || 0} truncated, ${t.masked || 0} masked, ${(t.segment_summaries || 0) + (t.per_message_summarized || 0)} summaries of ${t.summarized_messages || 0} messages; ${r.archived || 0} archived; ${Math.round(r.duration_ms || 0)} ms`));
      if (r.receipt) {
        const rc = r.receipt;
        row.append(el('div', 'receipt',
          `receipt (${rc.pricing}): cached prefix kept ${fmt(rc.cached_prefix_kept)}, re-billed ${fmt(rc.rebilled_tokens)}, summarizer ${fmt(Math.round(rc.summarizer_billed))}, net saving ${fmt(Math.round(rc.net_saving))} over ${rc.expected_turns.toFixed(1)} calls`));
      } else {
        row.append(el('div', 'receipt detail', 'no receipt (nothing changed)'));
      }
      if (r.reason) row.append(el('div', 'detail', r.reason));
    }
    if (c.applied !== null && c.applied !== undefined) {
      row.append(el('div', 'detail applied',
        c.applied ? `applied; the agent waited ${fmt(c.waited_ms)} ms` : `dropped: ${c.reason || ''}`));
    }
    return row;
  }));
}

function folded(cls, text) {
  if (text.length <= FOLD) return el('pre', cls, text);
  const box = el('details', cls);
  box.append(el('summary', null, `${text.slice(0, 160)}… (${fmt(text.length)} characters)`));
  box.append(el('pre', null, text));
  return box;
}

function renderConversation() {
  const section = document.getElementById('conversation-section');
  const c = state.conversation;
  section.classList.toggle('hidden', !c);
  if (!c) return;
  const t0 = performance.now();
  document.getElementById('conversation-agent').textContent = `(${c.agent}, ${fmt(c.messages.length)} messages)`;
  document.getElementById('conversation').replaceChildren(...c.messages.map(m => {
    const li = el('li', `${m.kind}${m.pinned ? ' pinned' : ''}`);
    li.dataset.id = String(m.id);
    const head = el('div');
    head.append(el('span', 'role', m.role), el('span', 'detail', `m${m.id}${m.kind !== 'normal' ? ` · ${m.kind}` : ''}${m.pinned ? ' · pinned' : ''}`));
    li.append(head);
    if (m.text) li.append(folded('text', m.text));
    for (const [tool, args] of m.tool_calls) li.append(folded('tool-call', `${tool}(${args})`));
    return li;
  }));
  stats.conversationMs = performance.now() - t0;
}

function describe(ev) {
  const e = { ...ev };
  delete e.type; delete e.agent;
  if (e.report) e.report = `${e.report.tokens_before} → ${e.report.tokens_after} tokens`;
  return JSON.stringify(e);
}

function renderLog() {
  const rows = state.events.slice(-LOG_ROWS).reverse().map(r => {
    const li = el('li');
    li.append(el('span', 'seq', `#${r.seq}`), el('span', 'agent', `${r.event.agent} `),
      el('b', 'type', `${r.event.type} `), el('span', 'data', describe(r.event)));
    return li;
  });
  document.getElementById('log').replaceChildren(...rows);
  document.getElementById('event-count').textContent =
    `(${fmt(state.events.length)} kept${state.missed ? `, ${fmt(state.missed)} missed` : ''}${state.lagged ? `, re-synced ${state.lagged}×` : ''})`;
}

function connect() {
  const es = new EventSource(`api/events?token=${encodeURIComponent(token)}`);
  es.addEventListener('snapshot', e => applySnapshot(JSON.parse(e.data)));
  es.addEventListener('patch', e => applyPatch(JSON.parse(e.data)));
  es.addEventListener('lagged', () => { state.lagged++; setStatus('fell behind, re-synced'); });
  es.addEventListener('open', () => setStatus('connected'));
  es.addEventListener('error', () => setStatus('disconnected (retrying)'));
}

connect();
