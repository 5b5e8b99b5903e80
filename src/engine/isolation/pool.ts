import { fork, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { CairnError, InvalidSpecError } from "../../errors.js";
import { crashError } from "./crash.js";
import type { ChildMessage, RunMessage } from "./protocol.js";
import { ExitSeen, RSS_HEADROOM_MB, type IsolatedTask } from "./task.js";

export type { IsolatedTask } from "./task.js";

export interface IsolationPoolOptions {
  /**
   * How many isolated processes may exist at once (default 2). They are started on first use and
   * kept warm; an isolated step that finds all of them busy waits for one (its `timeoutMs` counts
   * the wait). Processes differ by `maxMemoryMb` (a heap limit is fixed when a process starts), so a
   * step needing another limit than the idle ones replaces an idle one.
   */
  poolSize?: number;
  /**
   * Node flags for the pool's processes, which do not inherit this process's: `["--import", "tsx"]`
   * to load TypeScript modules on a Node that cannot, say. Default none.
   */
  execArgv?: string[];
}

/**
 * The warm pool of isolated-step processes of one Cairn instance (scheduler/runtime.ts makes it,
 * empty; `shutdown` closes it).
 *
 * Failure semantics: a process that dies while it runs a task — out of memory, a signal, an exit,
 * an exception thrown asynchronously — fails that task alone with an IsolatedStepCrashedError, and
 * the pool starts a replacement at once, so the next isolated step finds a warm process. A task
 * whose signal aborts (its timeout, a cancel of its run, the executor letting the run go) has its
 * process killed with SIGKILL and replaced: the step's code is stopped for sure, which an
 * in-process step can never promise. Nothing here is durable; the step's outcome is journaled by
 * the parent like any step's, so replay never runs it again. `close()` kills every process; a
 * process whose executor dies without closing (SIGKILL) exits by itself (isolated-child.ts).
 */
export class IsolationPool {
  private readonly size: number;
  private readonly execArgv: string[];
  private readonly idle: PooledProcess[] = [];
  private readonly all = new Set<PooledProcess>();
  /** Tasks waiting for a process, first come first served; `null` means the pool closed. */
  private readonly waiting: { task: IsolatedTask; take: (p: PooledProcess | null) => void }[] = [];
  private closed = false;

  constructor(options: IsolationPoolOptions = {}) {
    const size = options.poolSize ?? 2;
    if (!Number.isInteger(size) || size < 1) throw new InvalidSpecError("isolation.poolSize", size, "must be an integer ≥ 1");
    this.size = size;
    const execArgv = options.execArgv ?? [];
    if (!Array.isArray(execArgv) || !execArgv.every((flag) => typeof flag === "string")) {
      throw new InvalidSpecError("isolation.execArgv", execArgv, "must be an array of strings (Node flags)");
    }
    this.execArgv = [...execArgv];
  }

  /** Runs `task` in a pool process; `signal` aborting kills the process and rejects with its reason. */
  async run(task: IsolatedTask, signal: AbortSignal): Promise<ChildMessage & { type: "result" }> {
    if (this.closed) throw new CairnError(`the isolation pool is shut down: ${task.where} cannot run`, { runId: task.runId, seq: task.seq });
    signal.throwIfAborted();
    const member = await this.acquire(task, signal);
    try {
      return await member.run(task, signal);
    } finally {
      this.release(member);
    }
  }

  /** Kills every process (SIGKILL) and waits until each has exited. */
  async close(): Promise<void> {
    this.closed = true;
    for (const waiter of this.waiting.splice(0)) waiter.take(null);
    await Promise.all([...this.all].map((p) => p.kill()));
  }

  private acquire(task: IsolatedTask, signal: AbortSignal): Promise<PooledProcess> {
    const found = this.take(task.maxMemoryMb);
    if (found !== null) return Promise.resolve(found);
    return new Promise<PooledProcess>((resolve, reject) => {
      const waiter = {
        task,
        take: (p: PooledProcess | null) => {
          signal.removeEventListener("abort", onAbort);
          if (p === null) reject(new CairnError(`the isolation pool shut down while ${task.where} waited for a process`));
          else resolve(p);
        },
      };
      const onAbort = () => {
        const at = this.waiting.indexOf(waiter);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  /** An idle process with this heap limit, a new one if there is room, or an idle one of another limit replaced. */
  private take(maxMemoryMb: number | undefined): PooledProcess | null {
    const at = this.idle.findIndex((p) => p.maxMemoryMb === maxMemoryMb);
    if (at >= 0) return this.idle.splice(at, 1)[0]!;
    if (this.liveCount() < this.size) return this.spawn(maxMemoryMb);
    const other = this.idle.shift();
    if (other === undefined) return null;
    void other.kill();
    return this.spawn(maxMemoryMb);
  }

  /** Processes not on their way out (a killed one leaves `all` only when it has exited). */
  private liveCount(): number {
    let count = 0;
    for (const p of this.all) if (!p.dying) count++;
    return count;
  }

  private spawn(maxMemoryMb: number | undefined): PooledProcess {
    const member = new PooledProcess(maxMemoryMb, this.execArgv, () => this.exited(member));
    this.all.add(member);
    return member;
  }

  private release(member: PooledProcess): void {
    if (member.dying) return;
    if (this.closed) {
      void member.kill();
      return;
    }
    const at = this.waiting.findIndex((w) => w.task.maxMemoryMb === member.maxMemoryMb);
    if (at >= 0) return this.waiting.splice(at, 1)[0]!.take(member);
    if (this.waiting.length > 0) {
      // Every waiter needs another heap limit: this process makes room for one of them.
      const waiter = this.waiting.shift()!;
      void member.kill();
      return waiter.take(this.spawn(waiter.task.maxMemoryMb));
    }
    member.idleNow();
    this.idle.push(member);
  }

  /** A process is gone (crashed, killed, closed): keep the pool warm and serve a waiter. */
  private exited(member: PooledProcess): void {
    this.all.delete(member);
    const at = this.idle.indexOf(member);
    if (at >= 0) this.idle.splice(at, 1);
    if (this.closed) return;
    if (this.liveCount() >= this.size) return;
    const waiter = this.waiting.shift();
    if (waiter !== undefined) return waiter.take(this.spawn(waiter.task.maxMemoryMb));
    // A crashed or killed process is replaced at once, so the next isolated step finds one warm
    // (not one that died before it was ever ready: that would only spin).
    if (member.replace && member.wasReady) {
      const fresh = this.spawn(member.maxMemoryMb);
      fresh.idleNow();
      this.idle.push(fresh);
    }
  }
}

/** How much of a process's stderr a crash report keeps. */
const STDERR_TAIL = 4_000;

/** One pool process: at most one task at a time. */
class PooledProcess {
  readonly child: ChildProcess;
  /** Being killed or gone: never handed out again. */
  dying = false;
  /** Whether its end should be made good by a fresh process (false when the pool killed it to make room or close). */
  replace = true;
  /** It came up once: a process that dies at start is not replaced in a loop. */
  wasReady = false;
  private readonly ready: Promise<void>;
  private readonly gone: Promise<void>;
  private stderr = "";
  private uncaught: string | null = null;
  private current: { id: number; settle: (m: (ChildMessage & { type: "result" }) | Error) => void } | null = null;
  private nextId = 1;

  constructor(
    readonly maxMemoryMb: number | undefined,
    execArgv: string[],
    onGone: () => void,
  ) {
    this.child = fork(childEntry(), [], {
      execArgv: maxMemoryMb === undefined ? execArgv : [...execArgv, `--max-old-space-size=${maxMemoryMb}`],
      env: {
        ...process.env,
        CAIRN_ISOLATED_PROCESS: "1",
        CAIRN_ISOLATED_RSS_LIMIT_MB: maxMemoryMb === undefined ? "0" : String(maxMemoryMb + RSS_HEADROOM_MB),
      },
      stdio: ["ignore", "inherit", "pipe", "ipc"],
      serialization: "json",
    });
    this.child.stderr!.setEncoding("utf8");
    this.child.stderr!.on("data", (chunk: string) => {
      process.stderr.write(chunk);
      this.stderr = (this.stderr + chunk).slice(-STDERR_TAIL);
    });
    let readied: () => void;
    this.ready = new Promise((resolve) => (readied = resolve));
    this.child.on("message", (message: ChildMessage) => {
      if (message.type === "ready") {
        this.wasReady = true;
        readied();
      } else if (message.type === "uncaught") this.uncaught = message.error;
      else if (message.type === "result" && this.current?.id === message.id) this.current.settle(message);
    });
    this.child.on("error", () => undefined); // a failed spawn or send also ends in "close"
    // "close", not "exit": by then stderr has been read to its end (V8's out-of-memory report).
    this.gone = new Promise((resolve) =>
      this.child.once("close", (code, signal) => {
        this.dying = true;
        readied();
        this.current?.settle(new ExitSeen(code, signal, this.stderr, this.uncaught, this.child.pid ?? null));
        resolve();
        onGone();
      }),
    );
  }

  async run(task: IsolatedTask, signal: AbortSignal): Promise<ChildMessage & { type: "result" }> {
    this.busyNow();
    const id = this.nextId++;
    const outcome = await new Promise<(ChildMessage & { type: "result" }) | Error>((resolve) => {
      const onAbort = () => {
        // Stopped from outside (the attempt's timeout, a cancel): the code is stopped by killing it.
        this.replace = true;
        void this.kill(true);
        resolve(signal.reason instanceof Error ? signal.reason : new CairnError(String(signal.reason)));
      };
      this.current = {
        id,
        settle: (m) => {
          signal.removeEventListener("abort", onAbort);
          this.current = null;
          resolve(m);
        },
      };
      signal.addEventListener("abort", onAbort, { once: true });
      void this.ready.then(() => {
        if (this.current?.id !== id || this.dying) return;
        const message: RunMessage = {
          type: "run",
          id,
          module: task.module,
          exportName: task.exportName,
          input: task.input,
          idempotencyKey: task.idempotencyKey,
          attempt: task.attempt,
          where: task.where,
        };
        this.child.send(message);
      });
    });
    if (outcome instanceof ExitSeen) throw crashError(task, outcome);
    if (outcome instanceof Error) throw outcome;
    return outcome;
  }

  /** SIGKILL; resolves once the process is gone. */
  kill(replace = false): Promise<void> {
    this.replace = replace;
    this.dying = true;
    this.busyNow(); // whoever waits for the exit must keep the event loop alive until it comes
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGKILL");
    return this.gone;
  }

  /** An idle process must not keep the application's event loop alive. */
  idleNow(): void {
    this.child.unref();
    this.child.channel?.unref();
    (this.child.stderr as unknown as { unref?: () => void }).unref?.();
  }

  private busyNow(): void {
    this.child.ref();
    this.child.channel?.ref();
    (this.child.stderr as unknown as { ref?: () => void }).ref?.();
  }
}

/**
 * The compiled child program beside this file. Running from the TypeScript sources (the tests,
 * through vitest), there is no .js here: the build's copy in dist/ is the one a process can start.
 */
function childEntry(): string {
  const here = fileURLToPath(new URL("./isolated-child.js", import.meta.url));
  if (existsSync(here)) return here;
  const built = here.replace(/([/\\])src([/\\]engine[/\\]isolation[/\\])/, "$1dist$2");
  if (existsSync(built)) return built;
  throw new CairnError(`the isolated-step program is missing (${here}, ${built}): run \`npm run build\``);
}
