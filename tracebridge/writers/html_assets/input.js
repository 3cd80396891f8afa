/* Mouse and keyboard on the timelines: hover box and cursor line, click to select, drag to
 * pan, wheel to zoom (shift or a sideways wheel: pan), chrome://tracing's W/S/A/D keys. */

class Input {
  constructor(page) {
    this.page = page;
    this.pointer = null;  // {timeline, x} of the mouse over a time area
    document.addEventListener('keydown', (e) => this.onKey(e));
  }

  /** Listen on ``target``, the ruler (``panel`` null) or a panel of ``timeline``. */
  attach(target, timeline, panel) {
    const page = this.page, tooltip = page.tooltip;
    let drag = null;
    target.addEventListener('pointerdown', (e) => {
      if (e.button !== 0) return;
      const r = target.getBoundingClientRect();
      drag = {x: e.clientX, t0: page.range.t0, t1: page.range.t1, moved: false, inTime: e.clientX - r.left >= GUTTER};
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
          page.setRange(drag.t0 - dt, drag.t1 - dt);
          tooltip.hide();
          return;
        }
      }
      page.cursor = inTime ? timeline.timeAt(x) - timeline.offset : null;
      let hovered = -1;
      if (panel && panel.memory && inTime) {
        tooltip.showMemory(timeline, timeline.timeAt(x), e.clientX, e.clientY);
      } else if (panel) {
        hovered = timeline.opAt(panel, x, y);
        if (hovered >= 0) tooltip.showOp(timeline, hovered, e.clientX, e.clientY); else tooltip.hide();
      }
      if (panel && !panel.memory) target.title = x < GUTTER ? timeline.laneTitle(panel, y) : '';
      for (const t of page.timelines) t.hovered = t === timeline ? hovered : -1;
      target.style.cursor = hovered >= 0 ? 'pointer' : (inTime ? 'grab' : 'default');
      page.redrawOverlays();
    });
    const finish = (e) => {
      if (!drag) return;
      const wasDrag = drag.moved;
      drag = null;
      if (wasDrag || !panel || panel.memory) return;
      const r = target.getBoundingClientRect();
      const pos = timeline.opAt(panel, e.clientX - r.left, e.clientY - r.top);
      page.select(pos >= 0 ? timeline : null, pos);
      page.highlightLinked(timeline, pos);
    };
    target.addEventListener('pointerup', finish);
    target.addEventListener('pointercancel', () => { drag = null; });
    target.addEventListener('pointerleave', () => {
      tooltip.hide();
      page.cursor = null;
      this.pointer = null;
      timeline.hovered = -1;
      page.redrawOverlays();
    });
    target.addEventListener('wheel', (e) => {
      const r = target.getBoundingClientRect(), x = e.clientX - r.left;
      if (x < GUTTER) return;  // over the lane names the wheel scrolls the page
      e.preventDefault();
      const unit = e.deltaMode === 1 ? 16 : e.deltaMode === 2 ? 400 : 1;
      const dx = e.deltaX * unit, dy = e.deltaY * unit;
      if (e.shiftKey || Math.abs(dx) > Math.abs(dy)) {
        page.pan((e.shiftKey && !dx ? dy : dx) / (timeline.width - GUTTER - PAD_R));
      } else {
        page.zoom(Math.exp(dy * 0.0015), timeline.timeAt(x) - timeline.offset);
      }
    }, {passive: false});
  }

  onKey(e) {
    const page = this.page, target = e.target;
    if (target && (target.tagName === 'INPUT' || target.tagName === 'SELECT' || target.tagName === 'TEXTAREA')) return;
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const anchor = this.pointer ? this.pointer.timeline.timeAt(this.pointer.x) - this.pointer.timeline.offset : null;
    switch (e.key.toLowerCase()) {
      case 'w': page.zoom(0.8, anchor); break;
      case 's': page.zoom(1.25, anchor); break;
      case 'a': case 'arrowleft': page.pan(-0.1); break;
      case 'd': case 'arrowright': page.pan(0.1); break;
      case '0': page.resetZoom(); break;
      case '/': page.toolbar.searchBox.focus(); break;
      case 'escape': page.select(null, -1); page.toolbar.searchBox.value = ''; page.clearHighlight(); break;
      default: return;
    }
    e.preventDefault();
  }

  /** {timeline, panel, x, y} of a client point over a panel, or null. */
  locate(clientX, clientY) {
    for (const t of this.page.timelines) {
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

  /** {timeline, pos} of the op at a client point, or null. */
  hitTest(clientX, clientY) {
    const where = this.locate(clientX, clientY);
    if (!where) return null;
    const pos = where.timeline.opAt(where.panel, where.x, where.y);
    return pos < 0 ? null : {timeline: where.timeline, pos};
  }
}
