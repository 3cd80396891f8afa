/* The sidebar: the selected op's details, the top-ops and op-type tables, a trace's facts.
 * A one-trace page shows all three (addForTrace); the diff view picks its own panels. */

class Sidebar {
  constructor(page, side) {
    this.page = page;
    this.side = side;
    this.detailsBody = null;
  }

  /** The panels of a one-trace page. */
  addForTrace(data) {
    this.addParts(data.meta.breakdown);
    this.addDetails();
    this.addTopOps(data.meta.summary);
    this.addInfo(data.meta, 'Trace');
  }

  add(section) { this.side.appendChild(section); }

  /** "Step time by part": the median step's parts as a stacked bar (summary's breakdown),
   *  the device's busy share, what was left out of the median and what the format cannot tell. */
  addParts(breakdown) {
    if (!breakdown || !breakdown.parts) return;
    const panel = el('section', 'tb-panel tb-parts');
    panel.appendChild(el('h2', null, `Median step by part (${plural((breakdown.steps || []).length, 'step')})`));
    panel.appendChild(partsBar('step', breakdown.parts, breakdown.median_ns, breakdown.median_ns));
    panel.appendChild(partsLegend());
    const device = breakdown.device;
    if (device) {
      panel.appendChild(el('p', 'tb-muted', `device busy ${fmtShort(device.busy_ns)}, idle ${fmtShort(device.idle_ns)}: `
        + `${device.bound}-bound`));
    }
    for (const note of [breakdown.steady_note].concat(breakdown.notes || [])) {
      if (note) panel.appendChild(el('p', 'tb-muted tb-parts-note', note));
    }
    this.add(panel);
  }

  /** The "Selected op" panel (showDetails fills it). */
  addDetails() {
    const details = el('section', 'tb-panel tb-details');
    details.appendChild(el('h2', null, 'Selected op'));
    this.detailsBody = el('div', 'tb-details-body');
    this.detailsBody.appendChild(el('p', 'tb-muted', 'Click an op to see its details.'));
    details.appendChild(this.detailsBody);
    this.add(details);
  }

  /** Op ``pos`` of ``timeline`` in the details panel, with zoom and highlight buttons
   *  (no op: the hint). */
  showDetails(timeline, pos) {
    const page = this.page, body = this.detailsBody;
    body.textContent = '';
    const op = timeline && pos >= 0 ? timeline.data.op(pos) : null;
    if (!op) {
      body.appendChild(el('p', 'tb-muted', 'Click an op to see its details.'));
      return;
    }
    body.appendChild(fieldList(opFields(op, true, op.device)));
    const actions = el('div', 'tb-actions');
    const zoom = el('button', 'tb-button', 'Zoom to op');
    zoom.type = 'button';
    zoom.addEventListener('click', () => {
      const s = op.start_ns - timeline.offset, e = op.end_ns - timeline.offset, pad = Math.max((e - s) * 0.5, MIN_SPAN);
      page.setRange(s - pad, e + pad);
    });
    const same = el('button', 'tb-button', 'Highlight this name');
    same.type = 'button';
    same.addEventListener('click', () => {
      page.toolbar.searchBox.value = '';
      page.highlight({name: op.name}, (count) => {
        page.toolbar.say(`${count.toLocaleString('en-US')} ops: ${op.name}`);
      });
    });
    actions.appendChild(zoom);
    actions.appendChild(same);
    body.appendChild(actions);
  }

  /** The "Top ops" and "Op types" tables (tabs) of a trace's summary. */
  addTopOps(summary) {
    const top = el('section', 'tb-panel tb-top');
    const tabs = el('div', 'tb-tabs');
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
    top.appendChild(el('p', 'tb-muted', `${summary.op_count.toLocaleString('en-US')} ${summary.counted_as || 'events'}, ${fmtDuration(summary.total_ns)}${summary.time === 'device' ? ' device time (kernels credited to the op that launched them)' : ''} in all; click a row to highlight${summary.time === 'device' ? ' the op and its kernels' : ''}`));
    for (const value of Object.values(tables)) top.appendChild(value.table);
    this.add(top);
    show('ops');
  }

  /** A row click highlights its op name (``key`` 'ops') or op type in the first timeline
   *  and selects the longest instance; a second click clears. */
  _topTable(rows, key) {
    const page = this.page;
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
      const name = el('td', 'tb-name tb-fit tb-wrap', row.key);
      name.title = row.key;
      tr.appendChild(name);
      tr.appendChild(el('td', 'tb-num', fmtShort(row.total_ns)));
      tr.appendChild(el('td', 'tb-num', fmtShort(row.mean_ns)));
      tr.appendChild(el('td', 'tb-num', row.count.toLocaleString('en-US')));
      const activate = () => {
        const wasSelected = tr.classList.contains('tb-selected');
        for (const other of this.side.querySelectorAll('tr.tb-selected')) other.classList.remove('tb-selected');
        if (wasSelected) { page.clearHighlight(); return; }
        tr.classList.add('tb-selected');
        page.toolbar.searchBox.value = '';
        page.highlight(key === 'ops' ? {name: row.key} : {type: row.key}, (count) => {
          const timeline = page.timelines[0];
          if (timeline.highlight) {  // select the longest instance
            const d = timeline.data, mask = timeline.highlight;
            let best = -1, longest = -1;
            for (let i = 0; i < d.n; i++) if (mask[i] && d.end[i] - d.start[i] > longest) { longest = d.end[i] - d.start[i]; best = i; }
            if (best >= 0) page.select(timeline, best);
          }
          page.toolbar.say(`${count.toLocaleString('en-US')} ops: ${row.key}`);
        });
      };
      tr.addEventListener('click', activate);
      tr.addEventListener('keydown', (e) => { if (e.key === 'Enter') activate(); });
      body.appendChild(tr);
    }
    table.appendChild(body);
    return table;
  }

  /** A trace's facts panel titled ``heading``: counts, span and the trace's metadata. */
  addInfo(meta, heading) {
    const info = el('section', 'tb-panel tb-info');
    info.appendChild(el('h2', null, heading));
    const dl = el('dl');
    const add = (k, v) => { dl.appendChild(el('dt', null, k)); dl.appendChild(el('dd', null, v)); };
    add('ops', (meta.op_count - (meta.span_count || 0)).toLocaleString('en-US'));
    add('devices', String(meta.devices.length) + (meta.hidden_devices ? ` (${meta.hidden_devices} hidden)` : ''));
    add('steps', String(meta.steps.length));
    add('span', fmtDuration(meta.span_ns));
    add('start (epoch ns)', meta.base_ns);
    for (const [k, v] of Object.entries(meta.metadata)) add(k, v === null ? '' : String(v));
    info.appendChild(dl);
    this.add(info);
  }
}
