/* The diff view of a comparison page (compare_html.py; only comparison pages carry this
 * file): a coverage bar, a heading per run, the aligned step pairs in the step selector, and
 * the sortable diff table whose rows highlight their op in both runs.
 * window.tracebridge.compare is its API (api()).
 */

const ROLES = ['control', 'test'];
const DIFF_COLUMNS = [
  {key: 'change', label: 'change', kind: 'change', title: 'slower (+), faster (\u2212) or the same within noise (=)'},
  {key: 'key', label: 'op', kind: 'text', title: 'the aligned op'},
  {key: 'rule', label: 'matched by', kind: 'text', title: 'how the op was matched across the runs'},
  {key: 'op_type', label: 'op type', kind: 'text', title: 'op type'},
  {key: 'control_median_ns', label: 'control', kind: 'num', title: 'control run: median time per step'},
  {key: 'test_median_ns', label: 'test', kind: 'num', title: 'test run: median time per step'},
  {key: 'delta_ns', label: 'delta', kind: 'num', title: 'test minus control (per-step medians)'},
  {key: 'ratio', label: 'ratio', kind: 'num', title: 'test / control (per-step medians)'},
];
// slower, new in the test run, the same, gone from it, faster: from most added time to least
const CHANGE_ORDER = {'+': 1, new: 0.5, '=': 0, gone: -0.5, '-': -1};
const CHANGE_TEXT = {'+': '\u25b2 slower', '-': '\u25bc faster', '=': '= same',
  new: '\u25cb only in test', gone: '\u25cb only in control'};
const CHANGE_CLASS = {'+': 'tb-slower', '-': 'tb-faster', '=': 'tb-same', new: 'tb-alone', gone: 'tb-alone'};
const MAX_DIFF_ROWS = 2000;  // rows put in the table at once (filter to see others)

function fmtPercent(share) {
  return typeof share === 'number' && isFinite(share) ? (share * 100).toFixed(1) + '%' : '\u2014';
}

/** The CSS class of a rule's colour: 'type+position' -> 'tb-rule-type-position'. */
function ruleClass(rule) {
  return 'tb-rule-' + String(rule).toLowerCase().replace(/[^a-z0-9]+/g, '-');
}

function fmtSigned(ns) {
  return (ns > 0 ? '+' : ns < 0 ? '\u2212' : '\u00b1') + fmtShort(Math.abs(ns));
}

/** The diff of two runs (compare_html.py): a coverage bar above the timelines, a heading
 *  per run, a sortable table of the aligned ops below them; a row highlights its op in
 *  both runs (control names in the control timeline, test names in the test one). */
class DiffView {
  constructor(page, compare, datas) {
    this.page = page;
    this.compare = compare;
    this.datas = datas;
    const fields = compare.fields;
    this.rows = compare.rows.map((values, index) => {
      const row = {index};
      fields.forEach((field, k) => { row[field] = values[k]; });
      row.control_names = row.control_names || [];
      row.test_names = row.test_names || [];
      row.side = row.control_names.length && row.test_names.length ? 'both'
        : row.control_names.length ? 'control' : 'test';
      // An op of one run only is neither slower nor faster: it is new, or gone.
      if (row.side !== 'both') row.change = row.side === 'test' ? 'new' : 'gone';
      row.search = [row.key, row.op_type, row.rule].concat(row.control_names, row.test_names).join('\n').toLowerCase();
      return row;
    });
    // The layer table (compare.layers): the diff table lists layers, op rows folded under each.
    this.layers = (compare.layers || []).map((layer, index) => Object.assign({index, open: false}, layer));
    this.byLayer = this.layers.length > 0;
    this.sortState = {key: 'delta_ns', descending: true};
    this.filterText = '';
    this.category = '';
    this.selectedIndex = -1;
    this.shown = [];
    this.currentPair = -1;  // the step pair the timelines are aligned at
    this._coverageBar(page.app);
    this._partsBars(page.app);
    this._stepChoices();
  }

  /** Where each run's median step goes (analysis/run/breakdown.py): a stacked bar per run,
   *  both to the longer step's scale, and the difference by part (they add up to it). */
  _partsBars(app) {
    const parts = this.compare.parts;
    if (!parts || !parts.control || !parts.test) return;
    const panel = el('div', 'tb-parts-compare');
    const scale = Math.max(parts.control.median_ns || 0, parts.test.median_ns || 0);
    panel.appendChild(el('span', 'tb-compare-label', 'Median step by part'));
    this.partRows = ROLES.map((role) => {
      const row = partsBar(role, parts[role].parts, parts[role].median_ns, scale);
      row.classList.add('tb-role-' + role);
      panel.appendChild(row);
      return row;
    });
    const delta = parts.delta || {};
    const ranked = STEP_PARTS.slice().sort((a, b) => Math.abs(delta[b] || 0) - Math.abs(delta[a] || 0));
    const moved = el('div', 'tb-parts-delta');
    moved.appendChild(el('span', 'tb-parts-label', 'difference'));
    moved.appendChild(el('span', null, ranked.map((part) => `${part} ${fmtSigned(delta[part] || 0)}`).join(' \u00b7 ')
      + ` = ${fmtSigned(STEP_PARTS.reduce((sum, part) => sum + (delta[part] || 0), 0))}`));
    panel.appendChild(moved);
    panel.appendChild(partsLegend());
    app.appendChild(panel);
    this.partsPanel = panel;
  }

  /** The step selector: the aligned step pairs, by index. */
  _stepChoices() {
    const pairs = this.compare.step_pairs, toolbar = this.page.toolbar;
    const length = (d, number) => {
      const s = d.steps.find((x) => x.number === number);
      return s ? fmtDuration(s.end - s.start) : '?';
    };
    toolbar.setSteps(`All steps (${plural(pairs.length, 'aligned pair')})`,
      pairs.map(([c, t], i) => [i, `step ${c} \u2194 ${t} \u00b7 ${length(this.datas[0], c)} / ${length(this.datas[1], t)}`]),
      (index) => this.selectStepPair(index));
    toolbar.bar.classList.add('tb-compare-mode');
  }

  /** At the start: the runs aligned at the first step pair, all of both in view. */
  alignFirstPair() {
    const page = this.page;
    if (this.compare.step_pairs.length && page.alignSteps(this.compare.step_pairs[0])) {
      this.currentPair = 0;
      page.range = {t0: page.home.t0, t1: page.home.t1};
    }
  }

  /** Align the traces at step pair ``index`` of the comparison and zoom to it (both
   *  steps in view: they start together); false if there is no such pair. */
  selectStepPair(index) {
    const page = this.page, pair = this.compare.step_pairs[index];
    if (!pair || !page.alignSteps(pair)) return false;
    this.currentPair = index;
    let lo = Infinity, hi = -Infinity;
    page.timelines.forEach((t, i) => {
      const s = t.data.steps.find((x) => x.number === pair[i]);
      lo = Math.min(lo, s.start - t.offset);
      hi = Math.max(hi, s.end - t.offset);
    });
    const pad = Math.max(hi - lo, MIN_SPAN) * 0.02;
    page.toolbar.showStep(index);
    page.setRange(lo - pad, hi + pad);
    return true;
  }

  /** The pair of the control run's step ``number`` (Page.selectStep). */
  selectControlStep(number) {
    return this.selectStepPair(this.compare.step_pairs.findIndex((pair) => pair[0] === number));
  }

  _coverageBar(app) {
    const bar = el('div', 'tb-compare-bar');
    const coverage = this.compare.coverage || {};
    bar.appendChild(el('span', 'tb-compare-label', 'Matched op time'));
    ROLES.forEach((role) => {
      const item = el('span', 'tb-coverage tb-role-' + role);
      item.appendChild(el('span', 'tb-role', role));
      item.appendChild(el('span', 'tb-coverage-value', fmtPercent(coverage[role])));
      item.title = `share of the ${role} run's op time matched to the other run`;
      bar.appendChild(item);
    });
    const count = (test) => this.rows.filter(test).length;
    const facts = [
      plural(count((r) => r.side === 'both'), 'matched op'),
      `${count((r) => r.side === 'control').toLocaleString('en-US')} only in control`,
      `${count((r) => r.side === 'test').toLocaleString('en-US')} only in test`,
    ];
    bar.appendChild(el('span', 'tb-compare-facts', facts.join(' \u00b7 ')));
    // Per rule, the share of each run's op time it matched: the legend of the rule colours.
    const shares = el('span', 'tb-compare-facts tb-rule-shares');
    for (const [rule, share] of Object.entries(this.compare.rule_shares || {})) {
      const item = el('span', 'tb-rule ' + ruleClass(rule),
                      `${rule} ${fmtPercent(share.control)}/${fmtPercent(share.test)}`);
      item.title = `share of control / test op time matched by ${rule}`;
      shares.appendChild(item);
    }
    if (shares.childNodes.length) bar.appendChild(shares);
    const changes = el('span', 'tb-compare-facts');
    for (const change of ['+', '-', '=']) {
      changes.appendChild(el('span', 'tb-change ' + CHANGE_CLASS[change],
        `${count((r) => r.change === change).toLocaleString('en-US')} ${CHANGE_TEXT[change].slice(2)}`));
    }
    bar.appendChild(changes);
    // The measure `tracebridge compare` leads with: each run's median step time.
    const head = this.compare.headline || {};
    const c = head.control_ns || 0, t = head.test_ns || 0;
    const total = el('span', 'tb-compare-facts tb-headline',
      `step time (median): ${fmtShort(c)} \u2192 ${fmtShort(t)}` + (c > 0 ? ` (${t >= c ? '+' : '\u2212'}${Math.abs((t - c) / c * 100).toFixed(1)}%)` : ''));
    if (typeof head.explained === 'number') total.title = `findings explain up to ${Math.round(head.explained * 100)}% of the difference`;
    bar.appendChild(total);
    bar.appendChild(el('span', 'tb-compare-facts', plural(this.compare.step_pairs.length, 'aligned step pair')));
    app.appendChild(bar);
    this.bar = bar;
  }

  /** The heading of timeline ``i``: its role, name (its file's, else its source format)
   *  and counts. */
  heading(i) {
    const role = ROLES[i] || `trace ${i}`, meta = this.datas[i].meta, info = (this.compare.traces || [])[i] || {};
    const head = el('div', 'tb-trace-head tb-role-' + (ROLES[i] || 'other'));
    head.appendChild(el('span', 'tb-role', role));
    const format = el('span', 'tb-trace-format', info.name || info.source_format || meta.source_format);
    format.title = `${info.name || ''} (${info.source_format || meta.source_format} trace)`;
    head.appendChild(format);
    head.appendChild(el('span', 'tb-trace-facts',
      `${plural(meta.op_count, 'event')} \u00b7 ${plural(meta.devices.length, 'device')} \u00b7 ${plural(meta.steps.length, 'step')}`
      + ` \u00b7 ${fmtPercent((this.compare.coverage || {})[role])} of op time matched`));
    return head;
  }

  /** Why the test run is slower (analysis/findings.py): one entry per finding, ranked by
   *  share; clicking one with ops filters the table to its first op. */
  _findingsPanel(sidebar) {
    const panel = el('section', 'tb-panel tb-findings');
    const findings = this.compare.findings || [];
    panel.appendChild(el('h2', null, `Findings (${findings.length})`));
    if (!findings.length) panel.appendChild(el('div', 'tb-finding-none', 'none: nothing in the traces names a porting mistake'));
    for (const finding of findings) {
      const item = el('div', 'tb-finding');
      item.appendChild(el('div', 'tb-finding-head', `${fmtPercent(finding.share)} \u00b7 ${finding.kind}`));
      item.appendChild(el('div', 'tb-finding-summary', finding.summary));
      item.appendChild(el('div', 'tb-finding-advice', `fix: ${finding.advice} (${finding.link})`));
      const ops = (finding.evidence || {}).ops || [];
      if (ops.length) {
        const show = el('button', 'tb-finding-ops', `show ${plural(ops.length, 'op')} in the table`);
        show.addEventListener('click', () => this.setFilter(String(ops[0]).split(' [')[0].split(' ~ ')[0], ''));
        item.appendChild(show);
      }
      panel.appendChild(item);
    }
    sidebar.add(panel);
  }

  /** The sidebar of a comparison: the compared op (row), the selected op, both runs. */
  sidebar(sidebar) {
    const compared = el('section', 'tb-panel tb-compared');
    compared.appendChild(el('h2', null, 'Compared op'));
    this.rowBody = el('div', 'tb-compared-body');
    compared.appendChild(this.rowBody);
    sidebar.add(compared);
    this._findingsPanel(sidebar);
    this.showRow(null);
    sidebar.addDetails();
    this.datas.forEach((d, i) => sidebar.addInfo(d.meta, ['Control run', 'Test run'][i] || 'Trace'));
  }

  showRow(row) {
    const body = this.rowBody;
    body.textContent = '';
    if (!row) {
      body.appendChild(el('p', 'tb-muted', 'Click a row of the diff table to highlight its op in both runs.'));
      return;
    }
    const dl = el('dl');
    const add = (k, v, className) => { dl.appendChild(el('dt', null, k)); dl.appendChild(el('dd', className || null, v)); };
    add('Op', row.key);
    add('Change', CHANGE_TEXT[row.change] || String(row.change), 'tb-change ' + (CHANGE_CLASS[row.change] || ''));
    add('Matched by', row.rule + (row.side === 'both' ? '' : ` (${row.side} only)`), 'tb-rule ' + ruleClass(row.rule));
    if (typeof row.confidence === 'number' && row.side === 'both') add('Confidence', row.confidence.toFixed(2));
    add('Op type', row.op_type);
    ROLES.forEach((role) => {
      const names = row[role + '_names'];
      add(`${role} names`, names.length ? names.join('\n') : '\u2014', 'tb-pre');
      add(`${role} median`, names.length ? fmtDuration(row[role + '_median_ns']) : '\u2014');
      add(`${role} total`, names.length ? fmtDuration(row[role + '_total_ns']) : '\u2014');
    });
    add('Delta', fmtSigned(row.delta_ns));
    add('Ratio', typeof row.ratio === 'number' ? row.ratio.toFixed(3) + '\u00d7' : '\u2014');
    if (this.counts) add('Highlighted', ROLES.map((role, i) => `${role} ${plural(this.counts[i], 'op')}`).join(', '));
    body.appendChild(dl);
  }

  /** The table below the timelines (and the splitter that resizes it). */
  mount(app) {
    const splitter = el('div', 'tb-splitter');
    splitter.setAttribute('role', 'separator');
    splitter.setAttribute('aria-orientation', 'horizontal');
    splitter.title = 'Drag to resize the diff table';
    const panel = el('section', 'tb-diff');
    this.panel = panel;
    let drag = null;
    splitter.addEventListener('pointerdown', (e) => {
      drag = {y: e.clientY, height: panel.getBoundingClientRect().height};
      splitter.setPointerCapture(e.pointerId);
      e.preventDefault();
    });
    splitter.addEventListener('pointermove', (e) => {
      if (!drag) return;
      const max = Math.max(120, app.clientHeight - 200);
      panel.style.height = Math.round(Math.min(max, Math.max(90, drag.height + drag.y - e.clientY))) + 'px';
      this.page.requestDraw();
    });
    const stop = () => { drag = null; };
    splitter.addEventListener('pointerup', stop);
    splitter.addEventListener('pointercancel', stop);
    const head = el('div', 'tb-diff-head');
    head.appendChild(el('h2', null, `Diff \u00b7 ${plural(this.rows.length, 'op')}`));
    this.filterBox = searchField('tb-search tb-diff-filter', 'Filter rows',
                                 'Filter the diff table by op, op type or rule',
                                 (value) => this.setFilter(value, this.category));
    head.appendChild(this.filterBox);
    this.categorySelect = el('select', 'tb-diff-category');
    this.categorySelect.setAttribute('aria-label', 'Show rows of one kind');
    for (const [value, text] of [['', 'All rows'], ['+', 'Slower'], ['-', 'Faster'], ['=', 'Same'],
                                 ['matched', 'Matched'], ['unmatched', 'Unmatched']]) {
      const option = el('option', null, text);
      option.value = value;
      this.categorySelect.appendChild(option);
    }
    this.categorySelect.addEventListener('change', () => this.setFilter(this.filterBox.value, this.categorySelect.value));
    head.appendChild(this.categorySelect);
    if (this.layers.length) {
      const label = el('label', 'tb-diff-by-layer');
      this.layerBox = el('input');
      this.layerBox.type = 'checkbox';
      this.layerBox.checked = this.byLayer;
      this.layerBox.addEventListener('change', () => { this.byLayer = this.layerBox.checked; this.render(); });
      label.appendChild(this.layerBox);
      label.appendChild(document.createTextNode(' by layer'));
      label.title = 'List the layers of the model (time per step in each layer and phase), op rows folded under each';
      head.appendChild(label);
    }
    this.note = el('span', 'tb-muted tb-diff-note', '');
    head.appendChild(el('span', 'tb-help', 'click a row: highlight and zoom to it in both runs \u00b7 \u2191/\u2193 next row \u00b7 click a column: sort'));
    head.appendChild(this.note);
    panel.appendChild(head);
    const scroll = el('div', 'tb-diff-scroll');
    this.scroll = scroll;
    this.table = el('table', 'tb-table tb-diff-table');
    const thead = el('thead'), tr = el('tr');
    this.headers = DIFF_COLUMNS.map((column) => {
      const th = el('th', 'tb-col-' + column.key.replace(/_/g, '-'));
      const button = el('button', 'tb-sort', column.label);
      button.type = 'button';
      button.title = `${column.title}; click to sort`;
      button.addEventListener('click', () => {
        const same = this.sortState.key === column.key;
        this.sortBy(column.key, same ? !this.sortState.descending : column.kind !== 'text');
      });
      th.appendChild(button);
      tr.appendChild(th);
      return {column, th, button};
    });
    thead.appendChild(tr);
    this.table.appendChild(thead);
    this.body = el('tbody');
    this.table.appendChild(this.body);
    scroll.appendChild(this.table);
    panel.appendChild(scroll);
    app.appendChild(splitter);
    app.appendChild(panel);
  }

  sortBy(key, descending) {
    if (!DIFF_COLUMNS.some((c) => c.key === key)) return false;
    this.sortState = {key, descending: descending === undefined ? true : !!descending};
    this.render();
    return true;
  }

  setFilter(text, category) {
    this.filterText = (text || '').toLowerCase();
    this.category = category || '';
    if (this.categorySelect.value !== this.category) this.categorySelect.value = this.category;
    this.render();
    return this.shown.length;
  }

  _filtered() {
    const text = this.filterText, category = this.category;
    return this.rows.filter((r) => {
      if (text && !r.search.includes(text)) return false;
      if (!category) return true;
      if (category === 'matched') return r.side === 'both';
      if (category === 'unmatched') return r.side !== 'both';
      return r.change === category;
    });
  }

  _sorted(rows) {
    const {key, descending} = this.sortState, column = DIFF_COLUMNS.find((c) => c.key === key);
    const value = column.kind === 'change' ? (r) => (r.change in CHANGE_ORDER ? CHANGE_ORDER[r.change] : null)
      : column.kind === 'num' ? (r) => (typeof r[key] === 'number' && isFinite(r[key]) ? r[key] : null)
        : (r) => String(r[key] === null || r[key] === undefined ? '' : r[key]);
    const sign = descending ? -1 : 1;
    return rows.map((r) => [value(r), r]).sort(([x, a], [y, b]) => {
      if (x === null || y === null) return x === y ? a.index - b.index : (x === null ? 1 : -1);  // missing: last
      const c = column.kind === 'text' ? (x < y ? -1 : x > y ? 1 : 0) : x - y;
      return c ? sign * c : a.index - b.index;
    }).map(([, r]) => r);
  }

  render() {
    this.shown = this._sorted(this._filtered());
    const fragment = document.createDocumentFragment();
    if (this.byLayer) this._renderLayers(fragment);
    else for (const row of this.shown.slice(0, MAX_DIFF_ROWS)) fragment.appendChild(this._row(row));
    this.body.textContent = '';
    this.body.appendChild(fragment);
    for (const {column, th, button} of this.headers) {
      const active = column.key === this.sortState.key;
      th.setAttribute('aria-sort', active ? (this.sortState.descending ? 'descending' : 'ascending') : 'none');
      button.textContent = column.label + (active ? (this.sortState.descending ? ' \u25be' : ' \u25b4') : '');
    }
    const total = this.rows.length, shown = this.shown.length;
    this.note.textContent = (shown < total ? `${shown.toLocaleString('en-US')} of ${total.toLocaleString('en-US')} rows` : '')
      + (shown > MAX_DIFF_ROWS ? ` (first ${MAX_DIFF_ROWS.toLocaleString('en-US')} listed: filter to see others)` : '');
    fitCells(this.table);
  }

  /** Layers in the model's order, each a heading row (both runs' time per step in it, the
   *  difference) that opens to its op rows, as filtered and sorted. */
  _renderLayers(fragment) {
    const shown = new Set(this.shown.map((r) => r.index));
    let listed = 0;
    for (const layer of this.layers) {
      const rows = layer.rows.filter((i) => shown.has(i));
      if (!rows.length && (this.filterText || this.category)) continue;
      const tr = el('tr', 'tb-layer' + (layer.open ? ' tb-open' : ''));
      tr.tabIndex = 0;
      tr.dataset.layer = String(layer.index);
      tr.appendChild(el('td', 'tb-layer-toggle', layer.open ? '\u25be' : '\u25b8'));
      const name = el('td', 'tb-name tb-fit tb-wrap', layer.label);
      name.title = `${layer.label}: ${plural(rows.length, 'op row')}`;
      name.colSpan = 3;
      tr.appendChild(name);
      tr.appendChild(el('td', 'tb-num', fmtShort(layer.control_total_ns)));
      tr.appendChild(el('td', 'tb-num', fmtShort(layer.test_total_ns)));
      tr.appendChild(el('td', 'tb-num ' + (layer.delta_ns > 0 ? 'tb-slower' : layer.delta_ns < 0 ? 'tb-faster' : ''),
                        fmtSigned(layer.delta_ns)));
      const ratio = layer.control_total_ns > 0 ? layer.test_total_ns / layer.control_total_ns : null;
      tr.appendChild(el('td', 'tb-num', ratio === null ? '\u2014' : ratio.toFixed(2) + '\u00d7'));
      const toggle = () => { layer.open = !layer.open; this.render(); };
      tr.addEventListener('click', toggle);
      tr.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); toggle(); } });
      fragment.appendChild(tr);
      if (!layer.open) continue;
      const order = new Map(this.shown.map((r, k) => [r.index, k]));
      for (const i of rows.sort((a, b) => order.get(a) - order.get(b))) {
        if (listed++ >= MAX_DIFF_ROWS) return;
        const row = this._row(this.rows[i]);
        row.classList.add('tb-in-layer');
        fragment.appendChild(row);
      }
    }
  }

  _row(row) {
    const tr = el('tr', row.side === 'both' ? null : 'tb-unmatched');
    tr.tabIndex = 0;
    tr.dataset.index = String(row.index);
    if (row.index === this.selectedIndex) tr.classList.add('tb-selected');
    tr.appendChild(el('td', 'tb-change ' + (CHANGE_CLASS[row.change] || ''), CHANGE_TEXT[row.change] || String(row.change)));
    const name = el('td', 'tb-name tb-fit tb-wrap', row.key);
    name.title = row.key;
    tr.appendChild(name);
    // Each rule has its colour (timeline.css, .tb-rule-*): a table carried by position shows at a glance.
    const rule = el('td', 'tb-name tb-rule ' + ruleClass(row.rule),
                    row.side === 'both' ? row.rule : `${row.rule} \u00b7 ${row.side} only`);
    if (typeof row.confidence === 'number' && row.side === 'both') rule.title = `confidence ${row.confidence.toFixed(2)}`;
    tr.dataset.rule = row.rule;
    tr.appendChild(rule);
    const type = el('td', 'tb-name tb-fit', row.op_type);
    type.title = row.op_type;
    tr.appendChild(type);
    tr.appendChild(el('td', 'tb-num', row.control_names.length ? fmtShort(row.control_median_ns) : '\u2014'));
    tr.appendChild(el('td', 'tb-num', row.test_names.length ? fmtShort(row.test_median_ns) : '\u2014'));
    tr.appendChild(el('td', 'tb-num ' + (row.delta_ns > 0 ? 'tb-slower' : row.delta_ns < 0 ? 'tb-faster' : ''), fmtSigned(row.delta_ns)));
    tr.appendChild(el('td', 'tb-num', typeof row.ratio === 'number' ? (row.ratio >= 100 ? row.ratio.toFixed(0) : row.ratio.toFixed(2)) + '\u00d7' : '\u2014'));
    tr.addEventListener('click', () => this.activate(row));
    tr.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') { e.preventDefault(); this.activate(row); }
      if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
        const next = e.key === 'ArrowDown' ? tr.nextElementSibling : tr.previousElementSibling;
        if (next) { e.preventDefault(); next.focus(); next.click(); }
      }
    });
    return tr;
  }

  /** Highlight row ``row``'s op in both runs and zoom to it; a second click clears. */
  activate(row) {
    const page = this.page;
    if (row.index === this.selectedIndex) { page.clearHighlight(); return 0; }
    for (const other of page.app.querySelectorAll('tr.tb-selected')) other.classList.remove('tb-selected');
    this.selectedIndex = row.index;
    const tr = this.body.querySelector(`tr[data-index="${row.index}"]`);
    if (tr) tr.classList.add('tb-selected');
    this.counts = null;
    this.showRow(row);
    page.toolbar.searchBox.value = '';
    return page.highlight([{names: row.control_names}, {names: row.test_names}], () => {
      if (this.selectedIndex !== row.index) return;
      this.counts = page.timelines.map((t) => t.highlightCount);
      page.toolbar.say(`${this.counts.map((n, i) => `${ROLES[i]} ${n.toLocaleString('en-US')}`).join(' \u00b7 ')} ops: ${row.key}`);
      this.showRow(row);
      this.focus();
    });
  }

  deselect() {
    this.selectedIndex = -1;
    this.counts = null;
    if (this.rowBody) this.showRow(null);
  }

  /** An instance of the highlighted op of timeline ``t``: the longest one in the step
   *  the runs are aligned at, else the longest; -1 if none. */
  _instance(t, stepNumber) {
    const d = t.data, mask = t.highlight;
    if (!mask || !t.highlightCount) return -1;
    const stepIndex = stepNumber === null ? -1 : d.steps.findIndex((s) => s.number === stepNumber) + 1;
    const steps = d.column('step');
    let best = -1, bestInStep = -1;
    for (let i = 0; i < d.n; i++) {
      if (!mask[i]) continue;
      const length = d.end[i] - d.start[i];
      if (best < 0 || length > d.end[best] - d.start[best]) best = i;
      if (stepIndex > 0 && steps[i] === stepIndex && (bestInStep < 0 || length > d.end[bestInStep] - d.start[bestInStep])) bestInStep = i;
    }
    return bestInStep >= 0 ? bestInStep : best;
  }

  /** Zoom to the highlighted op's instances (both runs in view), select the first. */
  focus() {
    const page = this.page, pair = this.currentPair >= 0 ? this.compare.step_pairs[this.currentPair] : null;
    const found = [];
    let lo = Infinity, hi = -Infinity;
    page.timelines.forEach((t, k) => {
      const pos = this._instance(t, pair ? pair[k] : null);
      if (pos < 0) return;
      found.push({t, pos});
      lo = Math.min(lo, t.data.start[pos] - t.offset);
      hi = Math.max(hi, t.data.end[pos] - t.offset);
    });
    if (!found.length) return;
    const span = Math.max(hi - lo, MIN_SPAN * 10);
    page.setRange(lo - span * 0.5, hi + span * 0.5);
    this._revealTogether(found);
    page.select(found[0].t, found[0].pos);
    this.instances = found.map(({t, pos}) => ({trace: page.timelines.indexOf(t), pos}));
  }

  /** Scroll each run's pane (page.js: a comparison gives each run its own) so that the lane
   *  of its instance is in view, below the pane's sticky ruler: both runs show their op
   *  together (one scroll box for both scrolled the first away to show the second). */
  _revealTogether(found) {
    for (const {t, pos} of found) {
      const lane = t.data.laneOf(pos), panel = t.panelOfLane(lane);
      if (panel && panel.collapsed) t.setCollapsed(panel, false);
    }
    for (const {t, pos} of found) {
      const lane = t.data.laneOf(pos), panel = t.panelOfLane(lane), box = t.scroller;
      if (!panel) continue;
      const top = panel.wrap.getBoundingClientRect().top - box.getBoundingClientRect().top + box.scrollTop;
      const y = top + Math.max(panel.lanes.indexOf(lane), 0) * t.row;
      const ruler = t.rulerBox.offsetHeight;
      if (y >= box.scrollTop + ruler && y + t.row <= box.scrollTop + box.clientHeight) continue;  // in view already
      box.scrollTop = Math.max(0, y - ruler - Math.max(0, (box.clientHeight - ruler - t.row) / 2));
    }
  }

  /** Row ``index`` (its place in the comparison's rows) as a plain object. */
  rowInfo(row) {
    const out = {};
    for (const field of this.compare.fields) out[field] = row[field];
    return Object.assign(out, {index: row.index, side: row.side});
  }

  /** window.tracebridge.compare. */
  api() {
    const page = this.page;
    return {
      /** Each run's bar: its pieces' parts, widths (% of the bar) and the total shown. */
      partBars: () => (this.partRows || []).map((row) => ({
        pieces: Array.from(row.querySelectorAll('.tb-part'), (p) => ({
          part: STEP_PARTS.find((name) => p.classList.contains('tb-part-' + name)), width: parseFloat(p.style.width)})),
        total: row.querySelector('.tb-parts-total').textContent})),
      /** The rows in table order (after sorting and filtering), as plain objects. */
      rows: () => this.shown.map((r) => this.rowInfo(r)),
      /** The op keys of the rows drawn in the table, top to bottom. */
      tableKeys: () => Array.from(this.body.querySelectorAll('tr:not(.tb-layer)'), (tr) => tr.cells[1].title),
      sort: (key, descending) => this.sortBy(key, descending),
      sortState: () => Object.assign({}, this.sortState),
      filter: (text, category) => this.setFilter(text, category),
      /** Highlight row ``index`` (of the comparison's rows) in both runs and zoom to it;
       *  resolves to the highlighted op counts [control, test]. */
      selectRow: (index) => {
        const row = this.rows[index];
        if (!row) return Promise.resolve(null);
        if (this.selectedIndex === index) return Promise.resolve(this.counts);
        this.activate(row);
        return page.whenReady.then(() => { page.drawNow(); return this.counts; });
      },
      selectedRow: () => this.selectedIndex,
      /** [{trace, pos}] of the instances zoomed to after the last row selection. */
      instances: () => (this.instances || []).slice(),
      highlightCounts: () => page.timelines.map((t) => (t.highlight ? t.highlightCount : 0)),
      stepPairs: () => this.compare.step_pairs.map((pair) => pair.slice()),
      selectStepPair: (index) => { const ok = this.selectStepPair(index); page.drawNow(); return ok; },
      currentPair: () => this.currentPair,
      offsets: () => page.timelines.map((t) => t.offset),
      coverage: () => Object.assign({}, this.compare.coverage),
      ruleShares: () => JSON.parse(JSON.stringify(this.compare.rule_shares || {})),
      findings: () => Array.from(document.querySelectorAll('.tb-finding-head'), (e) => e.textContent),
      /** The layer table: [{label, phase, control_total_ns, test_total_ns, delta_ns, rows, open}]. */
      layers: () => this.layers.map((l) => Object.assign({}, l, {rows: l.rows.slice()})),
      /** Open or fold layer ``index`` (byLayer: list by layer, or not); the table's row keys after. */
      openLayer: (index, open) => {
        const layer = this.layers[index];
        if (!layer) return null;
        layer.open = open === undefined ? !layer.open : !!open;
        this.render();
        return Array.from(this.body.querySelectorAll('tr.tb-in-layer'), (tr) => tr.cells[1].title);
      },
      byLayer: (on) => { if (on !== undefined) { this.byLayer = !!on; if (this.layerBox) this.layerBox.checked = this.byLayer; this.render(); } return this.byLayer; },
    };
  }
}
