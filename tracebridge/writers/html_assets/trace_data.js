/* The data of one trace: the columns html.py embedded in the page's data blocks. */

const DTYPES = {u8: Uint8Array, u16: Uint16Array, u32: Uint32Array, i32: Int32Array, f64: Float64Array};
const FIRST_COLUMNS = ['start', 'dur', 'type', 'step', 'counter_time', 'counter_bytes'];

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
    this.linked = new Set(meta.linked_names || []);  // TF ops with kernels (by name)
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

  /** A TF op span drawn over its XLA kernels or thunks (html.py: flags bit 2), not a trace op. */
  isSpan(pos) { return (this.column('flags')[pos] & 2) !== 0; }

  /** The HLO instruction, module and fused TF ops of an XLA event ({} if it is none). */
  hlo(pos) {
    const i = this._sparse('hlo_at', pos);
    if (i < 0) return {};
    const strings = this.strings, k = this._sparse('tf_ops_at', pos);
    return {instruction: strings[this.column('hlo_id')[i]], module: strings[this.column('hlo_module_id')[i]],
            tf_ops: k < 0 ? '' : strings[this.column('tf_ops_id')[k]]};
  }

  kernel(pos) {
    const i = this._sparse('kernel_at', pos);
    return i < 0 ? this.types[this.type[pos]] : this.strings[this.column('kernel_id')[i]];
  }

  /** [short, whole] names of op ``pos``'s kernel: a C++ kernel's demangled and shortened
   *  (html.py: meta.kernel_names), any other's its name twice. */
  kernelNames(pos) {
    const i = this._sparse('kernel_at', pos);
    const found = i < 0 ? null : (this.meta.kernel_names || {})[this.column('kernel_id')[i]];
    if (found) return found;
    const name = this.kernel(pos);
    return [name, name];
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
    // an XLA event says its HLO instruction: the TF op's span above it says the op
    const instruction = this.hlo(pos).instruction;
    return instruction ? [instruction, 'end'] : [this.name(pos), 'start'];
  }

  /** Up to ``lines`` lines of op ``pos``'s label in a tall lane: boxLabel, then its op type
   *  and duration. */
  boxLines(pos, lines) {
    const out = [this.boxLabel(pos)];
    if (lines > 1) out.push([`${this.types[this.type[pos]]} \u00b7 ${fmtShort(this.end[pos] - this.start[pos])}`, 'end']);
    return out;
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
      kernel_short: this.kernelNames(pos)[0], kernel_full: this.kernelNames(pos)[1],
      device: device.name, device_index: lane.device, lane: lane.name, lane_index: laneIndex,
      network: lane.network, step: step ? this.steps[step - 1].number : null,
      start_ns: start, end_ns: end, duration_ns: end - start, start_epoch_ns: this.absoluteNs(start),
      inputs: this.inputs(pos), description: this.description(pos), transfers: this.transfers(pos),
      xla_span: this.isSpan(pos), hlo: this.hlo(pos),
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
