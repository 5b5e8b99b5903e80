import { readFileSync, readlinkSync } from "node:fs";

let cached: string | null | undefined;

/**
 * Where this process's pid means something: "<boot id>:<pid namespace>" on Linux (for example
 * "6f1c…:pid:[4026531836]"), null where neither can be read. Two executors on one hostname —
 * containers sharing a volume and a hostname, agent sandboxes — may live in different pid
 * namespaces, where "no process with that pid here" says nothing about the other's life; and a
 * machine that rebooted reuses pids. An executor checks a peer's pid only when both strings match.
 */
export function pidNamespace(): string | null {
  if (cached !== undefined) return cached;
  try {
    const bootId = readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
    const namespace = readlinkSync("/proc/self/ns/pid");
    cached = `${bootId}:${namespace}`;
  } catch {
    cached = null;
  }
  return cached;
}
