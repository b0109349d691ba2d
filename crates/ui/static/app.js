// The troupe view. Everything a model, a tool or a person wrote is put in the page with
// textContent, never parsed as markup: a model's output is hostile input. The server folds the team's
// events into the state; this page only replaces what a patch names and appends streamed text.
'use strict';

const token = new URLSearchParams(location.search).get('token') || '';
const LOG_ROWS = 200;

const state = {
  version: -1, readOnly: false, marks: null, saidCap: 32768, missed: 0, lagged: 0,
  agents: new Map(), approvals: [], compactions: new Map(), events: [],
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
  if (s.conversation) {
    conv.agent = s.conversation.agent;
    conv.data = s.conversation;
  }
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
  if (p.agent) {
    state.agents.set(p.agent.name, p.agent);
    dirty.agents.add(p.agent.name);
    conversationMaybeStale(p.agent);
  }
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
  if (d.all || d.log) refreshTraces();
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
    card.append(el('div', 'detail paused', `paused: ${p.scope} budget spent (${spendText(p.spent, p.limit)})`));
    if (!state.readOnly) card.append(raiseForm(a));
  }
  if (a.error) card.append(el('div', 'detail error', `error: ${a.error}`));
  if (a.moved) {
    const m = a.moved;
    card.append(el('div', 'detail moved', `moved from node ${m.from} to ${m.to} at step ${m.step}`));
  }
  card.append(el('div', 'detail', `model calls: ${a.model_calls}`));
  if (a.said) {
    const said = el('pre', 'said', a.said);
    card.append(said);
  }
  const actions = el('div', 'actions');
  if (a.revision > 0 || state.readOnly) {
    const show = el('button', 'show-conversation', 'Conversation');
    show.addEventListener('click', () => openConversation(a.name));
    actions.append(show);
  }
  if (!state.readOnly && a.revision > 0) {
    const compact = el('button', 'compact-now', '/compact');
    compact.addEventListener('click', () => compactNow(a.name));
    actions.append(compact);
  }
  if (actions.childElementCount) card.append(actions);
  if (notes.has(a.name)) card.append(el('div', 'detail note', notes.get(a.name)));
  return card;
}

function usable(a) { return a.window ? Math.max(1, a.window - (a.output_reserve || 0)) : null; }

// The agent's own marks (from its context policy, once its /context answered), else the view's.
function marksOf(a) { return a.marks || state.marks; }

const MARKS = ['warning', 'trigger', 'target'];

function peakOf(a) { return Math.max(a.tokens || 0, ...(a.meter || []).map(p => p.tokens)); }

function meter(a) {
  const box = el('div');
  const bar = el('div', 'meter');
  const use = usable(a);
  const marks = marksOf(a);
  const text = el('div', 'detail meter-text');
  if (use && a.tokens !== null) {
    const fill = el('div', 'fill');
    fill.style.width = `${Math.min(100, 100 * a.tokens / a.window)}%`;
    bar.append(fill);
    for (const kind of MARKS) {
      const m = el('div', `mark ${kind}`);
      const at = Math.round(use * marks[kind]);
      m.dataset.tokens = String(at);
      m.style.left = `${100 * at / a.window}%`;
      m.title = `${kind}: ${fmt(at)} tokens (${Math.round(100 * marks[kind])}% of ${fmt(use)} usable)`;
      bar.append(m);
    }
    const trigger = Math.round(use * marks.trigger);
    const peak = peakOf(a);
    // For a reader (and the browser test): whether the context ever reached the trigger.
    bar.dataset.peak = String(peak);
    bar.dataset.trigger = String(trigger);
    bar.classList.toggle('crossed', peak >= trigger);
    text.textContent = `context: ${fmt(a.tokens)} / ${fmt(a.window)} tokens (${Math.round(100 * a.tokens / use)}% of usable; ` +
      `warning ${fmt(Math.round(use * marks.warning))}, trigger ${fmt(trigger)}, target ${fmt(Math.round(use * marks.target))}; peak ${fmt(peak)})`;
  } else {
    text.textContent = a.tokens !== null ? `context: ${fmt(a.tokens)} tokens` : 'context: not measured yet';
  }
  box.append(bar, text);
  return box;
}

const SVG = 'http://www.w3.org/2000/svg';
const CHART_W = 240, CHART_H = 40;
function svgEl(tag, attrs) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

// Tokens over the session, by time, with the three marks as lines.
function chart(a) {
  const svg = svgEl('svg', { class: 'chart', viewBox: `0 0 ${CHART_W} ${CHART_H}`, preserveAspectRatio: 'none' });
  const pts = a.meter || [];
  const top = Math.max(a.window || 0, ...pts.map(p => p.tokens), 1);
  const y = t => (CHART_H - 1 - (CHART_H - 2) * t / top).toFixed(1);
  const use = usable(a);
  if (use) {
    const marks = marksOf(a);
    for (const kind of MARKS) {
      const at = y(use * marks[kind]);
      svg.append(svgEl('line', { class: kind, x1: 0, x2: CHART_W, y1: at, y2: at }));
    }
  }
  if (pts.length > 1) {
    const t0 = pts[0].at_ms, span = Math.max(1, pts[pts.length - 1].at_ms - t0);
    const x = p => (CHART_W * (p.at_ms - t0) / span).toFixed(1);
    svg.append(svgEl('polyline', { points: pts.map(p => `${x(p)},${y(p.tokens)}`).join(' ') }));
  }
  const title = svgEl('title', {});
  title.textContent = `${pts.length} readings of ${a.name}'s context over the session`;
  svg.append(title);
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
      yes.addEventListener('click', () => answer('approve', ap, row));
      const no = el('button', 'deny', 'Deny');
      no.addEventListener('click', () => answer('deny', ap, row));
      row.append(yes, no);
    }
    row.append(el('span', 'detail outcome'));
    return row;
  }));
}

// The answer names the call and what was shown of it (its digest): the server answers only
// that call, so a call that changed under the same id since it was drawn is not answered.
async function answer(decision, ap, row) {
  for (const b of row.querySelectorAll('button')) b.disabled = true;
  const body = { id: ap.id, digest: ap.digest };
  if (decision === 'deny') body.reason = 'denied in the troupe view';
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
    if (r && r.archived) {
      const b = el('button', 'show-archive', `what went to the archive (${fmt(r.archived)})`);
      b.addEventListener('click', () => openArchive(c.agent));
      row.append(b);
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

// ---- An agent's conversation: the newest CONV_PAGE messages drawn, older ones on demand, so a
// conversation of thousands keeps the DOM (and each render) small.
const CONV_PAGE = 200;
const conv = { agent: null, data: null, shown: CONV_PAGE, revision: -1, loading: false };

async function api(path) {
  const r = await fetch(path, { headers: { 'x-troupe-token': token } });
  if (!r.ok) throw new Error(`${r.status}: ${await r.text()}`);
  return r.json();
}

async function post(path, body) {
  const r = await fetch(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-troupe-token': token },
    body: JSON.stringify(body),
  });
  const text = await r.text();
  return { ok: r.ok, status: r.status, text };
}

async function openConversation(agent) {
  conv.agent = agent;
  conv.shown = CONV_PAGE;
  await loadConversation();
}

async function loadConversation() {
  if (!conv.agent) return;
  if (conv.loading) { conv.again = true; return; }
  conv.loading = true;
  const a = state.agents.get(conv.agent);
  const revision = a ? a.revision : 0;
  try {
    conv.data = await api(`api/conversation?agent=${encodeURIComponent(conv.agent)}`);
    conv.revision = revision;
  } catch (e) {
    conv.data = { agent: conv.agent, messages: [], archived: 0, error: String(e) };
  } finally {
    conv.loading = false;
  }
  renderConversation();
  if (conv.again) { conv.again = false; loadConversation(); }
}

// A live agent's conversation is read again when it is between requests once more.
function conversationMaybeStale(a) {
  if (conv.agent === a.name && !state.readOnly && a.revision !== conv.revision) loadConversation();
}

function messageItem(c, m) {
  const li = el('li', `${m.kind}${m.pinned ? ' pinned' : ''}`);
  li.dataset.id = String(m.id);
  const head = el('div');
  head.append(el('span', 'role', m.role), el('span', 'detail',
    `m${m.id}${m.kind !== 'normal' ? ` · ${m.kind}` : ''}${m.pinned ? ' · pinned' : ''}${m.answers ? ` · result of ${m.answers}` : ''}`));
  li.append(head);
  if (m.text) li.append(folded(m.role === 'tool' ? 'text tool-result' : 'text', m.text));
  for (const [tool, args] of m.tool_calls) li.append(folded('tool-call', `${tool}(${args})`));
  if (m.replaces && m.replaces.length) {
    const box = el('div', 'replaces');
    box.append(el('span', 'detail', `stands for ${m.replaces.length} archived: `));
    for (const id of m.replaces) {
      const b = el('button', 'original', `m${id}`);
      b.dataset.id = String(id);
      b.addEventListener('click', () => openOriginal(c.agent, id));
      box.append(b);
    }
    li.append(box);
  }
  return li;
}

function renderConversation() {
  const section = document.getElementById('conversation-section');
  const c = conv.data;
  section.classList.toggle('hidden', !c);
  if (!c) return;
  const t0 = performance.now();
  const total = c.messages.length;
  const shown = Math.min(total, conv.shown);
  document.getElementById('conversation-agent').textContent =
    `(${c.agent}, ${fmt(total)} messages, ${fmt(c.archived || 0)} archived${c.error ? `; ${c.error}` : ''})`;
  const older = document.getElementById('conversation-older');
  older.classList.toggle('hidden', shown >= total);
  older.textContent = `show ${fmt(Math.min(CONV_PAGE, total - shown))} earlier (${fmt(total - shown)} not drawn)`;
  document.getElementById('conversation').replaceChildren(
    ...c.messages.slice(total - shown).map(m => messageItem(c, m)));
  stats.conversationMs = performance.now() - t0;
  stats.conversationNodes = document.getElementById('conversation').getElementsByTagName('*').length;
}

function showOlder() {
  conv.shown += CONV_PAGE;
  renderConversation();
}

// ---- The archive: what compaction replaced, read back by id as `recall` reads it.
async function openArchive(agent) {
  const box = document.getElementById('archive');
  document.getElementById('archive-section').classList.remove('hidden');
  document.getElementById('archive-agent').textContent = `(${agent})`;
  let listing;
  try {
    listing = await api(`api/archive?agent=${encodeURIComponent(agent)}`);
  } catch (e) {
    box.replaceChildren(el('p', 'detail error', `cannot read the archive: ${e}`));
    return;
  }
  const list = el('ol', 'archive-list');
  for (const e of listing.entries) {
    const li = el('li');
    li.dataset.id = String(e.id);
    const b = el('button', 'original', `m${e.id}`);
    b.addEventListener('click', () => openOriginal(agent, e.id));
    li.append(b, el('span', 'detail', `${e.role}${e.replaced_by !== null ? ` → m${e.replaced_by}` : ' (removed)'} · ${fmt(e.chars)} chars: `),
      el('span', 'first-line', e.first_line));
    list.append(li);
  }
  box.replaceChildren(el('p', 'detail', `${fmt(listing.total)} originals archived${listing.total > listing.entries.length ? ` (newest ${fmt(listing.entries.length)} listed)` : ''}`), list,
    el('div', 'archived-original'));
}

async function openOriginal(agent, id) {
  const section = document.getElementById('archive-section');
  section.classList.remove('hidden');
  if (!document.querySelector('#archive .archived-original')) {
    document.getElementById('archive').replaceChildren(el('div', 'archived-original'));
    document.getElementById('archive-agent').textContent = `(${agent})`;
  }
  const box = document.querySelector('#archive .archived-original');
  box.dataset.id = String(id);
  let found;
  try {
    found = await api(`api/archive?agent=${encodeURIComponent(agent)}&id=m${id}`);
  } catch (e) {
    box.replaceChildren(el('p', 'detail error', `m${id}: ${e}`));
    return;
  }
  const parts = [el('h3', null, `m${id}, as ${agent}'s recall reads it back`)];
  const one = m => {
    const d = el('div', 'original-message');
    d.dataset.id = String(m.id);
    d.append(el('div', 'detail', `m${m.id} · ${m.role} · ${m.kind}${m.pinned ? ' · pinned' : ''}`));
    if (m.text) d.append(el('pre', 'original-text', m.text));
    for (const [tool, args] of m.tool_calls) d.append(el('pre', 'tool-call', `${tool}(${args})`));
    return d;
  };
  if (found.original) parts.push(one(found.original));
  if (found.replaced.length) {
    parts.push(el('div', 'detail', `m${id} stands for ${found.replaced.length} originals:`));
    for (const m of found.replaced) parts.push(one(m));
  }
  box.replaceChildren(...parts);
  box.scrollIntoView({ block: 'nearest' });
}

// ---- Requests: each trace as a waterfall, across the agents it asked.
const traces = { open: null, listedAt: -1, busy: false, at: 0 };
const TRACES_EVERY_MS = 400;

async function refreshTraces() {
  if (traces.listedAt === state.version) return;
  // Asked while a read is under way: read again once it is done (it may predate the change).
  if (traces.busy) { traces.again = true; return; }
  // At most every TRACES_EVERY_MS, however fast events come; the last change is always read.
  const wait = traces.at + TRACES_EVERY_MS - performance.now();
  if (wait > 0) {
    if (!traces.timer) traces.timer = setTimeout(() => { traces.timer = null; refreshTraces(); }, wait);
    return;
  }
  traces.at = performance.now();
  traces.busy = true;
  const version = state.version;
  try {
    const lines = await api('api/traces');
    traces.listedAt = version;
    renderTraceList(lines);
    if (traces.open) await openTrace(traces.open);
  } catch (e) {
    // The next change tries again.
  } finally {
    traces.busy = false;
  }
  if (traces.again) { traces.again = false; refreshTraces(); }
}

function renderTraceList(lines) {
  document.getElementById('no-requests').classList.toggle('hidden', lines.length > 0);
  document.getElementById('requests').replaceChildren(...lines.slice(0, 50).map(t => {
    const li = el('li', t.id === traces.open ? 'trace open' : 'trace');
    li.dataset.trace = t.id;
    const b = el('button', 'show-trace', `${t.agent}`);
    b.addEventListener('click', () => { traces.open = t.id; openTrace(t.id); });
    li.append(b, el('span', 'detail',
      ` ${new Date(t.start_ms).toLocaleTimeString()} · ${fmt(t.ms)} ms · ${t.spans} spans · ${t.agents.join(' → ')} · ${fmt(t.input_tokens)} in / ${fmt(t.output_tokens)} out${t.open ? ' · running' : ''}`));
    return li;
  }));
}

const KIND_TEXT = { request: 'request', model_call: 'model call', tool_call: 'tool call', compaction: 'compaction' };

async function openTrace(id) {
  let t;
  try {
    t = await api(`api/traces/${encodeURIComponent(id)}`);
  } catch (e) {
    document.getElementById('waterfall').replaceChildren(el('p', 'detail error', String(e)));
    return;
  }
  const t0 = performance.now();
  const end = Math.max(t.end_ms, ...t.spans.map(s => s.end_ms || t.end_ms));
  const span = Math.max(1, end - t.start_ms);
  const box = document.getElementById('waterfall');
  box.dataset.trace = t.id;
  const rows = t.spans.map(s => {
    const row = el('div', `bar-row ${s.kind}`);
    row.dataset.kind = s.kind;
    row.dataset.agent = s.agent;
    const ms = (s.end_ms === null ? end : s.end_ms) - s.start_ms;
    row.dataset.ms = String(ms);
    let tokens = '';
    if (s.input_tokens !== undefined) tokens = ` · ${fmt(s.input_tokens)} in / ${fmt(s.output_tokens)} out`;
    if (s.tokens) tokens = ` · ${fmt(s.tokens[0])} → ${fmt(s.tokens[1])} tokens`;
    if (s.waited_ms !== undefined) tokens += ` · waited ${fmt(s.waited_ms)} ms`;
    const label = el('div', 'bar-label', `${s.agent} · ${KIND_TEXT[s.kind] || s.kind}${s.kind === 'request' ? '' : ` ${s.name}`}`);
    label.style.paddingLeft = `${0.9 * s.depth}em`;
    const track = el('div', 'bar-track');
    const bar = el('div', 'bar');
    bar.style.left = `${100 * (s.start_ms - t.start_ms) / span}%`;
    bar.style.width = `${Math.max(0.4, 100 * ms / span)}%`;
    track.append(bar);
    const info = el('div', 'bar-info', `${fmt(ms)} ms${s.end_ms === null ? ' (running)' : ''}${tokens}${s.error ? ` · error: ${s.error}` : ''}`);
    row.append(label, track, info);
    return row;
  });
  box.replaceChildren(el('div', 'detail waterfall-head', `trace ${t.id} · ${t.agent} · ${fmt(span)} ms`), ...rows);
  for (const li of document.querySelectorAll('#requests li')) li.classList.toggle('open', li.dataset.trace === id);
  stats.waterfallMs = performance.now() - t0;
}

// ---- Spend against budgets, and the rate limiters' waits.
function spendText(spent, limit) {
  const parts = [];
  const s = spent || { input_tokens: 0, output_tokens: 0, cost_micros: 0 };
  const of = (v, l) => l === undefined || l === null ? fmt(v) : `${fmt(v)} of ${fmt(l)}`;
  parts.push(`${of(s.input_tokens, limit && limit.input_tokens)} in`);
  parts.push(`${of(s.output_tokens, limit && limit.output_tokens)} out`);
  const cost = v => `$${(v / 1e6).toFixed(4)}`;
  parts.push(limit && limit.cost_micros !== undefined ? `${cost(s.cost_micros)} of ${cost(limit.cost_micros)}` : cost(s.cost_micros));
  return parts.join(', ');
}

async function refreshSpend() {
  if (state.readOnly) return;
  let s;
  try { s = await api('api/spend'); } catch (e) { return; }
  document.getElementById('spend-section').classList.toggle('hidden', !s.agents.length && !s.rate_limits.length);
  const rows = [];
  for (const a of s.agents) {
    const row = el('div', a.paused ? 'spend-row paused' : 'spend-row');
    row.dataset.agent = a.agent;
    row.append(el('div', 'who', a.agent));
    const sp = a.spent || {};
    row.append(el('div', 'detail', `request: ${spendText(a.paused && a.paused.scope === 'request' ? a.paused.spent : sp.request, a.request)}`));
    row.append(el('div', 'detail', `agent: ${spendText(a.paused && a.paused.scope === 'agent' ? a.paused.spent : sp.agent, a.agent_limit)}`));
    if (a.team) row.append(el('div', 'detail', `team: ${spendText(a.team_spent, a.team)}`));
    if (a.paused) row.append(el('div', 'detail paused', `paused on its ${a.paused.scope} budget`));
    rows.push(row);
  }
  for (const r of s.rate_limits) {
    const row = el('div', 'spend-row rate-limit');
    row.dataset.limiter = r.name;
    row.append(el('div', 'who', `rate limit: ${r.name}`),
      el('div', 'detail', `${fmt(r.requests)} requests, ${fmt(r.waited)} waited (longest ${fmt(r.longest_wait_ms)} ms), ${fmt(r.holds)} Retry-After holds`));
    rows.push(row);
  }
  document.getElementById('spend').replaceChildren(...rows);
}

// ---- Actions on a live agent: /compact, and raising the budget that paused it.
const notes = new Map();

function note(agent, text) {
  notes.set(agent, text);
  dirty.agents.add(agent);
  schedule();
}

async function compactNow(agent) {
  note(agent, 'compacting…');
  const r = await post('api/agents/compact', { agent });
  if (r.ok) {
    const b = JSON.parse(r.text);
    note(agent, `compacted: ${fmt(b.tokens_before)} → ${fmt(b.tokens_after)} tokens`);
  } else {
    note(agent, `not compacted: ${r.text}`);
  }
}

function raiseForm(a) {
  const p = a.paused;
  const form = el('div', 'raise');
  const inputs = {};
  for (const [key, label] of [['input_tokens', 'input tokens'], ['output_tokens', 'output tokens'], ['cost_micros', 'cost (micro-$)']]) {
    const input = el('input');
    input.type = 'number';
    input.min = '0';
    input.name = key;
    input.title = label;
    input.placeholder = label;
    const now = p.limit[key];
    if (now !== undefined && now !== null) input.value = String(now * 2);
    inputs[key] = input;
    form.append(input);
  }
  const b = el('button', 'raise-budget', `Raise the ${p.scope} budget`);
  b.addEventListener('click', async () => {
    const limit = {};
    for (const [key, input] of Object.entries(inputs)) if (input.value !== '') limit[key] = Number(input.value);
    const r = await post('api/budgets/raise', { agent: a.name, scope: p.scope, limit });
    note(a.name, r.ok ? `${p.scope} budget raised` : `not raised: ${r.text}`);
  });
  form.append(b);
  return form;
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

document.getElementById('conversation-older').addEventListener('click', showOlder);
connect();
// Spend and the limiters change without events of their own.
setInterval(refreshSpend, 1500);
refreshSpend();
