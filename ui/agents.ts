import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { api } from './api';
import { Show, href, time, useLoad } from './common';

/** The agents the key covers, a page at a time, and a way to open one by id. */
export function AgentsPage() {
  const [after, setAfter] = useState<string | undefined>(undefined);
  const loaded = useLoad(() => api.agents(after), [after]);
  const [typed, setTyped] = useState('');
  const open = (event: Event) => {
    event.preventDefault();
    if (typed.trim()) location.hash = href('agents', typed.trim());
  };
  return html`<section>
    <h1>Agents</h1>
    <${Show} loaded=${loaded}>
      ${({ agents, next }: Awaited<ReturnType<typeof api.agents>>) => html`
        ${
          agents.length === 0
            ? html`<p>This key covers no agent that has written yet.</p>`
            : html`<table class="agents">
                <thead>
                  <tr>
                    <th>agent</th>
                    <th>first write</th>
                  </tr>
                </thead>
                <tbody>
                  ${agents.map(
                    (a) =>
                      html`<tr>
                        <td><a href=${href('agents', a.agentId)}>${a.agentId}</a></td>
                        <td>${time(a.firstWriteAt)}</td>
                      </tr>`,
                  )}
                </tbody>
              </table>`
        }
        ${next !== undefined && html`<button type="button" onClick=${() => setAfter(next)}>Next page</button>`}
      `}
    </${Show}>
    <form class="inline" onSubmit=${open}>
      <label>
        Open an agent by id
        <input
          name="agentId"
          value=${typed}
          onInput=${(e: Event) => setTyped((e.target as HTMLInputElement).value)}
        />
      </label>
      <button type="submit">Open</button>
    </form>
  </section>`;
}
