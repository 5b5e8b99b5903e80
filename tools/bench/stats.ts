/**
 * Summaries of timing samples, and the number formats the report prints. Durations are kept in
 * microseconds (`…Us`) because a durable step on a fast disk costs a few hundred of them.
 */

/** One timed loop: per-operation latencies and the wall time of the whole loop. */
export interface Timing {
  /** How many operations the loop did (steps, or rows). */
  operations: number;
  elapsedMs: number;
  /** Per-operation latency samples, in microseconds; may be empty when none were taken. */
  latenciesUs: number[];
}

export interface TimingSummary {
  operationsPerSecond: number;
  p50Us: number | null;
  p99Us: number | null;
}

export function summarize(timing: Timing): TimingSummary {
  const sorted = [...timing.latenciesUs].sort((a, b) => a - b);
  return {
    operationsPerSecond: timing.elapsedMs > 0 ? (timing.operations * 1000) / timing.elapsedMs : 0,
    p50Us: sorted.length === 0 ? null : percentile(sorted, 50),
    p99Us: sorted.length === 0 ? null : percentile(sorted, 99),
  };
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) throw new RangeError("percentile of no samples");
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

/** The median, or null for no values (a measurement that never ran). */
export function median(values: readonly (number | null)[]): number | null {
  const present = values.filter((v): v is number => v !== null).sort((a, b) => a - b);
  if (present.length === 0) return null;
  const mid = present.length >> 1;
  return present.length % 2 === 1 ? present[mid]! : (present[mid - 1]! + present[mid]!) / 2;
}

/**
 * A 95% bootstrap interval for `statistic(b) ÷ statistic(a)`: both sample sets resampled with
 * replacement `iterations` times, the ratio's 2.5th and 97.5th percentiles. For a tail percentile
 * from a shared, noisy machine, where one round's p99 of 1,000 samples rests on its ten slowest:
 * an interval that contains 1 says the two arms cannot be told apart by this run. Seeded
 * (mulberry32), so a report can be recomputed.
 */
export function bootstrapRatioInterval(
  a: readonly number[],
  b: readonly number[],
  statistic: (sorted: readonly number[]) => number,
  iterations = 1000,
  seed = 1,
): { low: number; high: number } | null {
  if (a.length === 0 || b.length === 0) return null;
  let state = seed >>> 0;
  const random = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const resampled = (values: readonly number[]): number => {
    const draw = Array.from({ length: values.length }, () => values[Math.floor(random() * values.length)]!);
    return statistic(draw.sort((x, y) => x - y));
  };
  const ratios = Array.from({ length: iterations }, () => resampled(b) / resampled(a)).sort((x, y) => x - y);
  return { low: percentile(ratios, 2.5), high: percentile(ratios, 97.5) };
}

/** The medians, field by field, of a list of summaries from repeated rounds. */
export function medianSummary(rounds: readonly TimingSummary[]): TimingSummary {
  return {
    operationsPerSecond: median(rounds.map((r) => r.operationsPerSecond)) ?? 0,
    p50Us: median(rounds.map((r) => r.p50Us)),
    p99Us: median(rounds.map((r) => r.p99Us)),
  };
}

export function formatCount(value: number | null): string {
  return value === null ? "—" : Math.round(value).toLocaleString("en-US");
}

export function formatMicros(value: number | null): string {
  return value === null ? "—" : value.toFixed(1);
}

/** Truncated, not rounded: a ratio just under a goal (0.797) must not print as the goal (0.80). */
export function formatRatio(value: number | null): string {
  return value === null ? "—" : `${(Math.floor(value * 100) / 100).toFixed(2)}×`;
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(2)} MB`;
}

/** A plain-text table: the first row is the header; numeric-looking cells are right-aligned. */
export function renderTable(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  const line = (row: readonly string[]): string =>
    row
      .map((cell, i) => (/^[\d,.—×≥µ%+ -]+$/.test(cell) && i > 0 ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd();
  const [header, ...body] = rows;
  if (header === undefined) return "";
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...body.map(line)].join("\n");
}
