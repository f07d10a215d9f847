import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api, type AuditRun } from './api';
import { StackedChart } from './charts';
import { Show, time, useLoad } from './common';

/**
 * The decomposition of the last audit run (docs/audit.md): each arm's errors at each budget,
 * irreversible, recoverable and residual, under one read condition at a time.
 */
function Decomposition({ run }: { run: AuditRun }) {
  const conditions = [...new Set(run.rows.map((r) => r.condition))];
  const [condition, setCondition] = useState(conditions[0]);
  const rows = run.rows.filter((r) => r.condition === condition);
  return html`<div>
    <p class="note">${run.title} · run ${run.runId}, ${time(run.at)}</p>
    ${
      conditions.length > 1 &&
      html`<label
        >Read condition
        <select
          value=${condition}
          onChange=${(e: Event) => setCondition((e.target as HTMLSelectElement).value as typeof condition)}
        >
          ${conditions.map((c) => html`<option value=${c}>${c}</option>`)}
        </select>
      </label>`
    }
    ${
      rows.length === 0
        ? html`<p>The run recorded no rows.</p>`
        : html`<${StackedChart}
            title="Errors by arm and budget"
            testId="audit-chart"
            x=${rows.map((_, i) => i)}
            labels=${rows.map((r) => `${r.arm} · ${r.budget ?? 'none'}`)}
            series=${[
              { label: 'irreversible', colour: '#c62828', values: rows.map((r) => r.irreversible) },
              { label: 'recoverable', colour: '#1565c0', values: rows.map((r) => r.recoverable) },
              { label: 'residual', colour: '#9e9e9e', values: rows.map((r) => r.residual) },
            ]}
          />`
    }
  </div>`;
}

export function AuditPage() {
  const loaded = useLoad(() => api.audit(), []);
  return html`<section>
    <h1>The restore-counterfactual audit</h1>
    <${Show} loaded=${loaded}>${(run: AuditRun) => html`<${Decomposition} run=${run} />`}</${Show}>
  </section>`;
}
