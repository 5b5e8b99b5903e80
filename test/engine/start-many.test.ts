import { describe, expect, it } from "vitest";
import { z } from "zod";
import { InvalidInputError, InvalidSpecError } from "../../src/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { storeOf } from "../../src/internal.js";

describe.each(BACKENDS)("workflow.startMany on $name", (backend) => {
  const env = cairnFactory(backend);

  it("starts every run, handles in the order given, each with its own result", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const square = cairn.workflow("square", async (ctx, n: number) => ctx.step("x", () => n * n));
    await cairn.launch();
    const handles = await square.startMany(Array.from({ length: 60 }, (_, i) => ({ input: i, options: { id: `sq-${i}` } })));
    expect(handles.map((h) => h.id)).toEqual(Array.from({ length: 60 }, (_, i) => `sq-${i}`));
    expect(await Promise.all(handles.map((h) => h.result()))).toEqual(Array.from({ length: 60 }, (_, i) => i * i));
    // Without ids: fresh UUIDs, all different.
    const anonymous = await square.startMany([{ input: 2 }, { input: 3, options: { timeoutMs: 60_000 } }]);
    expect(new Set(anonymous.map((h) => h.id)).size).toBe(2);
    expect(await Promise.all(anonymous.map((h) => h.result()))).toEqual([4, 9]);
    expect(await square.startMany([])).toEqual([]);
  });

  it("is idempotent by id: existing runs come back, a repeated id makes one run (the first item's input)", async () => {
    const db = await env.database();
    const client = env.cairn(db);
    const echo = client.workflow("echo", async (_ctx, s: string) => s);
    const first = await echo.startMany([
      { input: "a", options: { id: "e-1" } },
      { input: "b", options: { id: "e-2" } },
      { input: "b-again", options: { id: "e-2" } },
    ]);
    expect(first.map((h) => h.id)).toEqual(["e-1", "e-2", "e-2"]);
    const again = await echo.startMany([
      { input: "other", options: { id: "e-1" } },
      { input: "c", options: { id: "e-3" } },
    ]);
    expect(again.map((h) => h.id)).toEqual(["e-1", "e-3"]);
    // A client: the runs wait, enqueued, for an executor.
    const rows = await storeOf(client).listRuns({ workflow: "echo" });
    expect(rows.map((r) => [r.id, r.status]).sort()).toEqual([
      ["e-1", "enqueued"],
      ["e-2", "enqueued"],
      ["e-3", "enqueued"],
    ]);
    const executor = env.cairn(db);
    executor.workflow("echo", async (_ctx, s: string) => s);
    await executor.launch();
    expect(await executor.run("e-1").result()).toBe("a");
    expect(await executor.run("e-2").result()).toBe("b");
    expect(await executor.run("e-3").result()).toBe("c");
  });

  it("stores nothing when any item is bad, and names the item", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const typed = cairn.workflow("typed", async (_ctx, n: number) => n, { input: z.number() });
    await cairn.launch();
    const badInput = typed.startMany([
      { input: 1, options: { id: "t-1" } },
      { input: "two" as unknown as number, options: { id: "t-2" } },
    ]);
    await expect(badInput).rejects.toBeInstanceOf(InvalidInputError);
    await expect(badInput).rejects.toThrow(/items\[1\]/);
    const badId = typed.startMany([
      { input: 1, options: { id: "t-1" } },
      { input: 2, options: { id: "" } },
    ]);
    await expect(badId).rejects.toBeInstanceOf(InvalidSpecError);
    await expect(badId).rejects.toMatchObject({ field: "items[1].options.id" });
    await expect(typed.startMany([{ input: 1, options: { timeoutMs: -1 } }])).rejects.toMatchObject({ field: "items[0].options.timeoutMs" });
    await expect(typed.startMany({} as never)).rejects.toMatchObject({ field: "items" });
    await expect(typed.startMany([null as never])).rejects.toMatchObject({ field: "items[0]" });
    expect(await storeOf(cairn).listRuns({})).toEqual([]);
  });

  it("refuses an id that belongs to another workflow's run, naming it", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const one = cairn.workflow("one", async () => 1);
    const two = cairn.workflow("two", async () => 2);
    await cairn.launch();
    await (await one.start(undefined, { id: "taken" })).result();
    const clash = two.startMany([
      { input: undefined, options: { id: "fresh" } },
      { input: undefined, options: { id: "taken" } },
    ]);
    await expect(clash).rejects.toMatchObject({ name: "InvalidSpecError", field: "items[1].options.id" });
    expect((await storeOf(cairn).getRun("taken"))?.workflow).toBe("one");
  });

  it("stores a large input once, by hash, however many runs of the call share it", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const size = cairn.workflow("size", async (_ctx, s: string) => s.length);
    await cairn.launch();
    const big = "x".repeat(20_000);
    const other = "y".repeat(20_000);
    const handles = await size.startMany([
      { input: big, options: { id: "b-1" } },
      { input: big, options: { id: "b-2" } },
      { input: other, options: { id: "b-3" } },
    ]);
    expect(await Promise.all(handles.map((h) => h.result()))).toEqual([20_000, 20_000, 20_000]);
    const payloads = await storeOf(cairn).query("SELECT count(*) AS n FROM cairn_payloads WHERE size > 19000");
    expect(Number(payloads.rows[0]?.n)).toBe(2);
  });

  it("concurrent start() calls that meet in one commit each get their run (repeated ids included)", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const id = cairn.workflow("ident", async (_ctx, n: number) => n);
    await cairn.launch();
    const handles = await Promise.all(Array.from({ length: 120 }, (_, i) => id.start(i, { id: `c-${i % 100}` })));
    const results = await Promise.all(handles.map((h) => h.result()));
    // Ids 0..19 were started twice: whichever start came first wins, and both handles agree.
    for (let i = 0; i < 120; i++) expect(results[i]! % 100).toBe(i % 100);
    expect(results.slice(100)).toEqual(results.slice(0, 20));
    expect((await storeOf(cairn).listRuns({ workflow: "ident", limit: 1000 })).length).toBe(100);
  });
});
