import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { cli, expectOneLineError } from "../cli/cli.js";
import { cairnFactory } from "../harness.js";

const MAIN = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));

/** `cairn ui` as a real process: prints its URL with the token, refuses requests without it, stops on SIGTERM. */
describe.each(BACKENDS)("cairn ui on $name", (backend) => {
  const env = cairnFactory(backend);
  const started: ChildProcess[] = [];
  afterEach(() => {
    for (const child of started.splice(0)) if (child.exitCode === null) child.kill("SIGKILL");
  });

  async function serve(args: string[]): Promise<{ url: URL; child: ChildProcess; lines: string[] }> {
    const child = spawn(process.execPath, [MAIN, "ui", ...args], {
      env: { ...process.env, NO_COLOR: "1", USER: "ops" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    started.push(child);
    const lines: string[] = [];
    const url = await new Promise<URL>((resolve, reject) => {
      child.once("exit", (code) => reject(new Error(`cairn ui exited with ${code}: ${lines.join("\n")}`)));
      createInterface({ input: child.stdout! }).on("line", (line) => {
        lines.push(line);
        // The last line it prints once serving; the URL is on an earlier one.
        const found = lines.join("\n").match(/(http:\/\/\S+)/)?.[1];
        if (/Ctrl-C to stop/.test(line) && found !== undefined) resolve(new URL(found));
      });
    });
    return { url, child, lines };
  }

  it("serves on 127.0.0.1 with a free port and a token, and stops on SIGTERM", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    await cairn.workflow("hello", async () => "hi").start(undefined, { id: "hello-1" });
    const { url, child } = await serve(["--database", db, "--port", "0"]);
    expect(url.hostname).toBe("127.0.0.1");
    expect(Number(url.port)).toBeGreaterThan(0);
    const token = url.searchParams.get("token")!;
    const refused = await fetch(`${url.origin}/api/runs`);
    expect(refused.status).toBe(401);
    expect(await refused.text()).not.toContain("hello-1");
    const runs = (await (await fetch(`${url.origin}/api/runs`, { headers: { authorization: `Bearer ${token}` } })).json()) as { runs: { id: string }[] };
    expect(runs.runs.map((r) => r.id)).toEqual(["hello-1"]);
    // The first visit trades the token for an HttpOnly cookie and leaves the address bar clean.
    const visit = await fetch(url, { redirect: "manual" });
    expect(visit.status).toBe(302);
    expect(visit.headers.get("location")).toBe("/");
    expect(visit.headers.get("referrer-policy")).toBe("no-referrer");
    const cookie = visit.headers.get("set-cookie")!;
    expect(cookie).toMatch(/HttpOnly/i);
    expect(cookie).toMatch(/SameSite=Strict/i);
    expect((await fetch(`${url.origin}/api/runs/hello-1`, { headers: { cookie: cookie.split(";")[0]! } })).status).toBe(200);
    const page = await fetch(`${url.origin}/`, { headers: { cookie: cookie.split(";")[0]! } });
    expect(page.headers.get("content-security-policy")).toMatch(/script-src 'self';/);
    expect(await page.text()).toContain('<script type="module" src="/assets/main.js">');
    const script = await fetch(`${url.origin}/assets/main.js`, { headers: { cookie: cookie.split(";")[0]! } });
    expect(script.headers.get("content-type")).toMatch(/^text\/javascript/);
    expect((await fetch(`${url.origin}/assets/..%2fserver.js`, { headers: { cookie: cookie.split(";")[0]! } })).status).toBe(404);
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  });

  it("binds another interface only with --host, and keeps the token there", async () => {
    const db = await env.database();
    env.cairn(db);
    await env.cairn(db).query("SELECT 1"); // migrates
    const { url, lines } = await serve(["--database", db, "--port", "0", "--host", "0.0.0.0"]);
    expect(lines.join("\n")).toMatch(/reachable from other machines/);
    expect((await fetch(`http://127.0.0.1:${url.port}/api/runs`)).status).toBe(401);
    expect((await fetch(`http://127.0.0.1:${url.port}/api/runs`, { headers: { authorization: `Bearer ${url.searchParams.get("token")}` } })).status).toBe(
      200,
    );
  });

  it("refuses a bad port, an empty host, and a database that is not there", async () => {
    const db = await env.database();
    await env.cairn(db).query("SELECT 1");
    expectOneLineError(await cli(["ui", "--database", db, "--port", "70000"]), /--port 70000 is not a port/);
    expectOneLineError(await cli(["ui", "--database", db, "--host", ""]), /--host is empty/);
    if (backend.name === "sqlite") expectOneLineError(await cli(["ui", "--database", `${db}.missing`]), /no database at/);
  });
});
