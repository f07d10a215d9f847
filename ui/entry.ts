import { html } from 'htm/preact';
import { useState } from 'preact/hooks';
import { AgentTabs } from './agent';
import { api, type EntryView } from './api';
import { DecayCurve } from './charts';
import { Failure, Show, asApiError, href, time, useLoad } from './common';
import type { ApiError } from './api';

type Action = 'forget' | 'restore';

type Shown = NonNullable<EntryView['entry']>;

/** Where an entry came from, and how sure its writer was. */
function provenance({ source, writtenAt, confidence, verified }: Shown): string {
  const parts = [
    source.origin,
    ...(source.sessionId !== undefined ? [`session ${source.sessionId}`] : []),
    ...(source.turn !== undefined ? [`turn ${source.turn}`] : []),
    ...(source.ref !== undefined ? [source.ref] : []),
  ];
  return `${parts.join(', ')}; written ${time(writtenAt)}; confidence ${confidence}${verified ? ', verified' : ''}`;
}

/**
 * Forget or restore, each behind a confirmation; the answer (or the refusal: a 403 is shown
 * as such) replaces the buttons, and the page reads the entry again.
 */
function Actions({
  agentId,
  view,
  done,
}: {
  agentId: string;
  view: EntryView;
  done: (what: string) => void;
}) {
  const [asking, setAsking] = useState<Action | undefined>(undefined);
  const [freshUntil, setFreshUntil] = useState('');
  const [failed, setFailed] = useState<ApiError | undefined>(undefined);
  const entry = view.entry;
  if (!entry) return null;
  const restorable = !entry.isActive || entry.validity.volatile;
  const act = async (action: Action) => {
    setAsking(undefined);
    setFailed(undefined);
    try {
      if (action === 'forget') {
        const r = await api.forget(agentId, view.entryId);
        done(`Forgotten: erased from ${r.tiers.join(' and ') || 'nowhere (already erased)'}.`);
      } else {
        const until = freshUntil ? Date.parse(freshUntil) : undefined;
        const r = await api.restore(agentId, view.entryId, until);
        done(`Restored: ${r.restored.join(' and ')}.`);
      }
    } catch (error) {
      setFailed(asApiError(error));
    }
  };
  return html`<div class="actions">
    ${failed && html`<${Failure} error=${failed} />`}
    ${
      asking === undefined &&
      html`<button type="button" class="danger" onClick=${() => setAsking('forget')}>Forget…</button>
        ${restorable && html`<button type="button" onClick=${() => setAsking('restore')}>Restore…</button>`}`
    }
    ${
      asking === 'forget' &&
      html`<div class="confirm" role="dialog" aria-label="Confirm forget">
        <p>
          Erase this entry from both tiers, every summary built from it, the query log and the vector indexes?
          It leaves a content-free tombstone and cannot be undone.
        </p>
        <button type="button" class="danger" onClick=${() => act('forget')}>Forget for good</button>
        <button type="button" onClick=${() => setAsking(undefined)}>Cancel</button>
      </div>`
    }
    ${
      asking === 'restore' &&
      html`<div class="confirm" role="dialog" aria-label="Confirm restore">
        <p>Reverse its supersession${entry.validity.volatile ? ', or renew it until a new time' : ''}?</p>
        ${
          entry.validity.volatile &&
          html`<label
            >Fresh until (ISO time)
            <input
              value=${freshUntil}
              placeholder="2030-01-01T00:00:00Z"
              onInput=${(e: Event) => setFreshUntil((e.target as HTMLInputElement).value)}
            />
          </label>`
        }
        <button type="button" onClick=${() => act('restore')}>Restore</button>
        <button type="button" onClick=${() => setAsking(undefined)}>Cancel</button>
      </div>`
    }
  </div>`;
}

function Entry({ agentId, view, done }: { agentId: string; view: EntryView; done: (what: string) => void }) {
  const agent = useLoad(() => api.agent(agentId), [agentId]);
  const { entry, tombstone } = view;
  return html`<article class="entry" data-testid="entry">
    ${
      entry
        ? html`<blockquote>${entry.text}</blockquote>
            <dl>
              <dt>where</dt>
              <dd>${entry.tier}, <span class=${`badge ${entry.state}`}>${entry.state}</span></dd>
              <dt>kind</dt>
              <dd>${entry.kind}${entry.subject && ` about ${entry.subject} / ${entry.attribute}`}</dd>
              <dt>provenance</dt>
              <dd>${provenance(entry)}</dd>
              <dt>salience</dt>
              <dd>
                ${`${entry.salienceNow.toFixed(3)} now (${entry.salience.base} at ${time(entry.salience.at)}); `}
                ${`dormant from ${time(entry.dormantAt)}`}
                ${
                  agent.state === 'done' &&
                  html`<${DecayCurve}
                    salience=${entry.salienceNow}
                    halfLifeHours=${agent.data.policy.halfLifeHours}
                    gate=${agent.data.policy.gateThreshold}
                  />`
                }
              </dd>
              ${
                entry.validity.volatile &&
                html`<dt>fresh until</dt>
                  <dd>
                    ${time(entry.validity.freshUntil)}${entry.expiredAt !== undefined && `, expired ${time(entry.expiredAt)}`}
                  </dd>`
              }
              ${
                entry.supersededBy &&
                html`<dt>superseded by</dt>
                  <dd>
                    <a href=${href('agents', agentId, 'entries', entry.supersededBy)}
                      >${entry.supersededBy}</a
                    >
                  </dd>`
              }
              ${
                entry.supersedes &&
                html`<dt>supersedes</dt>
                  <dd>
                    <a href=${href('agents', agentId, 'entries', entry.supersedes)}>${entry.supersedes}</a>
                  </dd>`
              }
              ${
                entry.kind === 'summary' &&
                html`<dt>summary</dt>
                  <dd>
                    ${entry.lossy_summary ? `lossy (${(entry.lossyReasons ?? []).join('; ')})` : 'lossless'},
                    of
                    ${(entry.derivedFrom ?? []).map(
                      (id) => html` <a href=${href('agents', agentId, 'entries', id)}>${id}</a>`,
                    )}
                  </dd>`
              }
              <dt>atoms</dt>
              <dd>${entry.atoms.length ? entry.atoms.join(', ') : 'none'}</dd>
            </dl>`
        : html`<p class="gone">
            Deleted ${time(tombstone?.deletedAt)}: ${tombstone?.reason}. Its tombstone holds no content.
          </p>`
    }
    <${Actions} agentId=${agentId} view=${view} done=${done} />
    <h2>Lifecycle</h2>
    <ol class="lifecycle" data-testid="lifecycle">
      ${view.lifecycle.map(
        (e) =>
          html`<li>
            <time>${time(e.at)}</time> <strong>${e.event}</strong> ${e.reason !== e.event && e.reason}
            ${e.runId && html`<small> (run ${e.runId})</small>`}
          </li>`,
      )}
    </ol>
    <h2>Stand-in</h2>
    ${
      view.standIns.length === 0
        ? html`<p>No summary stands in for it.</p>`
        : view.standIns.map(
            (s) =>
              html`<div class="stand-in" data-testid="stand-in">
                <p>
                  <a href=${href('agents', agentId, 'entries', s.summaryId)}>${s.summaryId}</a
                  >${`, ${s.lossy ? 'lossy' : 'lossless'}`}
                  ${`${s.tier ? `, in ${s.tier}` : ', no longer stored'}${s.isActive === false ? ', retired' : ''}`}
                </p>
                ${s.text && html`<blockquote>${s.text}</blockquote>`}
                <p>keeps: ${s.keeps.length ? s.keeps.join(', ') : 'none'}</p>
                <p>lacks: ${s.lacks.length ? s.lacks.join(', ') : 'none'}</p>
              </div>`,
          )
    }
  </article>`;
}

export function EntryPage({ agentId, entryId }: { agentId: string; entryId: string }) {
  const loaded = useLoad(() => api.entry(agentId, entryId), [agentId, entryId]);
  const [notice, setNotice] = useState<string | undefined>(undefined);
  const done = (what: string) => {
    setNotice(what);
    loaded.reload();
  };
  return html`<section>
    <${AgentTabs} agentId=${agentId} current="Entries" />
    <h1>${entryId}</h1>
    ${notice && html`<p class="done" role="status">${notice}</p>`}
    <${Show} loaded=${loaded}>
      ${(view: EntryView) => html`<${Entry} agentId=${agentId} view=${view} done=${done} />`}
    </${Show}>
  </section>`;
}
