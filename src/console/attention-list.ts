/**
 * "Needs attention": every permission prompt waiting across the caller's
 * sessions (GET /v1/permissions), polled by the app every few seconds, so a
 * prompt in a session nobody is looking at is not missed. Choosing one opens
 * its session, where the prompt can be answered.
 */
import type { GatewayClient, PendingPermission } from '../client/index.js'
import { duration, h, replaceChildren, revealed, shortId } from './dom.js'

export class AttentionList {
  readonly element: HTMLElement
  readonly #list = h('ul', { class: 'list', testid: 'attention-list', attrs: { 'aria-label': 'Prompts waiting for an answer' } })
  readonly #count = h('span', { class: 'count', testid: 'attention-count' }, '0')
  /** Counts the requests made: an answer older than the last one asked is stale. */
  #asked = 0

  constructor (private readonly client: GatewayClient, private readonly onOpen: (sessionId: string) => void) {
    this.element = h('section', { class: 'panel attention', attrs: { 'aria-labelledby': 'attention-title' } },
      h('h2', { attrs: { id: 'attention-title' } }, 'Needs attention ', this.#count), this.#list)
    this.#render([])
  }

  /** Rejects on an API error (the app decides: 401 signs out). */
  async refresh (): Promise<void> {
    // A poll and a refresh after a change can be out at once: an older answer would show a prompt answered since.
    const asked = ++this.#asked
    const pending = await this.client.pendingPermissions()
    if (asked === this.#asked) this.#render(pending)
  }

  #render (pending: PendingPermission[]): void {
    this.#count.textContent = String(pending.length)
    this.element.dataset.count = String(pending.length)
    if (pending.length === 0) {
      replaceChildren(this.#list, h('li', { class: 'empty muted' }, 'Nothing is waiting for you.'))
      return
    }
    replaceChildren(this.#list, ...pending.map((p) => h('li', {},
      h('button', {
        class: 'item',
        testid: 'attention-item',
        attrs: { type: 'button', 'data-session-id': p.session_id, 'data-request-id': p.request_id },
        on: { click: () => { this.onOpen(p.session_id) } }
      },
      h('span', { class: 'item-top' }, h('strong', {}, ...revealed(p.display_name ?? p.tool_name)), h('span', { class: 'muted' }, `${duration(p.age_ms)} · ${shortId(p.session_id)}`)),
      h('span', { class: 'item-sub mono' }, ...revealed(p.summary))))))
  }
}
