import { describe, expect, it } from "vitest";
import { JournalChecks } from "../../src/engine/journal-checks.js";
import { storeOf } from "../../src/internal.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";

/**
 * The checks of warm runs claimed back together (journal-checks.ts) share one statement; each must
 * answer exactly what its own statement did: no row above its top, none where it knows of none,
 * the rows it knows of as they were — whatever the other runs in the batch look like.
 */
describe.each(BACKENDS)("journal checks batched on $name", (backend) => {
  const env = cairnFactory(backend);

  it("answers each run's check in one batch as a check of its own would", async () => {
    const cairn = env.cairn(await env.database());
    const wf = cairn.workflow("steps", async (ctx, n: number) => {
      for (let i = 0; i < n; i++) await ctx.step(`s${i}`, () => i);
      return n;
    });
    await cairn.launch();
    for (const [id, n] of [
      ["three", 3],
      ["five", 5],
      ["it's-ünïcode ✓", 2],
    ] as const) {
      expect(await (await wf.start(n, { id })).result()).toBe(n);
    }
    const store = storeOf(cairn);
    /** The row as memory would know it. */
    const known = async (runId: string, seq: number) => {
      const [row] = await store.select<{ status: string; completion: number | string | null }>(
        "SELECT status, completion FROM cairn_steps WHERE run_id = $1 AND seq = $2",
        [runId, seq],
      );
      return { seq, status: row!.status, completion: row!.completion === null ? null : Number(row!.completion) };
    };
    const unicode = "it's-ünïcode ✓";
    const [threeAt1, unicodeAt0] = [await known("three", 1), await known(unicode, 0)];
    const checks = new JournalChecks(store);
    const select = store.select.bind(store);
    let statements = 0;
    store.select = (sql, params) => (statements++, select(sql, params));
    // Asked in one turn: one statement for all of them.
    const answers = await Promise.all([
      checks.unchanged("three", { top: 2, rows: [threeAt1] }), // as it is
      checks.unchanged("five", { top: 3, rows: [] }), // row 4 above its top: moved on
      checks.unchanged(unicode, { top: 1, rows: [unicodeAt0, { seq: 5, status: null, completion: null }] }), // as it is
      checks.unchanged("nowhere", { top: -1, rows: [] }), // no rows, none expected
      checks.unchanged("nowhere-else", { top: 4, rows: [threeAt1] }), // a row it knew is gone
    ]);
    expect(answers).toEqual([true, false, true, true, false]);
    expect(statements).toBe(1);
    // A row where it knew of none, and a row changed.
    expect(await checks.unchanged("three", { top: 2, rows: [{ seq: 2, status: null, completion: null }] })).toBe(false);
    expect(await checks.unchanged("three", { top: 2, rows: [{ ...threeAt1, completion: threeAt1.completion! + 1 }] })).toBe(false);
    // Two checks of one run in one batch: each answered for itself.
    expect(await Promise.all([checks.unchanged("five", { top: 4, rows: [] }), checks.unchanged("five", { top: 2, rows: [] })])).toEqual([true, false]);
  });
});
