import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";

/**
 * `ai` and `@ai-sdk/provider` are optional peer dependencies: an application with workflows only
 * installs neither. A module hook makes them unresolvable (as if not installed) for a process that
 * imports the built package: `cairn` works, `cairn/ai` fails with an AiSdkUnavailableError naming
 * the versions it supports.
 */
const REFUSE = `data:text/javascript,${encodeURIComponent(`
  export async function resolve(specifier, context, next) {
    if (specifier === "ai" || specifier.startsWith("ai/") || specifier.startsWith("@ai-sdk/")) {
      throw Object.assign(new Error("Cannot find package '" + specifier + "' (refused by the test)"), { code: "ERR_MODULE_NOT_FOUND" });
    }
    return next(specifier, context);
  }
`)}`;
const REGISTER = `data:text/javascript,${encodeURIComponent(`import { register } from "node:module"; register(${JSON.stringify(REFUSE)});`)}`;

function run(script: string): string {
  return execFileSync(process.execPath, ["--import", REGISTER, "--input-type=module", "-e", script], { encoding: "utf8", cwd: resolve(".") }).trim();
}

describe("without the AI SDK installed", () => {
  it("`cairn` runs workflows, and `cairn/ai` says which AI SDK versions it needs", () => {
    const dist = pathToFileURL(resolve("dist")).href;
    const dir = mkdtempSync(join(tmpdir(), "cairn-no-ai-"));
    const db = join(dir, "app.db");
    let out: string;
    try {
      out = run(`
      const refused = await import("ai").then(() => "loaded", (e) => e.code);
      const { Cairn, AiSdkUnavailableError } = await import(${JSON.stringify(`${dist}/index.js`)});
      const cairn = new Cairn({ database: ${JSON.stringify(db)} });
      const hello = cairn.workflow("hello", async (ctx, name) => ctx.step("greet", () => "hello " + name));
      await cairn.launch();
      const result = await (await hello.start("world", { id: "h1" })).result();
      await cairn.shutdown();
      const ai = await import(${JSON.stringify(`${dist}/ai/index.js`)}).then(() => null, (e) => ({ name: e.name, code: e.code, isClass: e instanceof AiSdkUnavailableError, message: e.message }));
      console.log(JSON.stringify({ refused, result, ai }));
    `);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    const parsed = JSON.parse(out.split("\n").pop()!) as {
      refused: string;
      result: string;
      ai: { name: string; code: string; isClass: boolean; message: string };
    };
    expect(parsed.refused).toBe("ERR_MODULE_NOT_FOUND");
    expect(parsed.result).toBe("hello world");
    expect(parsed.ai).toMatchObject({ name: "AiSdkUnavailableError", code: "AI_SDK_UNAVAILABLE", isClass: true });
    expect(parsed.ai.message).toMatch(/ai@6 with @ai-sdk\/provider@3, or ai@7 with @ai-sdk\/provider@4/);
  });
});
