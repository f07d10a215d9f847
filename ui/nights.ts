import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { NIGHT_PHASES } from '../core/nightly/registry';
import { AgentTabs, NightsChart } from './agent';
import { api, type ImpossibleReport, type NightList, type VerifyReport } from './api';
import { Failure, Show, asApiError, number, seconds, time, useLoad } from './common';
import type { ApiError } from './api';

/** Where the Temporal UI is, as the server that served this page knows it (docs/browser.md). */
function temporalLink(workflowId: string): string | undefined {
  const ui = document.querySelector<HTMLMetaElement>('meta[name="memgate:temporal-ui"]')?.content;
  const namespace = document.querySelector<HTMLMetaElement>(
    'meta[name="memgate:temporal-namespace"]',
  )?.content;
  if (!ui || !namespace) return undefined;
  return `${ui.replace(/\/$/, '')}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(workflowId)}`;
}

function RunsTable({ list }: { list: NightList }) {
  if (list.nights.length === 0) return html`<p>No night has run for this agent yet.</p>`;
  return html`<table class="nights" data-testid="nights">
    <thead>
      <tr>
        <th>night (as of)</th>
        ${NIGHT_PHASES.map((phase) => html`<th>${phase.name}</th>`)}
        <th>run</th>
      </tr>
    </thead>
    <tbody>
      ${list.nights.map((night) => {
        const link = temporalLink(night.workflowId);
        return html`<tr>
          <td>${time(night.asOf)}</td>
          ${NIGHT_PHASES.map(
            (phase) =>
              html`<td>
                ${phase.counts.map((f) => html`<div>${f} ${number(night.counts[f] ?? 0)}</div>`)}
                <small>${seconds(night.durations?.[phase.name])}</small>
              </td>`,
          )}
          <td>
            ${link ? html`<a href=${link} target="_blank" rel="noopener">${night.workflowId}</a>` : night.workflowId}
          </td>
        </tr>`;
      })}
    </tbody>
  </table>`;
}

function Impossible({ report }: { report: ImpossibleReport }) {
  if (report.groups.length === 0) return html`<p>Nothing: no deep recall has matched deleted evidence.</p>`;
  return html`<ul class="impossible">
    ${report.groups.map(
      (g) =>
        html`<li>
          <strong>${g.reason}</strong>: ${g.tombstones} deleted entries, missed by
          ${g.queries.map((q) => html` <q>${q.query}</q> <small>(${time(q.at)})</small>`)}
        </li>`,
    )}
    ${report.omitted !== undefined && html`<li>${report.omitted} older queries not listed</li>`}
  </ul>`;
}

/** `memgate verify` for the agent, run when asked: it reads the agent's whole store. */
function Verify({ agentId }: { agentId: string }) {
  const [report, setReport] = useState<VerifyReport | 'running' | undefined>(undefined);
  const [failed, setFailed] = useState<ApiError | undefined>(undefined);
  const run = async () => {
    setReport('running');
    setFailed(undefined);
    try {
      setReport(await api.verify(agentId));
    } catch (error) {
      setReport(undefined);
      setFailed(asApiError(error));
    }
  };
  return html`<div class="verify" data-testid="verify">
    <button type="button" onClick=${run} disabled=${report === 'running'}>
      ${report === 'running' ? 'Verifying…' : 'Run verify'}
    </button>
    ${failed && html`<${Failure} error=${failed} />`}
    ${
      typeof report === 'object' &&
      html`<p class=${report.ok ? 'ok' : 'failure'}>
          ${`${report.ok ? 'Every promise holds' : `${report.findings.length} findings`}: `}
          ${`${number(report.checked.ids)} ids and ${number(report.checked.tombstones)} tombstones checked, ${time(Date.now())}.`}
        </p>
        ${
          report.findings.length > 0 &&
          html`<ul>
            ${report.findings.map((f) => html`<li>${f.check} ${f.id}: ${f.detail}</li>`)}
          </ul>`
        }`
    }
  </div>`;
}

export function NightsPage({ agentId }: { agentId: string }) {
  const nights = useLoad(() => api.nights(agentId), [agentId]);
  const impossible = useLoad(() => api.impossible(agentId), [agentId]);
  return html`<section>
    <${AgentTabs} agentId=${agentId} current="Nights" />
    <${Show} loaded=${nights}>
      ${(list: NightList) =>
        html`<${NightsChart} nights=${list.nights} />
          <h2>Runs</h2>
          <p class="note">Each phase: what it did, and its time (scheduled to done, retries included).</p>
          <${RunsTable} list=${list} />`}
    </${Show}>
    <h2>What became impossible to answer</h2>
    <${Show} loaded=${impossible}>${(report: ImpossibleReport) => html`<${Impossible} report=${report} />`}</${Show}>
    <h2>Verify</h2>
    <${Verify} agentId=${agentId} />
  </section>`;
}
