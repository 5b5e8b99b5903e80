import { execFileSync } from "node:child_process";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { scratchDir } from "../scratch.js";

/** The `exports` map is the API: another project that depends on Cairn imports it by name. */
describe("the package", () => {
  it("is importable as `cairn` and `cairn/testing` from another ESM project (compiled dist/)", () => {
    const project = scratchDir("cairn-consumer-");
    mkdirSync(join(project, "node_modules"));
    symlinkSync(resolve("."), join(project, "node_modules", "cairn"), "dir");
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "consumer", type: "module", dependencies: { cairn: "*" } }));
    writeFileSync(
      join(project, "main.js"),
      `import { Cairn, NonDeterminismError } from "cairn";
       import { ManualClock } from "cairn/testing";
       const cairn = new Cairn({ database: ${JSON.stringify(join(project, "app.db"))}, clock: new ManualClock() });
       const hello = cairn.workflow("hello", async (ctx, name) => ctx.step("greet", () => "hello " + name));
       await cairn.launch();
       const run = await hello.start("world", { id: "h1" });
       console.log(JSON.stringify({ out: await run.result(), error: new NonDeterminismError("x").name }));
       await cairn.shutdown();`,
    );
    const out = execFileSync(process.execPath, ["main.js"], { cwd: project, encoding: "utf8" });
    expect(JSON.parse(out.trim())).toEqual({ out: "hello world", error: "NonDeterminismError" });
  });
});
