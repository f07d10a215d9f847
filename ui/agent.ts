import { html } from 'htm/preact';
import { api, type AgentView, type Night } from './api';
import { StackedChart } from './charts';
import { Show, href, number, time, useLoad } from './common';

/** The views of one agent. */
export function AgentTabs({ agentId, current }: { agentId: string; current: string }) {
  const tabs: [string, string | undefined][] = [
    ['Overview', undefined],
    ['Search', 'search'],
    ['Entries', 'entries'],
    ['Nights', 'nights'],
  ];
  return html`<nav class="tabs">
    <strong>${agentId}</strong>
    ${tabs.map(
      ([label, section]) =>
        html`<a href=${href('agents', agentId, section)} class=${label === current ? 'current' : ''}
          >${label}</a
        >`,
    )}
  </nav>`;
}

type Census = AgentView['census'];

/** The hot states, in the order they stack, with their colours; cold on top. */
export const STATES: { key: keyof Census['hot'] | 'cold'; label: string; colour: string }[] = [
  { key: 'active', label: 'hot active', colour: '#2f7d32' },
  { key: 'reachingGate', label: 'reaching the gate', colour: '#9ccc65' },
  { key: 'dormant', label: 'dormant', colour: '#f9a825' },
  { key: 'superseded', label: 'superseded', colour: '#8e24aa' },
  { key: 'expired', label: 'expired', colour: '#e53935' },
  { key: 'inactive', label: 'retired summaries', colour: '#6d4c41' },
  { key: 'cold', label: 'cold', colour: '#1e88e5' },
];

const stateCount = (census: Census, key: (typeof STATES)[number]['key']) =>
  key === 'cold' ? census.cold : census.hot[key];

function CensusTable({ census }: { census: Census }) {
  const tombstones = Object.entries(census.tombstones);
  return html`<div class="census" data-testid="census">
    <table>
      <caption>
        Entries by tier and state, as of ${time(census.asOf)}
      </caption>
      <tbody>
        ${STATES.map(
          (s) =>
            html`<tr>
              <th><span class="swatch" style=${{ background: s.colour }}></span>${s.label}</th>
              <td>${number(stateCount(census, s.key))}</td>
            </tr>`,
        )}
        <tr>
          <th>summaries, lossless</th>
          <td>${number(census.summaries.lossless)}</td>
        </tr>
        <tr>
          <th>summaries, lossy</th>
          <td>${number(census.summaries.lossy)}</td>
        </tr>
      </tbody>
    </table>
    <table>
      <caption>
        Tombstones by reason
      </caption>
      <tbody>
        ${
          tombstones.length === 0
            ? html`<tr>
                <td>none</td>
              </tr>`
            : tombstones.map(
                ([reason, n]) =>
                  html`<tr>
                    <th>${reason}</th>
                    <td>${number(n)}</td>
                  </tr>`,
              )
        }
      </tbody>
    </table>
  </div>`;
}

/** The census of each night that recorded one, oldest first, stacked by state. */
export function NightsChart({ nights }: { nights: Night[] }) {
  const counted = nights.filter((n) => n.census !== undefined).reverse();
  if (counted.length === 0)
    return html`<p>No night has run for this agent yet (<code>memgate consolidate</code>).</p>`;
  return html`<${StackedChart}
    title="Entries by state, night by night"
    testId="nights-chart"
    x=${counted.map((n) => n.asOf)}
    series=${STATES.map((s) => ({
      label: s.label,
      colour: s.colour,
      values: counted.map((n) => stateCount(n.census!, s.key)),
    }))}
  />`;
}

export function AgentPage({ agentId }: { agentId: string }) {
  const agent = useLoad(() => api.agent(agentId), [agentId]);
  const nights = useLoad(() => api.nights(agentId), [agentId]);
  return html`<section>
    <${AgentTabs} agentId=${agentId} current="Overview" />
    <${Show} loaded=${agent}>
      ${(view: AgentView) => html`
        <p class="note">
          ${`First write ${time(view.firstWriteAt)}. Salience halves every ${view.policy.halfLifeHours} h; below `}
          ${`${view.policy.gateThreshold} an entry is dormant. An entry is counted from the night that counts its terms.`}
        </p>
        <${CensusTable} census=${view.census} />
      `}
    </${Show}>
    <${Show} loaded=${nights}>${(list: { nights: Night[] }) => html`<${NightsChart} nights=${list.nights} />`}</${Show}>
  </section>`;
}
