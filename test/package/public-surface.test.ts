import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { Cairn } from "../../src/index.js";
import { runtimeOf, storeOf } from "../../src/internal.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";

/**
 * `Cairn`'s public members are the API the README documents, and nothing else: the runtime's
 * internals (`startRun`, `readyStore`, `poke`, `waitForRun`, `store()` with its `commit`) are
 * reached only through src/internal.ts, which the package does not export.
 */
const DOCUMENTED = [
  "agent",
  "approvals",
  "cancel",
  "fork",
  "getEvent",
  "launch",
  "query",
  "queue",
  "resume",
  "run",
  "runs",
  "schedule",
  "send",
  "shutdown",
  "stream",
  "supervisor",
  "supervisors",
  "ui",
  "workflow",
];

function publicMembers(value: object): string[] {
  const names = new Set<string>(Object.keys(value));
  for (let proto = Object.getPrototypeOf(value); proto !== null && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
    for (const name of Object.getOwnPropertyNames(proto)) if (name !== "constructor") names.add(name);
  }
  return [...names].sort();
}

describe("the public Cairn", () => {
  it("documents every member it has in the README", () => {
    const readme = readFileSync("README.md", "utf8");
    expect(DOCUMENTED.filter((name) => !new RegExp(`cairn\\.${name}\\b`).test(readme))).toEqual([]);
  });

  it("has exactly the documented members", async () => {
    const cairn = new Cairn({ database: ":memory:" });
    try {
      expect(publicMembers(cairn)).toEqual(DOCUMENTED);
      expect(Object.keys(cairn.runs).sort()).toEqual(["delete", "gc"]);
      // The internal route reaches the runtime behind this instance, and only for a Cairn.
      expect(typeof runtimeOf(cairn).startRun).toBe("function");
      expect(() => runtimeOf({})).toThrow(TypeError);
      // Neither can a workflow or a run handle lead a user to the runtime.
      const workflow = cairn.workflow("w", async () => null);
      expect(publicMembers(workflow)).toEqual(["enqueue", "fn", "name", "start", "startMany"]);
      expect(publicMembers(cairn.run("r"))).toEqual(["cancel", "id", "result", "resume", "status"]);
    } finally {
      await cairn.shutdown();
    }
  });
});

describe.each(BACKENDS)("cairn.query on $name", (backend) => {
  const env = cairnFactory(backend);

  it("reads the system tables with $n params, and the database refuses a write", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const hello = cairn.workflow("hello", async (ctx, name: string) => ctx.step("greet", () => `hello ${name}`));
    await cairn.launch();
    await (await hello.start("a", { id: "q-a" })).result();
    await (await hello.start("b", { id: "q-b" })).result();

    const result = await cairn.query("SELECT id, status FROM cairn_runs WHERE id = $1 OR id = $2 ORDER BY id", ["q-a", "q-b"]);
    expect(result.columns).toEqual(["id", "status"]);
    expect(result.rows).toEqual([
      { id: "q-a", status: "succeeded" },
      { id: "q-b", status: "succeeded" },
    ]);
    expect((await cairn.query("SELECT count(*) AS n FROM cairn_steps")).rows.map((r) => Number(r.n))).toEqual([2]);

    await expect(cairn.query("DELETE FROM cairn_runs WHERE id = $1", ["q-a"])).rejects.toThrow(/read-only/);
    await expect(cairn.query("UPDATE cairn_runs SET status = 'failed'")).rejects.toThrow(/read-only/);
    await expect(cairn.query("")).rejects.toThrow(/SELECT/);
    // Nothing was written.
    expect((await storeOf(cairn).getRun("q-a"))?.status).toBe("succeeded");
  });
});
