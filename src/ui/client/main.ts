import { ApiError } from "./api.js";
import { h } from "./dom.js";
import { approvalsPage } from "./page-approvals.js";
import { costsPage } from "./page-costs.js";
import { modelPage } from "./page-model.js";
import { runPage } from "./page-run.js";
import { runsPage } from "./page-runs.js";
import { sqlPage } from "./page-sql.js";
import { treePage } from "./page-tree.js";
import { whyPage } from "./page-why.js";
import type { Params } from "./route.js";

/** A page renders into its root and may return how to stop (its polling) when the reader leaves. */
type Page = (root: HTMLElement, params: Params) => Promise<(() => void) | void>;

const PAGES: Record<string, Page> = {
  runs: runsPage,
  run: runPage,
  model: modelPage,
  why: whyPage,
  tree: treePage,
  approvals: approvalsPage,
  costs: costsPage,
  sql: sqlPage,
};

let stop: (() => void) | void = undefined;

async function route(): Promise<void> {
  const [pathText, queryText] = (location.hash.replace(/^#\/?/, "") || "runs").split("?", 2);
  const path = pathText!.split("/").map(decodeURIComponent);
  const page = PAGES[path[0]!] ?? runsPage;
  stop?.();
  stop = undefined;
  const app = document.getElementById("app")!;
  const root = h("div", { "data-page": path[0] ?? "runs" });
  app.replaceChildren(root);
  for (const a of document.querySelectorAll<HTMLAnchorElement>("[data-nav]")) a.classList.toggle("active", a.dataset.nav === path[0]);
  try {
    stop = await page(root, { path, query: new URLSearchParams(queryText ?? "") });
  } catch (error) {
    const unauthorized = error instanceof ApiError && error.status === 401;
    root.replaceChildren(
      h("p", { class: "error" }, unauthorized ? "The dashboard's token is missing: open the URL `cairn ui` printed." : (error as Error).message),
    );
  }
}

const actorInput = document.getElementById("actor") as HTMLInputElement;
actorInput.value = localStorage.getItem("cairn.actor") ?? "";
actorInput.addEventListener("change", () => localStorage.setItem("cairn.actor", actorInput.value.trim()));
void fetch("/api/me")
  .then((r) => r.json() as Promise<{ actor: string }>)
  .then((me) => (actorInput.placeholder = me.actor))
  .catch(() => undefined);

window.addEventListener("hashchange", () => void route());
void route();
