import Database from "better-sqlite3";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach } from "vitest";
import { scratchDir } from "../scratch.js";

/**
 * Real worker processes for the crash tests: test/fixtures/crash-worker.mjs over the built
 * package, started on a database, killed with SIGKILL, started again. Every wait is bounded and
 * waits for something the worker says or writes, never for a fixed time.
 */

const WORKER = fileURLToPath(new URL("../fixtures/crash-worker.mjs", import.meta.url));

export interface RunToStart {
  workflow: "steps" | "sleeper" | "inbox" | "parent" | "txn" | "mixed";
  id: string;
  input: unknown;
}

export interface WorkerOptions {
  database: string;
  ledger: string;
  start?: RunToStart[];
  /** Runs to wait for and report; default: the ones in `start`. */
  await?: string[];
  /**
   * "<inside|between>@<runId>@<seq>": points where this worker stops and waits to be killed;
   * "slow@<runId>@<seq>": that step's effect takes 400 ms.
   */
  hang?: string[];
  /** The executor's lease; default Cairn's 15 s. */
  leaseMs?: number;
  /** Stay up (and keep claiming work) after reporting the awaited runs. */
  stay?: boolean;
}

export interface LedgerEntry {
  kind: "start" | "done";
  runId: string;
  seq: number;
  pid: number;
  key: string;
  note: string;
}

/** One worker process and what it printed so far. */
export class Worker {
  readonly lines: string[] = [];
  stderr = "";
  readonly exited: Promise<number | null>;
  private readonly waiters = new Set<() => void>();

  constructor(private readonly child: ChildProcess) {
    let buffered = "";
    child.stdout!.setEncoding("utf8");
    child.stdout!.on("data", (chunk: string) => {
      buffered += chunk;
      const parts = buffered.split("\n");
      buffered = parts.pop()!;
      this.lines.push(...parts);
      for (const wake of this.waiters) wake();
    });
    child.stderr!.setEncoding("utf8");
    child.stderr!.on("data", (chunk: string) => (this.stderr += chunk));
    this.exited = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
    void this.exited.then(() => {
      for (const wake of this.waiters) wake();
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** The first printed line (from the start) that matches, waiting up to `timeoutMs` for it. */
  async line(pattern: RegExp, timeoutMs = 10_000): Promise<RegExpMatchArray> {
    return this.until(
      () => {
        for (const line of this.lines) {
          const match = pattern.exec(line);
          if (match !== null) return match;
        }
        return undefined;
      },
      `a line matching ${pattern}`,
      timeoutMs,
    );
  }

  /** Waits until `count` printed lines match. */
  async count(pattern: RegExp, count: number, timeoutMs = 10_000): Promise<void> {
    const enough = (): true | undefined => (this.lines.filter((l) => pattern.test(l)).length >= count ? true : undefined);
    await this.until(enough, `${count} lines matching ${pattern}`, timeoutMs);
  }

  /** The time (ms since the epoch) in a `<marker> <ms>` line. */
  async time(marker: "boot" | "launched"): Promise<number> {
    return Number((await this.line(new RegExp(`^${marker} (\\d+)$`)))[1]);
  }

  /** The outcome printed for a run: status and the output (parsed JSON) or the error text. */
  async result(runId: string, timeoutMs = 15_000): Promise<{ status: string; value: unknown }> {
    const match = await this.line(new RegExp(`^result ${escape(runId)} (\\w+) (.*)$`), timeoutMs);
    const status = match[1]!;
    return { status, value: status === "succeeded" ? JSON.parse(match[2]!) : match[2] };
  }

  /** Waits for a clean exit after `all-done`. */
  async finished(timeoutMs = 15_000): Promise<void> {
    await this.line(/^all-done$/, timeoutMs);
    const code = await within(this.exited, timeoutMs, "the worker to exit");
    if (code !== 0) throw new Error(`worker exited with ${code}\n${this.stderr}`);
  }

  /** SIGSTOP: the process freezes (a long GC pause, a suspended VM) without dying. */
  pause(): void {
    this.child.kill("SIGSTOP");
  }

  resume(): void {
    this.child.kill("SIGCONT");
  }

  /** SIGKILL, and wait until the process is gone (reaped: its pid no longer answers). */
  async kill(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGKILL");
    await within(this.exited, 10_000, "the killed worker to exit");
  }

  private until<T>(check: () => T | undefined, what: string, timeoutMs: number): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const tick = (): void => {
        const value = check();
        if (value !== undefined) return done(() => resolve(value));
        if (this.child.exitCode !== null || this.child.signalCode !== null) {
          done(() => reject(new Error(`worker ${this.pid} exited before ${what}\n${this.tail()}`)));
        }
      };
      const timer = setTimeout(() => {
        done(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}\n${this.tail()}`)));
      }, timeoutMs);
      const done = (settle: () => void): void => {
        clearTimeout(timer);
        this.waiters.delete(tick);
        settle();
      };
      this.waiters.add(tick);
      tick();
    });
  }

  private tail(): string {
    return `--- stdout (last 20 lines) ---\n${this.lines.slice(-20).join("\n")}\n--- stderr ---\n${this.stderr}`;
  }
}

/** Starts workers and SIGKILLs any still alive after each test. */
export function workerFactory() {
  const alive: Worker[] = [];
  afterEach(async () => {
    await Promise.all(alive.splice(0).map((w) => w.kill()));
  });
  return {
    /** A fresh, empty ledger file path. */
    ledger(): string {
      return join(scratchDir("cairn-crash-"), "ledger.txt");
    },
    spawn(options: WorkerOptions): Worker {
      const env: NodeJS.ProcessEnv = { ...process.env, DB: options.database, LEDGER: options.ledger };
      if (options.start !== undefined) env.START = JSON.stringify(options.start);
      if (options.await !== undefined) env.AWAIT = JSON.stringify(options.await);
      if (options.hang !== undefined) env.HANG = options.hang.join(",");
      if (options.leaseMs !== undefined) env.LEASE_MS = String(options.leaseMs);
      if (options.stay === true) env.STAY = "1";
      const worker = new Worker(spawn(process.execPath, [WORKER], { env, stdio: ["ignore", "pipe", "pipe"] }));
      alive.push(worker);
      return worker;
    },
  };
}

export function readLedger(path: string): LedgerEntry[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => {
      const [kind, runId, seq, pid, key, ...note] = line.split(" ");
      const entry = { kind: kind as LedgerEntry["kind"], runId: runId!, seq: Number(seq), pid: Number(pid), key: key! };
      return { ...entry, note: note.join(" ") };
    });
}

/** How many ledger lines of `kind` there are per `runId seq`. */
export function tally(entries: LedgerEntry[], kind: LedgerEntry["kind"]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const e of entries) if (e.kind === kind) counts.set(`${e.runId} ${e.seq}`, (counts.get(`${e.runId} ${e.seq}`) ?? 0) + 1);
  return counts;
}

export { seededRandom } from "../../tools/util/random.js";

async function within<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * Whether SQLite's one write lock is free (no process, frozen or not, is inside a write): a
 * `BEGIN IMMEDIATE` that does not wait. Crash tests that freeze a worker use it to freeze it
 * between its commits.
 */
export function sqliteWriteLockIsFree(path: string): boolean {
  const probe = new Database(path, { timeout: 0 });
  try {
    probe.exec("BEGIN IMMEDIATE");
    probe.exec("ROLLBACK");
    return true;
  } catch (error) {
    if ((error as { code?: string }).code === "SQLITE_BUSY") return false;
    throw error;
  } finally {
    probe.close();
  }
}
