import { execFileSync, spawn, spawnSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach } from "vitest";
import { Worker } from "../crash/crash-harness.js";
import { scratchDir as runScratchDir } from "../scratch.js";

/**
 * Real executor processes (test/fixtures/fault-worker.mjs) driven over stdin while a test injects a
 * fault into their database, and an append-only ledger of step effects outside the database.
 */

const WORKER = fileURLToPath(new URL("../fixtures/fault-worker.mjs", import.meta.url));

export interface FaultWorkerOptions {
  database: string;
  ledger: string;
  prefix: string;
  runs?: number;
  steps?: number;
  stepMs?: number;
  /** Bytes each step's output carries on top of its number (distinct per step). */
  stepBytes?: number;
  pollMs?: number;
  leaseMs?: number;
  maxRecovery?: number;
  poison?: string;
  /** Run the worker under this command (e.g. `unshare --pid --fork`). */
  wrapper?: string[];
}

export class FaultWorker extends Worker {
  constructor(
    private readonly input: NodeJS.WritableStream,
    child: ConstructorParameters<typeof Worker>[0],
  ) {
    super(child);
  }

  send(command: string): void {
    this.input.write(`${command}\n`);
  }

  /** The outcomes reported for runs whose id starts with `prefix`, waiting until there are `count`. */
  async results(prefix: string, count: number, timeoutMs: number): Promise<Map<string, string>> {
    const pattern = new RegExp(`^result ${prefix}\\S* `);
    await this.count(pattern, count, timeoutMs);
    const results = new Map<string, string>();
    for (const line of this.lines.filter((l) => pattern.test(l))) {
      const [, id, ...rest] = line.split(" ");
      results.set(id!, rest.join(" "));
    }
    return results;
  }

  /** Sends `shutdown`; resolves with how long `cairn.shutdown()` took, as the worker measured it. */
  async shutdown(timeoutMs = 20_000): Promise<number> {
    this.send("shutdown");
    return Number((await this.line(/^shutdown-ms (\d+)$/, timeoutMs))[1]);
  }
}

export function faultWorkers() {
  const alive: FaultWorker[] = [];
  afterEach(async () => {
    await Promise.all(alive.splice(0).map((w) => w.kill()));
  });
  return {
    spawn(options: FaultWorkerOptions): FaultWorker {
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        DB: options.database,
        LEDGER: options.ledger,
        PREFIX: options.prefix,
        RUNS: String(options.runs ?? 10),
        STEPS: String(options.steps ?? 40),
        STEP_MS: String(options.stepMs ?? 10),
        POLL_MS: String(options.pollMs ?? 50),
      };
      if (options.stepBytes !== undefined) env.STEP_BYTES = String(options.stepBytes);
      if (options.leaseMs !== undefined) env.LEASE_MS = String(options.leaseMs);
      if (options.maxRecovery !== undefined) env.MAX_RECOVERY = String(options.maxRecovery);
      if (options.poison !== undefined) env.POISON = options.poison;
      const [command, ...args] = [...(options.wrapper ?? []), process.execPath, WORKER];
      const child = spawn(command!, args, { env, stdio: ["pipe", "pipe", "pipe"] });
      const worker = new FaultWorker(child.stdin!, child);
      alive.push(worker);
      return worker;
    },
  };
}

export interface LedgerLine {
  at: number;
  runId: string;
  seq: number;
  pid: number;
}

export function readFaultLedger(path: string): LedgerLine[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => {
      const [at, runId, seq, pid] = line.split(" ");
      return { at: Number(at), runId: runId!, seq: Number(seq), pid: Number(pid) };
    });
}

/** Per run: how many of its steps' effects ran more than once (extra executions, summed). */
export function doubledSteps(ledger: LedgerLine[], runIdPrefix: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const line of ledger) {
    if (!line.runId.startsWith(runIdPrefix)) continue;
    const key = `${line.runId} ${line.seq}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  const doubled = new Map<string, number>();
  for (const [key, count] of counts) {
    const runId = key.split(" ")[0]!;
    doubled.set(runId, (doubled.get(runId) ?? 0) + (count - 1));
  }
  return doubled;
}

export function sum(values: Iterable<number>): number {
  let total = 0;
  for (const value of values) total += value;
  return total;
}

export function scratchDir(label: string): string {
  return runScratchDir(`cairn-fault-${label.replace(/[^a-z0-9]+/gi, "-")}-`);
}

// ---- a PostgreSQL cluster of the test's own --------------------------------------------------

const PG_BIN = process.env.CAIRN_PG_BIN ?? "/usr/lib/postgresql/15/bin";

export interface ScratchCluster {
  url: string;
  /** `pg_ctl restart -m <mode>`: every session ends; the server is back when this returns. */
  restart(mode: "fast" | "immediate"): void;
  /**
   * `pg_ctl stop -m immediate` (synchronously): the server's processes exit at once and the WAL
   * still in its buffers is gone — the stand-in for a power loss of the server. `start()` brings it
   * back (crash recovery from the WAL that reached the files).
   */
  crash(): void;
  start(): void;
  /** One statement through psql (synchronously): its rows, tab-separated, one line each. */
  psql(sql: string): string[];
  stop(): void;
}

/** Why a scratch cluster cannot be made here, or undefined when it can. */
export function noScratchCluster(): string | undefined {
  const initdb = join(PG_BIN, "initdb");
  return existsSync(initdb) ? undefined : `no initdb at ${initdb} (set CAIRN_PG_BIN)`;
}

/**
 * Starts a throwaway PostgreSQL cluster on loopback (initdb into a temporary folder, as the postgres
 * OS user when this runs as root, which initdb refuses to be). It is stopped by `stop()`, or when
 * the test process exits. Its port is drawn at random below Linux's ephemeral range (32768–60999
 * here: a port inside it can be held at that moment by any outgoing connection's local end — CI
 * lost a run to that with port 55434), and drawn again when the server cannot bind it: fixed
 * ports made two test runs on one machine take each other's clusters. A restart keeps the port.
 */
export function startScratchCluster(serverOptions = ""): ScratchCluster {
  const root = mkdtempSync(join(tmpdir(), "cairn-pg-"));
  const data = join(root, "data");
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
    chownSync(root, uid, gid);
    chmodSync(root, 0o700);
  }
  const run = (binary: string, args: string[]): void => {
    const [command, all] = asRoot ? ["runuser", ["-u", "postgres", "--", join(PG_BIN, binary), ...args]] : [join(PG_BIN, binary), args];
    const result = spawnSync(command as string, all as string[], { encoding: "utf8", timeout: 60_000 });
    if (result.status !== 0) throw new Error(`${binary} ${args.join(" ")} failed: ${result.stderr || result.stdout}`);
  };
  run("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]);
  const log = join(root, "log");
  let port = 0;
  let options = "";
  const start = (): void => run("pg_ctl", ["-D", data, "-o", options, "-l", log, "-w", "-t", "30", "start"]);
  for (let attempt = 1; ; attempt++) {
    port = 20_000 + Math.floor(Math.random() * 12_000);
    options = `-p ${port} -k ${root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100 ${serverOptions}`;
    try {
      start();
      break;
    } catch (error) {
      const taken = existsSync(log) && /could not bind|Address already in use/.test(readFileSync(log, "utf8"));
      if (!taken || attempt === 10) throw error;
    }
  }
  let stopped = false;
  const stop = (): void => {
    if (stopped) return;
    stopped = true;
    try {
      run("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  };
  process.once("exit", stop);
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    restart(mode) {
      run("pg_ctl", ["-D", data, "-m", mode, "-l", log, "-w", "-t", "30", "restart"]);
    },
    crash() {
      run("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]);
    },
    start,
    psql(sql) {
      const result = spawnSync(join(PG_BIN, "psql"), ["-X", "-A", "-t", "-F", "\t", "-h", "127.0.0.1", "-p", String(port), "-U", "postgres", "-c", sql], {
        encoding: "utf8",
        timeout: 30_000,
      });
      if (result.status !== 0) throw new Error(`psql failed: ${result.stderr || result.stdout}`);
      return result.stdout.split("\n").filter((line) => line !== "");
    },
    stop,
  };
}
