import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { parseMarker, type Marker } from "../markers.js";
import { CONFIG_ENV, type WorkerConfig } from "../worker/worker-config.js";

/**
 * One worker: a real child process (`node worker-main.js`) whose markers arrive through `onMarker`.
 * `kill()` sends SIGKILL — no handler runs, nothing is flushed — and resolves once the process is
 * reaped: only then is its pid gone, which is how a Cairn executor tells its peer is dead.
 */
export class WorkerProcess {
  readonly pid: number;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private readonly child: ChildProcess;
  private output = "";

  constructor(
    workerPath: string,
    readonly config: WorkerConfig,
    onMarker: (marker: Marker, worker: WorkerProcess) => void,
  ) {
    this.child = spawn(process.execPath, [workerPath], {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, [CONFIG_ENV]: JSON.stringify(config) },
    });
    if (this.child.pid === undefined) throw new Error(`could not start ${workerPath}`);
    this.pid = this.child.pid;
    this.exited = new Promise((resolve) => this.child.once("exit", (code, signal) => resolve({ code, signal })));
    createInterface({ input: this.child.stdout! }).on("line", (line) => {
      const marker = parseMarker(line);
      if (marker === undefined) this.keep(line);
      else onMarker(marker, this);
    });
    this.child.stderr!.on("data", (chunk: Buffer) => this.keep(chunk.toString()));
  }

  get slot(): number {
    return this.config.slot;
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The last lines the worker printed besides markers (its errors, should it fail). */
  tail(lines = 5): string {
    return this.output.trim().split("\n").slice(-lines).join("\n");
  }

  async kill(): Promise<void> {
    if (this.alive) this.child.kill("SIGKILL");
    await this.exited;
  }

  private keep(text: string): void {
    this.output = (this.output + text + (text.endsWith("\n") ? "" : "\n")).slice(-8000);
  }
}
