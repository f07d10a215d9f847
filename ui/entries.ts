import { html } from 'htm/preact';
import { AgentTabs } from './agent';
import { api, type EntryList } from './api';
import { Show, href, time, useLoad } from './common';

/** A page of the agent's entries, both tiers, in id order; the next page from its cursor. */
export function EntriesPage({ agentId, cursor }: { agentId: string; cursor: string | null }) {
  const loaded = useLoad(() => api.entries(agentId, cursor ?? undefined), [agentId, cursor]);
  return html`<section>
    <${AgentTabs} agentId=${agentId} current="Entries" />
    <${Show} loaded=${loaded}>
      ${({ entries, next }: EntryList) => html`
        ${
          entries.length === 0
            ? html`<p>No entry here.</p>`
            : html`<table class="entries">
                <thead>
                  <tr>
                    <th>entry</th>
                    <th>tier</th>
                    <th>state</th>
                    <th>kind</th>
                    <th>salience</th>
                    <th>written</th>
                  </tr>
                </thead>
                <tbody>
                  ${entries.map(
                    (e) =>
                      html`<tr>
                        <td><a href=${href('agents', agentId, 'entries', e.id)}>${e.text}</a></td>
                        <td>${e.tier}</td>
                        <td><span class=${`badge ${e.state}`}>${e.state}</span></td>
                        <td>
                          ${e.kind}${e.kind === 'summary' ? (e.lossy_summary ? ', lossy' : ', lossless') : ''}
                        </td>
                        <td>${e.salience.toFixed(3)}</td>
                        <td>${time(e.writtenAt)}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>`
        }
        <p>
          ${cursor !== null && html`<a href=${href('agents', agentId, 'entries')}>First page</a> `}
          ${
            next !== undefined &&
            html`<a
              href=${`${href('agents', agentId, 'entries')}?${new URLSearchParams({ cursor: next }).toString()}`}
              >Next page</a
            >`
          }
        </p>
      `}
    </${Show}>
  </section>`;
}
