import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

/**
 * The layers of src/ (docs/architecture.md), as folders whose imports point down only:
 *
 *   base (errors, error registry, util/)  — importable by every layer
 *   store/ → engine/ → scheduler/ → ai/ | supervision/ | testing/ → observe/ → ui/ → cairn.ts, index.ts, internal.ts → cli/
 *
 * A file may import its own layer and any layer below it; never one above, never a sibling on the
 * same floor (ai/ and supervision/ meet only above them). Every import counts — `import type` and
 * `export ... from` too — and no two src files may import each other in a circle, even through
 * types. src/bench and src/experiment are leaving src/ for tools/ and are outside the rule.
 */
const LAYERS: { name: string; rank: number; owns: (path: string) => boolean }[] = [
  { name: "base", rank: 0, owns: (p) => p === "errors.ts" || p === "error-registry.ts" || p.startsWith("util/") },
  { name: "store", rank: 1, owns: (p) => p.startsWith("store/") },
  { name: "engine", rank: 2, owns: (p) => p.startsWith("engine/") },
  { name: "scheduler", rank: 3, owns: (p) => p.startsWith("scheduler/") },
  { name: "ai", rank: 4, owns: (p) => p.startsWith("ai/") },
  { name: "supervision", rank: 4, owns: (p) => p.startsWith("supervision/") },
  { name: "testing", rank: 4, owns: (p) => p.startsWith("testing/") },
  { name: "observe", rank: 5, owns: (p) => p.startsWith("observe/") },
  // The dashboard (issue 12): reads through observe/, acts through a host the face implements.
  { name: "ui", rank: 5.5, owns: (p) => p.startsWith("ui/") },
  { name: "facade", rank: 6, owns: (p) => p === "cairn.ts" || p === "index.ts" || p === "internal.ts" },
  { name: "cli", rank: 7, owns: (p) => p.startsWith("cli/") },
];

/**
 * Circles left after issue 9 (type-level: the store's interface and retention's filter types; the
 * agents layer's context, tools, budgets and recorded model). This list may only shrink, and an
 * entry that no longer exists fails the test below so the list stays true.
 */
const KNOWN_CYCLES: string[][] = [
  ["store/retention.ts", "store/store.ts"],
  [
    "ai/agent-context.ts",
    "ai/agent.ts",
    "ai/budget-approval.ts",
    "ai/durable-tools.ts",
    "ai/model-budget.ts",
    "ai/recorded-model.ts",
    "ai/tool-context.ts",
  ],
];

type Graph = Map<string, string[]>;

function layerOf(path: string) {
  return LAYERS.find((layer) => layer.owns(path));
}

/** Imports that point up or sideways, and files in no layer. Paths are relative to src/. */
export function layerViolations(graph: Graph): string[] {
  const problems: string[] = [];
  for (const [from, targets] of graph) {
    const source = layerOf(from);
    if (source === undefined) {
      problems.push(`${from} is in no layer: add its folder to LAYERS (and to docs/architecture.md)`);
      continue;
    }
    for (const to of targets) {
      const target = layerOf(to);
      if (target === undefined || target.name === source.name) continue; // unknown targets are reported as sources
      if (target.rank > source.rank) problems.push(`${from} imports ${to}: ${source.name} may not import ${target.name} (up)`);
      else if (target.rank === source.rank) problems.push(`${from} imports ${to}: ${source.name} may not import ${target.name} (sideways)`);
    }
  }
  return problems;
}

/** Every circle of imports (strongly connected component of more than one file, or a self-import). */
export function importCycles(graph: Graph): string[][] {
  let index = 0;
  const indices = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (node: string): void => {
    indices.set(node, index);
    low.set(node, index++);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!graph.has(next)) continue;
      if (!indices.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, indices.get(next)!));
      }
    }
    if (low.get(node) === indices.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) cycles.push(component.sort());
    }
  };
  for (const node of [...graph.keys()].sort()) if (!indices.has(node)) visit(node);
  return cycles;
}

const SRC = resolve("src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return name.endsWith(".ts") && !name.endsWith(".d.ts") ? [path] : [];
  });
}

/** src/'s import graph: every static import, `import type`, `export ... from` and `import()` of a relative path. */
function srcGraph(): Graph {
  const graph: Graph = new Map();
  for (const file of sourceFiles(SRC)) {
    const from = relative(SRC, file);
    const { importedFiles } = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
    const targets: string[] = [];
    for (const { fileName } of importedFiles) {
      if (!fileName.startsWith(".")) continue; // packages and node: builtins
      const to = relative(SRC, resolve(dirname(file), fileName.replace(/\.js$/, ".ts")));
      if (to.startsWith("..")) throw new Error(`${from} imports ${fileName}, outside src/`);
      targets.push(to);
    }
    graph.set(from, targets);
  }
  return graph;
}

describe("the layers of src/", () => {
  it("finds what it is meant to find (an upward import, a sideways one, a circle through types)", () => {
    const graph: Graph = new Map([
      ["engine/a.ts", ["store/s.ts", "errors.ts", "scheduler/x.ts"]],
      ["ai/agent.ts", ["supervision/tree.ts", "engine/a.ts"]],
      ["store/s.ts", ["errors.ts"]],
      ["scheduler/x.ts", ["engine/a.ts"]],
      ["supervision/tree.ts", []],
      ["errors.ts", []],
      ["nowhere/z.ts", []],
    ]);
    expect(layerViolations(graph)).toEqual([
      "engine/a.ts imports scheduler/x.ts: engine may not import scheduler (up)",
      "ai/agent.ts imports supervision/tree.ts: ai may not import supervision (sideways)",
      "nowhere/z.ts is in no layer: add its folder to LAYERS (and to docs/architecture.md)",
    ]);
    expect(importCycles(graph)).toEqual([["engine/a.ts", "scheduler/x.ts"]]);
  });

  it("reads every kind of import statement", () => {
    const { importedFiles } = ts.preProcessFile(
      `import type { A } from "./a.js";\nimport { type B } from "./b.js";\nexport { C } from "./c.js";\nexport type * from "./d.js";\nimport "./e.js";\nconst f = await import("./f.js");`,
      true,
      true,
    );
    expect(importedFiles.map((f) => f.fileName)).toEqual(["./a.js", "./b.js", "./c.js", "./d.js", "./e.js", "./f.js"]);
  });

  it("has every import of src/ pointing down (or within its own layer)", () => {
    const graph = srcGraph();
    expect(graph.size).toBeGreaterThan(100);
    expect(layerViolations(graph)).toEqual([]);
  });

  it("has no circular imports between src files (beyond the known ones being rewritten)", () => {
    const known = new Set(KNOWN_CYCLES.map((cycle) => [...cycle].sort().join(" ↔ ")));
    const found = importCycles(srcGraph()).map((cycle) => cycle.join(" ↔ "));
    expect(found.filter((cycle) => !known.has(cycle))).toEqual([]);
    expect(
      [...known].filter((cycle) => !found.includes(cycle)),
      "gone: remove from KNOWN_CYCLES",
    ).toEqual([]);
  });

  it("has a README in src/supervision/ saying what lives there (issue 11)", () => {
    expect(readdirSync(join(SRC, "supervision"))).toContain("README.md");
  });
});
