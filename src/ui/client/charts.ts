import { h, svg } from "./dom.js";

/** A horizontal bar chart as inline SVG: one bar per item, labelled with its key and value. */
export function barChart(items: { key: string; value: number; label: string }[], options: { width?: number } = {}): Element {
  if (items.length === 0) return h("p", { class: "muted" }, "No model calls yet.");
  const width = options.width ?? 460;
  const labelWidth = 130;
  const valueWidth = 90;
  const row = 22;
  const max = Math.max(...items.map((i) => i.value), Number.MIN_VALUE);
  const bars = items.map((item, i) => {
    const w = Math.max(1, ((width - labelWidth - valueWidth) * item.value) / max);
    const y = i * row;
    return svg(
      "g",
      {},
      svg("text", { x: 0, y: y + 15 }, item.key.length > 20 ? `${item.key.slice(0, 19)}…` : item.key),
      svg("rect", { x: labelWidth, y: y + 4, width: w, height: 14, rx: 2, fill: "#2f6fdd" }),
      svg("text", { x: labelWidth + w + 6, y: y + 15 }, item.label),
    );
  });
  return svg("svg", { class: "bars", width, height: items.length * row + 4, role: "img" }, ...bars);
}

/** A column chart by day as inline SVG. */
export function dayChart(items: { key: string; value: number; label: string }[]): Element {
  if (items.length === 0) return h("p", { class: "muted" }, "No model calls yet.");
  const height = 160;
  const col = Math.max(14, Math.min(48, Math.floor(600 / items.length)));
  const max = Math.max(...items.map((i) => i.value), Number.MIN_VALUE);
  const cols = items.map((item, i) => {
    const hgt = Math.max(1, ((height - 40) * item.value) / max);
    const x = i * col;
    return svg(
      "g",
      {},
      svg("rect", { x: x + 2, y: height - 20 - hgt, width: col - 4, height: hgt, rx: 2, fill: "#7a5af8" }, svg("title", {}, `${item.key}: ${item.label}`)),
      svg("text", { x: x + 2, y: height - 6 }, item.key.slice(5)),
    );
  });
  return svg("svg", { class: "bars", width: Math.max(200, items.length * col), height, role: "img" }, ...cols);
}
