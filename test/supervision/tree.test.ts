import { describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { cli, expectOk, expectOneLineError } from "../cli/cli.js";
import { cairnFactory, eventually } from "../harness.js";

/** `cairn tree <runId>` (the built CLI) and the `cairn_tree` view over a two-level supervision tree with restarts. */
describe.each(BACKENDS)("cairn tree on $name", (backend) => {
  const env = cairnFactory(backend);

  it("shows each child's state, restart count and last exit reason, nested supervisors included", async () => {
    const database = await env.database();
    const cairn = env.cairn(database);
    const flaky = cairn.workflow("flaky", async (ctx) => {
      if (!ctx.runId.includes("~")) throw new TypeError("tool timed out");
      await ctx.recv("finish");
    });
    const steady = cairn.workflow("steady", async (ctx) => ctx.recv("finish"));
    const team = cairn.supervisor("team", { intensity: 3, children: [{ id: "worker", workflow: flaky }] });
    cairn.supervisor("root", {
      children: [
        { id: "team", workflow: team },
        { id: "verifier", workflow: steady },
      ],
    });
    await cairn.launch();
    await (await import("../../src/internal.js")).runtimeOf(cairn).startRun("root", "root", undefined, undefined);
    await eventually(
      async () =>
        (
          await cairn
            .run("root/team/worker~1")
            .status()
            .catch(() => undefined)
        )?.status === "waiting",
    );

    const result = await cli(["tree", "root", "--database", database]);
    expectOk(result);
    const lines = result.stdout.split("\n");
    expect(lines[0]).toMatch(/^RUN\s+WORKFLOW\s+STATE\s+CHILD\s+RESTARTS\s+LAST EXIT\s+REPLACED BY/);
    const line = (id: string) => lines.find((l) => l.includes(`${id} `))!;
    expect(line("root/team/worker")).toMatch(/├─ root\/team\/worker\s+flaky\s+failed\s+worker\s+0\s+TypeError: tool timed out\s+→ root\/team\/worker~1/);
    expect(line("root/team/worker~1")).toMatch(/root\/team\/worker~1\s+flaky\s+waiting\s+worker\s+1\s+TypeError: tool timed out/);
    expect(line("root/verifier")).toMatch(/└─ root\/verifier\s+steady\s+waiting\s+verifier\s+0/);

    const json = JSON.parse((await cli(["tree", "root", "--database", database, "--json"])).stdout) as { id: string; restartCount: number }[];
    expect(json.map((n) => [n.id, n.restartCount])).toEqual([
      ["root", 0],
      ["root/team", 0],
      ["root/team/worker", 0],
      ["root/team/worker~1", 1],
      ["root/verifier", 0],
    ]);
    const sql = await cairn.query("SELECT run_id, state, restart_count FROM cairn_tree WHERE root_id = 'root' AND child_id = 'worker' ORDER BY run_id");
    expect(sql.rows.map((r) => [r.run_id, r.state, Number(r.restart_count)])).toEqual([
      ["root/team/worker", "failed", 0],
      ["root/team/worker~1", "waiting", 1],
    ]);
    expectOneLineError(await cli(["tree", "nobody", "--database", database]), /nobody/);
  });
});
