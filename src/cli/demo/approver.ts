import type { Cairn } from "../../index.js";
import type { PendingApproval } from "../../ai/index.js";

export const APPROVER = "demo-approver";
/** How long a request waits before the approver decides: a human takes a moment. */
export const APPROVAL_DELAY_MS = 300;
const POLL_INTERVAL_MS = 50;

/**
 * The human in the loop, played by the demo's own process: it approves each tool call of the
 * tickets' runs that waits for approval, once the request is `APPROVAL_DELAY_MS` old. It decides through
 * `cairn.approvals` on the shared database, never through a worker: the decision is a row and a
 * message, which the waiting run receives in whichever worker runs it next — or, should no worker
 * be alive, as soon as one is.
 */
export class Approver {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private sweeping: Promise<void> = Promise.resolve();

  constructor(
    private readonly cairn: Cairn,
    private readonly runIds: readonly string[],
    private readonly onApproved: (approval: PendingApproval, waitedMs: number) => void,
    private readonly onError: (error: unknown) => void,
  ) {}

  start(): void {
    const tick = (): void => {
      if (this.stopped) return;
      this.timer = setTimeout(() => {
        this.sweeping = this.sweep().then(tick, (error: unknown) => this.onError(error));
      }, POLL_INTERVAL_MS);
    };
    tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.sweeping;
  }

  private async sweep(): Promise<void> {
    const now = Date.now();
    for (const approval of await this.cairn.approvals.list()) {
      if (approval.kind !== "tool" || !this.runIds.includes(approval.runId)) continue;
      const waitedMs = now - approval.requestedAt.getTime();
      if (waitedMs < APPROVAL_DELAY_MS) continue;
      await this.cairn.approvals.approve(approval.runId, approval.toolCallId, { by: APPROVER });
      this.onApproved(approval, waitedMs);
    }
  }
}
