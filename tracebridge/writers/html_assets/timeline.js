/* tracebridge timeline page (written by tracebridge/writers/html.py, inlined in the page).
 *
 * Parts, each usable on its own so that one page can hold several traces (the comparison
 * view stacks two Timelines under one Page with aligned steps and a shared highlight):
 *
 *   TraceData  the columns of one trace, decoded from the page's data blocks (times,
 *              durations and types first; names, inputs and the rest after the first draw)
 *   Timeline   one trace's device panels, ruler and memory chart, drawn on canvases;
 *              view time = trace time - timeline.offset, so traces can be aligned
 *              (Page.alignSteps)
 *   Page       the shared range (zoom/pan), highlight (highlight({text|name|names|type}),
 *              or one spec per timeline), toolbar, keyboard, hover box, details, top ops;
 *              window.tracebridge is its API (see the end of this file)
 *   DiffView   the comparison page (compare_html.py; when a ``tb-compare`` block is on the
 *              page): coverage bar, a heading per run, step pairs in the step selector
 *              (Page.selectStepPair), the sortable diff table whose rows highlight their op
 *              in both runs; window.tracebridge.compare is its API
 *
 * Drawing is level-of-detail: per lane, the ops in the visible window are found by binary
 * search (a lane's ops never overlap, so starts and ends are both sorted); ops at least a
 * pixel wide are drawn as they are, narrower ones merge into one block per pixel column
 * (coloured by the longest op in it). Rects are batched into one Path2D per colour.
 *
 * Data from the trace is only ever put on the page with textContent or canvas fillText.
 */
(function () {
  'use strict';

  const ROW = 18;          // lane height (CSS px)
  const GUTTER = 172;      // lane names
  const PAD_R = 14;        // right margin of the time area
  const RULER_H = 38;
  const MEM_H = 120;
  const LABEL_MIN = 36;    // ops at least this wide (px) get their name written in
  const MIN_SPAN = 20;     // ns: the deepest zoom
  const HIT_SLOP = 3;      // px: hover/click tolerance for ops narrower than a pixel
  const DTYPES = {u8: Uint8Array, u16: Uint16Array, u32: Uint32Array, i32: Int32Array, f64: Float64Array};
  const FIRST_COLUMNS = ['start', 'dur', 'type', 'step', 'counter_time', 'counter_bytes'];
  const ALLOCATOR_COLORS = ['#1f6fb2', '#c2410c', '#15803d', '#7e22ce', '#b91c1c', '#0e7490', '#a16207', '#4d7c0f'];

  // ----------------------------------------------------------------------- helpers

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  // A search field that calls onChange(value) 150 ms after typing stops;
  // field.cancelPending() drops a call still waiting (when Enter acts at once).
  function searchField(className, placeholder, label, onChange) {
    const field = el('input', className);
    field.type = 'search';
    field.placeholder = placeholder;
    field.setAttribute('aria-label', label);
    let timer = 0;
    field.cancelPending = () => clearTimeout(timer);
    field.addEventListener('input', () => {
      clearTimeout(timer);
      timer = setTimeout(() => onChange(field.value), 150);
    });
    return field;
  }

  function decodeBase64(text) {
    if (typeof Uint8Array.fromBase64 === 'function') return Uint8Array.fromBase64(text);
    const binary = atob(text);
    const out = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
    return out;
  }

  /** The bytes of a block html.py wrote: base64, of raw deflate if ``deflated``. */
  async function readBlock(id, deflated) {
    const node = document.getElementById(id);
    const packed = decodeBase64(node ? node.textContent : '');
    if (!deflated) return packed;
    const stream = new Blob([packed]).stream().pipeThrough(new DecompressionStream('deflate-raw'));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  /** First index in [lo, hi) with arr[i] >= value (hi if none). */
  function lowerBound(arr, lo, hi, value) {
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (arr[mid] < value) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  /** First index in [lo, hi) with arr[i] > value (hi if none). */
  function upperBound(arr, lo, hi, value) {
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (arr[mid] <= value) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  /** A duration (ns) as text with a unit that suits it. */
  function fmtDuration(ns) {
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(3) + ' s';
    if (a >= 1e6) return (ns / 1e6).toFixed(3) + ' ms';
    if (a >= 1e3) return (ns / 1e3).toFixed(3) + ' \u00b5s';
    return Math.round(ns) + ' ns';
  }

  /** A duration in 3-4 significant digits, for tables. */
  function fmtShort(ns) {
    for (const [factor, unit] of [[1e9, 's'], [1e6, 'ms'], [1e3, '\u00b5s'], [1, 'ns']]) {
      if (Math.abs(ns) >= factor || factor === 1) {
        const v = ns / factor;
        return (factor === 1 ? v.toFixed(0) : Math.abs(v) >= 100 ? v.toFixed(1) : v.toFixed(2)) + ' ' + unit;
      }
    }
    return '';
  }

  /** A time since the trace start (ns) as milliseconds, the way tfvis showed them. */
  function fmtMs(ns, decimals) {
    return (ns / 1e6).toFixed(decimals === undefined ? 6 : decimals) + ' ms';
  }

  function plural(n, word) {
    return `${n.toLocaleString('en-US')} ${word}${n === 1 ? '' : 's'}`;
  }

  function fmtBytes(bytes) {
    const a = Math.abs(bytes);
    if (a >= 1 << 30) return (bytes / (1 << 30)).toFixed(2) + ' GiB';
    if (a >= 1 << 20) return (bytes / (1 << 20)).toFixed(2) + ' MiB';
    if (a >= 1 << 10) return (bytes / (1 << 10)).toFixed(1) + ' KiB';
    return bytes + ' B';
  }

  function hashString(text) {  // FNV-1a: the same op type gets the same colour in every page
    let h = 0x811c9dc5;
    for (let i = 0; i < text.length; i++) {
      h ^= text.charCodeAt(i);
      h = Math.imul(h, 0x01000193);
    }
    return h >>> 0;
  }

  function typeColors(type) {
    const h = hashString(type);
    const hue = h % 360, sat = 42 + ((h >>> 9) % 28), light = 58 + ((h >>> 17) % 14);
    return {full: `hsl(${hue},${sat}%,${light}%)`, faded: `hsl(${hue},${Math.round(sat * 0.35)}%,90%)`};
  }

  /** ``text`` cut to fit ``width`` px in the context's font, with an ellipsis where ``mode``
   *  says: 'end' (default), 'start' (keep the end: the end of a TF name, ``.../Conv2D``, says
   *  the most) or 'middle' (keep both ends, the end longer). */
  function fitText(ctx, text, width, mode) {
    if (width <= 8) return '';
    const full = ctx.measureText(text).width;
    if (full <= width) return text;
    const cut = (chars) => {
      if (mode === 'start') return '\u2026' + text.slice(text.length - chars);
      if (mode !== 'middle') return text.slice(0, chars) + '\u2026';
      const tail = Math.ceil(chars * 0.6);
      return text.slice(0, chars - tail) + '\u2026' + text.slice(text.length - tail);
    };
    let chars = Math.floor(text.length * width / full);
    let out = cut(chars);
    while (chars > 0 && ctx.measureText(out).width > width) {
      chars -= 1;
      out = cut(chars);
    }
    return chars > 1 ? out : '';
  }

  let measureContext = null;

  /** Fit every ``td.tb-name`` of a table to its cell (full text stays in the title). */
  function fitCells(root) {
    if (!measureContext) measureContext = document.createElement('canvas').getContext('2d');
    const cells = Array.from(root.querySelectorAll('.tb-fit'));
    for (const cell of cells) cell.textContent = cell.title;
    // read every width, then write: one layout, not one per cell
    const widths = cells.map((cell) => {
      if (cell.scrollWidth <= cell.clientWidth) return 0;
      const style = getComputedStyle(cell);
      return cell.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - 2;
    });
    cells.forEach((cell, i) => {
      if (widths[i] <= 0) return;
      measureContext.font = getComputedStyle(cell).font;
      cell.textContent = fitText(measureContext, cell.title, widths[i], 'middle') || '\u2026';
    });
  }

  function niceStep(rough) {
    if (!(rough > 0) || !isFinite(rough)) return 1;
    const power = Math.pow(10, Math.floor(Math.log10(rough)));
    for (const m of [1, 2, 5, 10]) if (m * power >= rough) return m * power;
    return 10 * power;
  }

  // ----------------------------------------------------------------------- data

  /** The columns of one trace, as html.py embedded them: decoded in two batches, what the
   *  first draw needs (load) and the rest (loadRest, then ``ready``). */
  class TraceData {
    constructor(meta) {
      this.meta = meta;
      this.n = meta.op_count;
      this.devices = meta.devices;
      this.lanes = meta.lanes;
      this.steps = meta.steps;
      this.types = meta.types;
      this.colors = meta.types.map(typeColors);
      this.laneFirst = new Float64Array(this.lanes.length + 1);
      this.lanes.forEach((lane, i) => { this.laneFirst[i] = lane.first; });
      this.laneFirst[this.lanes.length] = meta.lane_end;
      this._columns = {};
      this.ready = false;  // names, inputs and the rest decoded (see loadRest)
      this._strings = null;
      this._lower = null;
      this._start = null;
      this._end = null;
      this._inputOffsets = null;
    }

    /** Decode what the first draw needs: times, durations, types (and memory counters). */
    async load() {
      await this._load(FIRST_COLUMNS.filter((key) => key in this.meta.columns));
      return this;
    }

    /** Decode the rest (names, inputs, ...); ``ready`` once done. */
    async loadRest() {
      const rest = Object.keys(this.meta.columns).filter((key) => !(key in this._columns));
      await this._load(rest.concat(['strings']));
      this.ready = true;
      return this;
    }

    async _load(keys) {
      const prefix = this.meta.prefix, deflated = new Set(this.meta.deflated || []);
      const blocks = await Promise.all(keys.map((key) => readBlock(prefix + '-' + key, deflated.has(key))));
      keys.forEach((key, i) => {
        const bytes = blocks[i];
        if (key === 'strings') { this._stringBytes = bytes; return; }
        const Type = DTYPES[this.meta.columns[key].dtype];
        this._columns[key] = new Type(bytes.buffer, bytes.byteOffset, bytes.byteLength / Type.BYTES_PER_ELEMENT);
      });
    }

    column(key) { return this._columns[key] || null; }

    get start() {
      if (!this._start) this._times();
      return this._start;
    }

    get end() {
      if (!this._end) this._times();
      return this._end;
    }

    /** Starts (undoing the per-lane deltas) and ends, in ns since the trace start. */
    _times() {
      const stored = this.column('start'), dur = this.column('dur'), n = this.n;
      const start = this.meta.start_delta ? new Float64Array(n) : stored, end = new Float64Array(n);
      for (let lane = 0; lane < this.lanes.length; lane++) {
        let t = 0;
        for (let i = this.laneFirst[lane], last = this.laneFirst[lane + 1]; i < last; i++) {
          if (start !== stored) { t += stored[i]; start[i] = t; }
          end[i] = start[i] + dur[i];
        }
      }
      this._start = start;
      this._end = end;
    }

    get type() { return this.column('type'); }

    /** The string table, parsed on first use (names are needed for labels, hover, search). */
    get strings() {
      if (!this._strings) {
        this._strings = this._stringBytes && this._stringBytes.length
          ? JSON.parse(new TextDecoder().decode(this._stringBytes)) : [];
        this._stringBytes = null;
      }
      return this._strings;
    }

    name(pos) { return this.strings[this.column('name')[pos]]; }

    laneOf(pos) { return upperBound(this.laneFirst, 0, this.lanes.length, pos) - 1; }

    _sparse(atKey, pos) {
      const at = this.column(atKey);
      if (!at || !at.length) return -1;
      const i = lowerBound(at, 0, at.length, pos);
      return i < at.length && at[i] === pos ? i : -1;
    }

    kernel(pos) {
      const i = this._sparse('kernel_at', pos);
      return i < 0 ? this.types[this.type[pos]] : this.strings[this.column('kernel_id')[i]];
    }

    inputs(pos) {
      if (!this._inputOffsets) {
        const counts = this.column('input_count'), offsets = new Float64Array(this.n + 1);
        for (let i = 0; i < this.n; i++) offsets[i + 1] = offsets[i] + counts[i];
        this._inputOffsets = offsets;
      }
      const ids = this.column('inputs'), strings = this.strings, out = [];
      for (let k = this._inputOffsets[pos]; k < this._inputOffsets[pos + 1]; k++) out.push(strings[ids[k]]);
      return out;
    }

    description(pos) {
      const i = this._sparse('label_at', pos);
      if (i >= 0) return this.strings[this.column('label_id')[i]];
      if (this.column('flags')[pos] & 1) return `${this.name(pos)} = ${this.kernel(pos)}(${this.inputs(pos).join(', ')})`;
      return '';
    }

    transfers(pos) {
      const at = this.column('xfer_at');
      if (!at || !at.length) return [];
      const out = [], strings = this.strings;
      for (let i = lowerBound(at, 0, at.length, pos); i < at.length && at[i] === pos; i++) {
        out.push({bytes: this.column('xfer_bytes')[i], rate_bps: this.column('xfer_rate')[i],
                  src: strings[this.column('xfer_src')[i]], dst: strings[this.column('xfer_dst')[i]],
                  tensor: strings[this.column('xfer_tensor')[i]]});
      }
      return out;
    }

    /** What a lane box says about op ``pos``: [text, where to cut it]. A transfer says its
     *  size and ends (cut at the end); an op its name (cut at the start: the end says most). */
    boxLabel(pos) {
      if (this.lanes[this.laneOf(pos)].network) {
        const t = this.transfers(pos);
        if (t.length) return [`${fmtBytes(t[0].bytes)}  ${t[0].src} \u2192 ${t[0].dst}`, 'end'];
      }
      return [this.name(pos), 'start'];
    }

    absoluteNs(rel) {
      try { return (BigInt(this.meta.base_ns) + BigInt(Math.round(rel))).toString(); } catch (e) { return ''; }
    }

    /** Everything about op ``pos`` as a plain object (times in ns since the trace start). */
    op(pos) {
      if (!this.ready || !(pos >= 0 && pos < this.n)) return null;
      const laneIndex = this.laneOf(pos), lane = this.lanes[laneIndex], device = this.devices[lane.device];
      const step = this.column('step')[pos];
      const start = this.start[pos], end = this.end[pos];
      return {
        pos, name: this.name(pos), type: this.types[this.type[pos]], kernel: this.kernel(pos),
        device: device.name, device_index: lane.device, lane: lane.name, lane_index: laneIndex,
        network: lane.network, step: step ? this.steps[step - 1].number : null,
        start_ns: start, end_ns: end, duration_ns: end - start, start_epoch_ns: this.absoluteNs(start),
        inputs: this.inputs(pos), description: this.description(pos), transfers: this.transfers(pos),
      };
    }

    /** ops matching ``test(op string)`` on name, op type or kernel: {mask, count}. */
    matchText(needle) {
      const lowerNeedle = needle.toLowerCase();
      const strings = this.strings;
      if (!this._lower) this._lower = strings.map((s) => s.toLowerCase());
      const stringHit = new Uint8Array(strings.length);
      for (let i = 0; i < strings.length; i++) if (this._lower[i].includes(lowerNeedle)) stringHit[i] = 1;
      const typeHit = this.types.map((t) => t.toLowerCase().includes(lowerNeedle) ? 1 : 0);
      return this._mask((names, types, i) => stringHit[names[i]] || typeHit[types[i]], stringHit);
    }

    matchName(name) {
      const id = this.strings.indexOf(name);
      return this._mask((names, types, i) => names[i] === id);
    }

    /** ops whose name is any of ``names`` (exact). */
    matchNames(names) {
      const wanted = new Set(names), strings = this.strings, hit = new Uint8Array(strings.length);
      let any = false;
      for (let i = 0; i < strings.length; i++) if (wanted.has(strings[i])) { hit[i] = 1; any = true; }
      if (!any) return {mask: new Uint8Array(this.n), count: 0};
      return this._mask((ids, types, i) => hit[ids[i]] === 1);
    }

    matchType(type) {
      const index = this.types.indexOf(type);
      const stringHit = new Uint8Array(this.strings.length);
      const s = this.strings.indexOf(type);
      if (s >= 0) stringHit[s] = 1;
      return this._mask((names, types, i) => types[i] === index, stringHit);
    }

    _mask(test, kernelHit) {
      const names = this.column('name'), types = this.type, mask = new Uint8Array(this.n);
      let count = 0;
      for (let i = 0; i < this.n; i++) if (test(names, types, i)) { mask[i] = 1; count++; }
      if (kernelHit) {  // kernels that differ from the op type match too
        const at = this.column('kernel_at'), ids = this.column('kernel_id');
        for (let k = 0; at && k < at.length; k++) {
          if (kernelHit[ids[k]] && !mask[at[k]]) { mask[at[k]] = 1; count++; }
        }
      }
      return {mask, count};
    }
  }

  // ----------------------------------------------------------------------- one trace

  /** The device panels of one trace under a ruler, and its memory chart. */
  class Timeline {
    constructor(data, container, page, options) {
      this.data = data;
      this.page = page;
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
      page.attachPointer(this.ruler, this, null);
    }

    _panel(device, index) {
      const section = el('section', 'tb-device');
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
        `${plural(device.ops, 'op')} \u00b7 ${plural(device.lanes.length, 'lane')}` + (network ? ` (${network} network)` : '')));
      const wrap = el('div', 'tb-canvas-wrap');
      const canvas = el('canvas', 'tb-base'), overlay = el('canvas', 'tb-overlay');
      wrap.appendChild(canvas);
      wrap.appendChild(overlay);
      section.appendChild(head);
      section.appendChild(wrap);
      if (!device.lanes.length) wrap.appendChild(el('div', 'tb-empty', 'no ops'));
      this.root.appendChild(section);
      const panel = {index, device, lanes: device.lanes, section, head, wrap, canvas, overlay,
                     ctx: canvas.getContext('2d'), octx: overlay.getContext('2d'),
                     height: Math.max(device.lanes.length, 1) * ROW, collapsed: false, drawn: -1,
                     counts: {ops: 0, rects: 0}};
      const toggle = () => this.setCollapsed(panel, !panel.collapsed);
      head.addEventListener('click', toggle);
      head.addEventListener('keydown', (e) => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); toggle(); } });
      this.page.attachPointer(wrap, this, panel);
      return panel;
    }

    _memoryPanel() {
      const section = el('section', 'tb-device tb-memory');
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
      const wrap = el('div', 'tb-canvas-wrap');
      const canvas = el('canvas', 'tb-base'), overlay = el('canvas', 'tb-overlay');
      wrap.appendChild(canvas);
      wrap.appendChild(overlay);
      section.appendChild(head);
      section.appendChild(wrap);
      this.root.appendChild(section);
      const panel = {memory: true, section, head, wrap, canvas, overlay, ctx: canvas.getContext('2d'),
                     octx: overlay.getContext('2d'), height: MEM_H, collapsed: false, drawn: -1,
                     peak: Math.max(1, ...this.data.meta.allocators.map((a) => a.peak))};
      this.page.attachPointer(wrap, this, panel);
      return panel;
    }

    allPanels() { return this.memory ? this.panels.concat([this.memory]) : this.panels; }

    setCollapsed(panel, collapsed) {
      panel.collapsed = collapsed;
      panel.section.classList.toggle('tb-collapsed', collapsed);
      panel.head.setAttribute('aria-expanded', String(!collapsed));
      panel.head.firstChild.textContent = collapsed ? '\u25b8' : '\u25be';
      panel.drawn = -1;
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
        size(p.canvas, p.height);
        size(p.overlay, p.height);
        p.wrap.style.height = p.height + 'px';
        p.drawn = -1;
      }
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
      const view = this.page.scrollBox.getBoundingClientRect();
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
      const d = this.data, W = this.width, x0 = GUTTER, x1 = W - PAD_R;
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
      p.lanes.forEach((laneIndex, k) => {
        const lane = d.lanes[laneIndex], y = k * ROW;
        ctx.fillStyle = lane.network ? (k % 2 ? '#f6efe2' : '#fbf5ea') : (k % 2 ? '#f4f5f7' : '#fbfbfc');
        ctx.fillRect(0, y, W, ROW);
        if (lane.network && (k === 0 || !d.lanes[p.lanes[k - 1]].network)) {
          ctx.fillStyle = '#c08a2e';
          ctx.fillRect(0, y, W, 1);
        }
        ctx.fillStyle = lane.network ? '#8a5a00' : '#444';
        ctx.fillText(fitText(ctx, lane.name, GUTTER - 14, 'middle'), 8, y + ROW / 2);
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
        ctx.fillStyle = '#111';
        for (let j = 0; j < labels.length; j += 4) {
          const i = labels[j], lx0 = Math.max(labels[j + 1], x0), lx1 = Math.min(labels[j + 2], x1);
          if (highlight && !highlight[i]) continue;
          const [label, mode] = d.boxLabel(i);
          const text = fitText(ctx, label, lx1 - lx0 - 6, mode);
          if (text) ctx.fillText(text, lx0 + 3, labels[j + 3] + (ROW - 4) / 2);
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

    /** The op under a point of a panel canvas (CSS px in that canvas), or -1. */
    opAt(p, x, y) {
      if (!p || p.memory || x < GUTTER || x > this.width - PAD_R + HIT_SLOP) return -1;
      const k = Math.floor(y / ROW);
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

  // ----------------------------------------------------------------------- the page

  class Page {
    /** ``datas``: one TraceData per trace, drawn one above the other; ``options.labels``:
     *  a caption per trace; ``options.compare``: the comparison compare_html.py embedded
     *  (then the page is the diff view: a DiffView table under the timelines, the step
     *  selector over aligned step pairs, a sidebar per compared op). */
    constructor(app, datas, options) {
      this.app = app;
      this.version = 0;
      this.frame = 0;
      this.cursor = null;
      this.pointer = null;  // {timeline, x} of the mouse over a time area
      this.highlightSpec = null;
      this.ready = false;
      this.whenReady = Promise.resolve(true);
      this.compare = (options && options.compare) || null;
      this.currentPair = -1;  // the step pair the timelines are aligned at (comparisons)
      app.textContent = '';
      this._toolbar(datas, options);
      this.diff = this.compare ? new DiffView(this, this.compare, datas) : null;
      const body = el('div', 'tb-body');
      this.scrollBox = el('div', 'tb-main');
      this.side = el('aside', 'tb-side');
      body.appendChild(this.scrollBox);
      body.appendChild(this.side);
      app.appendChild(body);
      if (this.diff) this.diff.mount(app);
      this.tip = el('div', 'tb-tip');
      this.tip.hidden = true;
      document.body.appendChild(this.tip);
      const labels = (options && options.labels) || [];
      this.timelines = datas.map((data, i) => new Timeline(data, this.scrollBox, this, {
        label: labels[i], heading: this.diff ? this.diff.heading(i) : null}));
      if (this.diff) this.diff.sidebar(this.side); else this._sidebar(datas[0]);
      const [lo, hi] = this.extent();
      const pad = (hi - lo) * 0.01;
      this.range = {t0: lo - pad, t1: hi + pad};
      this.home = {t0: this.range.t0, t1: this.range.t1};
      if (this.compare && this.compare.step_pairs.length && this.alignSteps(this.compare.step_pairs[0])) {
        this.currentPair = 0;
        this.range = {t0: this.home.t0, t1: this.home.t1};
      }
      this.layout();
      fitCells(this.scrollBox);
      if (this.diff) this.diff.render();
      new ResizeObserver(() => {
        if (this.scrollBox.clientWidth === this.layoutWidth) { this.requestDraw(); return; }
        this.layout();
        this.requestDraw();
        fitCells(this.side);
        fitCells(this.scrollBox);
        if (this.diff) fitCells(this.diff.table);
      }).observe(this.scrollBox);
      this.scrollBox.addEventListener('scroll', () => this.requestDraw(), {passive: true});
      document.addEventListener('keydown', (e) => this.onKey(e));
    }

    // --- toolbar and sidebar -------------------------------------------------------------
    _toolbar(datas, options) {
      const data = datas[0];
      const bar = el('header', 'tb-bar');
      const titleText = options && typeof options.title === 'string' ? options.title : data.meta.title;
      const title = el('h1', 'tb-title', titleText);
      title.title = titleText;
      document.title = titleText;
      bar.appendChild(title);
      this.searchBox = searchField('tb-search', 'Search name or op type', 'Search ops by name or op type',
                                   (value) => this.search(value));
      this.searchBox.addEventListener('keydown', (e) => {
        if (e.key === 'Enter') { this.searchBox.cancelPending(); this.search(this.searchBox.value); this.nextMatch(); }
        if (e.key === 'Escape') { this.searchBox.value = ''; this.clearHighlight(); this.searchBox.blur(); }
      });
      bar.appendChild(this.searchBox);
      this.countLabel = el('span', 'tb-count', '');
      this.countLabel.setAttribute('aria-live', 'polite');
      bar.appendChild(this.countLabel);
      this.stepSelect = el('select', 'tb-steps');
      this.stepSelect.setAttribute('aria-label', 'Zoom to step');
      const pairs = this.compare ? this.compare.step_pairs : null;
      const all = el('option', null, pairs ? `All steps (${plural(pairs.length, 'aligned pair')})` : `All steps (${data.steps.length})`);
      all.value = '';
      this.stepSelect.appendChild(all);
      if (pairs) {  // a comparison: the aligned step pairs (value: the pair's index)
        const length = (d, number) => {
          const s = d.steps.find((x) => x.number === number);
          return s ? fmtDuration(s.end - s.start) : '?';
        };
        pairs.forEach(([c, t], i) => {
          const option = el('option', null, `step ${c} \u2194 ${t} \u00b7 ${length(datas[0], c)} / ${length(datas[1], t)}`);
          option.value = String(i);
          this.stepSelect.appendChild(option);
        });
      } else {
        for (const s of data.steps) {
          const option = el('option', null, `step ${s.number}${s.name ? ' ' + s.name : ''} \u00b7 ${fmtDuration(s.end - s.start)}`);
          option.value = String(s.number);
          this.stepSelect.appendChild(option);
        }
      }
      this.stepSelect.addEventListener('change', () => {
        const value = this.stepSelect.value;
        if (value === '') this.resetZoom();
        else if (pairs) this.selectStepPair(Number(value));
        else this.selectStep(Number(value));
      });
      bar.appendChild(this.stepSelect);
      const button = (text, action, hint) => {
        const b = el('button', 'tb-button', text);
        b.type = 'button';
        if (hint) b.title = hint;
        b.addEventListener('click', action);
        bar.appendChild(b);
        return b;
      };
      button('Reset', () => this.resetZoom(), 'Show everything (0)');
      button('Collapse all', () => this.collapseAll(true));
      button('Expand all', () => this.collapseAll(false));
      bar.appendChild(el('span', 'tb-help', 'W/S zoom \u00b7 A/D pan \u00b7 wheel zoom \u00b7 drag pan \u00b7 click: details \u00b7 Esc clears'));
      if (this.compare) bar.classList.add('tb-compare-mode');
      this.app.appendChild(bar);
    }

    _sidebar(data) {
      const details = el('section', 'tb-panel tb-details');
      details.appendChild(el('h2', null, 'Selected op'));
      this.detailsBody = el('div', 'tb-details-body');
      this.detailsBody.appendChild(el('p', 'tb-muted', 'Click an op to see its details.'));
      details.appendChild(this.detailsBody);
      this.side.appendChild(details);

      const top = el('section', 'tb-panel tb-top');
      const tabs = el('div', 'tb-tabs');
      const summary = data.meta.summary;
      const tables = {};
      const show = (which) => {
        for (const [key, value] of Object.entries(tables)) {
          value.table.hidden = key !== which;
          value.tab.setAttribute('aria-selected', String(key === which));
        }
        fitCells(tables[which].table);
      };
      for (const [key, label, rows] of [['ops', 'Top ops', summary.by_op], ['types', 'Op types', summary.by_type]]) {
        const tab = el('button', 'tb-tab', label);
        tab.type = 'button';
        tab.addEventListener('click', () => show(key));
        tabs.appendChild(tab);
        tables[key] = {tab, table: this._topTable(rows, key)};
      }
      top.appendChild(tabs);
      top.appendChild(el('p', 'tb-muted', `${summary.op_count.toLocaleString('en-US')} ${summary.counted === 'op' ? 'TF ops' : 'events'}, ${fmtDuration(summary.total_ns)} in all; click a row to highlight`));
      for (const value of Object.values(tables)) top.appendChild(value.table);
      this.side.appendChild(top);
      show('ops');

      this.side.appendChild(this._infoPanel(data.meta, 'Trace'));
    }

    /** The "Trace" panel: counts, span and the trace's metadata. */
    _infoPanel(meta, heading) {
      const info = el('section', 'tb-panel tb-info');
      info.appendChild(el('h2', null, heading));
      const dl = el('dl');
      const add = (k, v) => { dl.appendChild(el('dt', null, k)); dl.appendChild(el('dd', null, v)); };
      add('ops', meta.op_count.toLocaleString('en-US'));
      add('devices', String(meta.devices.length) + (meta.hidden_devices ? ` (${meta.hidden_devices} hidden)` : ''));
      add('steps', String(meta.steps.length));
      add('span', fmtDuration(meta.span_ns));
      add('start (epoch ns)', meta.base_ns);
      for (const [k, v] of Object.entries(meta.metadata)) add(k, v === null ? '' : String(v));
      info.appendChild(dl);
      return info;
    }

    _topTable(rows, key) {
      const table = el('table', 'tb-table');
      const head = el('tr');
      for (const h of [key === 'ops' ? 'name' : 'op type', 'total', 'mean', 'count']) head.appendChild(el('th', null, h));
      const thead = el('thead');
      thead.appendChild(head);
      table.appendChild(thead);
      const body = el('tbody');
      for (const row of rows) {
        const tr = el('tr');
        tr.tabIndex = 0;
        const name = el('td', 'tb-name tb-fit', row.key);
        name.title = row.key;
        tr.appendChild(name);
        tr.appendChild(el('td', 'tb-num', fmtShort(row.total_ns)));
        tr.appendChild(el('td', 'tb-num', fmtShort(row.mean_ns)));
        tr.appendChild(el('td', 'tb-num', row.count.toLocaleString('en-US')));
        const activate = () => {
          const wasSelected = tr.classList.contains('tb-selected');
          for (const other of this.side.querySelectorAll('tr.tb-selected')) other.classList.remove('tb-selected');
          if (wasSelected) { this.clearHighlight(); return; }
          tr.classList.add('tb-selected');
          this.searchBox.value = '';
          this.highlight(key === 'ops' ? {name: row.key} : {type: row.key}, (count) => {
            const timeline = this.timelines[0];
            if (timeline.highlight) {  // select the longest instance
              const d = timeline.data, mask = timeline.highlight;
              let best = -1, longest = -1;
              for (let i = 0; i < d.n; i++) if (mask[i] && d.end[i] - d.start[i] > longest) { longest = d.end[i] - d.start[i]; best = i; }
              if (best >= 0) this.select(timeline, best);
            }
            this.countLabel.textContent = `${count.toLocaleString('en-US')} ops: ${row.key}`;
          });
        };
        tr.addEventListener('click', activate);
        tr.addEventListener('keydown', (e) => { if (e.key === 'Enter') activate(); });
        body.appendChild(tr);
      }
      table.appendChild(body);
      return table;
    }

    // --- range -----------------------------------------------------------------------------
    extent() {
      let lo = Infinity, hi = -Infinity;
      for (const t of this.timelines) {
        const [a, b] = t.extent();
        lo = Math.min(lo, a);
        hi = Math.max(hi, b);
      }
      return [lo, Math.max(hi, lo + 1000)];
    }

    layout() {
      // Sizing the panels may add a vertical scrollbar, which narrows the box: then again.
      for (let pass = 0; pass < 2; pass++) {
        const width = Math.max(GUTTER + 200, this.scrollBox.clientWidth);
        for (const t of this.timelines) t.layout(width);
        this.layoutWidth = this.scrollBox.clientWidth;
        if (this.layoutWidth === width) break;
      }
      this.version++;
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
      this.stepSelect.value = '';
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
      if (this.compare) {  // the pair of the first (control) trace's step ``number``
        return this.selectStepPair(this.compare.step_pairs.findIndex((pair) => pair[0] === number));
      }
      const t = this.timelines[0];
      const step = t.data.steps.find((s) => s.number === number);
      if (!step) return false;
      const span = Math.max(step.end - step.start, MIN_SPAN), pad = span * 0.02;
      this.stepSelect.value = String(number);
      this.setRange(step.start - t.offset - pad, step.end - t.offset + pad);
      return true;
    }

    /** Align the traces at step pair ``index`` of the comparison and zoom to it (both
     *  steps in view: they start together); false if there is no such pair. */
    selectStepPair(index) {
      const pair = this.compare && this.compare.step_pairs[index];
      if (!pair || !this.alignSteps(pair)) return false;
      this.currentPair = index;
      let lo = Infinity, hi = -Infinity;
      this.timelines.forEach((t, i) => {
        const s = t.data.steps.find((x) => x.number === pair[i]);
        lo = Math.min(lo, s.start - t.offset);
        hi = Math.max(hi, s.end - t.offset);
      });
      const pad = Math.max(hi - lo, MIN_SPAN) * 0.02;
      this.stepSelect.value = String(index);
      this.setRange(lo - pad, hi + pad);
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
      for (const t of this.timelines) for (const p of t.panels) t.setCollapsed(p, collapsed);
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

    clearHighlight() {
      this.highlightSpec = null;
      for (const t of this.timelines) t.setHighlight(null);
      for (const row of this.app.querySelectorAll('tr.tb-selected')) row.classList.remove('tb-selected');
      if (this.diff) this.diff.deselect();
      this.countLabel.textContent = '';
      this.requestDraw();
    }

    search(text) {
      for (const row of this.app.querySelectorAll('tr.tb-selected')) row.classList.remove('tb-selected');
      if (this.diff) this.diff.deselect();
      if (!text) { this.clearHighlight(); return 0; }
      return this.highlight({text}, (count) => {
        this.countLabel.textContent = `${count.toLocaleString('en-US')} match${count === 1 ? '' : 'es'}`;
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
      const panel = timeline.panelOfLane(d.laneOf(pos));
      if (panel) {
        if (panel.collapsed) timeline.setCollapsed(panel, false);
        panel.section.scrollIntoView({block: 'nearest'});
      }
    }

    select(timeline, pos) {
      if (!this.ready && timeline && pos >= 0) { this.whenReady.then(() => this.select(timeline, pos)); return; }
      for (const t of this.timelines) t.selected = -1;
      if (timeline && pos >= 0) timeline.selected = pos;
      this.showDetails(timeline, pos);
      this.redrawOverlays();
    }

    showDetails(timeline, pos) {
      const body = this.detailsBody;
      body.textContent = '';
      const op = timeline && pos >= 0 ? timeline.data.op(pos) : null;
      if (!op) {
        body.appendChild(el('p', 'tb-muted', 'Click an op to see its details.'));
        return;
      }
      const dl = el('dl');
      for (const [k, v] of this.fields(op, true)) {
        dl.appendChild(el('dt', null, k));
        const dd = el('dd', k === 'Inputs' ? 'tb-pre' : null, v);
        dl.appendChild(dd);
      }
      body.appendChild(dl);
      const actions = el('div', 'tb-actions');
      const zoom = el('button', 'tb-button', 'Zoom to op');
      zoom.type = 'button';
      zoom.addEventListener('click', () => {
        const s = op.start_ns - timeline.offset, e = op.end_ns - timeline.offset, pad = Math.max((e - s) * 0.5, MIN_SPAN);
        this.setRange(s - pad, e + pad);
      });
      const same = el('button', 'tb-button', 'Highlight this name');
      same.type = 'button';
      same.addEventListener('click', () => {
        this.searchBox.value = '';
        this.highlight({name: op.name}, (count) => {
          this.countLabel.textContent = `${count.toLocaleString('en-US')} ops: ${op.name}`;
        });
      });
      actions.appendChild(zoom);
      actions.appendChild(same);
      body.appendChild(actions);
    }

    /** [label, text] pairs of an op: the hover box (tfvis's fields) or the details panel. */
    fields(op, full) {
      const out = [['Name', op.name], ['op', op.kernel !== op.type ? `${op.type} (kernel ${op.kernel})` : op.type]];
      const inputs = full || op.inputs.length <= 12 ? op.inputs : op.inputs.slice(0, 12).concat([`\u2026 ${op.inputs.length - 12} more`]);
      out.push(['Inputs', inputs.join('\n')]);
      const description = !full && op.description.length > 400 ? op.description.slice(0, 400) + '\u2026' : op.description;
      out.push(['Description', description]);
      out.push(['Duration', fmtDuration(op.duration_ns)]);
      out.push(['Start', fmtMs(op.start_ns)]);
      out.push(['End', fmtMs(op.end_ns)]);
      for (const t of op.transfers) {
        out.push(['Transfer', `${t.src} \u2192 ${t.dst}`]);
        out.push(['Bytes', `${fmtBytes(t.bytes)} (${t.bytes.toLocaleString('en-US')} B)` + (t.rate_bps ? `, ${fmtBytes(t.rate_bps)}/s` : '')]);
        if (t.tensor) out.push(['Tensor', t.tensor]);
      }
      out.push(['Device', full ? op.device : this._short(op)]);
      if (full) {
        out.push(['Lane', op.lane + (op.network ? ' (network)' : '')]);
        out.push(['Step', op.step === null ? '\u2014' : String(op.step)]);
        out.push(['Start (epoch ns)', op.start_epoch_ns]);
      }
      return out;
    }

    _short(op) {
      const t = this.timelines.find((x) => x.data.devices[op.device_index] && x.data.devices[op.device_index].name === op.device);
      return t ? t.data.devices[op.device_index].short : op.device;
    }

    showTip(timeline, pos, clientX, clientY) {
      const op = timeline.data.op(pos);
      const tip = this.tip;
      tip.textContent = '';
      const dl = el('dl');
      if (!op) tip.appendChild(el('span', 'tb-muted', 'Loading names\u2026'));
      for (const [k, v] of op ? this.fields(op, false) : []) {
        if (v === '' && (k === 'Inputs' || k === 'Description')) continue;
        dl.appendChild(el('dt', null, k));
        dl.appendChild(el('dd', k === 'Inputs' ? 'tb-pre' : null, v));
      }
      tip.appendChild(dl);
      tip.hidden = false;
      const margin = 14, w = tip.offsetWidth, h = tip.offsetHeight;
      let x = clientX + margin, y = clientY + margin;
      if (x + w > window.innerWidth - 4) x = Math.max(4, clientX - margin - w);
      if (y + h > window.innerHeight - 4) y = Math.max(4, clientY - margin - h);
      tip.style.left = x + 'px';
      tip.style.top = y + 'px';
    }

    showMemoryTip(timeline, t, clientX, clientY) {
      const d = timeline.data, time = d.column('counter_time'), bytes = d.column('counter_bytes');
      const tip = this.tip;
      tip.textContent = '';
      const dl = el('dl');
      dl.appendChild(el('dt', null, 'Time'));
      dl.appendChild(el('dd', null, fmtMs(t)));
      for (const a of d.meta.allocators) {
        const i = upperBound(time, a.first, a.first + a.count, t) - 1;
        dl.appendChild(el('dt', null, a.name));
        dl.appendChild(el('dd', null, i >= a.first ? `${fmtBytes(bytes[i])} (${bytes[i].toLocaleString('en-US')} B)` : '0 B'));
      }
      tip.appendChild(dl);
      tip.hidden = false;
      tip.style.left = Math.min(clientX + 14, window.innerWidth - tip.offsetWidth - 4) + 'px';
      tip.style.top = Math.min(clientY + 14, window.innerHeight - tip.offsetHeight - 4) + 'px';
    }

    hideTip() { this.tip.hidden = true; }

    /** {timeline, panel, x, y} of a client point over a panel or ruler, or null. */
    locate(clientX, clientY) {
      for (const t of this.timelines) {
        for (const p of t.allPanels()) {
          if (p.collapsed) continue;
          const r = p.wrap.getBoundingClientRect();
          if (clientX >= r.left && clientX < r.right && clientY >= r.top && clientY < r.bottom) {
            return {timeline: t, panel: p, x: clientX - r.left, y: clientY - r.top};
          }
        }
      }
      return null;
    }

    hitTest(clientX, clientY) {
      const where = this.locate(clientX, clientY);
      if (!where) return null;
      const pos = where.timeline.opAt(where.panel, where.x, where.y);
      return pos < 0 ? null : {timeline: where.timeline, pos};
    }

    // --- input -------------------------------------------------------------------------------
    attachPointer(target, timeline, panel) {
      let drag = null;
      target.addEventListener('pointerdown', (e) => {
        if (e.button !== 0) return;
        const r = target.getBoundingClientRect();
        drag = {x: e.clientX, t0: this.range.t0, t1: this.range.t1, moved: false, inTime: e.clientX - r.left >= GUTTER};
        target.setPointerCapture(e.pointerId);
      });
      target.addEventListener('pointermove', (e) => {
        const r = target.getBoundingClientRect(), x = e.clientX - r.left, y = e.clientY - r.top;
        const inTime = x >= GUTTER && x <= timeline.width - PAD_R;
        this.pointer = inTime ? {timeline, x} : null;
        if (drag && drag.inTime) {
          const dx = e.clientX - drag.x;
          if (Math.abs(dx) > 3) drag.moved = true;
          if (drag.moved) {
            const dt = dx * (drag.t1 - drag.t0) / (timeline.width - GUTTER - PAD_R);
            this.setRange(drag.t0 - dt, drag.t1 - dt);
            this.hideTip();
            return;
          }
        }
        this.cursor = inTime ? timeline.timeAt(x) - timeline.offset : null;
        let hovered = -1;
        if (panel && panel.memory && inTime) {
          this.showMemoryTip(timeline, timeline.timeAt(x), e.clientX, e.clientY);
        } else if (panel) {
          hovered = timeline.opAt(panel, x, y);
          if (hovered >= 0) this.showTip(timeline, hovered, e.clientX, e.clientY); else this.hideTip();
        }
        for (const t of this.timelines) t.hovered = t === timeline ? hovered : -1;
        target.style.cursor = hovered >= 0 ? 'pointer' : (inTime ? 'grab' : 'default');
        this.redrawOverlays();
      });
      const finish = (e) => {
        if (!drag) return;
        const wasDrag = drag.moved;
        drag = null;
        if (wasDrag || !panel || panel.memory) return;
        const r = target.getBoundingClientRect();
        const pos = timeline.opAt(panel, e.clientX - r.left, e.clientY - r.top);
        this.select(pos >= 0 ? timeline : null, pos);
      };
      target.addEventListener('pointerup', finish);
      target.addEventListener('pointercancel', () => { drag = null; });
      target.addEventListener('pointerleave', () => {
        this.hideTip();
        this.cursor = null;
        this.pointer = null;
        timeline.hovered = -1;
        this.redrawOverlays();
      });
      target.addEventListener('wheel', (e) => {
        const r = target.getBoundingClientRect(), x = e.clientX - r.left;
        if (x < GUTTER) return;  // over the lane names the wheel scrolls the page
        e.preventDefault();
        const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? 400 : 1;
        const dx = e.deltaX * unit, dy = e.deltaY * unit;
        if (e.shiftKey || Math.abs(dx) > Math.abs(dy)) {
          this.pan((e.shiftKey && !dx ? dy : dx) / (timeline.width - GUTTER - PAD_R));
        } else {
          this.zoom(Math.exp(dy * 0.0015), timeline.timeAt(x) - timeline.offset);
        }
      }, {passive: false});
    }

    onKey(e) {
      const target = e.target;
      if (target && (target.tagName === 'INPUT' || target.tagName === 'SELECT' || target.tagName === 'TEXTAREA')) return;
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      const anchor = this.pointer ? this.pointer.timeline.timeAt(this.pointer.x) - this.pointer.timeline.offset : null;
      switch (e.key.toLowerCase()) {
        case 'w': this.zoom(0.8, anchor); break;
        case 's': this.zoom(1.25, anchor); break;
        case 'a': case 'arrowleft': this.pan(-0.1); break;
        case 'd': case 'arrowright': this.pan(0.1); break;
        case '0': this.resetZoom(); break;
        case '/': this.searchBox.focus(); break;
        case 'escape': this.select(null, -1); this.searchBox.value = ''; this.clearHighlight(); break;
        default: return;
      }
      e.preventDefault();
    }
  }

  // ----------------------------------------------------------------------- the diff view

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
  const CHANGE_ORDER = {'+': 1, '=': 0, '-': -1};
  const CHANGE_TEXT = {'+': '\u25b2 slower', '-': '\u25bc faster', '=': '= same'};
  const CHANGE_CLASS = {'+': 'tb-slower', '-': 'tb-faster', '=': 'tb-same'};
  const MAX_DIFF_ROWS = 2000;  // rows put in the table at once (filter to see others)

  function fmtPercent(share) {
    return typeof share === 'number' && isFinite(share) ? (share * 100).toFixed(1) + '%' : '\u2014';
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
        row.search = [row.key, row.op_type, row.rule].concat(row.control_names, row.test_names).join('\n').toLowerCase();
        return row;
      });
      this.sortState = {key: 'delta_ns', descending: true};
      this.filterText = '';
      this.category = '';
      this.selectedIndex = -1;
      this.shown = [];
      this._coverageBar(page.app);
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
      const changes = el('span', 'tb-compare-facts');
      for (const change of ['+', '-', '=']) {
        changes.appendChild(el('span', 'tb-change ' + CHANGE_CLASS[change],
          `${count((r) => r.change === change).toLocaleString('en-US')} ${CHANGE_TEXT[change].slice(2)}`));
      }
      bar.appendChild(changes);
      const sum = (key) => this.rows.reduce((a, r) => a + (typeof r[key] === 'number' && isFinite(r[key]) ? r[key] : 0), 0);
      const c = sum('control_median_ns'), t = sum('test_median_ns');
      const total = el('span', 'tb-compare-facts',
        `per-step op time (sum of medians): ${fmtShort(c)} \u2192 ${fmtShort(t)}` + (c > 0 ? ` (${t >= c ? '+' : '\u2212'}${Math.abs((t - c) / c * 100).toFixed(1)}%)` : ''));
      bar.appendChild(total);
      bar.appendChild(el('span', 'tb-compare-facts', plural(this.compare.step_pairs.length, 'aligned step pair')));
      app.appendChild(bar);
      this.bar = bar;
    }

    /** The heading of timeline ``i``: its role, source format and counts. */
    heading(i) {
      const role = ROLES[i] || `trace ${i}`, meta = this.datas[i].meta, info = (this.compare.traces || [])[i] || {};
      const head = el('div', 'tb-trace-head tb-role-' + (ROLES[i] || 'other'));
      head.appendChild(el('span', 'tb-role', role));
      const format = el('span', 'tb-trace-format', info.source_format || meta.source_format);
      head.appendChild(format);
      head.appendChild(el('span', 'tb-trace-facts',
        `${plural(meta.op_count, 'op')} \u00b7 ${plural(meta.devices.length, 'device')} \u00b7 ${plural(meta.steps.length, 'step')}`
        + ` \u00b7 ${fmtPercent((this.compare.coverage || {})[role])} of op time matched`));
      return head;
    }

    /** The sidebar of a comparison: the compared op (row), the selected op, both runs. */
    sidebar(side) {
      const page = this.page;
      const compared = el('section', 'tb-panel tb-compared');
      compared.appendChild(el('h2', null, 'Compared op'));
      this.rowBody = el('div', 'tb-compared-body');
      compared.appendChild(this.rowBody);
      side.appendChild(compared);
      this.showRow(null);
      const details = el('section', 'tb-panel tb-details');
      details.appendChild(el('h2', null, 'Selected op'));
      page.detailsBody = el('div', 'tb-details-body');
      page.detailsBody.appendChild(el('p', 'tb-muted', 'Click an op to see its details.'));
      details.appendChild(page.detailsBody);
      side.appendChild(details);
      this.datas.forEach((d, i) => side.appendChild(page._infoPanel(d.meta, ['Control run', 'Test run'][i] || 'Trace')));
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
      add('Matched by', row.rule + (row.side === 'both' ? '' : ` (${row.side} only)`));
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
      for (const row of this.shown.slice(0, MAX_DIFF_ROWS)) fragment.appendChild(this._row(row));
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

    _row(row) {
      const tr = el('tr', row.side === 'both' ? null : 'tb-unmatched');
      tr.tabIndex = 0;
      tr.dataset.index = String(row.index);
      if (row.index === this.selectedIndex) tr.classList.add('tb-selected');
      tr.appendChild(el('td', 'tb-change ' + (CHANGE_CLASS[row.change] || ''), CHANGE_TEXT[row.change] || String(row.change)));
      const name = el('td', 'tb-name tb-fit', row.key);
      name.title = row.key;
      tr.appendChild(name);
      tr.appendChild(el('td', 'tb-name', row.side === 'both' ? row.rule : `${row.rule} \u00b7 ${row.side} only`));
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
      page.searchBox.value = '';
      return page.highlight([{names: row.control_names}, {names: row.test_names}], () => {
        if (this.selectedIndex !== row.index) return;
        this.counts = page.timelines.map((t) => t.highlightCount);
        page.countLabel.textContent = `${this.counts.map((n, i) => `${ROLES[i]} ${n.toLocaleString('en-US')}`).join(' \u00b7 ')} ops: ${row.key}`;
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
      const page = this.page, pair = page.currentPair >= 0 ? this.compare.step_pairs[page.currentPair] : null;
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
      for (const {t, pos} of found.slice().reverse()) {
        const panel = t.panelOfLane(t.data.laneOf(pos));
        if (!panel) continue;
        if (panel.collapsed) t.setCollapsed(panel, false);
        panel.section.scrollIntoView({block: 'nearest'});
      }
      page.select(found[0].t, found[0].pos);
      this.instances = found.map(({t, pos}) => ({trace: page.timelines.indexOf(t), pos}));
    }

    /** Row ``index`` (its place in the comparison's rows) as a plain object. */
    rowInfo(row) {
      const out = {};
      for (const field of this.compare.fields) out[field] = row[field];
      return Object.assign(out, {index: row.index, side: row.side});
    }
  }

  // ----------------------------------------------------------------------- start

  async function start() {
    const app = document.getElementById('tb-app');
    const metas = Array.from(document.querySelectorAll('script.tracebridge-trace'));
    if (!app || !metas.length) return;
    if (typeof DecompressionStream !== 'function') {
      app.textContent = 'This browser cannot read the timeline (it lacks DecompressionStream): use a current Chrome, Firefox or Safari.';
      return;
    }
    const datas = await Promise.all(metas.map((node) => new TraceData(JSON.parse(node.textContent)).load()));
    const compareNode = document.getElementById('tb-compare');
    const compare = compareNode ? JSON.parse(compareNode.textContent) : null;
    const page = new Page(app, datas, compare && datas.length === 2
      ? {compare, title: compare.title, labels: []} : undefined);
    let resolveReady = null;
    page.whenReady = new Promise((resolve) => { resolveReady = resolve; });
    const primary = page.timelines[0];
    const info = (t, pos) => {
      const op = t.data.op(pos);
      return op && Object.assign(op, {trace: page.timelines.indexOf(t)});
    };
    window.tracebridge = {
      version: 1,
      /** True once names and inputs are decoded (the API's op data needs them). */
      get ready() { return page.ready; },
      whenReady: () => page.whenReady,
      page, TraceData, Timeline, Page,
      timelines: page.timelines,
      /** The visible window in ns since the first trace's start (view time). */
      visibleRange: () => ({start_ns: page.range.t0, end_ns: page.range.t1}),
      setRange: (start, end) => { page.setRange(start, end); page.drawNow(); },
      zoom: (factor) => { page.zoom(factor); page.drawNow(); },
      pan: (fraction) => { page.pan(fraction); page.drawNow(); },
      reset: () => { page.resetZoom(); page.drawNow(); },
      search: (text) => { page.searchBox.value = text; const n = page.search(text); page.drawNow(); return n; },
      highlightName: (name) => { const n = page.highlight({name}); page.drawNow(); return n; },
      highlightType: (type) => { const n = page.highlight({type}); page.drawNow(); return n; },
      clearHighlight: () => { page.clearHighlight(); page.drawNow(); },
      highlighted: () => page.timelines.reduce((n, t) => n + (t.highlight ? t.highlightCount : 0), 0),
      isHighlighted: (pos, trace) => { const t = page.timelines[trace || 0]; return !!(t.highlight && t.highlight[pos]); },
      steps: () => primary.data.steps.map((s) => ({number: s.number, name: s.name, start_ns: s.start, end_ns: s.end})),
      selectStep: (number) => { const ok = page.selectStep(number); page.drawNow(); return ok; },
      hitTest: (x, y) => { const hit = page.hitTest(x, y); return hit ? info(hit.timeline, hit.pos) : null; },
      op: (pos, trace) => info(page.timelines[trace || 0], pos),
      select: (pos, trace) => page.select(page.timelines[trace || 0], pos),
      selected: () => { const t = page.timelines.find((x) => x.selected >= 0); return t ? info(t, t.selected) : null; },
      /** Client coordinates of the middle of op ``pos`` (clamped to the visible window). */
      screenPoint: (pos, trace) => {
        const t = page.timelines[trace || 0], d = t.data, panel = t.panelOfLane(d.laneOf(pos));
        if (!panel || panel.collapsed) return null;
        const r = panel.wrap.getBoundingClientRect(), k = panel.lanes.indexOf(d.laneOf(pos));
        const sx = Math.max(t.xAt(d.start[pos]), GUTTER), ex = Math.min(t.xAt(d.end[pos]), t.width - PAD_R);
        return {x: r.left + (sx + ex) / 2, y: r.top + k * ROW + ROW / 2};
      },
      drawnCounts: (trace) => page.timelines[trace || 0].drawnCounts(),
      /** The diff view of a comparison page (null on a one-trace page). */
      compare: page.diff ? {
        /** The rows in table order (after sorting and filtering), as plain objects. */
        rows: () => page.diff.shown.map((r) => page.diff.rowInfo(r)),
        /** The op keys of the rows drawn in the table, top to bottom. */
        tableKeys: () => Array.from(page.diff.body.rows, (tr) => tr.cells[1].title),
        sort: (key, descending) => page.diff.sortBy(key, descending),
        sortState: () => Object.assign({}, page.diff.sortState),
        filter: (text, category) => page.diff.setFilter(text, category),
        /** Highlight row ``index`` (of the comparison's rows) in both runs and zoom to it;
         *  resolves to the highlighted op counts [control, test]. */
        selectRow: (index) => {
          const row = page.diff.rows[index];
          if (!row) return Promise.resolve(null);
          if (page.diff.selectedIndex === index) return Promise.resolve(page.diff.counts);
          page.diff.activate(row);
          return page.whenReady.then(() => { page.drawNow(); return page.diff.counts; });
        },
        selectedRow: () => page.diff.selectedIndex,
        /** [{trace, pos}] of the instances zoomed to after the last row selection. */
        instances: () => (page.diff.instances || []).slice(),
        highlightCounts: () => page.timelines.map((t) => (t.highlight ? t.highlightCount : 0)),
        stepPairs: () => page.compare.step_pairs.map((pair) => pair.slice()),
        selectStepPair: (index) => { const ok = page.selectStepPair(index); page.drawNow(); return ok; },
        currentPair: () => page.currentPair,
        offsets: () => page.timelines.map((t) => t.offset),
        coverage: () => Object.assign({}, page.compare.coverage),
      } : null,
      devices: (trace) => page.timelines[trace || 0].data.devices.map((d) => d.name),
      tooltipText: () => (page.tip.hidden ? '' : page.tip.innerText),
      detailsText: () => page.detailsBody.innerText,
      draw: () => page.drawNow(),
    };
    page.drawNow();
    performance.mark('tracebridge:first-draw');
    // Then names, inputs and the rest; labels appear with the names.
    await new Promise((resolve) => setTimeout(resolve, 0));
    await Promise.all(datas.map((d) => d.loadRest()));
    for (const d of datas) d.strings;
    page.ready = true;
    page.version++;
    page.requestDraw();
    performance.mark('tracebridge:ready');
    resolveReady(true);
  }

  start().catch((error) => {
    console.error('tracebridge: the timeline could not be shown:', error);
    const app = document.getElementById('tb-app');
    if (app) app.textContent = 'The timeline could not be shown: ' + error;
  });
})();
