import { describe, expect, it } from "vitest";
import { Cairn, InvalidSpecError, SupervisorShutdownError } from "../../src/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";

/**
 * The supervisor against OTP's documented behaviour (supervisor.erl): strategies, restart types,
 * intensity, escalation and stop order, on both backends. Children are small workflows: `worker`
 * counts its runs per key in a recorded step and fails while the count is within `failures`, then
 * waits (a durable recv) until told to finish.
 */

type Row = {
  event: string;
  child_id: string | null;
  child_run_id: string | null;
  previous_run_id: string | null;
  reason: string | null;
  restart_count: number;
};

function setup(cairn: Cairn) {
  const counts = new Map<string, number>();
  const worker = cairn.workflow("worker", async (ctx, input: { key: string; failures?: number; finish?: boolean }) => {
    const n = await ctx.step("count", () => {
      const next = (counts.get(input.key) ?? 0) + 1;
      counts.set(input.key, next);
      return next;
    });
    if (n <= (input.failures ?? 0)) throw new TypeError(`${input.key} crashed (run ${n})`);
    if (input.finish === true) return `${input.key} finished`;
    await ctx.recv("finish");
    return `${input.key} finished`;
  });
  const decisions = async (supervisorId: string): Promise<Row[]> =>
    (
      await cairn.query(
        "SELECT event, child_id, child_run_id, previous_run_id, reason, restart_count FROM cairn_supervision WHERE run_id = $1 ORDER BY seq",
        [supervisorId],
      )
    ).rows.map((r) => ({ ...r, restart_count: Number(r.restart_count) }) as Row);
  const events = async (supervisorId: string): Promise<string[]> => (await decisions(supervisorId)).map((d) => `${d.event} ${d.child_id ?? ""}`.trim());
  const status = async (runId: string): Promise<string> =>
    (
      await cairn
        .run(runId)
        .status()
        .catch(() => ({ status: "missing" }))
    ).status;
  return { worker, counts, decisions, events, status };
}

describe.each(BACKENDS)("supervisors on $name", (backend) => {
  const env = cairnFactory(backend);

  it("one_for_one: starts children in order and restarts only the one that crashed, linking the failed run to its replacement", async () => {
    const cairn = env.cairn(await env.database());
    const { worker, decisions, events, status } = setup(cairn);
    const sup = cairn.supervisor("sup", {
      strategy: "one_for_one",
      intensity: 3,
      children: [
        { id: "a", workflow: worker, input: { key: "a", failures: 1 } },
        { id: "b", workflow: worker, input: { key: "b" } },
      ],
    });
    await cairn.launch();
    await sup.start(undefined, { id: "s" });
    await eventually(async () => (await events("s")).includes("restart a"));
    expect((await events("s")).slice(0, 4)).toEqual(["start a", "start b", "exit a", "restart a"]);
    const restart = (await decisions("s")).find((d) => d.event === "restart")!;
    expect(restart).toMatchObject({ child_run_id: "s/a~1", previous_run_id: "s/a", restart_count: 1 });
    expect((await decisions("s")).find((d) => d.event === "exit")!.reason).toBe("TypeError: a crashed (run 1)");
    expect(await status("s/a")).toBe("failed");
    await eventually(async () => (await status("s/a~1")) === "waiting");
    expect(await status("s/b")).toBe("waiting");
    const tree = await cairn.query(
      "SELECT run_id, child_id, restart_count, last_exit_reason, replaced_by FROM cairn_tree WHERE root_id = 's' ORDER BY run_id",
    );
    expect(tree.rows.map((r) => [r.run_id, r.child_id, Number(r.restart_count), r.last_exit_reason, r.replaced_by])).toEqual([
      ["s", null, 0, null, null],
      ["s/a", "a", 0, "TypeError: a crashed (run 1)", "s/a~1"],
      ["s/a~1", "a", 1, "TypeError: a crashed (run 1)", null],
      ["s/b", "b", 0, null, null],
    ]);
  });

  it("transient: restarted after an abnormal exit, not after a normal one; temporary: never, and its spec is dropped", async () => {
    const cairn = env.cairn(await env.database());
    const { worker, events } = setup(cairn);
    const sup = cairn.supervisor("sup", {
      intensity: 5,
      children: [
        { id: "fine", workflow: worker, input: { key: "fine", finish: true }, restart: "transient" },
        { id: "bad", workflow: worker, input: { key: "bad", failures: 1 }, restart: "transient" },
        { id: "tmp", workflow: worker, input: { key: "tmp", failures: 1 }, restart: "temporary" },
      ],
    });
    await cairn.launch();
    await sup.start(undefined, { id: "s" });
    await eventually(async () => {
      const e = await events("s");
      return e.includes("exit fine") && e.includes("restart bad") && e.includes("drop tmp");
    });
    const e = await events("s");
    expect(e.filter((x) => x.startsWith("restart"))).toEqual(["restart bad"]);
    expect(e).toContain("exit tmp");
  });

  it("one_for_all: stops the others in reverse order, drops a temporary child, restarts the rest in order", async () => {
    const cairn = env.cairn(await env.database());
    const { worker, decisions, status } = setup(cairn);
    const sup = cairn.supervisor("sup", {
      strategy: "one_for_all",
      intensity: 3,
      children: [
        // a is stopped with a grace period it does not use (it never reads the shutdown request): cancelled after 200 ms.
        { id: "a", workflow: worker, input: { key: "a" }, shutdown: 200 },
        { id: "tmp", workflow: worker, input: { key: "tmp" }, restart: "temporary", shutdown: "brutal_kill" },
        { id: "c", workflow: worker, input: { key: "c" }, shutdown: "brutal_kill" },
        { id: "d", workflow: worker, input: { key: "d", failures: 1 } },
      ],
    });
    await cairn.launch();
    await sup.start(undefined, { id: "s" });
    await eventually(async () => (await decisions("s")).some((d) => d.event === "stop" && d.child_id === "c"));
    await eventually(async () => (await decisions("s")).filter((d) => d.event === "restart").length === 3);
    const rows = await decisions("s");
    const after = rows.slice(rows.findIndex((d) => d.event === "exit"));
    expect(after.map((d) => `${d.event} ${d.child_id}`)).toEqual([
      "exit d",
      "stop c",
      "stop tmp",
      "drop tmp",
      "stop a",
      "restart a",
      "restart c",
      "restart d",
    ]);
    expect(await status("s/tmp")).toBe("cancelled");
    expect(await status("s/tmp~1")).toBe("missing");
    expect((await decisions("s")).find((d) => d.event === "stop" && d.child_id === "a")!.reason).toBe("shutdown");
  });

  it("stops a child supervisor (default shutdown infinity) by asking it: it stops its own children in reverse order, then ends", async () => {
    const cairn = env.cairn(await env.database());
    const { worker, events, status } = setup(cairn);
    const inner = cairn.supervisor("inner", {
      children: [
        { id: "x", workflow: worker, input: { key: "x" }, shutdown: "brutal_kill" },
        { id: "y", workflow: worker, input: { key: "y" }, shutdown: "brutal_kill" },
      ],
    });
    const sup = cairn.supervisor("outer", {
      strategy: "one_for_all",
      intensity: 2,
      children: [
        { id: "inner", workflow: inner },
        { id: "d", workflow: worker, input: { key: "d", failures: 1 } },
      ],
    });
    await cairn.launch();
    await sup.start(undefined, { id: "o" });
    await eventually(async () => (await events("o")).includes("restart d"));
    expect(await events("o")).toEqual(["start inner", "start d", "exit d", "stop inner", "restart inner", "restart d"]);
    expect(await events("o/inner")).toEqual(["start x", "start y", "stop y", "stop x"]);
    expect(await status("o/inner")).toBe("succeeded");
    await eventually(async () => (await status("o/inner~1/y")) === "waiting");
  });

  it("rest_for_one: restarts the crashed child and only the children started after it", async () => {
    const cairn = env.cairn(await env.database());
    const { worker, events, status } = setup(cairn);
    const sup = cairn.supervisor("sup", {
      strategy: "rest_for_one",
      intensity: 3,
      children: [
        { id: "a", workflow: worker, input: { key: "a" } },
        { id: "b", workflow: worker, input: { key: "b", failures: 1 } },
        { id: "c", workflow: worker, input: { key: "c" }, shutdown: "brutal_kill" },
      ],
    });
    await cairn.launch();
    await sup.start(undefined, { id: "s" });
    await eventually(async () => (await events("s")).includes("restart c"));
    const e = await events("s");
    expect(e.slice(e.indexOf("exit b"))).toEqual(["exit b", "stop c", "restart b", "restart c"]);
    expect(await status("s/a")).toBe("waiting");
    expect(await status("s/a~1")).toBe("missing");
  });

  it("intensity exceeded: stops the children in reverse start order and escalates two levels up", async () => {
    const cairn = env.cairn(await env.database());
    const { worker, decisions, events } = setup(cairn);
    const mid = cairn.supervisor("mid", {
      intensity: 1,
      periodMs: 60_000,
      children: [
        { id: "a", workflow: worker, input: { key: "a" }, shutdown: "brutal_kill" },
        { id: "b", workflow: worker, input: { key: "b" }, shutdown: "brutal_kill" },
        { id: "w", workflow: worker, input: { key: "w", failures: 99 } },
      ],
    });
    const top = cairn.supervisor("top", { intensity: 0, children: [{ id: "mid", workflow: mid }] });
    await cairn.launch();
    const run = await top.start(undefined, { id: "t" });
    const error = await run.result().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SupervisorShutdownError);
    expect(await events("t/mid")).toEqual(["start a", "start b", "start w", "exit w", "restart w", "exit w", "give_up w", "stop b", "stop a"]);
    const topRows = await decisions("t");
    expect(topRows.map((d) => `${d.event} ${d.child_id}`)).toEqual(["start mid", "exit mid", "give_up mid"]);
    // mid ended with OTP's reason `shutdown`, which top (a permanent spec) would restart — but intensity 0 allows none.
    expect(topRows[1]!.reason).toBe("shutdown");
  });

  it("simple_one_for_one: children started on demand from another Cairn, each restarted alone with its own input", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const { worker, decisions } = setup(cairn);
    const pool = cairn.supervisor("pool", {
      strategy: "simple_one_for_one",
      intensity: 5,
      children: [{ id: "job", workflow: worker, restart: "transient" }],
    });
    await cairn.launch();
    await pool.start(undefined, { id: "p" });
    const other = env.cairn(db);
    const first = await other.supervisors.startChild("p", { key: "j1", failures: 1 }, { id: "p/j1" });
    await other.supervisors.startChild("p", { key: "j1", failures: 1 }, { id: "p/j1" }); // idempotent
    const second = await other.supervisors.startChild("p", { key: "j2" });
    await eventually(async () => (await decisions("p")).some((d) => d.event === "restart"));
    await eventually(async () => (await decisions("p")).filter((d) => d.event === "start").length === 2);
    const rows = await decisions("p");
    expect(
      rows
        .filter((d) => d.event === "start")
        .map((d) => d.child_run_id)
        .sort(),
    ).toEqual([first, second].sort());
    expect(rows.find((d) => d.event === "restart")).toMatchObject({ child_run_id: "p/j1~1", previous_run_id: "p/j1" });
    // A request the supervisor cannot honour (the id of a run that is not its child) is refused and recorded; the supervisor lives on.
    await worker.start({ key: "o", finish: true }, { id: "outsider" });
    await other.supervisors.startChild("p", { key: "j3" }, { id: "outsider" });
    await eventually(async () => (await decisions("p")).some((d) => d.event === "drop"));
    expect((await decisions("p")).find((d) => d.event === "drop")!.reason).toMatch(/^start failed: InvalidSpecError/);
    expect((await pool.start(undefined, { id: "p" })).id).toBe("p");
    expect((await cairn.run("p").status()).status).not.toBe("failed");
    const notSimple = cairn.supervisor("plain", { children: [] });
    await notSimple.start(undefined, { id: "plain" });
    await expect(cairn.supervisors.startChild("plain", {})).rejects.toBeInstanceOf(InvalidSpecError);
  });

  it("refuses a bad spec up front, naming the field and the value", () => {
    const cairn = env.cairn(":memory:");
    const { worker } = setup(cairn);
    const bad = (spec: unknown): unknown => {
      try {
        cairn.supervisor("bad", spec as never);
      } catch (error) {
        return error instanceof InvalidSpecError ? [error.field, error.value] : error;
      }
      return "accepted";
    };
    expect(bad({ strategy: "one_for_some", children: [] })).toEqual(["strategy", "one_for_some"]);
    expect(bad({ intensity: -1, children: [] })).toEqual(["intensity", -1]);
    expect(bad({ periodMs: 0, children: [] })).toEqual(["periodMs", 0]);
    expect(bad({ children: [{ id: "x", workflow: worker, restart: "sometimes" }] })).toEqual(["children[0].restart", "sometimes"]);
    expect(bad({ children: [{ id: "x", workflow: worker, shutdown: -5 }] })).toEqual(["children[0].shutdown", -5]);
    expect(
      bad({
        children: [
          { id: "x", workflow: worker },
          { id: "x", workflow: worker },
        ],
      }),
    ).toEqual(["children[1].id", "x"]);
    expect(bad({ children: [{ id: "x", workflow: "worker" }] })).toEqual(["children[0].workflow", "worker"]);
    expect(bad({ strategy: "simple_one_for_one", children: [] })).toEqual(["children", 0]);
    expect(bad({ children: [], backoff: { minMs: 100, maxMs: 10 } })).toEqual(["backoff.maxMs", 10]);
  });
});
