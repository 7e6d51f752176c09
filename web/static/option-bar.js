// The composer's row of what the agent offers (DESIGN.md §19): one native <select> per option
// (`option-select`, `data-option-id`), the model, mode and effort in the row and any others
// behind "More"; and the `usage-badge` at its end. A change is sent as `session.option.set`; an
// answer of "next_turn" says "from the next turn" until that turn starts, a refusal is said
// inline and the select goes back to what the agent has. The values follow the session's row
// (its DTO and session.options.changed). The row is hidden while the agent offers nothing.

import { h, setAttr } from "./dom.js";
import { appliedHint, shortOptionName, splitOptions, usageText } from "./offers.js";
import { humanizeError } from "./status.js";

/** onSet({session_id, option_id, value}) -> Promise<{applied}> (the request's answer). */
export function createOptionBar({ compact, onSet }) {
  const fields = h("div", { class: "option-fields" });
  const extra = h("div", { class: "option-fields option-fields--more", hidden: true, id: `option-more-${compact ? "compact" : "desktop"}` });
  const more = h("button", { type: "button", class: "btn btn-small option-more", "aria-expanded": "false", "aria-controls": extra.id, dataset: { testid: "options-more" } }, "More");
  const hint = h("span", { class: "option-hint", "aria-live": "polite", dataset: { testid: "option-hint" }, hidden: true });
  const error = h("span", { class: "option-error", role: "alert", dataset: { testid: "option-error" }, hidden: true });
  const badge = h("span", { class: "usage-badge", dataset: { testid: "usage-badge" }, hidden: true });
  const el = h("div", { class: "composer-offers", dataset: { testid: "composer-options" }, hidden: true }, fields, extra, more, hint, error, badge);

  let row = null; // the session shown
  let offline = false;
  let shape = ""; // the options' ids and choices the selects were built for
  let expanded = false;
  const selects = new Map(); // option id -> <select>
  // Per session id: what is being sent {optionId: value}, what waits for the next turn
  // {optionId: turn id running when it was set}, what was chosen and not yet heard back, the error.
  let sent = {};
  let nextTurn = {};
  let chosen = {};
  let failed = null;

  more.addEventListener("click", () => {
    expanded = !expanded;
    draw();
  });

  function optionsOf() {
    return Array.isArray(row?.options) ? row.options : [];
  }

  function build(list, into) {
    into.replaceChildren(
      ...list.map((option) => {
        const select = h(
          "select",
          { class: "option-select", "aria-label": option.name || option.id, dataset: { testid: "option-select", optionId: option.id } },
          option.choices.map((c) => h("option", { value: c.value, title: c.description ?? null }, c.name || c.value)),
        );
        select.addEventListener("change", () => choose(option.id, select.value));
        selects.set(option.id, select);
        return h("label", { class: "option-field" }, h("span", { class: "option-name" }, compact ? shortOptionName(option) : option.name || option.id), select);
      }),
    );
  }

  async function choose(optionId, value) {
    const sid = row?.id;
    if (!sid) return;
    failed = null;
    sent = { ...sent, [optionId]: value };
    const turnId = row.current_turn_id ?? null;
    draw();
    try {
      const answer = await onSet({ session_id: sid, option_id: optionId, value });
      if (row?.id !== sid) return;
      chosen = { ...chosen, [optionId]: { value, options: optionsOf() } };
      if (answer?.applied === "next_turn") nextTurn = { ...nextTurn, [optionId]: turnId };
      else delete nextTurn[optionId];
    } catch (err) {
      if (row?.id !== sid) return;
      const name = optionsOf().find((o) => o.id === optionId)?.name ?? optionId;
      failed = `Could not set ${name}: ${humanizeError(err?.message) ?? "the server refused it"}`;
    } finally {
      if (row?.id === sid) {
        const { [optionId]: _, ...rest } = sent;
        sent = rest;
        draw();
      }
    }
  }

  /** The value a select shows: being sent, else chosen and not yet heard back, else the agent's. */
  function shownValue(option) {
    if (option.id in sent) return sent[option.id];
    const mine = chosen[option.id];
    // Any later word of the options is the truth (the agent may have changed it since).
    if (mine && mine.options === optionsOf() && mine.value !== option.current) return mine.value;
    return option.current;
  }

  function draw() {
    const options = optionsOf();
    const { shown, more: rest } = splitOptions(options);
    const key = JSON.stringify([...shown, ...rest].map((o) => [o.id, o.name, o.choices.map((c) => [c.value, c.name])]));
    if (key !== shape) {
      shape = key;
      selects.clear();
      build(shown, fields);
      build(rest, extra);
    }
    for (const option of [...shown, ...rest]) {
      const select = selects.get(option.id);
      const value = shownValue(option);
      // A value the choices lack (unknown yet): an empty entry says so rather than the first.
      let unset = select.querySelector("option[data-unset]");
      const known = option.choices.some((c) => c.value === value);
      if (!known && !unset) select.prepend((unset = h("option", { value: "", disabled: true, dataset: { unset: "1" } }, "(not set)")));
      if (known && unset) unset.remove();
      select.value = known ? value : "";
      select.disabled = offline || option.id in sent;
      const choice = option.choices.find((c) => c.value === value);
      select.title = [option.name, choice?.description].filter(Boolean).join(": ");
    }
    more.hidden = rest.length === 0;
    extra.hidden = !(expanded && rest.length);
    setAttr(more, "aria-expanded", String(expanded && rest.length > 0));
    more.textContent = expanded ? "Less" : "More";
    // What waits for the next turn: until a turn other than the one running then starts.
    const running = row?.current_turn_id ?? null;
    for (const [id, turnId] of Object.entries(nextTurn)) {
      if (running && running !== turnId) delete nextTurn[id];
    }
    const waiting = options.filter((o) => o.id in nextTurn).map((o) => o.name || o.id);
    const said = appliedHint(waiting);
    hint.hidden = !said;
    hint.textContent = said ?? "";
    error.hidden = !failed;
    error.textContent = failed ?? "";
    const usage = usageText(row?.usage);
    badge.hidden = !usage;
    badge.textContent = usage?.text ?? "";
    setAttr(badge, "title", usage?.title ?? null);
    setAttr(badge, "aria-label", usage ? `Usage: ${usage.title}` : null);
    el.hidden = options.length === 0 && !usage;
  }

  return {
    el,
    /** session: the shown session's row (or null); offline: the page's connection is down. */
    update(session, { offline: isOffline = false } = {}) {
      if ((session?.id ?? null) !== (row?.id ?? null)) {
        sent = {};
        nextTurn = {};
        chosen = {};
        failed = null;
      }
      row = session ?? null;
      offline = isOffline;
      draw();
    },
  };
}
