/* The page's header: title, search box, match count, step selector, zoom and panel buttons. */

class Toolbar {
  /** The header of ``page`` (appended to its app), titled ``title``; the step selector is
   *  empty until setSteps. */
  constructor(page, title) {
    this.page = page;
    const bar = el('header', 'tb-bar');
    this.bar = bar;
    const heading = el('h1', 'tb-title', title);
    heading.title = title;
    document.title = title;
    bar.appendChild(heading);
    this.searchBox = searchField('tb-search', 'Search name or op type', 'Search ops by name or op type',
                                 (value) => page.search(value));
    this.searchBox.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') { this.searchBox.cancelPending(); page.search(this.searchBox.value); page.nextMatch(); }
      if (e.key === 'Escape') { this.searchBox.value = ''; page.clearHighlight(); this.searchBox.blur(); }
    });
    bar.appendChild(this.searchBox);
    this.countLabel = el('span', 'tb-count', '');
    this.countLabel.setAttribute('aria-live', 'polite');
    bar.appendChild(this.countLabel);
    this.stepSelect = el('select', 'tb-steps');
    this.stepSelect.setAttribute('aria-label', 'Zoom to step');
    this.pickStep = null;
    this.stepSelect.addEventListener('change', () => {
      const value = this.stepSelect.value;
      if (value === '') page.resetZoom();
      else if (this.pickStep) this.pickStep(Number(value));
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
    button('Reset', () => page.resetZoom(), 'Show everything (0)');
    button('Collapse all', () => page.collapseAll(true));
    button('Expand all', () => page.collapseAll(false));
    const help = bar.appendChild(el('span', 'tb-help', 'W/S zoom \u00b7 A/D pan \u00b7 wheel zoom \u00b7 drag pan \u00b7 click: details \u00b7 Esc clears'));
    help.title = help.textContent;
    page.app.appendChild(bar);
  }

  /** Fill the step selector: ``all`` (the first option, value '') shows everything;
   *  ``choices`` are [number, text] pairs; picking one calls ``pick(number)``. */
  setSteps(all, choices, pick) {
    const first = el('option', null, all);
    first.value = '';
    this.stepSelect.appendChild(first);
    for (const [number, text] of choices) {
      const option = el('option', null, text);
      option.value = String(number);
      this.stepSelect.appendChild(option);
    }
    this.pickStep = pick;
  }

  /** Show step choice ``number`` as selected (null: all steps). */
  showStep(number) { this.stepSelect.value = number === null ? '' : String(number); }

  /** The line next to the search box (match and highlight counts). */
  say(text) { this.countLabel.textContent = text; }
}
