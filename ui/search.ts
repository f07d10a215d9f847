import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { AgentTabs } from './agent';
import { api, type AgentView, type RecallHit, type RecallResult } from './api';
import { DecayCurve } from './charts';
import { Show, href, time, useLoad } from './common';

type Policy = AgentView['policy'];

function Hit({ agentId, hit, policy }: { agentId: string; hit: RecallHit; policy: Policy | undefined }) {
  return html`<li class="hit" data-testid="hit" data-id=${hit.id}>
    <a href=${href('agents', agentId, 'entries', hit.id)}>${hit.text}</a>
    <div class="badges">
      <span class=${`badge tier-${hit.tier}`}>${hit.tier}</span>
      ${hit.dormant && html`<span class="badge dormant">dormant</span>`}
      ${hit.expired && html`<span class="badge expired">expired</span>`}
      ${!hit.isActive && html`<span class="badge inactive">inactive</span>`}
      ${
        hit.kind === 'summary' &&
        html`<span class=${`badge ${hit.lossy_summary ? 'lossy' : 'lossless'}`}
          >${hit.lossy_summary ? 'lossy_summary' : 'lossless summary'}</span
        >`
      }
      <span class="badge found"
        >found by
        ${hit.foundBy}${hit.similarity !== undefined ? `, similarity ${hit.similarity.toFixed(3)}` : ''}</span
      >
    </div>
    <div class="salience">
      salience now ${hit.salience.toFixed(3)}
      ${policy && html`<${DecayCurve} salience=${hit.salience} halfLifeHours=${policy.halfLifeHours} gate=${policy.gateThreshold} />`}
    </div>
    ${
      (hit.supersededBy || hit.supersedes) &&
      html`<div class="chain">
        ${hit.supersedes && html`supersedes <a href=${href('agents', agentId, 'entries', hit.supersedes)}>${hit.supersedes}</a> `}
        ${
          hit.supersededBy &&
          html`superseded by
            <a href=${href('agents', agentId, 'entries', hit.supersededBy)}>${hit.supersededBy}</a>`
        }
      </div>`
    }
  </li>`;
}

function Results({
  agentId,
  result,
  policy,
  deep,
}: {
  agentId: string;
  result: RecallResult;
  policy: Policy | undefined;
  deep: boolean;
}) {
  return html`<div>
    <p class="note">
      ${result.retrieval.mode === 'hybrid' ? `hybrid (${result.retrieval.model})` : `lexical: ${result.retrieval.reason}`}
      ${` · ${result.candidates} candidates`}
    </p>
    ${
      result.hits.length === 0
        ? html`<p>No hit.</p>`
        : html`<ol class="hits">
            ${result.hits.map((hit) => html`<${Hit} agentId=${agentId} hit=${hit} policy=${policy} />`)}
          </ol>`
    }
    ${
      deep &&
      html`<h3>Successors</h3>
        ${
          (result.successors ?? []).length === 0
            ? html`<p>None: no hit was superseded.</p>`
            : html`<ol class="hits">
                ${result.successors!.map(
                  (s) =>
                    html`<li>
                      <a href=${href('agents', agentId, 'entries', s.id)}>${s.text}</a>
                      ${s.supersedes && html` <small>(supersedes ${s.supersedes})</small>`}
                    </li>`,
                )}
              </ol>`
        }
        <h3>Missing evidence</h3>
        ${
          (result.missing ?? []).length === 0
            ? html`<p>None: no deleted entry matches.</p>`
            : html`<ul data-testid="missing">
                ${result.missing!.map(
                  (m) =>
                    html`<li>
                      <a href=${href('agents', agentId, 'entries', m.tombstoneId)}>${m.tombstoneId}</a>:
                      ${m.reason}, ${time(m.deletedAt)}, terms ${m.matchedTerms.join(', ')}
                      ${
                        m.standIn &&
                        html` · stood in for by ${m.standIn.summaryId}
                        (${m.standIn.lossy ? 'lossy' : 'lossless'})`
                      }
                    </li>`,
                )}
              </ul>`
        }`
    }
  </div>`;
}

/** Default and deep recall of one query, side by side. */
export function SearchPage({ agentId, query }: { agentId: string; query: string }) {
  const [text, setText] = useState(query);
  const agent = useLoad(() => api.agent(agentId), [agentId]);
  const policy = agent.state === 'done' ? agent.data.policy : undefined;
  const both = useLoad(
    () =>
      query
        ? Promise.all([api.recall(agentId, query, false), api.recall(agentId, query, true)])
        : Promise.resolve(undefined),
    [agentId, query],
  );
  const search = (event: Event) => {
    event.preventDefault();
    location.hash = `${href('agents', agentId, 'search')}?${new URLSearchParams({ q: text }).toString()}`;
  };
  return html`<section>
    <${AgentTabs} agentId=${agentId} current="Search" />
    <form class="inline" onSubmit=${search}>
      <input
        name="query"
        aria-label="query"
        placeholder="What to recall"
        value=${text}
        onInput=${(e: Event) => setText((e.target as HTMLInputElement).value)}
      />
      <button type="submit">Search</button>
    </form>
    <${Show} loaded=${both}>
      ${(results: [RecallResult, RecallResult] | undefined) =>
        results &&
        html`<div class="columns">
          <div data-testid="default-recall">
            <h2>Default recall</h2>
            <${Results} agentId=${agentId} result=${results[0]} policy=${policy} deep=${false} />
          </div>
          <div data-testid="deep-recall">
            <h2>Deep recall</h2>
            <${Results} agentId=${agentId} result=${results[1]} policy=${policy} deep=${true} />
          </div>
        </div>`}
    </${Show}>
  </section>`;
}
