// The agent picker of the task page: every profile by its full name; a profile whose program is
// not installed is listed but disabled, with the reason; the last choice is remembered in
// localStorage and preselected next time. Under it, how fast the chosen agent has stopped when
// asked (DESIGN.md §18: `server.info`'s `agent_profiles`, measured from real cancels), and the
// note when its latest version stops markedly faster or slower than the one before.

import { h, setAttr } from "./dom.js";
import { cancelFiguresText, cancelFiguresTitle } from "./offers.js";
import { agentOptions, preferredAgent } from "./status.js";

export const REMEMBER_KEY = "turnvisor.agent";

function readRemembered(env) {
  try {
    return env.localStorage?.getItem(REMEMBER_KEY) ?? null;
  } catch {
    return null; // storage may be off (private mode, policy)
  }
}

/** serverInfo() -> Promise<server.info's answer>: asked on refreshFigures() and when the
 * picker takes the focus (the figures grow with every cancel). */
export function createAgentPicker({ agents, availability, defaultAgent, env = globalThis, serverInfo = null }) {
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
  const figures = h("p", { class: "agent-figures", dataset: { testid: "agent-cancel-figures" }, hidden: true });
  const versionNote = h("p", { class: "agent-figures-note", role: "note", dataset: { testid: "agent-figures-note" }, hidden: true });
  let profiles = {}; // agent name -> its agent_profiles entry

  function drawFigures() {
    for (const option of select.options) {
      const o = options.find((x) => x.name === option.value);
      const said = cancelFiguresTitle(profiles[option.value]?.cancel);
      setAttr(option, "title", o?.available === false ? o.reason : said ?? option.value);
    }
    const profile = profiles[select.value];
    const text = cancelFiguresText(profile?.cancel);
    figures.hidden = !text;
    figures.textContent = text ?? "";
    setAttr(figures, "title", cancelFiguresTitle(profile?.cancel));
    const note = typeof profile?.note === "string" && profile.note ? profile.note : null;
    versionNote.hidden = !note;
    versionNote.textContent = note ?? "";
  }

  let asking = null;
  function refreshFigures() {
    if (!serverInfo || asking) return;
    asking = Promise.resolve()
      .then(serverInfo)
      .then((info) => {
        const list = Array.isArray(info?.agent_profiles) ? info.agent_profiles : [];
        profiles = Object.fromEntries(list.filter((p) => typeof p?.name === "string").map((p) => [p.name, p]));
        drawFigures();
      })
      .catch(() => {}) // figures are a nicety: the next focus or connection asks again
      .finally(() => {
        asking = null;
      });
  }
  select.addEventListener("focus", refreshFigures);
  select.addEventListener("change", drawFigures);

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
    note: h("div", { class: "agent-notes" }, figures, versionNote, note),
    refreshFigures,
    remember,
    get value() {
      return select.value;
    },
    get launchable() {
      return options.some((o) => o.name === select.value && o.available);
    },
  };
}
