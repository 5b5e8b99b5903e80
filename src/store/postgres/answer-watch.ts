import type pg from "pg";
import { StatementClient } from "./statement-client.js";

/** Default of PostgresStoreOptions.answerTimeoutMs. */
export const DEFAULT_ANSWER_TIMEOUT_MS = 30_000;

/**
 * Drops a pooled connection whose server has not answered one of Cairn's statements for
 * `timeoutMs`: a backend frozen, or a connection half-open (a NAT or a load balancer that forgot
 * it, a machine gone without a word), where the kernel keeps retransmitting for about fifteen
 * minutes before it reports anything. Until then the statement, and everything queued behind it,
 * waits: a group commit's held connection that hung stalled every run of the executor while its
 * heartbeat, on other connections, went on — so no peer took the runs over either.
 *
 * Dropped, the connection fails what it was sending with a NoAnswerError, which is transient: the
 * caller treats it as a lost connection (the runs are let go and loaded again, their commits read
 * back from the journal under the fence), and the next use opens a new connection. A statement
 * that merely waits that long (a lock held by a frozen peer's open transaction) is sent again later,
 * and waits again; nothing is lost.
 *
 * Cost on the hot path: two assignments per statement (StatementClient); the check itself runs a
 * few times per timeout, off the statements' path.
 */
export class AnswerWatch {
  private readonly clients = new Set<StatementClient>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    pool: pg.Pool,
    private readonly timeoutMs: number,
  ) {
    // The pool makes its clients from StatementClient (postgres-store.ts), which keeps the waits.
    pool.on("connect", (client) => {
      if (client instanceof StatementClient) this.clients.add(client);
    });
    pool.on("remove", (client) => {
      if (client instanceof StatementClient) this.clients.delete(client);
    });
    this.timer = setInterval(() => this.check(Date.now()), Math.max(50, Math.min(5_000, Math.floor(timeoutMs / 4))));
    this.timer.unref();
  }

  /** Drops every connection waiting longer than the timeout for an answer; returns how many. */
  check(now: number): number {
    let dropped = 0;
    for (const client of this.clients) {
      const waitedMs = client.waitedForAnswerMs(now);
      if (waitedMs <= this.timeoutMs) continue;
      this.clients.delete(client);
      client.abandon(new NoAnswerError(waitedMs));
      dropped++;
    }
    return dropped;
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}

/** A connection dropped because its server did not answer a statement in time (see AnswerWatch). Transient. */
export class NoAnswerError extends Error {
  readonly code = "CAIRN_NO_ANSWER";

  constructor(waitedMs: number) {
    super(`PostgreSQL did not answer a statement for ${Math.round(waitedMs)} ms; the connection was dropped (answerTimeoutMs)`);
    this.name = "NoAnswerError";
  }
}
