import { randomBytes, timingSafeEqual } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { getCookie, setCookie } from "hono/cookie";

export const COOKIE = "cairn_ui";

/**
 * The dashboard's one secret: made when it starts, printed in its URL, and required of every
 * request — as `?token=` on the first visit (exchanged for an HttpOnly, SameSite=Strict cookie, so
 * it leaves the address bar), as the cookie after, or as `Authorization: Bearer` from a script.
 * A request without it gets 401 and no run data: another user on the machine, or a web page the
 * browser has open, can reach 127.0.0.1 but cannot read the token.
 */
export function newToken(): string {
  return randomBytes(24).toString("base64url");
}

export function requireToken(token: string): MiddlewareHandler {
  const expected = Buffer.from(token);
  const matches = (given: string | undefined): boolean => {
    if (given === undefined) return false;
    const bytes = Buffer.from(given);
    return bytes.length === expected.length && timingSafeEqual(bytes, expected);
  };
  return async (c, next) => {
    const fromQuery = c.req.query("token");
    if (matches(fromQuery)) {
      setCookie(c, COOKIE, token, { httpOnly: true, sameSite: "Strict", path: "/" });
      if (c.req.method === "GET" && !c.req.path.startsWith("/api/")) {
        // The token leaves the address bar (and the browser's history of it).
        const url = new URL(c.req.url);
        url.searchParams.delete("token");
        return c.redirect(`${url.pathname}${url.search}${url.hash}`, 302);
      }
      return next();
    }
    const bearer = c.req.header("authorization")?.match(/^Bearer (.+)$/)?.[1];
    if (matches(getCookie(c, COOKIE)) || matches(bearer)) return next();
    if (c.req.path.startsWith("/api/")) return c.json({ error: "unauthorized: open the URL `cairn ui` printed (it carries the token)" }, 401);
    return c.html(
      "<!doctype html><title>Cairn</title><p>Unauthorized. Open the URL that <code>cairn ui</code> printed: it carries this dashboard's token.</p>",
      401,
    );
  };
}
