import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { InvalidSpecError } from "../errors.js";
import { apiRoutes } from "./api.js";
import { newToken, requireToken } from "./auth.js";
import { DEFAULT_UI_PORT, type UiHost, type UiOptions, type UiServer } from "./host.js";
import { PAGE_CSS, pageHtml } from "./page.js";
import { UI_EXTENSION } from "./schema.js";

const LOOPBACK = "127.0.0.1";

/**
 * Starts the dashboard for `host`: registers the ui layer's schema (its index and table) and
 * migrates, then serves the page and its API behind a token made for this start. Resolves once it
 * listens; rejects when the port is taken (EADDRINUSE) or the options are wrong.
 */
export async function startUi(host: UiHost, options: UiOptions = {}): Promise<UiServer> {
  const port = options.port ?? DEFAULT_UI_PORT;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new InvalidSpecError("port", port, "give a port from 0 to 65535 (0 picks a free one)");
  const hostname = options.host ?? LOOPBACK;
  if (typeof hostname !== "string" || hostname === "") throw new InvalidSpecError("host", hostname, "give an interface address, e.g. 127.0.0.1");
  const actor = options.actor ?? (process.env.USER || "ui");

  const store = await host.store();
  store.register(UI_EXTENSION);
  await store.migrate();

  const token = newToken();
  const app = new Hono();
  app.use("*", async (c, next) => {
    await next();
    // Only this server's own scripts and styles; no framing; the token never leaves in a Referer.
    c.header(
      "content-security-policy",
      "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
    );
    c.header("referrer-policy", "no-referrer");
    c.header("x-content-type-options", "nosniff");
  });
  app.use("*", requireToken(token));
  app.route("/api", apiRoutes(host, actor));
  app.get("/assets/app.css", (c) => c.body(PAGE_CSS, 200, { "content-type": "text/css; charset=utf-8", "cache-control": "no-cache" }));
  app.get("/assets/:file", async (c) => {
    const file = c.req.param("file");
    if (!/^[a-z0-9-]+\.js$/.test(file)) return c.notFound();
    const text = await clientFile(file);
    if (text === undefined) return c.notFound();
    return c.body(text, 200, { "content-type": "text/javascript; charset=utf-8", "cache-control": "no-cache" });
  });
  app.get("/", (c) => c.html(pageHtml()));

  const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
    const s = serve({ fetch: app.fetch, port, hostname }, () => resolve(s));
    s.once("error", reject);
  });
  const address = server.address() as AddressInfo;
  const shown = hostname.includes(":") ? `[${hostname}]` : hostname === "0.0.0.0" ? LOOPBACK : hostname;
  return {
    url: `http://${shown}:${address.port}/?token=${token}`,
    close: () =>
      new Promise<void>((resolve) => {
        (server as { closeAllConnections?: () => void }).closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

/**
 * The compiled front end: dist/ui/client/ next to this file once built; from the sources (the
 * tests run src/ through vitest) the build's copy in dist/.
 */
const CLIENT_DIRS = [new URL("./client/", import.meta.url), new URL("../../dist/ui/client/", import.meta.url)].map((u) => fileURLToPath(u));
const cache = new Map<string, string>();

async function clientFile(name: string): Promise<string | undefined> {
  const cached = cache.get(name);
  if (cached !== undefined) return cached;
  for (const dir of CLIENT_DIRS) {
    if (!existsSync(`${dir}${name}`)) continue;
    const text = await readFile(`${dir}${name}`, "utf8");
    cache.set(name, text);
    return text;
  }
  return undefined;
}
