// teambus ui: plain JS, no build step. Team text is data: it reaches the
// page only through textContent and text nodes, with control characters
// removed; markup is never built from strings.
'use strict';

const MAX_ITEMS = 500;
const LAYER_ROWS = 20;
const MSG_TYPES = ['info', 'question', 'challenge', 'resolution', 'status_check', 'status', 'report',
  'shutdown_request', 'shutdown_response', 'escalation', 'system'];
const csrf = document.querySelector('meta[name="csrf-token"]').content;
const actions = document.querySelector('meta[name="actions"]').content === 'on';

let source = null;      // the EventSource of the team shown
let view = null;        // the last state frame
let clockSkew = 0;      // server time minus browser time, ms
const mail = [];        // messages shown, oldest first
const events = [];      // events shown, oldest first
let selectedTask = '';

const $ = (id) => document.getElementById(id);

// clean removes control characters; keepLines keeps newlines and tabs.
function clean(s, keepLines) {
  s = String(s == null ? '' : s);
  return keepLines ? s.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, '')
    : s.replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ');
}

// el builds an element; children are nodes or strings (as text).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = clean(v);
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(typeof c === 'string' ? document.createTextNode(clean(c)) : c);
  }
  return e;
}

function showError(msg) {
  const p = $('error');
  p.textContent = msg ? clean(msg) : '';
  p.hidden = !msg;
}

// age says how long ago ts was; without ts, none (the heartbeat cells:
// 'never' only of one that never beat, '—' of one whose key is gone).
function age(ts, none) {
  if (!ts) return none || 'never';
  const s = Math.max(0, Math.round((Date.now() + clockSkew - Date.parse(ts)) / 1000));
  if (s < 90) return s + 's ago';
  if (s < 5400) return Math.round(s / 60) + 'm ago';
  return Math.round(s / 3600) + 'h ago';
}

function clock(ts) {
  const d = new Date(ts);
  return isNaN(d) ? '' : d.toLocaleTimeString([], {hour12: false});
}

// ---- routing -------------------------------------------------------------

function route() {
  const m = /^#team=([A-Za-z0-9_-]+)$/.exec(location.hash);
  if (source) { source.close(); source = null; }
  showError('');
  if (m) openTeam(m[1]); else openTeams();
}

async function openTeams() {
  $('team-view').hidden = true;
  $('teams-view').hidden = false;
  $('crumb').textContent = '';
  setLive(false, 'teams list');
  try {
    const r = await fetch('/api/teams', {credentials: 'same-origin'});
    if (!r.ok) throw new Error(await r.text());
    renderTeams(await r.json());
  } catch (e) {
    showError('could not read teams: ' + e.message);
  }
}

function renderTeams(teams) {
  const body = $('teams').tBodies[0];
  body.replaceChildren();
  $('no-teams').hidden = teams.length > 0;
  for (const t of teams) {
    const done = (t.counts.complete || 0) + (t.counts.skipped || 0);
    body.append(el('tr', {},
      el('td', {}, el('a', {href: '#team=' + encodeURIComponent(t.id), text: t.id})),
      el('td', {}, t.error ? el('span', {class: 'error', text: t.error}) : statusTag(t.status)),
      el('td', {text: t.online + ' / ' + t.members}),
      el('td', {text: done + ' / ' + t.tasks + ' done'}),
      el('td', {text: t.progress + '%'})));
  }
}

function setLive(on, text) {
  const l = $('live');
  l.textContent = text;
  l.className = 'live ' + (on ? 'on' : 'off');
}

function openTeam(id) {
  $('teams-view').hidden = true;
  $('team-view').hidden = false;
  $('crumb').textContent = ' / ' + id;
  document.title = 'teambus: ' + id;
  setLive(false, 'connecting');
  const es = new EventSource('/api/teams/' + encodeURIComponent(id) + '/live');
  source = es;
  es.addEventListener('hello', () => {
    mail.length = 0; events.length = 0;
    $('mail').replaceChildren(); $('events').replaceChildren();
    setLive(true, 'live');
    showError('');
  });
  es.addEventListener('state', (e) => renderState(JSON.parse(e.data)));
  es.addEventListener('mail', (e) => addMail(JSON.parse(e.data)));
  es.addEventListener('event', (e) => addEvent(JSON.parse(e.data)));
  es.onerror = () => {
    if (source !== es) return;
    setLive(false, 'reconnecting');
  };
}

// ---- state ---------------------------------------------------------------

function statusTag(status) {
  const s = clean(status || 'unknown');
  return el('span', {class: 'st st-' + s.replace(/[^a-z_]/g, ''), text: s});
}

function renderState(v) {
  view = v;
  clockSkew = v.now ? Date.parse(v.now) - Date.now() : 0;
  const t = v.team;
  $('team-title').replaceChildren(el('span', {text: t.id + ' '}), statusTag(t.status));
  const lead = v.lead || {};
  const facts = [
    ['lead', lead.session ? lead.session + ' · epoch ' + (lead.epoch || 0) + ' · ' + leadState(lead) +
      ' · last seen ' + age(lead.last_heartbeat) : 'none attached'],
    ['created', new Date(t.created_at).toLocaleString()],
    ['progress', v.progress + '% of ' + v.tasks.length + ' tasks done'],
  ];
  if (t.lead_timeout_detected_at) facts.push(['lead timeout detected', new Date(t.lead_timeout_detected_at).toLocaleString()]);
  if (t.checkpoint_seq) facts.push(['checkpoints', String(t.checkpoint_seq)]);
  $('team-facts').replaceChildren(...facts.flatMap(([k, val]) => [el('dt', {text: k}), el('dd', {text: val})]));
  $('progress-bar').style.width = v.progress + '%';
  const counts = Object.entries(v.counts).sort();
  $('counts').replaceChildren(...counts.flatMap(([st, n]) => [statusTag(st), el('span', {class: 'n', text: ' ' + n + '  '})]));
  const pol = t.policy || {};
  $('policy').replaceChildren(...Object.keys(pol).sort().flatMap((k) => [el('dt', {text: k}),
    el('dd', {text: typeof pol[k] === 'string' ? pol[k] : JSON.stringify(pol[k])})]));
  renderMembers(v);
  renderGraph(v);
  renderDetail();
  const sel = document.querySelector('#mail-filter select');
  if (sel.options.length === 1) for (const ty of MSG_TYPES) sel.append(el('option', {value: ty, text: ty}));
}

// leadState is the lead's liveness in one word, and why when it let go.
function leadState(lead) {
  if (lead.online) return 'online';
  if (lead.released_at) return 'released ' + age(lead.released_at) + (lead.released === 'agent_exited' ? ' (its agent exited)' : ' (stopped cleanly)');
  return 'offline';
}

// hbNone is the heartbeat cell of a member without a live heartbeat key:
// 'never' only of one that never registered.
function hbNone(m) {
  return m.session ? '—' : 'never';
}

function condition(m) {
  const c = [];
  if (m.zombie_since) c.push('zombie since ' + clock(m.zombie_since));
  // Offline members say it in the status column; the others (crashed,
  // paused, shut down) are not expected to beat.
  if (!m.online && m.session && m.status !== 'offline' && !['crashed', 'paused', 'shutdown'].includes(m.status)) c.push('no heartbeat');
  if (!m.session) c.push('not registered');
  if (m.context_pct) c.push('context ' + m.context_pct + '%');
  if (view && view.team.probes && view.team.probes[m.id]) c.push('probed ' + age(view.team.probes[m.id].sent_at));
  const sp = view && view.spawns && view.spawns[m.id];
  if (sp) {
    c.push((sp.host ? 'host ' + sp.host + (sp.lost ? ' (lost)' : '') : 'machine ' + sp.machine) + ', ' + sp.mode);
    if (sp.respawns > 0) c.push('respawned ' + (sp.from === 'transcript' ? 'from transcript' : 'from brief'));
  }
  return c.join(', ') || 'ok';
}

function renderMembers(v) {
  const body = $('members').tBodies[0];
  const rows = [];
  const lead = v.lead || {};
  rows.push(el('tr', {'data-member': 'lead'},
    el('td', {}, el('b', {text: 'lead'})), el('td', {text: 'lead'}),
    el('td', {}, statusTag(lead.online ? 'online' : lead.released_at ? 'released' : 'offline')),
    el('td', {text: String(lead.epoch || 0)}),
    el('td', {class: 'hb', 'data-ts': lead.last_heartbeat || '', 'data-none': 'never', text: age(lead.last_heartbeat)}),
    el('td', {text: lead.session ? 'session ' + lead.session + (lead.released_at ? ', ' + leadState(lead) : '') : 'no lead attached'}),
    el('td', {text: ''}), el('td', {text: ''}), el('td', {})));
  for (const m of v.members) {
    rows.push(el('tr', {'data-member': m.id},
      el('td', {}, el('b', {text: m.id}), m.name && m.name !== m.id ? el('span', {class: 'dim', text: ' ' + m.name}) : null),
      el('td', {text: m.role}),
      el('td', {}, statusTag(m.status)),
      el('td', {text: String(m.epoch)}),
      el('td', {class: 'hb', 'data-ts': m.last_heartbeat || '', 'data-none': hbNone(m), text: age(m.last_heartbeat, hbNone(m))}),
      el('td', {text: condition(m)}),
      el('td', {text: String(m.crash_count)}),
      el('td', {}, m.task ? el('a', {href: '#', onclick: (e) => { e.preventDefault(); selectTask(m.task); }, text: m.task}) : '—'),
      el('td', {class: 'act'}, actions ? el('button', {type: 'button', onclick: () => act('members/' + encodeURIComponent(m.id) + '/probe'), text: 'probe'}) : null)));
  }
  body.replaceChildren(...rows);
}

function renderGraph(v) {
  const depth = v.depth || {};
  const layers = [];
  for (const t of v.tasks) {
    const d = depth[t.id] || 0;
    (layers[d] = layers[d] || []).push(t);
  }
  const cols = [];
  layers.forEach((ts, d) => {
    if (!ts) return;
    // A wide layer wraps into columns of LAYER_ROWS cards, so 200 tasks
    // stay on about one screen.
    const cards = el('div', {class: 'cards'});
    cards.style.gridTemplateRows = 'repeat(' + Math.min(ts.length, LAYER_ROWS) + ', auto)';
    cols.push(el('div', {class: 'layer'}, el('div', {class: 'layer-h', text: 'depth ' + d + ' · ' + ts.length}), cards));
    cards.append(...ts.map((t) => el('button', {type: 'button', class: 'task st-' + clean(t.status).replace(/[^a-z_]/g, '') + (t.id === selectedTask ? ' sel' : ''),
        'data-task': t.id, title: clean(t.description).slice(0, 300), onclick: () => selectTask(t.id)},
        el('span', {class: 'tid', text: t.id}), el('span', {class: 'tst', text: t.status}),
        t.assigned_to ? el('span', {class: 'dim', text: t.assigned_to}) : null,
        t.dependencies && t.dependencies.length ? el('span', {class: 'deps', text: 'after ' + t.dependencies.join(', ')}) : null)));
  });
  $('graph').replaceChildren(...(cols.length ? cols : [el('p', {class: 'dim', text: 'No tasks yet.'})]));
}

function selectTask(id) {
  selectedTask = selectedTask === id ? '' : id;
  for (const b of document.querySelectorAll('#graph .task')) b.classList.toggle('sel', b.dataset.task === selectedTask);
  renderDetail();
}

function renderDetail() {
  const box = $('task-detail');
  const t = view && selectedTask ? view.tasks.find((x) => x.id === selectedTask) : null;
  box.hidden = !t;
  if (!t) { box.replaceChildren(); return; }
  const rows = [['status', t.status], ['assigned to', t.assigned_to || '—'], ['priority', t.priority],
    ['depends on', (t.dependencies || []).join(', ') || '—'], ['attempts', t.attempts], ['failures', t.failures], ['crashes', t.crashes]];
  if (t.blocked_on) rows.push(['blocked on', t.blocked_on + ': ' + (t.blocked_reason || '')]);
  if (t.last_error) rows.push(['last error', t.last_error]);
  if (t.checkpoint) rows.push(['checkpoint', JSON.stringify(t.checkpoint)]);
  const btns = [];
  if (actions) {
    btns.push(el('button', {type: 'button', onclick: () => act('tasks/' + encodeURIComponent(t.id) + '/release'), text: 'release (requeue)'}));
    btns.push(el('button', {type: 'button', onclick: () => act('tasks/' + encodeURIComponent(t.id) + '/pause'), text: 'pause'}));
  }
  box.replaceChildren(el('h3', {text: 'task ' + t.id}), el('pre', {class: 'body', text: ''}),
    el('dl', {}, ...rows.flatMap(([k, val]) => [el('dt', {text: k}), el('dd', {text: String(val)})])), el('div', {}, ...btns));
  box.querySelector('pre').textContent = clean(t.description, true);
}

async function act(path) {
  if (!view) return;
  try {
    const r = await fetch('/api/teams/' + encodeURIComponent(view.team.id) + '/' + path, {
      method: 'POST', credentials: 'same-origin', headers: {'X-CSRF-Token': csrf}});
    const text = await r.text();
    if (!r.ok) throw new Error(text);
    showError('');
  } catch (e) {
    showError('action refused: ' + e.message);
  }
}

// ---- mail and events -------------------------------------------------------

function addMail(m) {
  if (mail.length && m.seq <= mail[mail.length - 1].seq) return;
  mail.push(m);
  const li = el('li', {'data-seq': m.seq, class: 'msg'},
    el('div', {class: 'meta'}, el('span', {class: 'time', text: clock(m.ts)}), el('span', {class: 'seq', text: '#' + m.seq}),
      el('b', {text: m.from}), ' → ', el('b', {text: m.to}), ' ', el('span', {class: 'type', text: m.type}),
      m.held ? el('span', {class: 'type', text: 'held'}) : null),
    el('pre', {class: 'body', text: ''}));
  li.querySelector('pre').textContent = clean(m.body, true);
  li.hidden = !mailMatches(m);
  const list = $('mail');
  list.prepend(li);
  if (mail.length > MAX_ITEMS) { mail.shift(); list.lastElementChild.remove(); }
}

function mailMatches(m) {
  const f = new FormData($('mail-filter'));
  const has = (v, q) => !q || clean(v).toLowerCase().includes(q.toLowerCase());
  return has(m.from, f.get('from')) && has(m.to, f.get('to')) && (!f.get('type') || m.type === f.get('type')) && has(m.body, f.get('text'));
}

function summary(ev) {
  if (ev.error) return ev.error;
  const d = ev.data || {};
  const parts = [];
  for (const k of ['taskId', 'name', 'action', 'status', 'reason', 'to', 'on', 'decision', 'session', 'label', 'outcome']) {
    if (d[k] !== undefined && d[k] !== null && d[k] !== '') parts.push(k + '=' + (typeof d[k] === 'string' ? d[k] : JSON.stringify(d[k])));
  }
  return parts.join(' ');
}

function addEvent(ev) {
  if (events.length && ev.seq <= events[events.length - 1].seq) return;
  events.push(ev);
  const li = el('li', {'data-seq': ev.seq, class: 'ev ev-' + clean(ev.type || 'bad').replace(/[^a-z]/g, '-')},
    el('span', {class: 'time', text: clock(ev.ts || ev.stored)}), el('span', {class: 'type', text: ev.type || 'invalid'}),
    ev.agent ? el('b', {text: ev.agent}) : null, el('span', {class: 'sum', text: summary(ev)}));
  li.hidden = !eventMatches(ev);
  const list = $('events');
  list.prepend(li);
  if (events.length > MAX_ITEMS) { events.shift(); list.lastElementChild.remove(); }
}

function eventMatches(ev) {
  const f = new FormData($('event-filter'));
  const has = (v, q) => !q || clean(v).toLowerCase().includes(q.toLowerCase());
  return has(ev.type, f.get('type')) && has(ev.agent, f.get('agent'));
}

function refilter() {
  const ms = $('mail').children;
  for (let i = 0; i < ms.length; i++) ms[i].hidden = !mailMatches(mail[mail.length - 1 - i]);
  const es = $('events').children;
  for (let i = 0; i < es.length; i++) es[i].hidden = !eventMatches(events[events.length - 1 - i]);
}

// ---- start ---------------------------------------------------------------

document.addEventListener('DOMContentLoaded', () => {
  for (const f of ['mail-filter', 'event-filter']) {
    $(f).addEventListener('input', refilter);
    $(f).addEventListener('submit', (e) => e.preventDefault());
  }
  window.addEventListener('hashchange', route);
  // Heartbeat ages move with the clock, not with the bus: redraw them
  // every second from the last view, without a request.
  setInterval(() => {
    for (const td of document.querySelectorAll('td.hb')) td.textContent = age(td.dataset.ts, td.dataset.none);
  }, 1000);
  route();
});
