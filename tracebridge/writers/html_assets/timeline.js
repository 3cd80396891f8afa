/* One trace's device panels, ruler and memory chart, drawn on canvases. View time = trace
 * time - timeline.offset, so that traces can be aligned (Page.alignSteps).
 *
 * Drawing is level-of-detail: per lane, the ops in the visible window are found by binary
 * search (a lane's ops never overlap, so starts and ends are both sorted); ops at least a
 * pixel wide are drawn as they are, narrower ones merge into one block per pixel column
 * (coloured by the longest op in it). Rects are batched into one Path2D per colour.
 */

const RULER_H = 38;
const MEM_H = 120;
const LINE_H = 14;       // px between the lines of an op's label in a tall lane
const LABEL_MIN = 36;    // ops at least this wide (px) get their name written in
const HIT_SLOP = 3;      // px: hover/click tolerance for ops narrower than a pixel
const ALLOCATOR_COLORS = ['#1f6fb2', '#c2410c', '#15803d', '#7e22ce', '#b91c1c', '#0e7490', '#a16207', '#4d7c0f'];

/** The gutter labels of a panel's lanes, each at most ``width`` px: a lane's sub-rows
 *  (``name / 2``) keep their number; names are cut at their end (a thread pool's name
 *  before its long id, ``tf_XLAEigen/-33599\u2026``) where the cut ones still read
 *  differently, else as elideNames cuts table names (their common prefix goes). */
function laneLabels(ctx, names, width) {
  const split = names.map((name) => { const m = /^(.*?)( \/ \d+)$/.exec(name); return m ? [m[1], m[2]] : [name, '']; });
  const bases = split.map(([base]) => base);
  const rooms = split.map(([, number]) => width - ctx.measureText(number).width);
  let shown = bases.map((base, i) => fitText(ctx, base, rooms[i], 'end') || ELLIPSIS);
  const readers = new Map();  // shown text -> the different names it stands for
  bases.forEach((base, i) => { if (!readers.has(shown[i])) readers.set(shown[i], new Set()); readers.get(shown[i]).add(base); });
  if (Array.from(readers.values()).some((set) => set.size > 1)) shown = elideNames(ctx, bases, rooms, null, false);
  return shown.map((text, i) => text + split[i][1]);
}

/** The device panels of one trace under a ruler, and its memory chart. */
class Timeline {
  constructor(data, container, page, options) {
    this.data = data;
    this.page = page;
    this.scroller = container;  // the element that scrolls this timeline's panels
    this.row = ROW;             // lane height: Page.layout grows it to fill the view
    this.memHeight = MEM_H;
    this.offset = (options && options.offset) || 0;  // view time = trace time - offset
    this.highlight = null;
    this.highlightCount = 0;
    this.selected = -1;
    this.hovered = -1;
    this.width = 0;
    this.root = el('section', 'tb-trace');
    this.rulerBox = el('div', 'tb-ruler');
    this.ruler = el('canvas');
    this.rulerBox.appendChild(this.ruler);
    this.root.appendChild(this.rulerBox);
    if (options && options.label) this.rulerBox.insertBefore(el('div', 'tb-trace-label', options.label), this.ruler);
    if (options && options.heading) this.rulerBox.insertBefore(options.heading, this.ruler);
    this.panels = data.devices.map((device, index) => this._panel(device, index));
    this.memory = data.meta.allocators.length ? this._memoryPanel() : null;
    if (data.meta.hidden_devices) {
      this.root.appendChild(el('div', 'tb-note', `${data.meta.hidden_devices} device(s) hidden by the device pattern`));
    }
    container.appendChild(this.root);
    page.input.attach(this.ruler, this, null);
  }

  /** A panel: ``head`` over a canvas and its overlay (for hover and selection marks). */
  _section(className, head) {
    const section = el('section', className);
    const wrap = el('div', 'tb-canvas-wrap');
    const canvas = el('canvas', 'tb-base'), overlay = el('canvas', 'tb-overlay');
    wrap.appendChild(canvas);
    wrap.appendChild(overlay);
    section.appendChild(head);
    section.appendChild(wrap);
    this.root.appendChild(section);
    return {section, wrap, canvas, overlay};
  }

  _panel(device, index) {
    const head = el('div', 'tb-device-head');
    head.tabIndex = 0;
    head.setAttribute('role', 'button');
    head.setAttribute('aria-expanded', 'true');
    head.appendChild(el('span', 'tb-twisty', '\u25be'));
    const short = el('span', 'tb-device-short tb-fit', device.short);
    short.title = device.short;
    head.appendChild(short);
    const full = el('span', 'tb-device-name', device.name);
    head.title = device.name;
    head.appendChild(full);
    const network = device.lanes.filter((l) => this.data.lanes[l].network).length;
    head.appendChild(el('span', 'tb-device-count',
      `${plural(device.ops, 'event')} \u00b7 ${plural(device.lanes.length, 'lane')}` + (network ? ` (${network} network)` : '')));
    const {section, wrap, canvas, overlay} = this._section('tb-device', head);
    if (!device.lanes.length) wrap.appendChild(el('div', 'tb-empty', 'no ops'));
    const panel = {index, device, lanes: device.lanes, section, head, wrap, canvas, overlay,
                   ctx: canvas.getContext('2d'), octx: overlay.getContext('2d'),
                   height: Math.max(device.lanes.length, 1) * ROW, collapsed: false, drawn: -1,
                   counts: {ops: 0, rects: 0}};
    if (device.folded) {  // many lanes (a host's threads): folded so the accelerators stay in view
      panel.collapsed = true;
      section.classList.add('tb-collapsed');
      head.setAttribute('aria-expanded', 'false');
      head.firstChild.textContent = '\u25b8';
      head.title = `${device.name}: ${device.lanes.length} lanes, folded; click to open`;
    }
    const toggle = () => this.setCollapsed(panel, !panel.collapsed);
    head.addEventListener('click', toggle);
    head.addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); toggle(); } });
    this.page.input.attach(wrap, this, panel);
    return panel;
  }

  _memoryPanel() {
    const head = el('div', 'tb-device-head');
    head.appendChild(el('span', 'tb-device-short', 'Allocator memory'));
    const legend = el('span', 'tb-legend');
    this.data.meta.allocators.forEach((a, i) => {
      const item = el('span', 'tb-legend-item');
      const swatch = el('span', 'tb-swatch');
      swatch.style.background = ALLOCATOR_COLORS[i % ALLOCATOR_COLORS.length];
      item.appendChild(swatch);
      item.appendChild(el('span', null, `${a.name} (peak ${fmtBytes(a.peak)})`));
      legend.appendChild(item);
    });
    head.appendChild(legend);
    const {section, wrap, canvas, overlay} = this._section('tb-device tb-memory', head);
    const panel = {memory: true, section, head, wrap, canvas, overlay, ctx: canvas.getContext('2d'),
                   octx: overlay.getContext('2d'), height: MEM_H, collapsed: false, drawn: -1,
                   peak: Math.max(1, ...this.data.meta.allocators.map((a) => a.peak))};
    this.page.input.attach(wrap, this, panel);
    return panel;
  }

  allPanels() { return this.memory ? this.panels.concat([this.memory]) : this.panels; }

  setCollapsed(panel, collapsed, later) {
    panel.collapsed = collapsed;
    panel.section.classList.toggle('tb-collapsed', collapsed);
    panel.head.setAttribute('aria-expanded', String(!collapsed));
    panel.head.firstChild.textContent = collapsed ? '\u25b8' : '\u25be';
    panel.drawn = -1;
    if (!later) this.page.layout();  // the lanes left in view may fill it again (later: the caller lays out)
    this.page.requestDraw();
  }

  /** Trace-time extent of the ops (and steps), in view time. */
  extent() {
    const d = this.data;
    let lo = 0, hi = Math.max(d.meta.span_ns, 1);
    for (const s of d.steps) { lo = Math.min(lo, s.start); hi = Math.max(hi, s.end); }
    return [lo - this.offset, hi - this.offset];
  }

  layout(width) {
    this.width = width;
    const dpr = window.devicePixelRatio || 1;
    const size = (canvas, h) => {
      canvas.width = Math.max(1, Math.round(width * dpr));
      canvas.height = Math.max(1, Math.round(h * dpr));
      canvas.style.width = width + 'px';
      canvas.style.height = h + 'px';
    };
    size(this.ruler, RULER_H);
    for (const p of this.allPanels()) {
      p.height = p.memory ? this.memHeight : Math.max(p.lanes.length, 1) * this.row;
      size(p.canvas, p.height);
      size(p.overlay, p.height);
      p.wrap.style.height = p.height + 'px';
      p.drawn = -1;
    }
  }

  /** How many lane heights the open panels take (an empty panel: one). */
  openLanes() {
    let n = 0;
    for (const p of this.panels) if (!p.collapsed) n += Math.max(p.lanes.length, 1);
    return n;
  }

  scale() {
    const r = this.page.range;
    return (this.width - GUTTER - PAD_R) / (r.t1 - r.t0);
  }

  /** Trace time at a canvas x, and back. */
  timeAt(x) { return this.page.range.t0 + this.offset + (x - GUTTER) / this.scale(); }
  xAt(t) { return GUTTER + (t - this.offset - this.page.range.t0) * this.scale(); }

  draw(version, force) {
    this.drawRuler();
    const view = this.scroller.getBoundingClientRect();
    for (const p of this.allPanels()) {
      if (p.collapsed) continue;
      const r = p.wrap.getBoundingClientRect();
      const visible = r.bottom >= view.top - 100 && r.top <= view.bottom + 100;
      if (!visible || (p.drawn === version && !force)) continue;
      if (p.memory) this.drawMemory(p); else this.drawPanel(p);
      p.drawn = version;
      this.drawOverlay(p);
    }
  }

  drawOverlays() {
    this.drawRuler();
    for (const p of this.allPanels()) if (!p.collapsed && p.drawn >= 0) this.drawOverlay(p);
  }

  _context(canvas, ctx) {
    const dpr = window.devicePixelRatio || 1;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, canvas.width / dpr, canvas.height / dpr);
    return ctx;
  }

  drawRuler() {
    const ctx = this._context(this.ruler, this.ruler.getContext('2d'));
    const W = this.width, d = this.data, t0 = this.page.range.t0 + this.offset;
    const t1 = this.page.range.t1 + this.offset, scale = this.scale();
    ctx.fillStyle = '#f7f7f8';
    ctx.fillRect(0, 0, W, RULER_H);
    ctx.save();
    ctx.beginPath();
    ctx.rect(GUTTER, 0, W - GUTTER - PAD_R, RULER_H);
    ctx.clip();
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    d.steps.forEach((s, i) => {  // step bands
      if (s.end < t0 || s.start > t1) return;
      const x0 = this.xAt(s.start), x1 = Math.max(this.xAt(s.end), x0 + 1);
      ctx.fillStyle = i % 2 ? '#dbe7f5' : '#e8eef7';
      ctx.fillRect(x0, 2, x1 - x0, 14);
      ctx.fillStyle = '#33415c';
      const text = fitText(ctx, `step ${s.number}` + (s.name ? ` ${s.name}` : ''), x1 - x0 - 6);
      if (text) ctx.fillText(text, Math.max(x0, GUTTER) + 3, 9);
    });
    const step = niceStep(100 / scale);
    const decimals = Math.max(0, Math.min(6, Math.ceil(-Math.log10(step / 1e6))));
    ctx.strokeStyle = '#9aa0a6';
    ctx.fillStyle = '#333';
    ctx.beginPath();
    for (let t = Math.ceil((t0 - this.offset) / step) * step; t <= t1 - this.offset; t += step) {
      const x = Math.round(this.xAt(t + this.offset)) + 0.5;
      ctx.moveTo(x, 22);
      ctx.lineTo(x, RULER_H);
      const label = fmtMs(t, decimals);
      if (x + 3 + ctx.measureText(label).width <= W - PAD_R) ctx.fillText(label, x + 3, 28);
    }
    ctx.stroke();
    const cursor = this.page.cursor;
    if (cursor !== null) {
      const x = this.xAt(cursor + this.offset);
      if (x >= GUTTER && x <= W - PAD_R) {
        ctx.fillStyle = '#c0262d';
        ctx.fillRect(Math.round(x), 18, 1, RULER_H - 18);
      }
    }
    ctx.restore();
    ctx.fillStyle = '#555';
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    ctx.fillText(fitText(ctx, `view ${fmtDuration(t1 - t0)}`, GUTTER - 12), 8, 12);
    if (cursor !== null) ctx.fillText(fitText(ctx, `at ${fmtMs(cursor, 3)}`, GUTTER - 12), 8, 28);
    ctx.fillStyle = '#c9ccd1';
    ctx.fillRect(0, RULER_H - 1, W, 1);
  }

  drawPanel(p) {
    const ctx = this._context(p.canvas, p.ctx);
    const d = this.data, W = this.width, x0 = GUTTER, x1 = W - PAD_R, ROW = this.row;
    const t0 = this.page.range.t0 + this.offset, t1 = this.page.range.t1 + this.offset;
    const scale = (x1 - x0) / (t1 - t0);
    const start = d.start, end = d.end, type = d.type;
    const highlight = this.highlight;
    const nTypes = d.types.length;
    const paths = new Array(nTypes * 2);
    let outline = null;
    const labels = [];
    let rects = 0, inView = 0, hits = 0;
    const addRect = (t, hit, x, y, w, h) => {
      const key = t * 2 + hit;
      let path = paths[key];
      if (!path) path = paths[key] = new Path2D();
      path.rect(x, y, w, h);
      rects++;
      if (highlight && hit) {
        hits++;
        if (!outline) outline = new Path2D();
        outline.rect(x - 0.5, y - 0.5, w + 1, h + 1);
      }
    };
    // lane backgrounds and names
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    if (!p.laneLabels) {  // the panel's lane names, told apart (helpers.js elideNames)
      const names = p.lanes.map((laneIndex) => d.lanes[laneIndex].name);
      p.laneLabels = laneLabels(ctx, names, GUTTER - 14);
    }
    const gutter = p.laneLabels;
    p.lanes.forEach((laneIndex, k) => {
      const lane = d.lanes[laneIndex], y = k * ROW;
      ctx.fillStyle = lane.network ? (k % 2 ? '#f6efe2' : '#fbf5ea') : (k % 2 ? '#f4f5f7' : '#fbfbfc');
      ctx.fillRect(0, y, W, ROW);
      if (lane.network && (k === 0 || !d.lanes[p.lanes[k - 1]].network)) {
        ctx.fillStyle = '#c08a2e';
        ctx.fillRect(0, y, W, 1);
      }
      ctx.fillStyle = lane.network ? '#8a5a00' : '#444';
      ctx.fillText(gutter[k], 8, y + ROW / 2);
    });
    ctx.fillStyle = '#d5d8dd';
    ctx.fillRect(GUTTER - 1, 0, 1, p.height);
    // step boundaries
    ctx.fillStyle = 'rgba(60, 90, 160, 0.35)';
    for (const s of d.steps) {
      for (const t of [s.start, s.end]) {
        if (t >= t0 && t <= t1) ctx.fillRect(Math.round(x0 + (t - t0) * scale), 0, 1, p.height);
      }
    }
    // ops
    for (let k = 0; k < p.lanes.length; k++) {
      const lane = p.lanes[k], first = d.laneFirst[lane], last = d.laneFirst[lane + 1];
      const lo = lowerBound(end, first, last, t0), hi = upperBound(start, lo, last, t1);
      inView += hi - lo;
      const y = k * ROW + 2, h = ROW - 4;
      let colPx = -Infinity, colType = 0, colDur = -1, colHit = 0;
      for (let i = lo; i < hi; i++) {
        const sx = x0 + (start[i] - t0) * scale, ex = x0 + (end[i] - t0) * scale;
        const hit = highlight ? highlight[i] : 1;
        if (ex - sx >= 1) {
          if (colDur >= 0) { addRect(colType, colHit, colPx, y, 1, h); colDur = -1; }
          const cx0 = Math.max(sx, x0 - 2), cx1 = Math.min(ex, x1 + 2);
          addRect(type[i], hit, cx0, y, cx1 - cx0, h);
          if (cx1 - cx0 >= LABEL_MIN) labels.push(i, cx0, cx1, y);
          colPx = -Infinity;
        } else {
          const px = Math.floor(sx), dur = end[i] - start[i];
          if (px !== colPx) {
            if (colDur >= 0) addRect(colType, colHit, colPx, y, 1, h);
            colPx = px; colType = type[i]; colDur = dur; colHit = hit;
          } else {
            if (dur > colDur) { colDur = dur; colType = type[i]; }
            colHit |= hit;
          }
        }
      }
      if (colDur >= 0) addRect(colType, colHit, colPx, y, 1, h);
    }
    ctx.save();
    ctx.beginPath();
    ctx.rect(x0, 0, x1 - x0, p.height);
    ctx.clip();
    for (let key = 0; key < paths.length; key++) {
      if (!paths[key]) continue;
      const colors = d.colors[key >> 1];
      ctx.fillStyle = (key & 1) ? colors.full : colors.faded;
      ctx.fill(paths[key]);
    }
    if (outline) {
      ctx.strokeStyle = '#111';
      ctx.lineWidth = 1;
      ctx.stroke(outline);
    }
    if (labels.length && d.ready) {
      // a tall lane (one that fills the view) says more of each op: its type and duration
      const lines = Math.max(1, Math.min(3, Math.floor((ROW - 4) / LINE_H)));
      ctx.fillStyle = '#111';
      for (let j = 0; j < labels.length; j += 4) {
        const i = labels[j], lx0 = Math.max(labels[j + 1], x0), lx1 = Math.min(labels[j + 2], x1);
        if (highlight && !highlight[i]) continue;
        const texts = d.boxLines(i, lines);
        const top = labels[j + 3] + (ROW - 4) / 2 - (texts.length - 1) * LINE_H / 2;
        texts.forEach(([label, mode], line) => {
          const text = fitText(ctx, label, lx1 - lx0 - 6, mode);
          if (text) ctx.fillText(text, lx0 + 3, top + line * LINE_H);
        });
      }
    }
    ctx.restore();
    p.counts = {ops: inView, rects, highlighted: hits};
  }

  drawMemory(p) {
    const ctx = this._context(p.canvas, p.ctx);
    const d = this.data, W = this.width, x0 = GUTTER, x1 = W - PAD_R;
    const t0 = this.page.range.t0 + this.offset, t1 = this.page.range.t1 + this.offset;
    const scale = (x1 - x0) / (t1 - t0);
    const time = d.column('counter_time'), bytes = d.column('counter_bytes');
    const top = 8, bottom = p.height - 4, Y = (v) => bottom - (bottom - top) * v / p.peak;
    ctx.fillStyle = '#fbfbfc';
    ctx.fillRect(0, 0, W, p.height);
    ctx.fillStyle = '#d5d8dd';
    ctx.fillRect(GUTTER - 1, 0, 1, p.height);
    ctx.fillStyle = '#555';
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    ctx.fillText(fmtBytes(p.peak), 8, top + 4);
    ctx.fillText('0 B', 8, bottom - 4);
    ctx.save();
    ctx.beginPath();
    ctx.rect(x0, 0, x1 - x0, p.height);
    ctx.clip();
    ctx.fillStyle = '#e3e5e8';
    ctx.fillRect(x0, Y(p.peak), x1 - x0, 1);
    let samples = 0;
    d.meta.allocators.forEach((a, n) => {
      const first = a.first, last = a.first + a.count;
      let i = lowerBound(time, first, last, t0);
      let value = i > first ? bytes[i - 1] : 0;
      const path = new Path2D();
      path.moveTo(x0 - 2, Y(value));
      let px = -Infinity, lo = 0, hi = 0;
      const flush = () => {
        if (px === -Infinity) return;
        path.lineTo(px, Y(lo));
        path.lineTo(px, Y(hi));
        path.lineTo(px, Y(value));
      };
      for (; i < last && time[i] <= t1; i++) {
        const x = Math.floor(x0 + (time[i] - t0) * scale);
        if (x !== px) {
          flush();
          path.lineTo(x, Y(value));
          px = x; lo = hi = bytes[i];
        } else {
          lo = Math.min(lo, bytes[i]); hi = Math.max(hi, bytes[i]);
        }
        value = bytes[i];
        samples++;
      }
      flush();
      path.lineTo(x1 + 2, Y(value));
      ctx.strokeStyle = ALLOCATOR_COLORS[n % ALLOCATOR_COLORS.length];
      ctx.lineWidth = 1.5;
      ctx.stroke(path);
    });
    ctx.restore();
    p.counts = {ops: samples, rects: 0};
  }

  drawOverlay(p) {
    const ctx = this._context(p.overlay, p.octx);
    const cursor = this.page.cursor;
    if (cursor !== null) {
      const x = this.xAt(cursor + this.offset);
      if (x >= GUTTER && x <= this.width - PAD_R) {
        ctx.fillStyle = 'rgba(192, 38, 45, 0.6)';
        ctx.fillRect(Math.round(x), 0, 1, p.height);
      }
    }
    if (p.memory) return;
    const ROW = this.row;
    const mark = (pos, color, width) => {
      if (pos < 0) return;
      const lane = this.data.laneOf(pos), k = p.lanes.indexOf(lane);
      if (k < 0) return;
      let sx = this.xAt(this.data.start[pos]), ex = this.xAt(this.data.end[pos]);
      if (ex - sx < 3) { const c = (sx + ex) / 2; sx = c - 1.5; ex = c + 1.5; }
      sx = Math.max(sx, GUTTER - 3); ex = Math.min(ex, this.width - PAD_R + 3);
      if (ex < sx) return;
      ctx.strokeStyle = color;
      ctx.lineWidth = width;
      ctx.strokeRect(sx - width / 2, k * ROW + 1, ex - sx + width, ROW - 2);
    };
    mark(this.hovered, '#d0021b', 1);
    mark(this.selected, '#0b3fd9', 2.5);
  }

  /** What the gutter says of the lane at height ``y`` of a panel on hover: its whole name,
   *  and a host thread's own name beside its role (``TF compute 2: tf_Compute/6596184094961``). */
  laneTitle(p, y) {
    const k = Math.floor(y / this.row);
    if (!p || k < 0 || k >= p.lanes.length) return '';
    const lane = this.data.lanes[p.lanes[k]];
    return lane.thread ? `${lane.name}: ${lane.thread}` : lane.name;
  }

  /** The op under a point of a panel canvas (CSS px in that canvas), or -1. */
  opAt(p, x, y) {
    if (!p || p.memory || x < GUTTER || x > this.width - PAD_R + HIT_SLOP) return -1;
    const k = Math.floor(y / this.row);
    if (k < 0 || k >= p.lanes.length) return -1;
    const d = this.data, lane = p.lanes[k], first = d.laneFirst[lane], last = d.laneFirst[lane + 1];
    const t = this.timeAt(x), scale = this.scale();
    const i = upperBound(d.start, first, last, t) - 1;
    let best = -1, bestDistance = HIT_SLOP + 1e-9;
    for (const j of [i, i + 1, i - 1]) {
      if (j < first || j >= last) continue;
      const s = d.start[j], e = d.end[j];
      const distance = t >= s && t <= e ? 0 : Math.min(Math.abs(t - s), Math.abs(t - e)) * scale;
      if (distance < bestDistance) { best = j; bestDistance = distance; }
    }
    return best;
  }

  panelOfLane(lane) { return this.panels.find((p) => p.lanes.includes(lane)) || null; }

  /** Scroll the panel of op ``pos`` into view, expanded. */
  revealPanel(pos) {
    const panel = this.panelOfLane(this.data.laneOf(pos));
    if (!panel) return;
    if (panel.collapsed) this.setCollapsed(panel, false);
    panel.section.scrollIntoView({block: 'nearest'});
  }

  setHighlight(result) {
    this.highlight = result ? result.mask : null;
    this.highlightCount = result ? result.count : 0;
    for (const p of this.panels) p.drawn = -1;
  }

  drawnCounts() {
    const out = {};
    for (const p of this.panels) {
      out[p.device.name] = {ops: p.counts.ops, rects: p.counts.rects, highlighted: p.counts.highlighted || 0,
                            drawn: p.drawn >= 0};
    }
    return out;
  }
}
