import { ReadBatch } from "../store/read-batch.js";
import type { Store } from "../store/store.js";
import type { ExpectedRow, JournalExpectation } from "./run/journal-watch.js";

/** A journal row as a warm run's check compares it. */
interface CheckedRow {
  seq: number;
  status: string;
  completion: number | null;
}

/**
 * The rows each check reads, for a JSON list of `{ run, top, seqs }` ($1): the rows above `top`
 * and at the watched `seqs`, by primary key. The list drives the loop (PostgreSQL: LATERAL, kept
 * a loop by `OFFSET 0`; SQLite: CROSS JOIN keeps the order as written), so each run costs an index
 * lookup whatever the size of `cairn_steps`. (Without `OFFSET 0` PostgreSQL may flatten the
 * LATERAL into a join, and on a `cairn_steps` it has no statistics for it hashed the list and
 * scanned the whole table: 40–60 ms a check with 500,000 journal rows, against 0.2 ms.)
 */
export const CHECK_SQL: Record<Store["backend"], string> = {
  postgres: `SELECT t.run_id, t.seq, t.status, t.completion
    FROM json_to_recordset($1::json) AS w(run text, top int, seqs int[])
    CROSS JOIN LATERAL (SELECT s.run_id, s.seq, s.status, s.completion FROM cairn_steps s
      WHERE s.run_id = w.run AND (s.seq > w.top OR s.seq = ANY(w.seqs)) OFFSET 0) t`,
  sqlite: `SELECT s.run_id, s.seq, s.status, s.completion FROM json_each($1) w CROSS JOIN cairn_steps s
    WHERE s.run_id = json_extract(w.value, '$.run')
      AND (s.seq > json_extract(w.value, '$.top') OR s.seq IN (SELECT value FROM json_each(json_extract(w.value, '$.seqs'))))`,
};

/**
 * The journal checks of warm runs (WarmRuns.take), read together: the checks asked for in one turn
 * of the event loop — the warm runs one claim gave back, up to the cache's size — share one
 * statement (ReadBatch), as a claim's replays share one read of their journals. One statement a
 * run was a round trip each on PostgreSQL: with 10,000 runs falling due at once and 100 held warm
 * by each of 4 executors, 400 reads queued on the pools, and the runs they held back resumed
 * (and committed) apart instead of together.
 */
export class JournalChecks {
  /** What each check asked for compares, by run, until its read goes out. */
  private readonly asked = new Map<string, JournalExpectation>();
  private readonly reads: ReadBatch<CheckedRow[]>;

  constructor(private readonly store: Store) {
    this.reads = new ReadBatch(
      (runIds) => this.read(runIds),
      () => [],
    );
  }

  /**
   * Whether the run's journal is still the one `expected` describes: no row above its top, none
   * where it knows of none, and the rows it knows of as they were (a resume deletes failed ones).
   * One check a run at a time (WarmRuns.take leaves the cache first).
   */
  async unchanged(runId: string, expected: JournalExpectation): Promise<boolean> {
    const earlier = this.asked.get(runId);
    // Two checks of one run in one batch: read what both compare (the lower top, every watched seq).
    this.asked.set(runId, earlier === undefined ? expected : { top: Math.min(earlier.top, expected.top), rows: [...earlier.rows, ...expected.rows] });
    return matches(await this.reads.load(runId), expected);
  }

  private async read(runIds: string[]): Promise<Map<string, CheckedRow[]>> {
    const wanted = runIds.map((run) => {
      const expected = this.asked.get(run)!;
      this.asked.delete(run);
      return { run, top: expected.top, seqs: expected.rows.map((row) => row.seq) };
    });
    const rows = await this.store.select<{ run_id: string; seq: number | string; status: string; completion: number | string | null }>(
      CHECK_SQL[this.store.backend],
      [JSON.stringify(wanted)],
    );
    const byRun = new Map<string, CheckedRow[]>();
    for (const row of rows) {
      let found = byRun.get(row.run_id);
      if (found === undefined) byRun.set(row.run_id, (found = []));
      found.push({ seq: Number(row.seq), status: row.status, completion: row.completion === null ? null : Number(row.completion) });
    }
    return byRun;
  }
}

function matches(found: readonly CheckedRow[], expected: JournalExpectation): boolean {
  const want = new Map<number, ExpectedRow>(expected.rows.map((row) => [row.seq, row]));
  let present = 0;
  for (const row of found) {
    const known = want.get(row.seq);
    // A row below the top this check does not watch was read for another check of the same run in
    // the same statement (not done today: WarmRuns.take lets go of the run first); not this one's.
    if (known === undefined && row.seq <= expected.top) continue;
    if (known === undefined || known.status === null) return false; // above top, or where none was
    if (row.status !== known.status || row.completion !== known.completion) return false;
    present++;
  }
  // Every row memory knows is still there (a resume deletes failed ones).
  return present === expected.rows.filter((row) => row.status !== null).length;
}
