import { describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";

/** The supervision layer's rows follow their runs (its extension's hooks): a fork copies them below the fork point, a delete removes them. */
describe.each(BACKENDS)("cairn_supervision and the run lifecycle on $name", (backend) => {
  const env = cairnFactory(backend);

  it("a fork inherits the decisions below fromSeq; deleting the runs deletes their decisions", async () => {
    const cairn = env.cairn(await env.database());
    const doomed = cairn.workflow("doomed", async () => {
      throw new TypeError("always");
    });
    const sup = cairn.supervisor("sup", { intensity: 0, children: [{ id: "d", workflow: doomed }] });
    await cairn.launch();
    await (await sup.start(undefined, { id: "s" })).result().catch(() => undefined);
    const rows = async (runId: string) =>
      (await cairn.query("SELECT seq, event FROM cairn_supervision WHERE run_id = $1 ORDER BY seq", [runId])).rows.map((r) => [Number(r.seq), r.event]);
    const original = await rows("s");
    expect(original.map(([, event]) => event)).toEqual(["start", "exit", "give_up"]);
    const exitSeq = original[1]![0] as number;
    await cairn.fork("s", { fromSeq: exitSeq, id: "s-fork" });
    expect(await rows("s-fork")).toEqual(original.filter(([seq]) => (seq as number) < exitSeq));
    await cairn.cancel("s-fork");
    const deleted = await cairn.runs.delete({ ids: ["s", "s-fork"] });
    expect(deleted.runIds).toEqual(expect.arrayContaining(["s", "s-fork"]));
    expect(await rows("s")).toEqual([]);
    expect(await rows("s-fork")).toEqual([]);
  });
});
