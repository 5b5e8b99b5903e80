import { describe, expect, it } from "vitest";
import { TerminalError, type Cairn } from "../../src/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { cli, expectOk, expectOneLineError } from "./cli.js";

/** Three finished runs: one succeeded with a child, one failed, one child. */
async function populate(cairn: Cairn): Promise<void> {
  const greet = cairn.workflow("greet", async (ctx, name: string) => {
    const greeting = await ctx.step("hello", () => ({ greeting: `hello ${name}`, big: 12345678901234567890n, at: new Date(0) }));
    await ctx.step("long", () => "x".repeat(300)); // past the inline limit: stored in cairn_payloads
    return greeting.greeting;
  });
  const parent = cairn.workflow("parent", async (ctx) => {
    const child = await ctx.child(greet, "child", { id: "kid" });
    return child.result();
  });
  const pay = cairn.workflow("pay", async (ctx) => {
    await ctx.step("charge", () => {
      throw new TerminalError("card declined");
    });
  });
  await cairn.launch();
  await (await greet.start("ada", { id: "g1" })).result();
  await (await parent.start(undefined, { id: "p1" })).result();
  await (await pay.start(undefined, { id: "f1" })).result().catch(() => undefined);
}

describe.each(BACKENDS)("cairn runs/show/sql on $name", (backend) => {
  const env = cairnFactory(backend);

  it("lists runs, filters them, and prints JSON", async () => {
    const db = await env.database();
    await populate(env.cairn(db));

    const all = await cli(["runs", "--database", db]);
    expectOk(all);
    const lines = all.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^ID\s+WORKFLOW\s+STATUS\s+CREATED\s+DURATION\s+RECOVERIES$/);
    expect(
      lines
        .slice(1)
        .map((line) => line.split(/\s+/)[0])
        .sort(),
    ).toEqual(["f1", "g1", "kid", "p1"]);
    expect(all.stdout).toMatch(/f1\s+pay\s+failed/);

    const failed = await cli(["runs", "--status", "failed", "--json", "--database", db]);
    expectOk(failed);
    const rows = JSON.parse(failed.stdout) as { id: string; status: string; recoveries: number; durationMs: number }[];
    expect(rows.map((r) => [r.id, r.status, r.recoveries])).toEqual([["f1", "failed", 0]]);
    expect(rows[0]!.durationMs).toBeGreaterThanOrEqual(0);

    const greets = JSON.parse((await cli(["runs", "--workflow", "greet", "--json", "--database", db])).stdout) as { id: string }[];
    expect(greets.map((r) => r.id).sort()).toEqual(["g1", "kid"]);
    const one = JSON.parse((await cli(["--json", "runs", "--limit=1", "--database", db])).stdout) as unknown[];
    expect(one).toHaveLength(1);
  });

  it("shows a run's header and its journal as a timeline with previews", async () => {
    const db = await env.database();
    await populate(env.cairn(db));

    const shown = await cli(["show", "g1", "--database", db]);
    expectOk(shown);
    expect(shown.stdout).toMatch(/workflow\s+greet/);
    expect(shown.stdout).toMatch(/status\s+succeeded/);
    expect(shown.stdout).toMatch(/output\s+"hello ada"/);
    expect(shown.stdout).toMatch(/SEQ\s+NAME\s+KIND\s+STATUS\s+DURATION\s+ATTEMPTS\s+OUTPUT \/ ERROR/);
    expect(shown.stdout).toMatch(/0\s+hello\s+step\s+succeeded\s+\d+ms\s+1\s+\{"greeting":"hello ada","big":"12345678901234567890",/);
    const long = shown.stdout.split("\n").find((line) => /\s1\s+long\s/.test(line))!;
    expect(long).toMatch(/"x{10,}…$/);
    expect(long.length).toBeLessThan(140);

    const parent = await cli(["show", "p1", "--database", db]);
    expect(parent.stdout).toMatch(/children\s+kid \(succeeded\)/);
    expect(parent.stdout).toMatch(/0\s+greet\s+child\s+succeeded\s+\S+\s+1\s+"kid"/);
    const kid = await cli(["show", "kid", "--database", db]);
    expect(kid.stdout).toMatch(/parent\s+p1 \(at seq 0\)/);

    const failed = await cli(["show", "f1", "--database", db]);
    expect(failed.stdout).toMatch(/error\s+TerminalError: card declined/);
    expect(failed.stdout).toMatch(/0\s+charge\s+step\s+failed\s+\S+\s+1\s+TerminalError: card declined/);
  });

  it("shows a run as JSON with decoded values", async () => {
    const db = await env.database();
    await populate(env.cairn(db));
    const result = await cli(["show", "f1", "--json", "--database", db]);
    expectOk(result);
    const view = JSON.parse(result.stdout) as Record<string, unknown> & { journal: Record<string, unknown>[] };
    expect(view).toMatchObject({ id: "f1", workflow: "pay", status: "failed", error: { name: "TerminalError", code: "TERMINAL" } });
    expect(view.journal).toEqual([
      expect.objectContaining({
        seq: 0,
        name: "charge",
        kind: "step",
        status: "failed",
        output: null,
        error: expect.objectContaining({ message: "card declined" }),
      }),
    ]);
    const g1 = JSON.parse((await cli(["show", "g1", "--json", "--database", db])).stdout) as { journal: { output: unknown }[] };
    expect(g1.journal[0]!.output).toEqual({ greeting: "hello ada", big: "12345678901234567890", at: "1970-01-01T00:00:00.000Z" });
  });

  it("runs read-only SQL, as a table or as JSON rows, and refuses writes in one line", async () => {
    const db = await env.database();
    await populate(env.cairn(db));
    const query = "SELECT run_id, seq, name, kind FROM cairn_journal WHERE run_id = 'g1' ORDER BY seq";

    const table = await cli(["sql", query, "--database", db]);
    expectOk(table);
    expect(table.stdout).toMatch(/^run_id\s+seq\s+name\s+kind\n/);
    expect(table.stdout).toMatch(/g1\s+0\s+hello\s+step\n/);
    expect(table.stdout).toContain("(2 rows)");

    const json = await cli(["sql", query, "--json", "--database", db]);
    expectOk(json);
    expect((JSON.parse(json.stdout) as { name: string }[]).map((r) => r.name)).toEqual(["hello", "long"]);

    for (const write of ["DELETE FROM cairn_runs", "UPDATE cairn_runs SET status = 'failed'", "DROP TABLE cairn_steps"]) {
      expectOneLineError(await cli(["sql", write, "--database", db]), /refused: cairn sql only reads/);
    }
    expectOneLineError(await cli(["sql", "SELECT nope FROM cairn_runs", "--database", db]), /SQL error: .*nope/);
    const after = JSON.parse((await cli(["sql", "SELECT count(*) AS n FROM cairn_runs", "--json", "--database", db])).stdout) as { n: unknown }[];
    expect(Number(after[0]!.n)).toBe(4);
  });
});
