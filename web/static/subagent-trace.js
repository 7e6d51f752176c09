// A child session's trace in the transcript (DESIGN.md §13, issue 41): one compact line per
// child once it ended ("Subagent 1 · stopped by you"), a <details> that opens to what it did:
// its task, the tools it ran (by title) and the end of the text it streamed. What it says is
// subagents-state.js's `traceView`; the message is the backend's `subagent` kind.

import { h } from "./dom.js";
import { traceView } from "./subagents-state.js";

export function renderSubagentTrace(message) {
  const v = traceView(message);
  const body = h("div", { class: "tool-body subagent-trace-body" });
  if (v.task) body.append(h("p", { class: "subagent-trace-task" }, v.task));
  if (v.tools.length) {
    body.append(
      h("p", { class: "tool-section-label" }, "Tools"),
      h("ul", { class: "subagent-trace-tools" }, ...v.tools.map((t) => h("li", {}, t)),
        v.toolsMore ? h("li", { class: "muted" }, `… and ${v.toolsMore} more`) : null),
    );
  }
  if (v.output) {
    body.append(
      h("p", { class: "tool-section-label" }, v.outputCut ? "Output (its end)" : "Output"),
      h("pre", { class: "tool-pre", dataset: { testid: "subagent-trace-output" } }, v.output),
    );
  }
  if (v.empty) body.append(h("p", { class: "tool-body--empty" }, "It left no output."));
  return h(
    "details",
    { class: `tool-card subagent-trace subagent-trace--${v.outcome}`, dataset: { testid: "subagent-trace", outcome: v.outcome } },
    h(
      "summary",
      { class: "tool-summary" },
      h("span", { class: "tool-call" },
        h("span", { class: "tool-kind" }, "Subagent"),
        h("span", { class: "subagent-trace-title" }, v.title),
        h("span", { class: "subagent-trace-outcome", dataset: { testid: "subagent-trace-outcome" } }, v.words)),
    ),
    body,
  );
}
