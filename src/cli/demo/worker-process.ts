import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { parseMarker, type Marker } from "./markers.js";

/**
 * One demo worker: a real child process (`node worker.js`) whose markers arrive through `onMarker`.
 * `kill()` sends SIGKILL — no handler runs, nothing is flushed — and resolves once the process is
 * reaped: only then is its pid gone, which is how the next executor tells it is dead.
 */
export class WorkerProcess {
  readonly pid: number;
  /** Resolves with the exit code, or the signal that ended the process. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private readonly child: ChildProcess;
  private stderr = "";
  private readonly waiters = new Set<(marker: Marker) => void>();

  constructor(
    readonly number: number,
    workerPath: string,
    /** Added to this process's environment (an undefined value removes a variable). */
    env: Record<string, string | undefined>,
    onMarker: (marker: Marker, worker: WorkerProcess) => void,
  ) {
    this.child = spawn(process.execPath, [workerPath], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...env, CAIRN_DEMO_WORKER: String(number) },
    });
    if (this.child.pid === undefined) throw new Error(`could not start ${workerPath} with ${process.execPath}`);
    this.pid = this.child.pid;
    this.exited = new Promise((resolve) => this.child.once("exit", (code, signal) => resolve({ code, signal })));
    createInterface({ input: this.child.stdout! }).on("line", (line) => {
      const marker = parseMarker(line);
      if (marker === undefined) {
        this.stderr += `${line}\n`;
        return;
      }
      onMarker(marker, this);
      for (const waiter of [...this.waiters]) waiter(marker);
    });
    this.child.stderr!.on("data", (chunk: Buffer) => (this.stderr += chunk.toString()));
  }

  /** What the worker printed besides markers (its errors, should it fail). */
  get output(): string {
    return this.stderr.trim();
  }

  /** The first marker from now on that matches; rejects if the process exits or time runs out first. */
  waitFor<M extends Marker["event"]>(event: M, timeoutMs: number, matches: (marker: Extract<Marker, { event: M }>) => boolean = () => true) {
    return new Promise<Extract<Marker, { event: M }>>((resolve, reject) => {
      const done = () => {
        this.waiters.delete(waiter);
        clearTimeout(timer);
      };
      const waiter = (marker: Marker) => {
        if (marker.event !== event || !matches(marker as Extract<Marker, { event: M }>)) return;
        done();
        resolve(marker as Extract<Marker, { event: M }>);
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`worker #${this.number} did not report "${event}" within ${timeoutMs} ms${this.tail()}`));
      }, timeoutMs);
      this.waiters.add(waiter);
      void this.exited.then(({ code, signal }) => {
        if (!this.waiters.has(waiter)) return;
        done();
        reject(new Error(`worker #${this.number} exited (${signal ?? `code ${code}`}) before reporting "${event}"${this.tail()}`));
      });
    });
  }

  private tail(): string {
    const output = this.output;
    return output === "" ? "" : `; it printed: ${output.split("\n").slice(-3).join(" | ")}`;
  }

  async kill(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGKILL");
    await this.exited;
  }
}
