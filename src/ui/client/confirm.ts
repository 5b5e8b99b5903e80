import { h } from "./dom.js";

/**
 * Asks before an action: what it does, who it will be recorded as, and (for a denial) why. Resolves
 * with the reason typed (or "") when confirmed, undefined when cancelled.
 */
export function confirmAction(title: string, text: string, options: { reason?: boolean; danger?: boolean } = {}): Promise<string | undefined> {
  return new Promise((resolve) => {
    const who = (document.getElementById("actor") as HTMLInputElement | null)?.value.trim() || "the dashboard's default user";
    const reason = h("textarea", { rows: 2, name: "reason", placeholder: "why (the model reads it)" }) as HTMLTextAreaElement;
    const close = (value: string | undefined) => {
      back.remove();
      resolve(value);
    };
    const back = h(
      "div",
      { class: "modal-back", role: "dialog", "aria-modal": "true" },
      h(
        "div",
        { class: "modal" },
        h("h2", {}, title),
        h("p", {}, text),
        h("p", { class: "muted" }, `Recorded as done by ${who}.`),
        options.reason ? h("label", {}, "Reason", reason) : null,
        h(
          "div",
          { class: "actions" },
          h("button", { class: options.danger ? "danger" : "primary", "data-confirm": "yes", onclick: () => close(reason.value.trim()) }, "Confirm"),
          h("button", { onclick: () => close(undefined) }, "Cancel"),
        ),
      ),
    );
    document.body.append(back);
  });
}
