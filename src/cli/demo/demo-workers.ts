import { bold, red } from "../style.js";
import type { JournalWatch } from "./journal-watch.js";
import type { Narrator } from "./narrator.js";
import { WorkerProcess } from "./worker-process.js";

export interface Kill {
  worker: number;
  pid: number;
  atMs: number;
  /** Right after a model response was recorded, or right after the payment service made a refund. */
  after: "model-response" | "refund";
  /** The ticket whose model response or refund the kill followed. */
  runId: string;
  /** A refund's checkpoint had committed before the kill landed after all (a machine slow enough). */
  tooLate: boolean;
  /** Model requests this worker made whose responses it never recorded: each is asked again. */
  modelCallsLost: number;
}

/** After a kill, how long requests already on the wire get to reach the mock LLM's log. */
const SETTLE_MS = 150;

/**
 * The demo's worker processes, one alive at a time, numbered from 1: started, killed with SIGKILL,
 * and accounted for — at each kill, the model requests made but never recorded are counted, since
 * those, and only those, a recovered run has to make again.
 */
export class DemoWorkers {
  readonly kills: Kill[] = [];
  /** Model requests the workers reported sending (a replayed call sends none). */
  requestsSent = 0;
  /** Of those, the ones that failed: each is retried, as another request. */
  requestsFailed = 0;
  private current: WorkerProcess | undefined;
  private unrecorded = 0;

  constructor(
    private readonly workerPath: string,
    private readonly env: Record<string, string | undefined>,
    private readonly narrator: Narrator,
    private readonly journal: JournalWatch,
    /** Requests the model has received so far. */
    private readonly modelRequests: () => number,
  ) {}

  /** The worker alive now, if any. */
  get alive(): WorkerProcess | undefined {
    return this.current;
  }

  start(story: string): WorkerProcess {
    const number = (this.current?.number ?? 0) + 1;
    const worker = new WorkerProcess(number, this.workerPath, this.env, (marker, w) => {
      if (marker.event === "model-request") this.requestsSent++;
      if (marker.event === "model-error") this.requestsFailed++;
      this.narrator.marker(marker, w.number);
    });
    this.current = worker;
    this.narrator.worker = number;
    this.narrator.say(`${bold("▶")} worker #${number} (pid ${worker.pid}) ${story}`);
    return worker;
  }

  /**
   * SIGKILLs the live worker and tells it, once `tooLate` and the lost model calls are known:
   * `why(kill)` says what the kill interrupted.
   */
  async kill(after: Kill["after"], runId: string, tooLate: () => Promise<boolean>, why: (kill: Kill) => string): Promise<Kill> {
    const victim = this.current!;
    await victim.kill();
    const atMs = this.narrator.elapsedMs;
    // What the dead worker committed is all it ever will: read it before the next one starts.
    await this.journal.poll();
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    await this.journal.poll();
    // A failed request is never recorded either, but it was retried, not lost.
    const unrecorded = this.modelRequests() - this.requestsFailed - this.journal.modelCalls;
    const kill: Kill = {
      worker: victim.number,
      pid: victim.pid,
      atMs,
      after,
      runId,
      tooLate: await tooLate(),
      modelCallsLost: unrecorded - this.unrecorded,
    };
    this.unrecorded = unrecorded;
    this.kills.push(kill);
    const lost = kill.modelCallsLost;
    this.narrator.say(
      `${red("✖ SIGKILL")} worker #${victim.number} (pid ${victim.pid}) ${why(kill)}` +
        (lost === 0 ? "" : `; ${lost} model call${lost === 1 ? " was" : "s were"} in flight, unrecorded: the model will be asked again`),
      atMs,
    );
    return kill;
  }

  /** `promise`, unless the live worker exits first. */
  whileAlive<T>(promise: Promise<T>): Promise<T> {
    const worker = this.current!;
    return new Promise<T>((resolve, reject) => {
      promise.then(resolve, reject);
      // Once `promise` has settled, this rejection is a no-op.
      void worker.exited.then(({ code, signal }) =>
        reject(new Error(`worker #${worker.number} exited (${signal ?? `code ${code}`}) too early${this.tail()}`)),
      );
    });
  }

  /** What the live worker printed besides markers, for an error message. */
  tail(): string {
    const output = this.current?.output ?? "";
    return output === "" ? "" : `; worker #${this.current!.number} printed: ${output.split("\n").slice(-3).join(" | ")}`;
  }
}
