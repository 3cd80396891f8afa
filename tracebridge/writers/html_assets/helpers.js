/* Helpers every part of the page script uses: the layout both the timelines and the page
 * measure with, DOM building, block decoding, binary search, number formats, colours and
 * text fitting.
 *
 * Data from the trace is only ever put on the page with textContent (el) or canvas fillText.
 */

const ROW = 18;          // lane height (CSS px)
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
  // Rows of a table often share a long scope (``replica_1/model/dense_3/...`` against
  // ``replica_1/model/dense_4/...``): the scope a name shares with another row goes first
  // (``\u2026/dense_3/...``), so what tells rows apart stays; the full name is the title.
  const shared = sharedScopes(cells.map((cell) => cell.title));
  cells.forEach((cell, i) => {
    if (widths[i] <= 0) return;
    measureContext.font = getComputedStyle(cell).font;
    let shown = shared[i] ? '\u2026/' + cell.title.slice(shared[i]) : cell.title;
    if (measureContext.measureText(shown).width > widths[i]) {
      // still too long: whole scopes go from the middle, so the first that differs and the
      // op's own name stay (``\u2026/layer_2/\u2026/MatMul``), not half of each
      const parts = shown.split('/');
      if (parts.length > 3 || (parts.length > 2 && !shared[i])) {
        const first = shared[i] ? parts.slice(0, 2).join('/') : parts[0];
        const head = `${first}/\u2026/`, last = parts[parts.length - 1];
        const tail = fitText(measureContext, last, widths[i] - measureContext.measureText(head).width, 'end');
        shown = tail ? head + tail : `${first}/\u2026/${last}`;
      }
    }
    cell.textContent = fitText(measureContext, shown, widths[i], 'middle') || '\u2026';
  });
}

/** For each of ``names``, the length of the longest ``a/b/`` scope it shares with another
 *  name that is not the whole of it (0: none): its sorted neighbours share the most. */
function sharedScopes(names) {
  const order = names.map((_, i) => i).sort((a, b) => (names[a] < names[b] ? -1 : names[a] > names[b] ? 1 : 0));
  const scope = (a, b) => {
    let n = 0;
    while (n < a.length && n < b.length && a[n] === b[n]) n += 1;
    const cut = a.lastIndexOf('/', n - 1) + 1;
    return cut < a.length ? cut : 0;
  };
  const out = new Array(names.length).fill(0);
  for (let k = 0; k < order.length; k += 1) {
    const name = names[order[k]];
    const before = k > 0 ? scope(name, names[order[k - 1]]) : 0;
    const after = k + 1 < order.length ? scope(name, names[order[k + 1]]) : 0;
    out[order[k]] = Math.max(before, after);
  }
  // What is left must still tell rows apart (``layer_1/dense/MatMul`` and ``layer_2/dense/MatMul``
  // are not both ``.../MatMul``): a name whose rest another row shows too keeps one scope more.
  const whole = new Map();
  for (const name of names) whole.set(name, (whole.get(name) || 0) + 1);
  for (let round = 0; round < 32; round += 1) {
    const rests = new Map();
    names.forEach((name, i) => { const rest = name.slice(out[i]); rests.set(rest, (rests.get(rest) || 0) + 1); });
    let changed = false;
    names.forEach((name, i) => {
      if (out[i] && whole.get(name) === 1 && rests.get(name.slice(out[i])) > 1) {
        out[i] = name.lastIndexOf('/', out[i] - 2) + 1;
        changed = true;
      }
    });
    if (!changed) break;
  }
  return out;
}

function niceStep(rough) {
  if (!(rough > 0) || !isFinite(rough)) return 1;
  const power = Math.pow(10, Math.floor(Math.log10(rough)));
  for (const m of [1, 2, 5, 10]) if (m * power >= rough) return m * power;
  return 10 * power;
}
