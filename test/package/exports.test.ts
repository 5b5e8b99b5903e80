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

  it("serves the mock LLM from `cairn/testing`, not from `cairn/ai`", () => {
    const project = scratchDir("cairn-consumer-");
    mkdirSync(join(project, "node_modules"));
    symlinkSync(resolve("."), join(project, "node_modules", "cairn"), "dir");
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "consumer", type: "module", dependencies: { cairn: "*" } }));
    writeFileSync(
      join(project, "main.js"),
      `import * as ai from "cairn/ai";
       import { startMockLlm } from "cairn/testing";
       const llm = await startMockLlm({ script: { rules: [{ reply: { content: "hi" } }] } });
       const response = await fetch(llm.url + "/chat/completions", {
         method: "POST",
         headers: { "content-type": "application/json" },
         body: JSON.stringify({ model: "mock-1", messages: [{ role: "user", content: "hello" }] }),
       });
       const body = await response.json();
       await llm.close();
       let internal = "importable";
       try { await import("cairn/internal"); } catch (error) { internal = error.code; }
       console.log(JSON.stringify({ aiHasMock: "startMockLlm" in ai, reply: body.choices[0].message.content, internal }));`,
    );
    const out = execFileSync(process.execPath, ["main.js"], { cwd: project, encoding: "utf8" });
    expect(JSON.parse(out.trim())).toEqual({ aiHasMock: false, reply: "hi", internal: "ERR_PACKAGE_PATH_NOT_EXPORTED" });
  });
});
