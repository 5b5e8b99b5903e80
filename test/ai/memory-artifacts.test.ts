import { describe, expect, it } from "vitest";
import type { Cairn } from "../../src/index.js";
import type { Artifact, ArtifactRef, MemoryEntry } from "../../src/ai/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { storeOf } from "../../src/internal.js";

async function count(cairn: Cairn, sql: string): Promise<number> {
  const result = await storeOf(cairn).query(sql);
  return Number(result.rows[0]!.n);
}

interface ReportOutput {
  a: ArtifactRef;
  b: ArtifactRef;
  note: ArtifactRef;
  listed: ArtifactRef[];
  got: Artifact;
  text: string;
  textType: string;
  missing: string;
}

describe.each(BACKENDS)("agent memory and artifacts on $name", (backend) => {
  const env = cairnFactory(backend);

  it("keeps versioned memory per agent, shared by later runs of the same workflow", async () => {
    const cairn = env.cairn(await env.database());
    const notes = cairn.workflow("notes", async (ctx, word: string) => {
      const before = await ctx.memory.get<string[]>("words");
      await ctx.memory.set("words", [...(before ?? []), word]);
      const long = `${word} `.repeat(200);
      const version = await ctx.memory.set("long", long);
      const words = await ctx.memory.get<string[]>("words");
      const history = await ctx.memory.history<string>("long");
      return { before, words, version, long: (await ctx.memory.get<string>("long")) === long, history };
    });
    await cairn.launch();

    const first = await (await notes.start("alpha")).result();
    expect(first.before).toBeUndefined();
    expect(first.words).toEqual(["alpha"]);
    expect(first.version).toBe(1);
    expect(first.long).toBe(true);
    expect(first.history.map((h: MemoryEntry<string>) => [h.version, h.deleted])).toEqual([[1, false]]);

    const second = await (await notes.start("beta", { id: "second" })).result();
    expect(second.before).toEqual(["alpha"]);
    expect(second.words).toEqual(["alpha", "beta"]);
    expect(second.version).toBe(2);
    expect(second.history.map((h) => [h.version, h.runId, h.value?.slice(0, 5)])).toEqual([
      [1, expect.any(String), "alpha"],
      [2, "second", "beta "],
    ]);

    // Long values live in cairn_payloads by hash, not inline.
    expect(await count(cairn, "SELECT count(*) AS n FROM cairn_memory WHERE key = 'long' AND value IS NULL AND value_hash IS NOT NULL")).toBe(2);
    expect(await count(cairn, "SELECT count(*) AS n FROM cairn_memory WHERE agent = 'notes' AND key = 'words'")).toBe(2);
    const kinds = await storeOf(cairn).query("SELECT name, kind FROM cairn_steps WHERE run_id = 'second' ORDER BY seq");
    expect(kinds.rows).toEqual([
      { name: "get:words", kind: "memory" },
      { name: "set:words", kind: "memory" },
      { name: "set:long", kind: "memory" },
      { name: "get:words", kind: "memory" },
      { name: "history:long", kind: "memory" },
      { name: "get:long", kind: "memory" },
    ]);
  });

  it("deletes with a tombstone and numbers concurrent sets of one key without a collision", async () => {
    const cairn = env.cairn(await env.database());
    const wf = cairn.workflow("scratch", async (ctx) => {
      const versions = await Promise.all([ctx.memory.set("k", "a"), ctx.memory.set("k", "b"), ctx.memory.set("k", "c")]);
      const deleted = await ctx.memory.delete("k");
      const gone = await ctx.memory.get("k");
      const history = await ctx.memory.history("k");
      const shared = ctx.memory.scope("shared");
      await shared.set("k", "elsewhere");
      return { versions, deleted, gone, history, scoped: await shared.get("k"), agents: [ctx.memory.agent, shared.agent] };
    });
    await cairn.launch();
    const out = await (await wf.start(undefined)).result();
    expect([...out.versions].sort()).toEqual([1, 2, 3]);
    expect(out.deleted).toBe(4);
    expect(out.gone).toBeUndefined();
    expect(out.history.map((h) => [h.version, h.deleted, h.value === undefined])).toEqual([
      [1, false, false],
      [2, false, false],
      [3, false, false],
      [4, true, true],
    ]);
    expect(out.scoped).toBe("elsewhere");
    expect(out.agents).toEqual(["scratch", "shared"]);
  });

  it("replays recorded memory after a restart: same values, no duplicate versions", async () => {
    const db = await env.database();
    const executions: string[] = [];
    const register = (cairn: Cairn) => {
      const agent = cairn.workflow("researcher", async (ctx) => {
        const v1 = await ctx.memory.set("topic", "tides");
        const v2 = await ctx.memory.set("topic", "moons");
        const read = await ctx.memory.get<string>("topic");
        const history = await ctx.memory.history<string>("topic");
        executions.push("before-recv");
        const extra = await ctx.recv<string>("go");
        const after = await ctx.memory.get<string>("topic");
        return { v1, v2, read, history: history.map((h) => h.value), extra, after };
      });
      const intruder = cairn.workflow("intruder", async (ctx) => ctx.memory.scope("researcher").set("topic", "comets"));
      return { agent, intruder };
    };

    const first = env.cairn(db);
    const { agent } = register(first);
    await first.launch();
    const run = await agent.start(undefined, { id: "research-1" });
    await eventually(async () => (await run.status()).status === "waiting");
    await first.shutdown();

    const second = env.cairn(db);
    const { intruder } = register(second);
    await second.launch();
    // Another run writes a newer version while the first waits: replay must not see it.
    expect(await (await intruder.start(undefined)).result()).toBe(3);
    await second.send("research-1", "go", "now");
    const out = await second.run<{ v1: number; v2: number; read: string; history: string[]; extra: string; after: string }>(run.id).result();
    expect(out).toEqual({ v1: 1, v2: 2, read: "moons", history: ["tides", "moons"], extra: "now", after: "comets" });
    expect(executions).toEqual(["before-recv", "before-recv"]);
    expect(await count(second, "SELECT count(*) AS n FROM cairn_memory WHERE agent = 'researcher' AND key = 'topic'")).toBe(3);
    expect(await count(second, "SELECT count(*) AS n FROM cairn_memory WHERE run_id = 'research-1'")).toBe(2);
  });

  it("stores artifacts by content once and reads them back, also after a restart", async () => {
    const db = await env.database();
    const bytes = new Uint8Array(4096).map((_, i) => i % 251);
    const register = (cairn: Cairn) =>
      cairn.workflow("reporter", async (ctx) => {
        const a = await ctx.artifacts.put("report.bin", bytes, { mediaType: "application/x-report" });
        const b = await ctx.artifacts.put("copy.bin", bytes, { mediaType: "application/x-report" });
        const note = await ctx.artifacts.put("note.txt", "héllo");
        const listed = await ctx.artifacts.list();
        await ctx.recv("go");
        const got = await ctx.artifacts.get(b.id);
        const text = await ctx.artifacts.get(note.id);
        const missing = await ctx.artifacts.get("no-such-id").catch((error: Error) => error.name);
        return { a, b, note, listed, got, text: new TextDecoder().decode(text.bytes), textType: text.mediaType, missing };
      });

    const first = env.cairn(db);
    const reporter = register(first);
    await first.launch();
    const run = await reporter.start(undefined, { id: "report-1" });
    await eventually(async () => (await run.status()).status === "waiting");
    await first.shutdown();

    const second = env.cairn(db);
    register(second);
    await second.launch();
    await second.send("report-1", "go", true);
    const out = await second.run<ReportOutput>(run.id).result();
    expect(out.a).toMatchObject({ id: "report-1:0", name: "report.bin", size: 4096 });
    expect(out.b.id).toBe("report-1:1");
    expect(out.b.hash).toBe(out.a.hash);
    expect(out.note).toMatchObject({ size: 6, mediaType: "text/plain; charset=utf-8" });
    expect(out.listed.map((r) => r.name)).toEqual(["report.bin", "copy.bin", "note.txt"]);
    expect(out.got).toMatchObject({ id: "report-1:1", name: "copy.bin", mediaType: "application/x-report", size: 4096 });
    expect(Buffer.from(out.got.bytes).equals(Buffer.from(bytes))).toBe(true);
    expect(out.text).toBe("héllo");
    expect(out.missing).toBe("TerminalError");

    expect(await count(second, "SELECT count(*) AS n FROM cairn_artifacts WHERE run_id = 'report-1'")).toBe(3);
    expect(await count(second, `SELECT count(*) AS n FROM cairn_payloads WHERE hash = '${out.a.hash}'`)).toBe(1);
    // The journal records references, not bytes: puts and gets are short inline rows.
    const steps = await storeOf(second).query(
      "SELECT count(*) AS n FROM cairn_steps WHERE run_id = 'report-1' AND kind = 'artifact' AND name <> 'list' AND output_hash IS NOT NULL",
    );
    expect(Number(steps.rows[0]!.n)).toBe(0);
  });
});
