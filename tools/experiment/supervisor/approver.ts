/**
 * The human in the loop, played by the supervisor: it polls an arm's approval desk and approves
 * each request once it is `delayMs` old. It sees each request first through `onRequested`, which is
 * where the supervisor kills a worker that waits for approval.
 */

/** An approval request, as an arm's desk lists it. */
export interface PendingApproval {
  /** Unique per request; what `approve` takes. */
  key: string;
  task: number;
  requestedAt: number;
}

/** Where an arm's approval requests are listed and decided. */
export interface ApprovalDesk {
  pending(): Promise<PendingApproval[]>;
  approve(key: string): Promise<void>;
  /** Requests made so far, decided or not (a restarted conventional task asks again). */
  requestCount(): Promise<number>;
}

export class Approver {
  private readonly seen = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private sweeping: Promise<void> = Promise.resolve();

  constructor(
    private readonly desk: ApprovalDesk,
    private readonly options: {
      delayMs: number;
      pollMs: number;
      onRequested: (request: PendingApproval) => Promise<void>;
      onError: (error: unknown) => void;
    },
  ) {}

  start(): void {
    const tick = (): void => {
      if (this.stopped) return;
      this.timer = setTimeout(() => {
        this.sweeping = this.sweep().then(tick, (error: unknown) => {
          this.options.onError(error);
          tick();
        });
      }, this.options.pollMs);
    };
    tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.sweeping;
  }

  private async sweep(): Promise<void> {
    for (const request of await this.desk.pending()) {
      if (this.stopped) return;
      if (!this.seen.has(request.key)) {
        this.seen.add(request.key);
        await this.options.onRequested(request);
      }
      if (Date.now() - request.requestedAt >= this.options.delayMs) await this.desk.approve(request.key);
    }
  }
}
