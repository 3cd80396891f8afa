/* The start: decode the data blocks, build the Page, publish window.tracebridge (the API
 * the tests and benchmarks drive), then decode names and inputs. html_page.py ends the
 * script with ``start(DiffView)`` on comparison pages and ``start(null)`` on the others.
 */

/** Show the page; ``DiffView``: the diff view class if this page may be a comparison. */
function start(DiffView) {
  show(DiffView).catch((error) => {
    console.error('tracebridge: the timeline could not be shown:', error);
    const app = document.getElementById('tb-app');
    if (app) app.textContent = 'The timeline could not be shown: ' + error;
  });
}

async function show(DiffView) {
  const app = document.getElementById('tb-app');
  const metas = Array.from(document.querySelectorAll('script.tracebridge-trace'));
  if (!app || !metas.length) return;
  if (typeof DecompressionStream !== 'function') {
    app.textContent = 'This browser cannot read the timeline (it lacks DecompressionStream): use a current Chrome, Firefox or Safari.';
    return;
  }
  const datas = await Promise.all(metas.map((node) => new TraceData(JSON.parse(node.textContent)).load()));
  const compareNode = DiffView ? document.getElementById('tb-compare') : null;
  const compare = compareNode ? JSON.parse(compareNode.textContent) : null;
  const page = new Page(app, datas, compare && datas.length === 2
    ? {compare, DiffView, title: compare.title} : undefined);
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
    search: (text) => { page.toolbar.searchBox.value = text; const n = page.search(text); page.drawNow(); return n; },
    highlightName: (name) => { const n = page.highlight({name}); page.drawNow(); return n; },
    highlightType: (type) => { const n = page.highlight({type}); page.drawNow(); return n; },
    clearHighlight: () => { page.clearHighlight(); page.drawNow(); },
    highlighted: () => page.timelines.reduce((n, t) => n + (t.highlight ? t.highlightCount : 0), 0),
    isHighlighted: (pos, trace) => { const t = page.timelines[trace || 0]; return !!(t.highlight && t.highlight[pos]); },
    steps: () => primary.data.steps.map((s) => ({number: s.number, name: s.name, start_ns: s.start, end_ns: s.end})),
    selectStep: (number) => { const ok = page.selectStep(number); page.drawNow(); return ok; },
    hitTest: (x, y) => { const hit = page.input.hitTest(x, y); return hit ? info(hit.timeline, hit.pos) : null; },
    op: (pos, trace) => info(page.timelines[trace || 0], pos),
    select: (pos, trace) => page.select(page.timelines[trace || 0], pos),
    selected: () => { const t = page.timelines.find((x) => x.selected >= 0); return t ? info(t, t.selected) : null; },
    /** Client coordinates of the middle of op ``pos`` (clamped to the visible window). */
    screenPoint: (pos, trace) => {
      const t = page.timelines[trace || 0], d = t.data, panel = t.panelOfLane(d.laneOf(pos));
      if (!panel || panel.collapsed) return null;
      const r = panel.wrap.getBoundingClientRect(), k = panel.lanes.indexOf(d.laneOf(pos));
      const sx = Math.max(t.xAt(d.start[pos]), GUTTER), ex = Math.min(t.xAt(d.end[pos]), t.width - PAD_R);
      return {x: r.left + (sx + ex) / 2, y: r.top + k * t.row + t.row / 2};
    },
    drawnCounts: (trace) => page.timelines[trace || 0].drawnCounts(),
    /** The diff view of a comparison page (null on a one-trace page). */
    compare: page.diff ? page.diff.api() : null,
    devices: (trace) => page.timelines[trace || 0].data.devices.map((d) => d.name),
    tooltipText: () => page.tooltip.text(),
    detailsText: () => page.sidebar.detailsBody.innerText,
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
