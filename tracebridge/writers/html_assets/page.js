/* The page: the timelines of one or more traces, one above the other, under a toolbar,
 * with one shared range (zoom and pan move them all), one highlight and one selection; the
 * sidebar, hover box and input act on them. A comparison page (compare_html.py) adds a
 * DiffView (diff_view.js), which brings its step pairs, headings, sidebar and table.
 */

class Page {
  /** ``datas``: one TraceData per trace, drawn one above the other. ``options.title``: the
   *  page title (default: the first trace's); ``options.labels``: a caption per trace;
   *  ``options.compare`` and ``options.DiffView``: the comparison compare_html.py embedded
   *  and the diff view class that shows it. */
  constructor(app, datas, options) {
    options = options || {};
    this.app = app;
    this.version = 0;
    this.frame = 0;
    this.cursor = null;  // view time under the mouse (a line on every timeline), or null
    this.highlightSpec = null;
    this.ready = false;
    this.whenReady = Promise.resolve(true);
    app.textContent = '';
    this.toolbar = new Toolbar(this, typeof options.title === 'string' ? options.title : datas[0].meta.title);
    this.diff = options.compare ? new options.DiffView(this, options.compare, datas) : null;
    if (!this.diff) this._stepChoices(datas[0]);
    const body = el('div', 'tb-body');
    this.scrollBox = el('div', 'tb-main');
    this.side = el('aside', 'tb-side');
    body.appendChild(this.scrollBox);
    body.appendChild(this.side);
    app.appendChild(body);
    if (this.diff) this.diff.mount(app);
    this.tooltip = new Tooltip(this);
    this.input = new Input(this);
    const labels = options.labels || [];
    // Two or more runs: each in a pane of its own that scrolls on its own, so that both stay
    // in view (a row of the diff table scrolls each to its op); one run: the box scrolls.
    this.panes = datas.length > 1 ? datas.map(() => this.scrollBox.appendChild(el('div', 'tb-pane'))) : [this.scrollBox];
    if (datas.length > 1) this.scrollBox.classList.add('tb-split');
    this.timelines = datas.map((data, i) => new Timeline(data, this.panes[i], this, {
      label: labels[i], heading: this.diff ? this.diff.heading(i) : null}));
    this.sidebar = new Sidebar(this, this.side);
    if (this.diff) this.diff.sidebar(this.sidebar); else this.sidebar.addForTrace(datas[0]);
    const [lo, hi] = this.extent();
    const pad = (hi - lo) * 0.01;
    this.home = {t0: lo - pad, t1: hi + pad};
    this.range = this._openRange() || {t0: this.home.t0, t1: this.home.t1};
    if (this.diff) this.diff.alignFirstPair();
    this.layout();
    fitCells(this.scrollBox);
    if (this.diff) this.diff.render();
    new ResizeObserver(() => {
      if (this.scrollBox.clientWidth === this.layoutWidth && this.scrollBox.clientHeight === this.layoutHeight) {
        this.requestDraw();
        return;
      }
      this.layout();
      this.requestDraw();
      fitCells(this.side);
      fitCells(this.scrollBox);
      if (this.diff) fitCells(this.diff.table);
    }).observe(this.scrollBox);
    for (const pane of this.panes) pane.addEventListener('scroll', () => this.requestDraw(), {passive: true});
  }

  /** The step selector of a one-trace page: its steps, by number. */
  _stepChoices(data) {
    this.toolbar.setSteps(`All steps (${data.steps.length})`,
      data.steps.map((s) => [s.number, `step ${s.number}${s.name ? ' ' + s.name : ''} \u00b7 ${fmtDuration(s.end - s.start)}`]),
      (number) => this.selectStep(number));
  }

  // --- range and drawing -------------------------------------------------------------------
  extent() {
    let lo = Infinity, hi = -Infinity;
    for (const t of this.timelines) {
      const [a, b] = t.extent();
      lo = Math.min(lo, a);
      hi = Math.max(hi, b);
    }
    return [lo, Math.max(hi, lo + 1000)];
  }

  /** Where the ops of the open panels are (and the steps), when that is under half of the
   *  whole: the first view, so that a folded host's long tail of events does not shrink the
   *  accelerator's work to a sliver (Reset shows everything). */
  _openRange() {
    let lo = Infinity, hi = -Infinity;
    for (const t of this.timelines) {
      const d = t.data;
      for (const p of t.panels) {
        if (p.collapsed) continue;
        for (const lane of p.lanes) {
          const first = d.laneFirst[lane], last = d.laneFirst[lane + 1];
          if (first >= last) continue;
          lo = Math.min(lo, d.start[first] - t.offset);
          for (let i = Math.max(first, last - 8); i < last; i++) hi = Math.max(hi, d.end[i] - t.offset);  // ends rise along a lane
        }
      }
      for (const s of d.steps) { lo = Math.min(lo, s.start - t.offset); hi = Math.max(hi, s.end - t.offset); }
    }
    const full = this.home.t1 - this.home.t0;
    if (!(hi > lo) || hi - lo > 0.5 * full) return null;
    const pad = Math.max((hi - lo) * 0.02, MIN_SPAN);
    return {t0: lo - pad, t1: hi + pad};
  }

  layout() {
    // Sizing the panels may add a vertical scrollbar, which narrows the box: then again.
    for (let pass = 0; pass < 2; pass++) {
      const width = Math.max(GUTTER + 200, this.panes[0].clientWidth);
      this._fill(width);
      this.layoutWidth = this.scrollBox.clientWidth;
      this.layoutHeight = this.scrollBox.clientHeight;
      if (this.panes[0].clientWidth === width) break;
    }
    this.version++;
  }

  /** Lay the timelines out ``width`` px wide, their lanes as tall as the view allows: a
   *  trace of few lanes fills the view (its ops get taller and say more) instead of
   *  leaving most of it blank; a trace of many keeps ROW and scrolls. The allocator
   *  chart takes what lanes leave. Where the runs of a comparison do not fit together,
   *  each pane gets its share of the height. */
  _fill(width) {
    const timelines = this.timelines;
    for (const t of timelines) { t.row = ROW; t.memHeight = MEM_H; t.layout(width); }
    for (const pane of this.panes) if (pane !== this.scrollBox) pane.style.height = '';
    const room = this.scrollBox.clientHeight - 4 * this.panes.length;  // borders, rounding
    const natural = timelines.map((t) => t.root.offsetHeight);
    const extra = room - natural.reduce((a, b) => a + b, 0);
    const lanes = timelines.reduce((n, t) => n + t.openLanes(), 0);
    const charts = timelines.filter((t) => t.memory && !t.memory.collapsed);
    if (extra > 0 && lanes + 2 * charts.length > 0) {
      // lanes and the memory chart (worth two lanes) share the room; a lane grows to MAX_ROW
      const row = Math.min(MAX_ROW, ROW + Math.floor(extra / (lanes + 2 * charts.length)));
      const left = extra - (row - ROW) * lanes;
      for (const t of timelines) {
        t.row = row;
        if (charts.includes(t)) t.memHeight = MEM_H + Math.floor(left / charts.length);
        t.layout(width);
      }
    } else if (this.panes.length > 1) {
      // each run its fair share of the height: a short one all it needs, the others the rest
      let left = room, count = timelines.length;
      const order = natural.map((h, i) => i).sort((a, b) => natural[a] - natural[b]);
      for (const i of order) {
        const height = Math.max(60, Math.min(natural[i], Math.floor(left / count)));
        this.panes[i].style.height = height + 'px';
        left -= height;
        count -= 1;
      }
    }
  }

  setRange(t0, t1) {
    const [lo, hi] = this.extent();
    const full = hi - lo;
    let span = Math.min(Math.max(t1 - t0, MIN_SPAN), full * 4);
    let center = (t0 + t1) / 2;
    center = Math.min(Math.max(center, lo), hi);
    this.range = {t0: center - span / 2, t1: center + span / 2};
    this.version++;
    this.requestDraw();
  }

  zoom(factor, anchor) {
    const r = this.range;
    const a = anchor === undefined || anchor === null ? (r.t0 + r.t1) / 2 : anchor;
    this.setRange(a - (a - r.t0) * factor, a + (r.t1 - a) * factor);
  }

  pan(fraction) {
    const r = this.range, dt = (r.t1 - r.t0) * fraction;
    this.setRange(r.t0 + dt, r.t1 + dt);
  }

  resetZoom() {
    this.toolbar.showStep(null);
    this.setRange(this.home.t0, this.home.t1);
  }

  /** Shift every trace so that its step ``number`` starts where the first trace's does
   *  (view time = trace time - offset); false if a trace lacks that step. ``number`` may
   *  be an array: a step number per trace (a comparison's step pair). */
  alignSteps(number) {
    const numbers = Array.isArray(number) ? number : this.timelines.map(() => number);
    const starts = this.timelines.map((t, i) => t.data.steps.find((s) => s.number === numbers[i]));
    if (starts.some((s) => !s)) return false;
    this.timelines.forEach((t, i) => { t.offset = starts[i].start - starts[0].start; });
    const [lo, hi] = this.extent(), pad = (hi - lo) * 0.01;
    this.home = {t0: lo - pad, t1: hi + pad};
    this.version++;
    this.requestDraw();
    return true;
  }

  selectStep(number) {
    if (number === null || number === undefined) { this.resetZoom(); return true; }
    if (this.diff) return this.diff.selectControlStep(number);
    const t = this.timelines[0];
    const step = t.data.steps.find((s) => s.number === number);
    if (!step) return false;
    const span = Math.max(step.end - step.start, MIN_SPAN), pad = span * 0.02;
    this.toolbar.showStep(number);
    this.setRange(step.start - t.offset - pad, step.end - t.offset + pad);
    return true;
  }

  requestDraw() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => { this.frame = 0; this.drawNow(); });
  }

  drawNow() {
    for (const t of this.timelines) t.draw(this.version, false);
  }

  redrawOverlays() {
    for (const t of this.timelines) t.drawOverlays();
  }

  collapseAll(collapsed) {
    for (const t of this.timelines) for (const p of t.panels) t.setCollapsed(p, collapsed, true);
    this.layout();
  }

  // --- highlight and selection -------------------------------------------------------------
  /** Highlight ops in every timeline: {text}, {name}, {names: [...]} or {type}; or an
   *  array with one such spec per timeline (null: none of its ops). Returns how many
   *  match. ``then(count)`` runs once applied (later, if names are still being decoded). */
  highlight(spec, then) {
    if (!this.ready) {
      this.highlightSpec = spec;
      this.whenReady.then(() => { if (this.highlightSpec === spec) this.highlight(spec, then); });
      return 0;
    }
    this.highlightSpec = spec;
    let total = 0;
    this.timelines.forEach((t, i) => {
      const d = t.data, one = Array.isArray(spec) ? spec[i] : spec;
      const result = !one ? {mask: new Uint8Array(d.n), count: 0}
        : one.names !== undefined ? d.matchNames(one.names)
        : one.name !== undefined ? d.matchName(one.name)
        : one.type !== undefined ? d.matchType(one.type) : d.matchText(one.text);
      t.setHighlight(result);
      total += result.count;
    });
    this.matchCursor = -1;
    this.requestDraw();
    if (then) then(total);
    return total;
  }

  /** A click on a TF op that ran kernels or copies, or on one of them: highlight the op
   *  and all its kernels (a device row carries the name of the TF op that launched it). */
  highlightLinked(timeline, pos) {
    const op = timeline && pos >= 0 ? timeline.data.op(pos) : null;
    if (!op || !timeline.data.linked.has(op.name)) return 0;
    this.toolbar.searchBox.value = '';
    return this.highlight({name: op.name}, (count) => {
      const d = timeline.data, what = d.meta.span_count ? 'its XLA ops' : 'its kernels';
      this.toolbar.say(`${count.toLocaleString('en-US')} ops: ${op.name} and ${what}`);
    });
  }

  clearHighlight() {
    this.highlightSpec = null;
    for (const t of this.timelines) t.setHighlight(null);
    for (const row of this.app.querySelectorAll('tr.tb-selected')) row.classList.remove('tb-selected');
    if (this.diff) this.diff.deselect();
    this.toolbar.say('');
    this.requestDraw();
  }

  search(text) {
    for (const row of this.app.querySelectorAll('tr.tb-selected')) row.classList.remove('tb-selected');
    if (this.diff) this.diff.deselect();
    if (!text) { this.clearHighlight(); return 0; }
    return this.highlight({text}, (count) => {
      this.toolbar.say(`${count.toLocaleString('en-US')} match${count === 1 ? '' : 'es'}`);
    });
  }

  /** Select the next highlighted op of the first timeline and bring it into view. */
  nextMatch() {
    const t = this.timelines[0], mask = t.highlight;
    if (!mask) return -1;
    let i = this.matchCursor + 1;
    while (i < mask.length && !mask[i]) i++;
    if (i >= mask.length) { i = 0; while (i < mask.length && !mask[i]) i++; }
    if (i >= mask.length) return -1;
    this.matchCursor = i;
    this.select(t, i);
    this.reveal(t, i);
    return i;
  }

  /** Bring op ``pos`` into view: pan to it, zoom in if it is tiny, scroll its panel in. */
  reveal(timeline, pos) {
    const d = timeline.data, s = d.start[pos] - timeline.offset, e = d.end[pos] - timeline.offset;
    const r = this.range;
    let span = r.t1 - r.t0;
    if ((e - s) * (timeline.width - GUTTER - PAD_R) / span < 4) span = Math.max((e - s) * 20, MIN_SPAN * 10);
    if (s < r.t0 || e > r.t1 || span !== r.t1 - r.t0) this.setRange((s + e) / 2 - span / 2, (s + e) / 2 + span / 2);
    timeline.revealPanel(pos);
  }

  select(timeline, pos) {
    if (!this.ready && timeline && pos >= 0) { this.whenReady.then(() => this.select(timeline, pos)); return; }
    for (const t of this.timelines) t.selected = -1;
    if (timeline && pos >= 0) timeline.selected = pos;
    this.sidebar.showDetails(timeline, pos);
    this.redrawOverlays();
  }
}
