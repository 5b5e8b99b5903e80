import { appendFileSync } from "node:fs";
import type { storeOf } from "../../internal.js";
import { now } from "./system.js";

/**
 * A diagnostic for `bench:queues`: with BENCH_QUEUES_PROBE=<file>, each Cairn process of the bench
 * (executors and producer) appends one line per store call (its name, start and end, epoch ms) and
 * per wake-up heard, so a latency sample can be taken apart afterwards (tools/bench/queues/probe-report.ts).
 */
const FILE = process.env.BENCH_QUEUES_PROBE;

type Store = ReturnType<typeof storeOf>;

const METHODS = [
  "commit",
  "select",
  "execute",
  "getRun",
  "loadJournal",
  "claimRuns",
  "claimWith",
  "nextWakeAt",
  "lostRuns",
  "listExecutors",
  "liveBackendPids",
  "heartbeat",
  "removeDeadExecutors",
] as const;

let lines: string[] = [];

export function probing(): boolean {
  return FILE !== undefined;
}

export function probeEvent(who: string, what: string, start: number, end = start): void {
  if (FILE === undefined) return;
  lines.push(`${who}\t${what}\t${start.toFixed(3)}\t${end.toFixed(3)}`);
  if (lines.length >= 200) flushProbe();
}

export function flushProbe(): void {
  if (FILE === undefined || lines.length === 0) return;
  appendFileSync(FILE, lines.join("\n") + "\n");
  lines = [];
}

/** Wraps `store`'s calls (and, in an executor, its wake-ups) to log them as `who`. */
export function probeStore(store: Store, who: string, wakes = true): void {
  if (FILE === undefined) return;
  const target = store as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
  for (const method of METHODS) {
    const original = target[method]!.bind(store);
    target[method] = (...args: unknown[]) => {
      const start = now();
      const statement = args[0] as { name?: string } | string | undefined;
      const label =
        method === "select" || method === "execute"
          ? `${method}:${typeof statement === "string" ? statement.slice(0, 24) : (statement?.name ?? "?")}`
          : method;
      return original(...args).finally(() => probeEvent(who, label, start, now()));
    };
  }
  // Not in a producer: listening would open a session it otherwise never has.
  if (wakes) store.capabilities.wakeNotifications?.onWake(() => probeEvent(who, "wake", now()));
  process.on("exit", flushProbe);
}
