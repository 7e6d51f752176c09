// The agent picker of the task page: every profile by its full name; a profile whose program is
// not installed is listed but disabled, with the reason; the last choice is remembered in
// localStorage and preselected next time.

import { h } from "./dom.js";
import { agentOptions, preferredAgent } from "./status.js";

export const REMEMBER_KEY = "turnvisor.agent";

function readRemembered(env) {
  try {
    return env.localStorage?.getItem(REMEMBER_KEY) ?? null;
  } catch {
    return null; // storage may be off (private mode, policy)
  }
}

export function createAgentPicker({ agents, availability, defaultAgent, env = globalThis }) {
  const options = agentOptions(agents, availability);
  const chosen = preferredAgent(options, readRemembered(env), defaultAgent);
  const select = h(
    "select",
    { id: "agent-select", class: "agent-select", dataset: { testid: "agent-select" } },
    options.map((o) =>
      h(
        "option",
        { value: o.name, selected: o.name === chosen, disabled: !o.available, title: o.reason ?? o.name },
        o.available ? o.name : `${o.name} (not installed)`,
      ),
    ),
  );
  const unavailable = options.filter((o) => !o.available);
  // Why some agents cannot be picked, in words: a disabled <option> cannot show its title on
  // every browser (and never on a phone).
  const note = h(
    "details",
    { class: "agent-note", dataset: { testid: "agent-unavailable" }, hidden: unavailable.length === 0 },
    h("summary", {}, `${unavailable.length} agent${unavailable.length === 1 ? " is" : "s are"} not installed`),
    h("ul", {}, unavailable.map((o) => h("li", {}, h("strong", {}, o.name), `: ${o.reason}`))),
  );

  function remember(name) {
    try {
      env.localStorage?.setItem(REMEMBER_KEY, name);
    } catch {
      // not remembered; nothing else depends on it
    }
  }
  select.addEventListener("change", () => remember(select.value));

  return {
    select,
    note,
    remember,
    get value() {
      return select.value;
    },
    get launchable() {
      return options.some((o) => o.name === select.value && o.available);
    },
  };
}
