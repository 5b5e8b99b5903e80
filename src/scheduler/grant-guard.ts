import { createHash, randomBytes, randomUUID, timingSafeEqual } from "node:crypto";
import type { Statement } from "../store/connection.js";
import { WAKE_CHANNEL } from "../store/postgres/postgres-writes.js";
import { isTransientStoreError } from "../store/transient.js";
import { MARK_WAKE_PREFIX } from "./wake-payloads.js";

/**
 * PostgreSQL: whether a run its enqueue handed to this executor with its row (the `granted:`
 * NOTIFY, wake-payloads.ts) may start from that row, without reading it again.
 *
 * The danger is a NOTIFY that arrives late. It comes on the executor's session at a time of its
 * own, while a poll's read of our assigned runs (another connection) can find the same run first,
 * load it and run it to its end. Started from the NOTIFY's row — a fresh run, no journal — it
 * would run its steps a second time. So every run loaded here is noted (`loaded`), and a grant of
 * a noted run goes the read's way instead, which sees the run as it is now.
 *
 * A note is dropped once no grant sent before it can still arrive. NOTIFYs reach a session in the
 * order their transactions committed, and a run's grant is committed by the transaction that
 * creates it, before anything can load the run. So when a marker this executor sent after a load
 * (`mark:<key>:<n>`, a NOTIFY of its own) comes back, the grant of that run, if any, has arrived
 * before it. Markers go out while notes wait, at most one a MARK_INTERVAL_MS and one at a time,
 * each a transaction of its own: a few a second across a fleet, where the read a grant saves was
 * one per run. A marker that is lost (the session dropped) leaves its notes to the next one.
 *
 * A NOTIFY is anyone's to send who can connect to the database, with no privilege on Cairn's
 * tables. A forged grant started from its row would run a workflow of the forger's choosing up to
 * its first step's commit (which fencing refuses, after the step acted). So a grant carries a
 * token, sha256(key ‖ run id), made by the enqueue function with this executor's `key`, which it
 * registered in `cairn_executor_grant_keys` (readable only by roles granted Cairn's tables); a
 * grant without the right token is read like a `dispatched:` wake-up — nothing is started from it.
 * A token seen on the channel is good only for its own run, whose real grant arrived first.
 */
export class GrantGuard {
  /** Tells this executor's markers from everyone else's (executor ids change on re-registration). */
  readonly key = randomUUID();
  /** The secret grants to this executor are proven with (see above): never sent on the channel. */
  readonly grantKey = randomBytes(32).toString("hex");
  /** Run id → how many markers had been sent when it was loaded here. */
  private readonly noted = new Map<string, number>();
  private sent = 0;
  private sending = false;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly send: (payload: string) => Promise<unknown>,
    private readonly onError: (error: unknown) => void,
  ) {}

  /** A run was loaded here, from whatever hand-out (a grant's row included). */
  loaded(runId: string): void {
    this.noted.set(runId, this.sent);
    this.scheduleMarker();
  }

  /**
   * Whether a grant of `runId` with `token` may start it from the grant's row: the grant is the
   * enqueue's (the token), and no load of the run here can have come before it.
   */
  mayStart(runId: string, token: string): boolean {
    const expected = createHash("sha256")
      .update(this.grantKey + runId, "utf8")
      .digest();
    const given = Buffer.from(token, "hex");
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return false;
    return !this.noted.has(runId);
  }

  /** One of this executor's markers came back: every grant committed before it was sent has arrived. */
  heard(marker: number): void {
    for (const [runId, sentBefore] of this.noted) if (sentBefore < marker) this.noted.delete(runId);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.noted.clear();
  }

  private scheduleMarker(): void {
    if (this.timer !== null || this.sending || this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.sendMarker();
    }, MARK_INTERVAL_MS);
    this.timer.unref();
  }

  private async sendMarker(): Promise<void> {
    if (this.stopped || this.noted.size === 0) return;
    this.sending = true;
    // Counted before the send: a load noted from now on was not before this marker.
    const marker = ++this.sent;
    try {
      await this.send(`${MARK_WAKE_PREFIX}${this.key}:${marker}`);
    } catch (error) {
      // An outage is reported by the executor's own passes; a marker only waits for the next one.
      if (!this.stopped && !isTransientStoreError(error)) this.onError(error);
    } finally {
      this.sending = false;
    }
    // Notes made meanwhile wait for the next marker.
    if (this.noted.size > 0) this.scheduleMarker();
  }
}

/** A marker's NOTIFY ($1 the payload), sent by the executor through its store. */
export const MARK_STATEMENT: Statement = { name: "cairn_grant_mark", text: `SELECT pg_notify('${WAKE_CHANNEL}', $1)` };

/** How long notes wait for a marker at least: a grant is normally heard within milliseconds. */
export const MARK_INTERVAL_MS = 1_000;
