import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { runWithLongJournal } from "./long-journal.js";

const MAIN = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));
const STEPS = 10_000;

/**
 * A reader that falls behind (a busy parent process, a slow terminal) still gets all of a long
 * listing: the CLI's exit waits for its output to be flushed. It once armed a 2 s exit timer the
 * moment the command returned, and the pipe's unflushed rest was lost, with exit code 0.
 */
describe.each(BACKENDS)("cairn output to a slow reader on $name", (backend) => {
  const env = cairnFactory(backend);

  it("a reader that pauses past the exit timer still gets every line", async () => {
    const database = await env.database();
    await runWithLongJournal(env.cairn(database), backend, database, "r1", STEPS);

    const child = spawn(process.execPath, [MAIN, "show", "r1", "--database", database, "--limit", String(STEPS)], {
      env: { ...process.env, CAIRN_DATABASE: undefined, NO_COLOR: "1" },
    });
    const chunks: Buffer[] = [];
    // Read the first chunk, then nothing for 6 s: the CLI has long returned by then and its
    // output (~700 KB) is far past what the pipe holds.
    child.stdout.once("data", (chunk: Buffer) => {
      chunks.push(chunk);
      child.stdout.pause();
      setTimeout(() => {
        child.stdout.on("data", (more: Buffer) => chunks.push(more));
        child.stdout.resume();
      }, 6_000);
    });
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    const stdout = Buffer.concat(chunks).toString();
    expect(code).toBe(0);
    expect(stdout).toContain(`step ${STEPS - 1}  `);
    expect(
      stdout
        .trimEnd()
        .split("\n")
        .filter((line) => /^\s*\d+\s+step \d+\s/.test(line)),
    ).toHaveLength(STEPS - 1);
  });
});
