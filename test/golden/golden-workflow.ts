import type { Cairn, WorkflowContext } from "../../src/index.js";

/**
 * The workflow behind the golden journal. Its code must not change: the golden file records one
 * run of it, and replaying that file must keep working in every later version of Cairn.
 */
export function registerGolden(cairn: Cairn, onExecute: (what: string) => void) {
  const helper = cairn.workflow("golden-helper", async (ctx, n: number) => ctx.step("square", () => (onExecute("square"), n * n)));
  return cairn.workflow("golden", async (ctx: WorkflowContext, input: { customer: string; amount: bigint }) => {
    const quote = await ctx.step("quote", () => (onExecute("quote"), { amount: input.amount, at: new Date(Date.UTC(2026, 0, 2)) }));
    const at = await ctx.now();
    const roll = await ctx.random();
    const id = await ctx.uuid();
    await ctx.sleep("settle", 1);
    await ctx.send(ctx.runId, "note", { text: "to myself", tags: new Set(["a", "b"]) });
    const note = await ctx.recv<{ text: string; tags: Set<string> }>("note", { timeoutMs: 60_000 });
    await ctx.setEvent("stage", "noted");
    const squared = await (await ctx.child(helper, 12)).result();
    const rows = await ctx.transaction("count", async (sql) => {
      onExecute("count");
      const result = await sql.query<{ n: number }>("SELECT count(*) AS n FROM cairn_runs");
      return Number(result[0]!.n) >= 1;
    });
    const patched = await ctx.patched("golden-patch");
    const failed = await ctx
      .step("refuse", () => {
        onExecute("refuse");
        throw new RangeError("declined");
      })
      .catch((e: Error) => `${e.name}: ${e.message}`);
    const bytes = await ctx.step("bytes", () => (onExecute("bytes"), new Map([["payload", new Uint8Array([7, 8, 9])]])));
    return { quote, at, roll, id, note, squared, rows, patched, failed, bytes, customer: input.customer };
  });
}
