// vlist.js - a virtualised list: rows of one fixed height, only the visible
// ones (and a few around them) in the DOM, so 100,000 rows scroll as 50 do.

const OVERSCAN = 8;

export class VList {
  // container: a scrollable element with a fixed height (CSS);
  // render(item, index, rowElement) fills a row (reused: set everything).
  constructor(container, rowHeight, render) {
    this.box = container;
    this.h = rowHeight;
    this.render = render;
    this.items = [];
    this.rows = new Map(); // index -> element
    this.pool = []; // hidden row elements, for reuse
    this.spacer = document.createElement('div');
    this.spacer.className = 'vspacer';
    this.box.append(this.spacer);
    this.pending = false;
    this.follow = false;
    this.selected = -1;
    this.box.addEventListener('scroll', () => this.schedule());
    new ResizeObserver(() => this.schedule()).observe(this.box);
  }

  setItems(items) {
    this.items = items;
    for (const r of this.rows.values()) {
      r.hidden = true;
      this.pool.push(r);
    }
    this.rows.clear();
    this.schedule();
  }

  // Rows appended at the end (the list follows them when asked and at the bottom).
  append(items) {
    const atEnd = this.box.scrollTop + this.box.clientHeight >= this.spacer.offsetHeight - this.h * 2;
    for (const x of items) this.items.push(x);
    this.stick = this.follow && atEnd;
    this.schedule();
  }

  // Redraw the visible rows (their data changed).
  refresh() {
    for (const [i, r] of this.rows) this.render(this.items[i], i, r);
  }

  schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.draw();
      if (this.onDrawn) this.onDrawn();
    });
  }

  scrollTo(i) {
    const top = i * this.h;
    if (top < this.box.scrollTop) this.box.scrollTop = top;
    else if (top + this.h > this.box.scrollTop + this.box.clientHeight)
      this.box.scrollTop = top + this.h - this.box.clientHeight;
    this.schedule();
  }

  draw() {
    this.spacer.style.height = this.items.length * this.h + 'px';
    if (this.stick) {
      this.box.scrollTop = this.items.length * this.h;
      this.stick = false;
    }
    const first = Math.max(0, Math.floor(this.box.scrollTop / this.h) - OVERSCAN);
    const last = Math.min(this.items.length, Math.ceil((this.box.scrollTop + this.box.clientHeight) / this.h) + OVERSCAN);
    // Rows that left the window are kept (hidden) and reused for those that enter it:
    // a fast scroll moves rows instead of making and dropping elements each frame.
    for (const [i, r] of this.rows) {
      if (i < first || i >= last) {
        r.hidden = true;
        this.pool.push(r);
        this.rows.delete(i);
      }
    }
    for (let i = first; i < last; i++) {
      let r = this.rows.get(i);
      if (!r) {
        r = this.pool.pop();
        if (!r) {
          r = document.createElement('div');
          this.box.append(r);
        }
        r.className = 'vrow';
        r.setAttribute('role', 'listitem');
        r.style.transform = `translateY(${i * this.h}px)`;
        this.render(this.items[i], i, r);
        r.hidden = false;
        this.rows.set(i, r);
      }
      r.classList.toggle('selected', i === this.selected);
    }
  }
}
