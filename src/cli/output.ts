import { jsonSafe, renderValue, truncate } from "../observe/json-values.js";
import { bold, dim, visibleLength } from "./style.js";

export { jsonSafe, renderValue, truncate };

/** Writes one line (or several) to stdout. */
export function print(text = ""): void {
  process.stdout.write(`${text}\n`);
}

/** `--json` output: one JSON document, with Cairn's stored types made JSON-safe (see `jsonSafe`). */
export function printJson(value: unknown): void {
  print(JSON.stringify(jsonSafe(value), null, 2));
}

export interface Column {
  header: string;
  /** Numbers read best right-aligned. Default "left". */
  align?: "left" | "right";
}

/** An aligned table: a header row, then one row per entry; cells are already strings. */
export function table(columns: readonly (Column | string)[], rows: readonly string[][]): string {
  return [...tableLines(columns, rows)].join("\n");
}

/**
 * The same table, written to stdout in chunks as it is built: a result of any size (140,000 rows)
 * prints without one giant string.
 */
export function printTable(columns: readonly (Column | string)[], rows: readonly string[][]): void {
  let chunk = "";
  for (const line of tableLines(columns, rows)) {
    chunk += `${line}\n`;
    if (chunk.length >= 65_536) {
      process.stdout.write(chunk);
      chunk = "";
    }
  }
  if (chunk !== "") process.stdout.write(chunk);
}

/** `--json` for a long list: one element per line group, written as it goes. */
export function printJsonArray(items: readonly unknown[]): void {
  if (items.length === 0) return print("[]");
  let chunk = "[\n";
  items.forEach((item, i) => {
    chunk += `  ${JSON.stringify(jsonSafe(item))}${i === items.length - 1 ? "" : ","}\n`;
    if (chunk.length >= 65_536) {
      process.stdout.write(chunk);
      chunk = "";
    }
  });
  process.stdout.write(`${chunk}]\n`);
}

function* tableLines(columns: readonly (Column | string)[], rows: readonly string[][]): Generator<string> {
  const cols = columns.map((c) => (typeof c === "string" ? { header: c } : c));
  // A loop, not Math.max(...cells): spreading 125,000+ arguments overflows the stack.
  const widths = cols.map((c) => c.header.length);
  for (const row of rows) {
    for (let i = 0; i < cols.length; i++) widths[i] = Math.max(widths[i]!, visibleLength(row[i] ?? ""));
  }
  const line = (cells: readonly string[], header: boolean): string =>
    cols
      .map((c, i) => {
        const cell = cells[i] ?? "";
        const pad = " ".repeat(widths[i]! - visibleLength(cell));
        const text = c.align === "right" ? pad + cell : i === cols.length - 1 ? cell : cell + pad;
        return header ? bold(text) : text;
      })
      .join("  ")
      .trimEnd();
  yield line(
    cols.map((c) => c.header),
    true,
  );
  for (const row of rows) yield line(row, false);
}

/** Local time, to the second: `2025-03-01 14:03:09`. */
export function formatTime(ms: number | null): string {
  if (ms === null) return "-";
  const d = new Date(ms);
  const two = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}

/** Local time of day with milliseconds: `14:03:09.120`. */
export function formatClock(ms: number): string {
  return `${formatTime(ms).slice(11)}.${String(new Date(ms).getMilliseconds()).padStart(3, "0")}`;
}

export function formatDuration(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) return "-";
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)}s`;
  const seconds = Math.round(ms / 1000);
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m${String(seconds % 60).padStart(2, "0")}s`;
  return `${Math.floor(seconds / 3600)}h${String(Math.floor((seconds % 3600) / 60)).padStart(2, "0")}m`;
}

/** A SQL result cell: NULL shown as such, everything else on one line. */
export function renderCell(value: unknown, max = 60): string {
  if (value === null || value === undefined) return dim("NULL");
  if (typeof value === "string") return truncate(value, max);
  return renderValue(value, max);
}
