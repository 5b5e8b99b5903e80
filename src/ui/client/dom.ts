/** A small element builder: the pages build the DOM from data, never from HTML strings (no injection). */
type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | ((event: Event) => void) | undefined>;

export function h(tag: string, attrs: Attrs = {}, ...children: (Child | Child[])[]): HTMLElement {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (typeof value === "function") el.addEventListener(key.replace(/^on/, ""), value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export function svg(tag: string, attrs: Record<string, string | number> = {}, ...children: (Node | string)[]): SVGElement {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value));
  el.append(...children);
  return el;
}

export function status(value: string): HTMLElement {
  return h("span", { class: `status ${value}` }, value);
}

/** A value as indented JSON in a <pre>. */
export function json(value: unknown): HTMLElement {
  return h("pre", {}, typeof value === "string" ? value : JSON.stringify(value, null, 2));
}

export function time(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  // Local time, as `YYYY-MM-DD HH:MM:SS` (Sweden's locale writes dates that way).
  return new Date(ms).toLocaleString("sv-SE");
}

export function duration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export function usd(value: number): string {
  return value < 0.01 && value > 0 ? `$${value.toFixed(6)}` : `$${value.toFixed(4)}`;
}

export function link(href: string, text: string, attrs: Attrs = {}): HTMLElement {
  return h("a", { href, ...attrs }, text);
}

export function runLink(id: string): HTMLElement {
  return link(`#/run/${encodeURIComponent(id)}`, id, { class: "mono" });
}

/** Appends children to an element, skipping the absent ones (null, undefined, false). */
export function add(parent: Element, ...children: (Child | Child[])[]): void {
  for (const child of children.flat())
    if (child !== null && child !== undefined && child !== false) parent.append(child instanceof Node ? child : String(child));
}
