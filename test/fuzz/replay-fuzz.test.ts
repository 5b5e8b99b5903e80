import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import type { Cairn } from "../../src/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { interpret, Observations, type ChildInput, programs, shrinkCandidates, size, type Node, type Program } from "./program.js";
import { storeOf } from "../../src/internal.js";
import { scratchDir } from "../scratch.js";

/**
 * The replay fuzzer (FoundationDB-style simulation): seeded random programs — trees of
 * `Promise.all`, `Promise.race` and sequences over steps (some failing), tools whose functions call
 * durable operations, model calls on the AI SDK's MockLanguageModelV3, sleeps, messages, child
 * runs, `ctx.select` / `ctx.race` over children, messages the program sends itself and real timers,
 * and child cancels (at once, or with a grace period), with random latencies — run live, then replayed after an unload (every program ends with a
 * sleep) and after its process's Cairn is shut down at a random moment and another recovers it.
 * Every value the workflow sees on replay must equal what it saw live (a select's winner included),
 * and every run must succeed
 * (the program never changes, so a NonDeterminismError would be a false alarm).
 *
 * FUZZ_SEED picks the programs (default a fixed seed, so the gate is repeatable; `FUZZ_SEED=random`
 * explores a new one each run, printed); FUZZ_PROGRAMS their number per backend (default 1,000).
 * Latencies and kill moments are real, so even a fixed seed meets new interleavings each run. A
 * failure prints the seed and the smallest failing program found.
 */
const seedSetting = process.env.FUZZ_SEED ?? "20261130";
const seed = seedSetting === "random" ? Math.floor(Math.random() * 2 ** 31) : Number(seedSetting);
const count = Number(process.env.FUZZ_PROGRAMS ?? 1_000);
const killedCount = Number(process.env.FUZZ_KILLED_PROGRAMS ?? 200);
const corpus = JSON.parse(readFileSync(new URL("./corpus.json", import.meta.url), "utf8")) as { name: string; root: Node }[];

/** The interpreter as plain JavaScript, for the worker process the SIGKILL test kills. */
function transpiledInterpreter(): string {
  const source = readFileSync(new URL("./program.ts", import.meta.url), "utf8");
  const { outputText } = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: true },
  });
  const dir = fileURLToPath(new URL("../../.tmp/fuzz-build/", import.meta.url));
  mkdirSync(dir, { recursive: true });
  const file = join(dir, "program.mjs");
  writeFileSync(file, outputText);
  return file;
}

interface Outcome {
  program: Program;
  problem: string | null;
}

describe.each(BACKENDS)("replay fuzzer on $name", (backend) => {
  const env = cairnFactory(backend);

  function register(cairn: Cairn, observations: Observations) {
    // A child's step takes `ms` (selects race children against messages and timers; cancels meet them mid-step).
    const child = cairn.workflow("fuzz-child", async (ctx, input: ChildInput) =>
      ctx.step("c", async () => {
        if (input.ms) await new Promise((resolve) => setTimeout(resolve, input.ms));
        return `child ${input.id} ${Math.random().toString(36).slice(2, 8)}`;
      }),
    );
    return cairn.workflow("fuzz", async (ctx, input: { root: Node }) => {
      const out = await interpret(ctx, input.root, observations, child);
      await ctx.sleep("end", 5); // unloads: the run is replayed from its journal before it returns
      return out;
    });
  }

  /** Runs programs, restarting the Cairn once after `restartAfterMs` if given; reports each one's problem. */
  async function runAll(list: Program[], restartAfterMs: number | null): Promise<Outcome[]> {
    const db = await env.database();
    const observations = new Observations();
    const first = env.cairn(db, { pollIntervalMs: 50 });
    const fuzz = register(first, observations);
    await first.launch();
    const ids = list.map((p, i) => `p${i}-${p.seed}`);
    await Promise.all(list.map((p, i) => fuzz.start({ root: p.root }, { id: ids[i] })));
    let cairn = first;
    if (restartAfterMs !== null) {
      await new Promise((resolve) => setTimeout(resolve, restartAfterMs));
      await first.shutdown();
      cairn = env.cairn(db, { pollIntervalMs: 50 });
      register(cairn, observations);
      await cairn.launch();
    }
    const results = await Promise.all(
      ids.map((id) =>
        cairn
          .run(id)
          .result()
          .then(
            (value) => ({ ok: true as const, value }),
            (error: unknown) => ({ ok: false as const, error }),
          ),
      ),
    );
    return list.map((program, i) => {
      const result = results[i]!;
      const diverged = observations.divergences.filter((d) => d.startsWith(`${ids[i]} `));
      const problem = !result.ok
        ? `failed: ${(result.error as Error).message}`
        : diverged.length > 0
          ? `replay differs from live: ${diverged.join("; ")}`
          : null;
      return { program, problem };
    });
  }

  /** The smallest program that still fails, by trying smaller ones (a few dozen tries at most). */
  async function shrink(program: Program, restartAfterMs: number | null): Promise<Program> {
    let smallest = program;
    for (let tries = 0; tries < 40;) {
      let smaller: Program | undefined;
      for (const candidate of shrinkCandidates(smallest.root)) {
        if (tries++ >= 40) break;
        const [outcome] = await runAll([{ seed: smallest.seed, root: candidate }], restartAfterMs);
        if (outcome!.problem !== null) {
          smaller = { seed: smallest.seed, root: candidate };
          break;
        }
      }
      if (smaller === undefined) break;
      smallest = smaller;
    }
    return smallest;
  }

  async function check(list: Program[], restartAfterMs: number | null): Promise<void> {
    const outcomes = await runAll(list, restartAfterMs);
    const failed = outcomes.filter((o) => o.problem !== null);
    if (failed.length === 0) return;
    const first = failed[0]!;
    const minimal = await shrink(first.program, restartAfterMs);
    expect.fail(
      `${failed.length} of ${list.length} programs replayed wrongly (FUZZ_SEED=${seed}, restart ${restartAfterMs ?? "none"}).\n` +
        `First: ${first.problem}\nProgram (${size(first.program.root)} nodes): ${JSON.stringify(first.program.root)}\n` +
        `Smallest failing (${size(minimal.root)} nodes): ${JSON.stringify(minimal.root)}`,
    );
  }

  /**
   * Starts programs in a worker process, SIGKILLs it at a random moment, and lets this process's
   * Cairn recover every run: what the workflows see after recovery must equal what they saw in the
   * killed process.
   */
  async function runKilled(killSeed: number, n: number, killAfterMs: number): Promise<Outcome[]> {
    const db = await env.database();
    const observationsFile = join(scratchDir("cairn-fuzz-"), "observations.jsonl");
    writeFileSync(observationsFile, "");
    const worker = spawn(process.execPath, [fileURLToPath(new URL("../fixtures/fuzz-worker.mjs", import.meta.url))], {
      env: { ...process.env, DB: db, PROGRAM_JS: transpiledInterpreter(), SEED: String(killSeed), COUNT: String(n), OBSERVATIONS: observationsFile },
      stdio: ["ignore", "pipe", "inherit"],
    });
    const exited = new Promise((resolve) => worker.once("exit", resolve));
    await new Promise<void>((resolve, reject) => {
      worker.stdout!.on("data", (chunk: Buffer) => {
        if (chunk.toString().includes("started")) resolve();
      });
      worker.once("exit", () => reject(new Error("the fuzz worker exited before starting its runs")));
    });
    // Kill mid-work: once the workflows have seen some values, after a random further moment.
    await eventually(() => readFileSync(observationsFile, "utf8").split("\n").length > n / 4, 60_000);
    await new Promise((resolve) => setTimeout(resolve, killAfterMs));
    worker.kill("SIGKILL");
    await exited;
    const observations = new Observations();
    for (const line of readFileSync(observationsFile, "utf8").split("\n")) {
      if (line === "") continue;
      const [runId, node, value] = JSON.parse(line) as [string, number, unknown];
      observations.observe(runId, node, value);
    }
    const liveDivergences = observations.divergences.length;
    // The kill must land mid-work for the test to mean anything: the worker saw some values, not all.
    expect(observations.size).toBeGreaterThan(0);
    const cairn = env.cairn(db, { pollIntervalMs: 50 });
    register(cairn, observations);
    await cairn.launch();
    const list = programs(killSeed, n);
    // A run that never ends is a finding too (a wait nothing wakes): name it and show its journal,
    // rather than let the test's own timeout hide which program it was.
    let giveUp!: NodeJS.Timeout;
    const stuck = new Promise<string>((resolve) => (giveUp = setTimeout(() => resolve("did not finish within 60 s of the recovery"), 60_000)));
    const results = await Promise.all(
      list.map((p, i) =>
        Promise.race([
          cairn
            .run(`p${p.seed - killSeed}-${p.seed}`)
            .result()
            .then(
              () => null,
              (error: unknown) => `failed: ${(error as Error).message}`,
            ),
          stuck,
        ]),
      ),
    );
    clearTimeout(giveUp);
    return Promise.all(
      list.map(async (program, i) => {
        const id = `p${program.seed - killSeed}-${program.seed}`;
        const diverged = observations.divergences.slice(liveDivergences).filter((d) => d.startsWith(`${id} `));
        const problem = results[i] ?? (diverged.length > 0 ? `replay differs from the killed process: ${diverged.join("; ")}` : null);
        if (problem === null) return { program, problem };
        const journal = (await storeOf(cairn).loadJournal(id)).map((r) => [r.seq, r.kind, r.name, r.status, r.storedPath, r.completion]);
        return { program, problem: `${problem}\njournal: ${JSON.stringify(journal)}` };
      }),
    );
  }

  it(
    `replays ${killedCount} random programs exactly after a SIGKILL at a random moment (seed ${seed})`,
    { timeout: budgetMs(killedCount, 150) },
    async () => {
      const killSeed = seed + 7_919 + (backend.name === "postgres" ? 1 : 0);
      const outcomes = await runKilled(killSeed, killedCount, seed % 150);
      const failed = outcomes.filter((o) => o.problem !== null);
      expect(
        failed.map((o) => `${o.problem}\nprogram: ${JSON.stringify(o.program.root)}`).slice(0, 3),
        `FUZZ_SEED=${seed}: ${failed.length} of ${outcomes.length} programs replayed wrongly after the SIGKILL`,
      ).toEqual([]);
    },
  );

  it.each(corpus)("replays the corpus case $name exactly", async ({ root }) => {
    await check([{ seed: 0, root }], null);
    await check([{ seed: 0, root }], 30);
  });

  it(`replays ${count} random programs exactly (seed ${seed})`, { timeout: budgetMs(count, 60) }, async () => {
    const all = programs(seed + (backend.name === "postgres" ? 1 : 0), count);
    const half = Math.ceil(all.length / 2);
    await check(all.slice(0, half), null);
    await check(all.slice(half), 40 + (seed % 60));
    await eventually(() => true);
  });
});

/** A test's time: 5 minutes for CI's counts, more for the larger runs FUZZ_PROGRAMS asks for. */
function budgetMs(programs: number, msPerProgram: number): number {
  return Math.max(300_000, programs * msPerProgram);
}
