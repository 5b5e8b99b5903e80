/**
 * chart.svg: one bar group per metric, one bar per arm. Metrics have different units, so each
 * group is scaled to its own largest value and every bar is labelled with its figure.
 */

import type { ArmResult } from "../metrics.js";
import type { ExperimentResults } from "../results.js";
import { compact } from "./columns.js";

interface Metric {
  title: string;
  /** "lower is better" or "higher is better", under the title. */
  better: "lower" | "higher";
  value: (r: ArmResult) => number;
  label: (value: number) => string;
}

const METRICS: readonly Metric[] = [
  { title: "completed", better: "higher", value: (r) => r.completionRate * 100, label: (v) => `${Math.round(v)}%` },
  { title: "recovered", better: "higher", value: (r) => r.recoveryRate * 100, label: (v) => `${Math.round(v)}%` },
  { title: "dup. side effects", better: "lower", value: (r) => r.duplicateSideEffects, label: (v) => String(v) },
  { title: "rep. model calls", better: "lower", value: (r) => r.repeatedModelCalls, label: (v) => String(v) },
  { title: "rep. tool calls", better: "lower", value: (r) => r.repeatedToolCalls, label: (v) => String(v) },
  { title: "tokens", better: "lower", value: (r) => r.tokens, label: compact },
  { title: "cost ($)", better: "lower", value: (r) => r.costUsd, label: (v) => v.toFixed(3) },
  { title: "p50 overhead (ms)", better: "lower", value: (r) => r.p50OverheadMs, label: (v) => v.toFixed(1) },
  { title: "p99 overhead (ms)", better: "lower", value: (r) => r.p99OverheadMs, label: (v) => v.toFixed(1) },
  { title: "tasks/min", better: "higher", value: (r) => r.throughputTasksPerMin, label: (v) => v.toFixed(0) },
  { title: "diagnose (ms)", better: "lower", value: (r) => r.diagnoseMs, label: (v) => v.toFixed(1) },
  { title: "reproducible", better: "higher", value: (r) => (r.reproducible ? 1 : 0), label: (v) => (v === 1 ? "yes" : "no") },
];

const COLORS: Readonly<Record<string, string>> = {
  conventional: "#9a9a9a",
  langgraph: "#e08a2c",
  "cairn-sqlite": "#2f7ed8",
  "cairn-postgres": "#1b4f91",
};

const BAR = 14;
const GAP = 4;
const GROUP_GAP = 26;
const PLOT_HEIGHT = 150;
const TOP = 95;
const LEFT = 20;

export function renderChart(results: ExperimentResults): string {
  const arms = results.arms;
  const groupWidth = Math.max(1, arms.length) * (BAR + GAP) - GAP;
  const width = LEFT * 2 + METRICS.length * (groupWidth + GROUP_GAP);
  const baseY = TOP + PLOT_HEIGHT;
  const height = baseY + 60;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, sans-serif">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${LEFT}" y="22" font-size="14" font-weight="bold">${escape(`Fault-injection experiment: ${results.settings.tasks} tasks, ${results.faults.length} faults, seed ${results.seed}`)}</text>`,
  ];
  let legendX = LEFT;
  for (const r of arms) {
    parts.push(`<rect x="${legendX}" y="34" width="10" height="10" fill="${COLORS[r.arm] ?? "#555"}"/>`);
    parts.push(`<text x="${legendX + 14}" y="43" font-size="11">${escape(r.arm)}</text>`);
    legendX += 24 + r.arm.length * 6.5;
  }
  parts.push(`<line x1="${LEFT}" y1="${baseY}" x2="${width - LEFT}" y2="${baseY}" stroke="#444" stroke-width="1"/>`);
  METRICS.forEach((metric, m) => {
    const x0 = LEFT + m * (groupWidth + GROUP_GAP);
    const values = arms.map((r) => metric.value(r));
    const max = Math.max(0, ...values);
    values.forEach((value, a) => {
      const h = max <= 0 ? 0 : Math.max(0, (value / max) * PLOT_HEIGHT);
      const x = x0 + a * (BAR + GAP);
      const fill = COLORS[arms[a]!.arm] ?? "#555";
      if (h > 0) parts.push(`<rect x="${x}" y="${(baseY - h).toFixed(1)}" width="${BAR}" height="${h.toFixed(1)}" fill="${fill}"/>`);
      const labelY = baseY - h - 4;
      parts.push(
        `<text x="${x + BAR / 2}" y="${labelY.toFixed(1)}" font-size="9" text-anchor="start" transform="rotate(-90 ${x + BAR / 2} ${labelY.toFixed(1)})" dominant-baseline="middle">${escape(metric.label(value))}</text>`,
      );
    });
    const cx = x0 + groupWidth / 2;
    parts.push(`<text x="${cx}" y="${baseY + 16}" font-size="10" text-anchor="middle">${escape(metric.title)}</text>`);
    parts.push(`<text x="${cx}" y="${baseY + 29}" font-size="9" fill="#777" text-anchor="middle">${metric.better} is better</text>`);
  });
  parts.push("</svg>");
  return `${parts.join("\n")}\n`;
}

function escape(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}
