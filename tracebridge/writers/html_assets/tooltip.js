/* The hover box (an op's fields, the way tfvis showed them, or the allocators' memory at a
 * time), and the op fields the details panel shows in full. */

class Tooltip {
  constructor(page) {
    this.page = page;
    this.box = el('div', 'tb-tip');
    this.box.hidden = true;
    document.body.appendChild(this.box);
  }

  /** Op ``pos`` of ``timeline``, next to the mouse (on the side where it fits). */
  showOp(timeline, pos, clientX, clientY) {
    const op = timeline.data.op(pos);
    const tip = this.box;
    tip.textContent = '';
    if (!op) tip.appendChild(el('span', 'tb-muted', 'Loading names\u2026'));
    const fields = op ? opFields(op, false, this._shortDevice(op)) : [];
    tip.appendChild(fieldList(fields.filter(([k, v]) => v !== '' || (k !== 'Inputs' && k !== 'Description'))));
    tip.hidden = false;
    const margin = 14, w = tip.offsetWidth, h = tip.offsetHeight;
    let x = clientX + margin, y = clientY + margin;
    if (x + w > window.innerWidth - 4) x = Math.max(4, clientX - margin - w);
    if (y + h > window.innerHeight - 4) y = Math.max(4, clientY - margin - h);
    tip.style.left = x + 'px';
    tip.style.top = y + 'px';
  }

  /** Bytes in use of each allocator of ``timeline`` at trace time ``t``. */
  showMemory(timeline, t, clientX, clientY) {
    const d = timeline.data, time = d.column('counter_time'), bytes = d.column('counter_bytes');
    const tip = this.box;
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

  hide() { this.box.hidden = true; }

  /** What the box says ('' when hidden). */
  text() { return this.box.hidden ? '' : this.box.innerText; }

  _shortDevice(op) {
    const t = this.page.timelines.find((x) => x.data.devices[op.device_index] && x.data.devices[op.device_index].name === op.device);
    return t ? t.data.devices[op.device_index].short : op.device;
  }
}

/** [label, text] pairs of an op (what TraceData.op returns): the hover box's (tfvis's
 *  fields, long inputs and descriptions cut) or, ``full``, the details panel's. ``device``:
 *  how to name the op's device. */
function opFields(op, full, device) {
  // a C++ kernel shows its short name; the whole one is the field's hover text (details panel)
  const kernel = op.kernel_short || op.kernel;
  const out = [['Name', op.name], ['op', op.kernel !== op.type ? `${op.type} (kernel ${kernel})` : op.type,
                                     op.kernel_full && op.kernel_full !== kernel ? op.kernel_full : '']];
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
  if (op.hlo && op.hlo.instruction) {
    out.push(['HLO', `${op.hlo.instruction}` + (op.hlo.module ? ` (${op.hlo.module})` : '')]);
    if (op.hlo.tf_ops) out.push(['Ops computed', op.hlo.tf_ops]);
  }
  if (op.xla_span) out.push(['XLA', 'the op over its XLA kernels or thunks in the lane below; click to highlight them']);
  out.push(['Device', device]);
  if (full) {
    out.push(['Lane', op.lane + (op.network ? ' (network)' : '')]);
    out.push(['Step', op.step === null ? '\u2014' : String(op.step)]);
    out.push(['Start (epoch ns)', op.start_epoch_ns]);
  }
  return out;
}

/** Op fields as a definition list (inputs one per line; a field's third part, where it
 *  has one, is its hover text). */
function fieldList(fields) {
  const dl = el('dl');
  for (const [k, v, title] of fields) {
    dl.appendChild(el('dt', null, k));
    const dd = el('dd', k === 'Inputs' ? 'tb-pre' : null, v);
    if (title) dd.title = title;  // the whole of what the field shortens
    dl.appendChild(dd);
  }
  return dl;
}
