// A session whose agent did not start (issue 41, item 6): its reason is said once (the header's
// `session-status-reason`), Send is off for it (`retry-start-button` starts another), and
// `agent-help` says what to do: the agent's login and its keys in turnvisor.toml, taken from
// docs/agents.md. When the agent's error says it needs a login, the help says that first (the
// login card of DESIGN.md §19 will take this place).

import { h } from "./dom.js";
import { loginComposerView } from "./login-card.js";

// What docs/agents.md says of each built-in profile: its section, how to log in, where it is set up.
const AGENTS = {
  codex: { section: "Codex", login: "codex login", key: "OPENAI_API_KEY", config: "$CODEX_HOME/config.toml (default ~/.codex): model, model_provider" },
  "codex-acp": { section: "codex-acp", login: "codex login", key: "OPENAI_API_KEY", config: "$CODEX_HOME/config.toml, as for Codex" },
  auggie: { section: "Auggie", login: "auggie login", key: null, config: "the session auggie login stores in ~/.augment" },
  claude: { section: "Claude", login: "claude, then /login", key: "ANTHROPIC_API_KEY", config: "ANTHROPIC_BASE_URL for a gateway; CLAUDE_CONFIG_DIR (default ~/.claude)" },
  gemini: { section: "Gemini", login: "gemini, then choose a sign-in", key: "GEMINI_API_KEY", config: "~/.gemini/settings.json: security.auth.selectedType" },
  qwen: { section: "Qwen Code", login: "qwen, then /auth", key: "OPENAI_API_KEY with OPENAI_BASE_URL and OPENAI_MODEL", config: "~/.qwen/settings.json: security.auth.selectedType" },
  opencode: { section: "opencode", login: "opencode auth login", key: null, config: "a provider in ~/.config/opencode/opencode.json" },
};

const LOGIN = /auth(entication)?[ _]required|authmethods|not logged in|log ?in\b|login|unauthori[sz]ed|\b401\b|api[_ ]?key|credential/i;

/** The agent's error says it needs a login (ACP auth_required, Codex's login errors, a missing key). */
export function needsLogin(text) {
  return typeof text === "string" && LOGIN.test(text);
}

/** The start-failure status message of a session (the last one), if any. */
export function startFailure(messages) {
  if (!Array.isArray(messages)) return null;
  for (let i = messages.length - 1; i >= 0; i -= 1) {
    const m = messages[i];
    if (m.kind === "status" && m.metadata?.start_failed) return m;
  }
  return null;
}

/**
 * What to tell the person about an agent that did not start: {title, login, steps}. agent: the
 * profile's name; error: the failure's text (raw).
 */
export function agentHelp(agent, error) {
  const name = String(agent ?? "agent");
  const known = AGENTS[name];
  const steps = [];
  const login = needsLogin(error);
  if (known) {
    steps.push(`Log in once, as the user that runs Turnvisor: ${known.login}${known.key ? ` (or set ${known.key} in the server's environment or the profile's env)` : ""}.`);
    steps.push(`Its setup: ${known.config}.`);
  } else if (login) {
    steps.push(`Log in to ${name} once as the user that runs Turnvisor, or give it its key through env in [agents.${name}].`);
  }
  steps.push(`The program must be installed (bash scripts/install_agents.sh installs the built-in agents) and on PATH, or command in [agents.${name}] of turnvisor.toml in the server's data dir must point at it; its other keys: protocol, env, cwd, sandbox. The server reads turnvisor.toml when it starts.`);
  steps.push("Then press Retry start.");
  return {
    title: login ? `${name} needs you to log in` : `How to set up ${name}`,
    login,
    steps,
    doc: `docs/agents.md${known ? `, “${known.section}”` : ", “Overriding a profile: turnvisor.toml”"}`,
  };
}

/** Leaves out the start-failure messages of a session that failed: its header says it once. */
export function withoutRepeatedFailure(messages, row) {
  if (row?.state !== "FAILED" || !Array.isArray(messages)) return messages;
  return messages.filter((m) => !(m.kind === "status" && m.metadata?.start_failed));
}

/** The composer's view for a failed session: Send is off, and the note says why in a few words. */
export function failedComposerView(view, row) {
  if (row?.state !== "FAILED") return loginComposerView(view, row); // §19: waits for a login
  return { ...view, sendDisabled: true, error: null, note: "Send is off: this session's agent did not start." };
}

/** The conversation's empty text for a failed session (nothing can be sent to it). */
export const FAILED_EMPTY = "No messages: its agent did not start.";

/** {el, update(row, messages)}: the help of a failed session (hidden for any other). */
export function createFailedStartHelp() {
  const summary = h("summary", { class: "agent-help-link", dataset: { testid: "agent-help-link" } });
  const body = h("div", { class: "agent-help-body" });
  const el = h("details", { class: "agent-help", dataset: { testid: "agent-help" }, hidden: true }, summary, body);
  let drawn = null;

  function update(row, messages) {
    const failed = row?.state === "FAILED";
    el.hidden = !failed;
    if (!failed) return;
    const help = agentHelp(row.agent, startFailure(messages)?.content ?? "");
    const signature = JSON.stringify([row.id, help]);
    if (signature === drawn) return;
    if (drawn !== null && JSON.parse(drawn)[0] !== row.id) el.open = false; // another session
    drawn = signature;
    el.dataset.login = help.login ? "true" : "false";
    summary.textContent = help.title;
    body.replaceChildren(
      h("ol", { class: "agent-help-steps" }, ...help.steps.map((s) => h("li", {}, s))),
      h("p", { class: "agent-help-doc" }, `More in ${help.doc}.`),
    );
  }

  return { el, update };
}
