import { readFileSync, readdirSync } from "node:fs";

/**
 * The isolated-step processes a process has started, read from /proc (Linux): pids whose parent is
 * `parent` and whose command line runs isolated-child.js. Used to prove that none outlives its pool.
 */
export function poolProcesses(parent: number = process.pid): number[] {
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    const stat = procStat(pid);
    if (stat === null || stat.ppid !== parent || stat.state === "Z") continue;
    if (commandLine(pid).includes("isolated-child.js")) found.push(pid);
  }
  return found.sort((a, b) => a - b);
}

/** Whether `pid` is a running process (a zombie waiting to be reaped counts as gone). */
export function alive(pid: number): boolean {
  const stat = procStat(pid);
  return stat !== null && stat.state !== "Z";
}

function procStat(pid: number): { state: string; ppid: number } | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")".
    const [state, ppid] = text.slice(text.lastIndexOf(")") + 2).split(" ");
    return { state: state!, ppid: Number(ppid) };
  } catch {
    return null;
  }
}

function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return "";
  }
}
