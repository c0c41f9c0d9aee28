// The memnets inspector: plain JavaScript over the server's /v1 routes, no build step, nothing from a CDN.
// Memory text is only ever inserted as text nodes (never as HTML), so a memory cannot script the page.
'use strict';

const PAGE = 50;
const state = { user: null, offset: 0, nextOffset: null, filters: null };
const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === 'class') node.className = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat(Infinity)) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function status(text, isError = false) {
  $('status').textContent = text;
  $('status').className = isError ? 'error' : 'muted';
}

async function api(method, path, { params, body } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== null && value !== undefined) url.searchParams.set(key, value);
  }
  const headers = {};
  const token = $('token').value.trim();
  if (token) headers.Authorization = 'Bearer ' + token;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = (data && data.error) || {};
    const message = (error.message || response.statusText).replace(`${error.code}: `, '');  // "401 unauthorized: unauthorized: ..." said it twice
    throw new Error(`${response.status} ${error.code || ''}: ${message}`);
  }
  return data;
}

// Each action starts from a blank status line, so no line of an earlier action (a hit count, an error) stays
// beside what this one shows; its error, if any, replaces it.
function guarded(fn) {
  return async (...args) => {
    status('');
    try { await fn(...args); } catch (error) { status(error.message, true); }
  };
}

function short(t) { return t ? t.replace('T', ' ').slice(0, 19) : ''; }

// A memory's validity: "current" (and, where the supersession judge found a newer memory that likely replaced
// it, likely_replaced_by, a button that opens that one), or "ended <date>" and, where a newer memory ended it (a
// supersession judge's invalidated_by), a button that opens that memory. Ids and dates go in as text, like all memory data.
const LIKELY_TITLE = 'open the newer memory that likely replaced this one';

function validity(memory) {
  if (!memory.valid_to) {
    const current = el('span', { class: 'muted' }, 'current');
    return memory.likely_replaced_by
      ? el('span', {}, current, ' ', successorButton(memory.likely_replaced_by, 'likely replaced by', LIKELY_TITLE))
      : current;
  }
  const word = new Date(memory.valid_to) > new Date() ? 'ends' : 'ended';
  const ended = el('span', { class: 'ended-mark' }, `${word} ${short(memory.valid_to).slice(0, 10)}`);
  return memory.invalidated_by ? el('span', {}, ended, ' ', successorButton(memory.invalidated_by)) : ended;
}

function successorButton(id, words = 'by', title = 'open the memory that ended this one') {
  const open = (event) => { event.stopPropagation(); guarded(showMemory)(id); };  // not the row's own memory
  return el('button', { class: 'successor', onclick: open, title }, `${words} ${id}`);
}

// ------------------------------------------------------------------ users
// The token's scope (/v1/whoami): a token for one user, agent or session fixes those fields, so the
// page shows what the server lets it reach (the server enforces the scope on every route anyway).
async function applyScope() {
  $('scope').textContent = '';  // a refused token must not leave the previous token's scope on show
  const who = await api('GET', '/v1/whoami');
  for (const name of ['agent', 'session']) {
    if (who[name]) $(name).value = who[name];
    else if ($(name).disabled) $(name).value = '';  // the previous token's scope, not this one's
    $(name).disabled = Boolean(who[name]);
  }
  const parts = who.admin ? ['admin'] : [`user ${who.user}`, ...['agent', 'session'].filter((n) => who[n]).map((n) => `${n} ${who[n]}`)];
  $('scope').textContent = `token: ${parts.join(', ')}`;
  return who;
}

async function loadUsers() {
  sessionStorage.setItem('memnets-token', $('token').value);
  // what the previous token showed goes first: a refused token must not leave its users and memories on show
  $('user').replaceChildren();
  $('memories').tBodies[0].replaceChildren();
  $('hits').tBodies[0].replaceChildren();
  $('page').textContent = '';
  $('detail').classList.add('hidden');
  const who = await applyScope();
  let { users } = await api('GET', '/v1/users');
  if (!who.admin && !users.includes(who.user)) users = [who.user];  // nothing in its scope yet: still its user
  const select = $('user');
  const keep = state.user;
  select.replaceChildren(...users.map((u) => el('option', { value: u }, u)));
  if (keep && users.includes(keep)) select.value = keep;
  status(`${users.length} user(s) visible to this token`);
  const typed = $('user-typed').value.trim();
  if (typed) select.value = users.includes(typed) ? typed : '';  // the select shows no other user than the one shown
  pickUser(typed || select.value || null);
}

function pickUser(user) {
  state.user = user;
  state.offset = 0;
  $('detail').classList.add('hidden');
  if (user) guarded(listMemories)();
}

// ------------------------------------------------------------------ memories
function scopeFields() {
  const scope = {};
  for (const name of ['agent', 'session']) {
    const value = $(name).value.trim();
    if (value) scope[name] = value;
  }
  return scope;
}

function readFilters() {
  const filters = scopeFields();
  if ($('kind').value) filters.kind = $('kind').value;
  const metadata = $('metadata').value.trim();
  if (metadata) filters.metadata = metadataFilter(metadata);
  return Object.keys(filters).length ? filters : null;
}

// The metadata box as a filter: a JSON object, else an error that names the box and shows the form it takes
// (not the browser's parse error, which names neither).
function metadataFilter(text) {
  const form = 'write a JSON object such as {"topic": "pets"} or {"year": {"$gte": 2024}}';
  let value;
  try { value = JSON.parse(text); } catch { throw new Error(`metadata: not JSON: ${form}`); }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error(`metadata: not an object: ${form}`);
  return value;
}

async function listMemories() {
  if (!state.user) return;
  $('memories').tBodies[0].replaceChildren();  // a refused request (422) leaves no stale rows under its error
  $('page').textContent = '';  // nor a page range of rows no longer shown
  const filters = readFilters();
  const data = await api('GET', '/v1/memories', {
    params: { user: state.user, limit: PAGE, offset: state.offset, filters: filters ? JSON.stringify(filters) : null },
  });
  const shown = data.memories;
  state.nextOffset = data.next_offset;
  $('page').textContent = shown.length ? ` ${state.offset + 1}-${state.offset + shown.length} ` : ' none ';
  $('memories').tBodies[0].replaceChildren(...shown.map((m) => el('tr', { onclick: () => guarded(showMemory)(m.id), 'data-id': m.id, class: m.valid_to ? 'ended' : '' },
    el('td', {}, short(m.t)), el('td', {}, m.kind), el('td', {}, m.content), el('td', {}, validity(m)),
    el('td', {}, m.importance.toFixed(2)), el('td', {}, m.agent || ''), el('td', {}, m.session || ''))));
  status(`${state.user}: ${shown.length} memories on this page`);
}

async function showMemory(id) {
  const user = state.user;
  const [{ memory }, { memories: versions }, { memories: derived }] = await Promise.all([
    api('GET', `/v1/memories/${encodeURIComponent(id)}`, { params: { user } }),
    api('GET', `/v1/memories/${encodeURIComponent(id)}/history`, { params: { user } }),
    api('GET', `/v1/memories/${encodeURIComponent(id)}/derived`, { params: { user } }),
  ]);
  const fields = ['id', 'kind', 't', 'updated_at', 'last_access', 'importance', 'agent', 'session', 'links', 'superseded_by', 'valid_from', 'valid_to', 'invalidated_by', 'likely_replaced_by'];
  const rows = fields.filter((f) => memory[f] !== null && memory[f] !== undefined && String(memory[f]) !== '')
    .map((f) => el('tr', {}, el('th', {}, f), el('td', {}, f === 'invalidated_by' ? successorButton(memory[f])
      : f === 'likely_replaced_by' ? successorButton(memory[f], 'by', LIKELY_TITLE)
      : f === 'importance' ? memory[f].toFixed(2) : Array.isArray(memory[f]) ? memory[f].join(', ') : String(memory[f]))));
  rows.push(el('tr', {}, el('th', {}, 'metadata'), el('td', {}, JSON.stringify(memory.metadata))));
  const panel = $('detail');
  panel.replaceChildren(
    el('h3', {}, 'memory'),
    el('p', { id: 'detail-content' }, memory.content),
    el('table', {}, el('tbody', {}, rows)),
    el('h4', {}, `versions (${versions.length})`),
    el('ol', {}, versions.map((v) => el('li', {}, `${short(v.updated_at || v.t)}: `, v.content))),
    el('h4', {}, `derived reflections, summaries, plans (${derived.length})`),
    el('ul', {}, derived.map((d) => el('li', {}, `${d.kind}: `, d.content))),
    el('button', { class: 'danger', id: 'delete-memory', onclick: guarded(() => deleteMemory(memory.id)) }, 'delete this memory'),
  );
  panel.classList.remove('hidden');
}

async function deleteMemory(id) {
  if (!window.confirm(`Delete memory ${id} of ${state.user}, its older versions and what was derived from it? This is final.`)) return;
  const { deleted } = await api('DELETE', `/v1/memories/${encodeURIComponent(id)}`, { params: { user: state.user } });
  $('detail').classList.add('hidden');
  status(deleted ? `deleted ${id}` : `${id} was already gone`);
  await listMemories();
}

async function deleteAll() {
  if (!state.user) return;
  const scope = scopeFields();
  const what = [`user ${state.user}`, ...Object.entries(scope).map(([k, v]) => `${k} ${v}`)].join(', ');
  if (!window.confirm(`Delete ALL memories of ${what}? This is final.`)) return;
  const { deleted } = await api('DELETE', '/v1/memories', { params: { user: state.user, ...scope } });
  status(`deleted ${deleted} memories of ${what}`);
  await loadUsers();
}

// ------------------------------------------------------------------ search
function partBar(name, value) {
  const width = value === null || value === undefined ? 0 : Math.max(0, Math.min(1, value)) * 100;
  return [el('span', {}, name),
    el('div', { class: 'track' }, el('div', { class: `fill ${name}`, style: `width:${width}%` })),
    el('span', {}, value === null || value === undefined ? '-' : value.toFixed(3))];
}

// What orders the hits, in words: the score column, which is the dense score (the cosine, or a pack's learned
// score) or, in a hybrid search, that fused with the query's words; an ended fact never above its successor.
function orderInWords(data) {
  const dense = data.ranker === 'cosine' ? 'cosine similarity' : `the pack's ${data.ranker} score` + (data.weights
    ? ` (weights: relevance ${data.weights.relevance.toFixed(2)}, recency ${data.weights.recency.toFixed(2)}, importance ${data.weights.importance.toFixed(2)})` : '');
  const score = data.search === 'hybrid'
    ? `ordered by score: ${dense} fused with the query's words (0.45 x meaning + 0.55 x words, each scaled over the candidates), so the bars need not be in order`
    : `ordered by score: ${dense}` + (data.ranker === 'cosine' ? ' (no pack: recency and importance do not count)' : '');
  return `${score}; current facts first: an ended fact never answers above the memory that ended it`;
}

async function search() {
  if (!state.user) return;
  const query = $('query').value.trim();
  if (!query) { status('type a query', true); return; }
  const body = { user: state.user, query, k: Number($('k').value) || 5 };
  $('hits').tBodies[0].replaceChildren();  // a refused search (422) leaves no stale results under its error
  $('ranker').textContent = '';
  const filters = readFilters();
  if (filters) body.filters = filters;
  const data = await api('POST', '/v1/search', { body });
  // without a pack the rank is the cosine alone: say so, and draw only the part that counted
  const counted = data.ranker === 'cosine' ? ['relevance'] : ['relevance', 'recency', 'importance', 'learned'];
  $('ranker').textContent = orderInWords(data);
  // an ended fact answers below the memory that ended it, showing at most its score (memnets.memory.search)
  $('hits').tBodies[0].replaceChildren(...data.results.map((hit) => el('tr', { class: hit.memory.valid_to ? 'hit ended' : 'hit', onclick: () => guarded(showMemory)(hit.memory.id) },
    el('td', { class: 'score' }, hit.score.toFixed(4)),
    el('td', {}, el('div', { class: 'parts' }, counted.map((p) => partBar(p, hit.parts[p])))),
    el('td', {}, hit.memory.content), el('td', {}, validity(hit.memory)))));
  status(`${data.results.length} hit(s) for "${query}"`);
}

// ------------------------------------------------------------------ manager
async function showManager() {
  if (!state.user) return;
  const data = await api('GET', `/v1/users/${encodeURIComponent(state.user)}/manager`);
  const tier = (name, memories) => el('div', { class: 'card' }, el('h4', {}, `${name} (${memories.length})`),
    el('ul', {}, memories.map((m) => el('li', {}, `${m.kind}: `, m.content))));
  const gate = el('div', { class: 'card' }, el('h4', {}, `recall gate: last ${data.gate.length} decisions`),
    el('table', {}, el('thead', {}, el('tr', {}, el('th', {}, 't'), el('th', {}, 'query'), el('th', {}, 'recall'), el('th', {}, 'score'))),
      el('tbody', {}, data.gate.map((g) => el('tr', {}, el('td', {}, short(g.t)), el('td', {}, g.detail.query),
        el('td', {}, String(g.detail.recall)), el('td', {}, Number(g.detail.score).toFixed(3)))))));
  const moves = el('p', { class: 'muted' }, 'moves: ' + Object.entries(data.moves).map(([k, v]) => `${k} ${v}`).join(', '));
  $('manager').replaceChildren(tier('context window', data.context), tier('working memory', data.working),
    tier('write buffer', data.pending), gate, moves);
}

// ------------------------------------------------------------------ pack metrics as SVG bar charts
function numericLeaves(value, prefix = '') {
  if (typeof value === 'number') return [[prefix, value]];
  if (!value || typeof value !== 'object') return [];
  return Object.entries(value).flatMap(([k, v]) => numericLeaves(v, prefix ? `${prefix}.${k}` : k));
}

function barChart(title, pairs) {
  const ns = 'http://www.w3.org/2000/svg';
  const width = 560, row = 18, left = 220, height = pairs.length * row + 28;
  const max = Math.max(1e-9, ...pairs.map(([, v]) => Math.abs(v)));
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('width', width); svg.setAttribute('height', height); svg.setAttribute('role', 'img');
  const add = (tag, attrs, text) => {
    const node = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    svg.append(node);
  };
  add('text', { x: 0, y: 14, 'font-weight': 600 }, title);
  pairs.forEach(([name, value], i) => {
    const y = 24 + i * row;
    add('text', { x: left - 6, y: y + 12, 'text-anchor': 'end' }, name);
    add('rect', { x: left, y: y + 2, width: Math.abs(value) / max * (width - left - 60), height: row - 6, fill: '#2563eb' });
    add('text', { x: left + Math.abs(value) / max * (width - left - 60) + 4, y: y + 12 }, value.toFixed(3));
  });
  return el('div', { class: 'card' }, svg);
}

async function showPack() {
  const data = await api('GET', '/v1/pack');
  const box = $('pack');
  if (!data.pack) {
    box.replaceChildren(el('p', {}, `This server runs without a pack (search ranked by ${data.ranker}); start it with --pack DIR to see the pack's evaluation figures.`));
    return;
  }
  const metrics = data.pack.metrics || {};
  const groups = Object.entries(metrics).map(([name, value]) => [name, numericLeaves(value)]).filter(([, pairs]) => pairs.length);
  box.replaceChildren(el('p', { class: 'muted' }, `pack format ${data.pack.format_version}, embedding dim ${data.pack.embedding_dim}, search ranked by ${data.ranker}`),
    ...(groups.length ? groups.map(([name, pairs]) => barChart(name, pairs)) : [el('p', {}, 'the manifest holds no metrics')]));
}

// ------------------------------------------------------------------ wiring
function showTab(name) {
  for (const button of document.querySelectorAll('nav button')) button.classList.toggle('active', button.dataset.tab === name);
  for (const tab of document.querySelectorAll('.tab')) tab.classList.toggle('hidden', tab.id !== `tab-${name}`);
  $('detail').classList.add('hidden');  // a memory's panel belongs to the tab it was opened from
  status('');  // and the status line to the action that wrote it (a hit count is not the list's)
  if (name === 'manager') guarded(showManager)();
  if (name === 'pack') guarded(showPack)();
}

window.addEventListener('DOMContentLoaded', () => {
  $('token').value = sessionStorage.getItem('memnets-token') || '';
  $('load').addEventListener('click', guarded(loadUsers));
  $('user').addEventListener('change', () => { $('user-typed').value = ''; pickUser($('user').value); });
  $('filter').addEventListener('click', guarded(() => { state.offset = 0; return listMemories(); }));
  $('prev').addEventListener('click', guarded(() => { state.offset = Math.max(0, state.offset - PAGE); return listMemories(); }));
  $('next').addEventListener('click', guarded(() => { if (state.nextOffset !== null) { state.offset = state.nextOffset; return listMemories(); } }));
  $('delete-all').addEventListener('click', guarded(deleteAll));
  $('search').addEventListener('click', guarded(search));
  $('query').addEventListener('keydown', (e) => { if (e.key === 'Enter') guarded(search)(); });
  $('refresh-manager').addEventListener('click', guarded(showManager));
  for (const button of document.querySelectorAll('nav button')) button.addEventListener('click', () => showTab(button.dataset.tab));
  start();
});

// The first load: a server that needs a token, asked before one is typed, gets a hint, not a red 401.
async function start() {
  try { await loadUsers(); } catch (error) {
    const unauthorized = error.message.startsWith('401');
    if (unauthorized && !$('token').value.trim()) status('this server needs a token: type it above and press open');
    else status(error.message, true);
  }
}
