// Unit tests of issue 43's page rules (DESIGN.md §19) and issue 42's picker figures (§18):
// the session.*.changed notifications folded into the session's row, which options sit in the
// composer's row and which behind "More", the usage badge's words, the `/` menu's filtering and
// input hint, and the agent picker's cancel figures.

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import * as L from "../../web/static/lists.js";
import {
  appliedHint,
  cancelFiguresText,
  cancelFiguresTitle,
  commandHint,
  commandQuery,
  compactCount,
  costText,
  filterCommands,
  pickedText,
  shortOptionName,
  splitOptions,
  usageText,
  typedWhole,
} from "../../web/static/offers.js";
import * as S from "../../web/static/state.js";
import { T, boot, session } from "./fixtures.mjs";

const MODE = { id: "mode", name: "Mode", category: "mode", type: "select", current: "default", choices: [{ value: "default", name: "Default", description: null }, { value: "plan", name: "Plan", description: "Plans only" }] };
const MODEL = { id: "model", name: "Model", category: "model", type: "select", current: "mock-fast", choices: [{ value: "mock-fast", name: "Mock Fast", description: null }] };
const EFFORT = { id: "reasoning_effort", name: "Reasoning effort", category: "reasoning_effort", type: "select", current: "low", choices: [{ value: "low", name: "low", description: null }] };
const POLICY = { id: "approval_policy", name: "Approval policy", category: "approval_policy", type: "select", current: "never", choices: [{ value: "never", name: "never", description: null }] };
const OTHER = { id: "temp", name: "Temperature", category: "other", type: "select", current: "hot", choices: [{ value: "hot", name: "hot", description: null }] };

const COMMANDS = [
  { name: "delay", description: "Stream a chunk every 100 ms", input_hint: "<ms>" },
  { name: "steps", description: "Run shell-like steps", input_hint: "<n> <ms> [permission]" },
  { name: "usage", description: "Report token usage", input_hint: "[tokens used]" },
  { name: "/options", description: "Say the mode and model in effect", input_hint: null },
  { name: "permission", description: "Ask for permission", input_hint: null },
];

function page() {
  return S.setConnection(S.hydrate(boot([session("a", { options: [MODE] }), session("b")])), "open");
}

describe("the agent's offers in the session's row", () => {
  it("takes the options, commands and usage whole, for the session named", () => {
    let s = page();
    s = L.applyPageNotification(s, "session.options.changed", { session_id: "a", options: [MODE, MODEL] }, 1, T);
    s = L.applyPageNotification(s, "session.commands.changed", { session_id: "a", commands: COMMANDS }, 1, T);
    const usage = { input_tokens: null, output_tokens: null, context_used: 10, context_size: 100, cost: null };
    s = L.applyPageNotification(s, "session.usage.changed", { session_id: "a", turn_id: "t1", usage }, 1, T);
    assert.deepEqual(s.sessions.a.options.map((o) => o.id), ["mode", "model"]);
    assert.equal(s.sessions.a.commands.length, 5);
    assert.deepEqual(s.sessions.a.usage, usage);
    assert.equal(s.sessions.b.options, undefined); // the other session keeps its own
    assert.equal(s.sessions.a.state, "RUNNING"); // the rest of the row is kept
  });

  it("leaves alone a session it does not show, and a malformed payload empties nothing else", () => {
    const s = page();
    assert.equal(L.applyPageNotification(s, "session.options.changed", { session_id: "zzz", options: [MODEL] }, 1, T), s);
    const bad = L.applyPageNotification(s, "session.options.changed", { session_id: "a", options: "nope" }, 1, T);
    assert.deepEqual(bad.sessions.a.options, []);
    const noUsage = L.applyPageNotification(s, "session.usage.changed", { session_id: "a", usage: null }, 1, T);
    assert.equal(noUsage.sessions.a.usage, null);
  });

  it("puts the model, mode and effort in the row and the rest behind More", () => {
    assert.deepEqual(splitOptions([POLICY, MODEL, EFFORT, OTHER, MODE]), { shown: [MODEL, EFFORT, MODE], more: [POLICY, OTHER] });
    // Only other kinds: they are the row.
    assert.deepEqual(splitOptions([OTHER, POLICY]), { shown: [OTHER, POLICY], more: [] });
    assert.deepEqual(splitOptions(null), { shown: [], more: [] });
    assert.deepEqual(splitOptions([{ id: "x" }, MODE]).shown, [MODE]); // no choices: not a select
  });

  it("names an option shortly where a phone needs it", () => {
    assert.equal(shortOptionName(EFFORT), "Effort");
    assert.equal(shortOptionName(POLICY), "Approvals");
    assert.equal(shortOptionName(MODE), "Mode");
    assert.equal(shortOptionName({ ...EFFORT, name: "Eff" }), "Eff"); // already short
    assert.equal(shortOptionName({ id: "x", category: "other" }), "x");
  });

  it("says what waits for the next turn", () => {
    assert.equal(appliedHint([]), null);
    assert.equal(appliedHint(["Model"]), "Model: from the next turn");
    assert.equal(appliedHint(["Model", "Reasoning effort"]), "Model, Reasoning effort: from the next turn");
  });
});

describe("the usage badge", () => {
  it("says the context's fill, the tokens in and out, and the cost", () => {
    const said = usageText({ input_tokens: 12000, output_tokens: 345, context_used: 84000, context_size: 200000, cost: { amount: 0.0123, currency: "USD" } });
    assert.equal(said.text, "Context 42% · 12.3k tokens · $0.01");
    assert.equal(said.title, "Context: 84,000 of 200,000 tokens · Tokens: 12000 in, 345 out · Cost: 0.0123 USD");
  });

  it("says only what is known", () => {
    assert.equal(usageText({ input_tokens: null, output_tokens: null, context_used: 1234, context_size: 200000, cost: null }).text, "Context <1%");
    assert.equal(usageText({ input_tokens: 0, output_tokens: 0, context_used: 0, context_size: 200000, cost: null }).text, "Context 0% · 0 tokens");
    assert.equal(usageText({ input_tokens: 900, output_tokens: null, context_used: null, context_size: null, cost: null }).text, "900 tokens");
    assert.equal(usageText({ input_tokens: null, output_tokens: null, context_used: 5000, context_size: null, cost: null }).text, "Context 5k tokens");
    assert.equal(usageText({ input_tokens: null, output_tokens: null, context_used: null, context_size: null, cost: { amount: 1.5, currency: "EUR" } }).text, "1.50 EUR");
  });

  it("is hidden without usage or with nothing known", () => {
    assert.equal(usageText(null), null);
    assert.equal(usageText(undefined), null);
    assert.equal(usageText({ input_tokens: null, output_tokens: null, context_used: null, context_size: null, cost: null }), null);
    // A context size of 0 says nothing about the fill.
    assert.equal(usageText({ context_used: 3, context_size: 0 }).text, "Context 3 tokens");
  });

  it("words counts and costs compactly", () => {
    assert.deepEqual([950, 1000, 1234, 12345, 99990, 123456, 1234567].map(compactCount), ["950", "1k", "1.2k", "12.3k", "100k", "123k", "1.2M"]);
    assert.equal(costText({ amount: 0.001, currency: "USD" }), "<$0.01");
    assert.equal(costText({ amount: 0, currency: "USD" }), "$0.00");
    assert.equal(costText({ amount: 2, currency: "usd" }), "$2.00");
    assert.equal(costText({ amount: "2", currency: "USD" }), null);
    assert.equal(costText(null), null);
  });
});

describe("the / menu", () => {
  it("opens only on a command name being typed at the start", () => {
    assert.equal(commandQuery("/"), "");
    assert.equal(commandQuery("/St"), "st");
    assert.equal(commandQuery("/steps "), null); // its input is being typed: no menu
    assert.equal(commandQuery(" /steps"), null);
    assert.equal(commandQuery("hello /steps"), null);
    assert.equal(commandQuery(""), null);
  });

  it("lists every command on /, names starting with the text first, then containing it", () => {
    assert.deepEqual(filterCommands(COMMANDS, "/").map((c) => c.name), ["delay", "steps", "usage", "/options", "permission"]);
    assert.deepEqual(filterCommands(COMMANDS, "/s").map((c) => c.name), ["steps", "usage", "/options", "permission"]);
    assert.deepEqual(filterCommands(COMMANDS, "/OPT").map((c) => c.name), ["/options"]); // either spelling of a name
    assert.deepEqual(filterCommands(COMMANDS, "/zzz"), []);
    assert.equal(filterCommands(COMMANDS, "plain text"), null);
    assert.deepEqual(filterCommands(undefined, "/"), []);
  });

  it("leaves the picked name for its input, and shows the input hint until more is typed", () => {
    assert.equal(pickedText(COMMANDS[1]), "/steps ");
    assert.equal(pickedText(COMMANDS[3]), "/options ");
    assert.equal(commandHint(COMMANDS, "/steps "), "<n> <ms> [permission]");
    assert.equal(commandHint(COMMANDS, "/steps 3"), null);
    assert.equal(commandHint(COMMANDS, "/steps"), null);
    assert.equal(commandHint(COMMANDS, "/options "), null); // it takes nothing
    assert.equal(commandHint(COMMANDS, "/nope "), null);
  });
});

describe("the agent picker's cancel figures", () => {
  const figures = { count: 12, p50_ms: 40.4, p95_ms: 1530, escalated: 0, dropped_early: 0, version: "0.9.1" };

  it("says how fast the agent stops, once it was stopped", () => {
    assert.equal(cancelFiguresText(figures), "Stops in ~40 ms (p50 of 12)");
    assert.equal(cancelFiguresTitle(figures), "Stops in ~40 ms (p50 of 12) (p95 1.5 s, version 0.9.1)");
    assert.equal(cancelFiguresText({ ...figures, p50_ms: 2500, escalated: 2, dropped_early: 1 }), "Stops in ~2.5 s (p50 of 12) · 2 had to be killed · 1 ignored the first cancel");
    assert.equal(cancelFiguresText({ ...figures, count: 1, p50_ms: null }), "Stopped 1 time");
  });

  it("says nothing before any cancel", () => {
    assert.equal(cancelFiguresText({ ...figures, count: 0 }), null);
    assert.equal(cancelFiguresText(undefined), null);
    assert.equal(cancelFiguresTitle(null), null);
  });
});

describe("Enter with the command menu open", () => {
  const commands = [{ name: "permission" }, { name: "permissions-reset" }, { name: "delay" }];
  it("sends a command whose whole name is typed", () => {
    assert.equal(typedWhole(commands, "/permission"), true);
    assert.equal(typedWhole(commands, "/Delay"), true);
  });
  it("picks while the name is only begun, or nothing but the slash is typed", () => {
    assert.equal(typedWhole(commands, "/perm"), false);
    assert.equal(typedWhole(commands, "/"), false);
    assert.equal(typedWhole(commands, "/delay now"), false); // the menu is closed then anyway
  });
});
