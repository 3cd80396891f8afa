/* Helpers every part of the page script uses: the layout both the timelines and the page
 * measure with, DOM building, block decoding, binary search, number formats, colours and
 * text fitting.
 *
 * Data from the trace is only ever put on the page with textContent (el) or canvas fillText.
 */

const ROW = 18;          // lane height (CSS px), where lanes do not fill the view
const MAX_ROW = 320;     // the tallest a lane grows to fill the view
const GUTTER = 172;      // lane names
const PAD_R = 14;        // right margin of the time area
const MIN_SPAN = 20;     // ns: the deepest zoom

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
const ELLIPSIS = '\u2026';
const WRAP_LINES = 3;  // lines a long name in a table may take

/** Fit every ``.tb-fit`` cell to its width, the full text in its title. The names of one
 *  column are elided together (elideNames), so that rows stay told apart; a ``.tb-wrap``
 *  cell may take WRAP_LINES lines, broken after a scope's ``/``. */
function fitCells(root) {
  if (!measureContext) measureContext = document.createElement('canvas').getContext('2d');
  const cells = Array.from(root.querySelectorAll('.tb-fit'));
  for (const cell of cells) { cell.textContent = cell.title; cell.classList.remove('tb-wrapped'); }
  // read every width, then write: one layout, not one per cell
  const widths = cells.map((cell) => {
    if (cell.scrollWidth <= cell.clientWidth) return 0;
    const style = getComputedStyle(cell);
    return cell.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - 2;
  });
  const columns = new Map();  // the cells of one table column (or of one list) are told apart together
  cells.forEach((cell, i) => {
    const table = cell.closest('table'), key = table ? table : root;
    if (!columns.has(key)) columns.set(key, new Map());
    const column = cell.cellIndex === undefined ? -1 : cell.cellIndex;
    const group = columns.get(key);
    if (!group.has(column)) group.set(column, []);
    group.get(column).push(i);
  });
  for (const group of columns.values()) {
    for (const members of group.values()) {
      if (!members.some((i) => widths[i] > 0)) continue;
      const first = cells[members.find((i) => widths[i] > 0)];
      measureContext.font = getComputedStyle(first).font;
      const names = members.map((i) => cells[i].title);
      const lines = members.map((i) => (cells[i].classList.contains('tb-wrap') ? WRAP_LINES : 1));
      const shown = elideNames(measureContext, names, members.map((i) => widths[i]), lines);
      members.forEach((i, k) => {
        if (widths[i] <= 0) return;
        const cell = cells[i], text = shown[k] || ELLIPSIS;
        if (lines[k] > 1 && measureContext.measureText(text).width > widths[i]) {
          cell.classList.add('tb-wrapped');  // more lines, a break allowed after each '/'
          cell.textContent = '';
          text.split('/').forEach((part, j, parts) => {
            cell.appendChild(document.createTextNode(part + (j + 1 < parts.length ? '/' : '')));
            if (j + 1 < parts.length) cell.appendChild(document.createElement('wbr'));
          });
        } else {
          cell.textContent = text;
        }
      });
    }
  }
}

/** What to show of each of ``names`` in ``widths[i]`` px (``lines[i]`` lines of them; 0:
 *  the whole name fits) in ``ctx``'s font, such that different names still read differently.
 *  In this order, until it fits: the whole name; the scopes that tell it from the others
 *  (scopeSkeletons: ``replica_6/\u2026/layer_22/\u2026/RandomUniform``; ``scopes`` false: names
 *  are not TF scopes, as lane names); the same on more lines; that with the prefix it shares with its closest
 *  neighbour cut off at a word start (``\u2026_1/RandomStandardNormal``), as long as what is
 *  left ends no other name; last, what remains cut in its middle. Never the middle of a
 *  whole name first: rows that differ only there (``layer_1`` against ``layer_2``) would
 *  read alike. */
function elideNames(ctx, names, widths, lines, scopes) {
  const skeletons = scopes === false ? names.slice() : scopeSkeletons(names);
  const shared = neighbourPrefixes(skeletons);
  const endings = new Map();  // how many different texts end with each word-start suffix
  for (const text of new Set(skeletons)) {
    for (const c of wordStarts(text)) endings.set(text.slice(c), (endings.get(text.slice(c)) || 0) + 1);
  }
  return names.map((name, i) => {
    const width = widths[i], n = (lines && lines[i]) || 1, skeleton = skeletons[i];
    const fits = (text, count) => linesOf(ctx, text, width) <= count;
    if (!(width > 0) || fits(name, 1)) return name;
    if (fits(skeleton, 1)) return skeleton;  // one line first
    if (n > 1 && fits(name, n)) return name;
    if (fits(skeleton, n)) return skeleton;
    const cuts = wordStarts(skeleton).filter((c) => c > 0 && c <= shared[i] && endings.get(skeleton.slice(c)) === 1);
    for (const c of cuts) if (fits(ELLIPSIS + skeleton.slice(c), n)) return ELLIPSIS + skeleton.slice(c);
    const c = cuts.length ? cuts[cuts.length - 1] : 0, head = c ? ELLIPSIS : '';
    const room = n * width - 20 * (n - 1);  // lines broken anywhere lose a little at each break
    const rest = fitText(ctx, skeleton.slice(c), room - ctx.measureText(head).width, 'middle');
    return rest ? head + rest : fitText(ctx, name, room, 'start');
  });
}

/** How many lines of ``width`` px ``text`` takes when it breaks after each '/' (fitCells
 *  puts a <wbr> there) and, in a part wider than a line, anywhere. */
function linesOf(ctx, text, width) {
  if (ctx.measureText(text).width <= width) return 1;
  let lines = 1, used = 0;
  const parts = text.split('/');
  parts.forEach((part, j) => {
    const w = ctx.measureText(part + (j + 1 < parts.length ? '/' : '')).width;
    if (used + w <= width) { used += w; return; }
    if (used > 0) { lines += 1; used = 0; }
    lines += Math.ceil(w / width) - 1;
    used = w - (Math.ceil(w / width) - 1) * width;
  });
  return lines;
}

/** Where words of ``text`` start: 0 and each place after a separator ('/', '_', ' ', '.', ...). */
function wordStarts(text) {
  const out = [0];
  for (let i = 1; i < text.length; i++) if ('/_ .-:(['.includes(text[i - 1]) && !'/_ .-:(['.includes(text[i])) out.push(i);
  return out;
}

/** For each of ``texts``, the length of the longest prefix it shares with another (its
 *  sorted neighbours share the most); identical texts do not count. */
function neighbourPrefixes(texts) {
  const order = texts.map((_, i) => i).sort((a, b) => (texts[a] < texts[b] ? -1 : texts[a] > texts[b] ? 1 : 0));
  const common = (a, b) => {
    if (a === b) return 0;
    let n = 0;
    while (n < a.length && n < b.length && a[n] === b[n]) n += 1;
    return n;
  };
  const out = new Array(texts.length).fill(0);
  order.forEach((index, k) => {
    const text = texts[index];
    const before = k > 0 ? common(text, texts[order[k - 1]]) : 0;
    const after = k + 1 < order.length ? common(text, texts[order[k + 1]]) : 0;
    out[index] = Math.max(before, after);
  });
  return out;
}

/** Each of ``names`` (TF names: scopes joined by '/') with the scopes it shares with the
 *  others left out (one ELLIPSIS per run of them): its first and last parts, and the first
 *  scope that differs from each name it would otherwise read like. Thirty
 *  ``replica_<r>/bert/encoder/transformer/layer_<l>/.../RandomUniform`` rows keep
 *  ``replica_<r>/\u2026/layer_<l>/\u2026/RandomUniform``; a name whose last part no other has
 *  keeps only that. */
function scopeSkeletons(names) {
  const parts = names.map((name) => name.split('/'));
  const kept = parts.map((p) => new Set([0, p.length - 1]));  // the top scope (gradients, replica_1) says much
  const render = (i) => {
    const p = parts[i], out = [];
    for (let k = 0; k < p.length; k++) {
      if (kept[i].has(k)) out.push(p[k]);
      else if (out[out.length - 1] !== ELLIPSIS) out.push(ELLIPSIS);
    }
    return out.join('/');
  };
  const firstDifference = (a, b) => {
    let k = 0;
    while (k < a.length && k < b.length && a[k] === b[k]) k += 1;
    return k;
  };
  for (let round = 0; round < 64; round++) {
    // names that read alike now: sorted by the whole name, each keeps the first scope
    // where it differs from its neighbours among them
    const alike = new Map();
    names.forEach((name, i) => {
      const text = render(i);
      if (!alike.has(text)) alike.set(text, []);
      alike.get(text).push(i);
    });
    let changed = false;
    for (const members of alike.values()) {
      if (members.length < 2) continue;
      members.sort((a, b) => (names[a] < names[b] ? -1 : names[a] > names[b] ? 1 : 0));
      const votes = new Map();  // how many members a scope's place tells from a neighbour
      members.forEach((i, k) => {
        for (const j of [members[k - 1], members[k + 1]]) {
          if (j === undefined || names[j] === names[i]) continue;
          const at = Math.min(firstDifference(parts[i], parts[j]), parts[i].length - 1);
          let keep = at;
          while (keep < parts[i].length - 1 && kept[i].has(keep)) keep += 1;  // already shown: the next one
          if (!kept[i].has(keep)) { kept[i].add(keep); changed = true; }
          votes.set(keep, (votes.get(keep) || 0) + 1);
        }
      });
      // A place that tells many apart (the layer of 24 layers) is shown in all of them, also
      // where a neighbour differed elsewhere first: ``layer_9/self_attention`` keeps its layer.
      for (const [place, count] of votes) {
        if (3 * count < members.length) continue;
        for (const i of members) if (place < parts[i].length - 1 && !kept[i].has(place)) { kept[i].add(place); changed = true; }
      }
    }
    if (!changed) break;
  }
  return names.map((_, i) => render(i));
}

function niceStep(rough) {
  if (!(rough > 0) || !isFinite(rough)) return 1;
  const power = Math.pow(10, Math.floor(Math.log10(rough)));
  for (const m of [1, 2, 5, 10]) if (m * power >= rough) return m * power;
  return 10 * power;
}

// ---- where a step's time goes (analysis/run/breakdown.py): its parts, drawn in this order
const STEP_PARTS = ['ops', 'framework', 'input', 'compile', 'idle'];
const PART_TITLES = {
  ops: 'TF ops and kernels (device: kernels and copies)',
  framework: 'the framework between ops: tf.function calls and their dispatch, the executor, Keras',
  input: 'the step waiting for its input (tf.data, a dequeue)',
  compile: 'tracing a tf.function, XLA compiling',
  idle: 'no event: Python the profiler does not see, or waiting',
};

/** A row of the stacked bar of one run's median step: ``label``, one piece per part (its
 *  width ``parts[part] / scale`` of the bar, so that bars drawn to one scale compare), and
 *  the step's total. */
function partsBar(label, parts, total, scale) {
  const row = el('div', 'tb-parts-row');
  row.appendChild(el('span', 'tb-parts-label', label));
  const bar = el('div', 'tb-parts-bar');
  for (const part of STEP_PARTS) {
    const ns = Math.max(Number(parts[part]) || 0, 0);
    if (!ns || !(scale > 0)) continue;
    const piece = el('span', 'tb-part tb-part-' + part);
    piece.style.width = (100 * ns / scale).toFixed(3) + '%';
    piece.title = `${part}: ${fmtShort(ns)}, ${(100 * ns / (total || ns)).toFixed(1)}% of the step \u00b7 ${PART_TITLES[part]}`;
    if (ns / scale >= 0.09) piece.textContent = `${part} ${fmtShort(ns)}`;
    bar.appendChild(piece);
  }
  row.appendChild(bar);
  row.appendChild(el('span', 'tb-parts-total', fmtShort(total || 0)));
  return row;
}

/** The colours of the parts, named. */
function partsLegend() {
  const legend = el('div', 'tb-parts-legend');
  for (const part of STEP_PARTS) {
    const item = el('span', 'tb-parts-key');
    item.appendChild(el('span', 'tb-part-swatch tb-part-' + part));
    item.appendChild(document.createTextNode(part));
    item.title = PART_TITLES[part];
    legend.appendChild(item);
  }
  return legend;
}
