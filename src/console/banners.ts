/**
 * The banners above a session's transcript, each saying in words what is
 * wrong and what to do: the event store is degraded (`gateway`/`store`
 * frames); the CLI has a problem the gateway recognised (`cli_problem`: not
 * authenticated, with its hint; the API unreachable, with the retry count
 * kept current from `system`/`api_retry` lines); the gateway refused
 * something (an `error` frame, an HTTP error, a lost connection). A problem
 * is cleared by the CLI's next good answer, so replaying an old session does
 * not show problems it got over.
 */
import { h, replaceChildren } from './dom.js'

type Json = Record<string, unknown>

interface Problem { code: string, message: string, hint: string, attempt?: number, maxRetries?: number | null }

export class Banners {
  readonly element: HTMLElement
  readonly #store = h('div', { class: 'banner banner-warn', testid: 'store-banner', attrs: { role: 'status', hidden: true } })
  readonly #problem = h('div', { class: 'banner banner-error', testid: 'problem-banner', attrs: { role: 'alert', hidden: true } })
  readonly #error = h('div', { class: 'banner banner-error', testid: 'error-banner', attrs: { role: 'alert', hidden: true } })
  #current: Problem | null = null

  constructor () {
    this.element = h('div', { class: 'banners' }, this.#store, this.#problem, this.#error)
  }

  store (state: 'ok' | 'degraded'): void {
    this.#store.hidden = state !== 'degraded'
    this.#store.dataset.state = state
    replaceChildren(this.#store, h('div', { class: 'grow' }, h('strong', {}, 'The event store is not answering.'),
      ' The session keeps running and frames are relayed live; history is written once the store is back. Until then a reconnect may miss frames.'))
  }

  /** Feeds one recorded frame: cli_problem opens a problem, api_retry updates it, a good answer ends it. */
  observe (f: Json): void {
    if (f.type === 'gateway' && f.subtype === 'cli_problem') {
      this.#current = {
        code: String(f.code),
        message: typeof f.message === 'string' ? f.message : 'The CLI reported a problem',
        hint: typeof f.hint === 'string' ? f.hint : '',
        ...(typeof f.attempt === 'number' ? { attempt: f.attempt } : {}),
        maxRetries: typeof f.max_retries === 'number' ? f.max_retries : null
      }
    } else if (f.type === 'system' && f.subtype === 'api_retry' && this.#current?.code === 'api_unreachable') {
      if (typeof f.attempt === 'number') this.#current.attempt = f.attempt
      if (typeof f.max_retries === 'number') this.#current.maxRetries = f.max_retries
    } else if (this.#current !== null && ((f.type === 'assistant' && f.error === undefined && f.is_api_error_message !== true) || (f.type === 'result' && f.is_error !== true))) {
      this.#current = null
    } else {
      return
    }
    this.#renderProblem()
  }

  /** Shows a refusal: a gateway error frame, a GatewayRequestError, a ConnectionError or any Error. */
  error (err: unknown): void {
    const e = err as { code?: unknown, message?: unknown }
    const code = typeof e.code === 'string' ? e.code : null
    const message = typeof e.message === 'string' ? e.message : String(err)
    this.#error.dataset.code = code ?? ''
    replaceChildren(this.#error, h('span', { class: 'grow' }, code === null ? message : `${message} (${code})`),
      h('button', { class: 'link', attrs: { type: 'button', 'aria-label': 'Dismiss' }, on: { click: () => { this.clearError() } } }, 'Dismiss'))
    this.#error.hidden = false
  }

  clearError (): void {
    this.#error.hidden = true
  }

  #renderProblem (): void {
    const p = this.#current
    this.#problem.hidden = p === null
    if (p === null) return
    this.#problem.dataset.code = p.code
    // The gateway's message says what is wrong; for a missing login it is the CLI's own words, which need saying what they mean.
    const title = p.code === 'cli_not_authenticated' ? h('strong', {}, 'The CLI has no credentials. ') : null
    const message = p.code === 'cli_not_authenticated' ? `It says: “${p.message}”` : p.message
    const retries = p.code === 'api_unreachable' && p.attempt !== undefined
      ? h('div', { class: 'retries', testid: 'problem-retries' }, `Retry ${p.attempt}${p.maxRetries === null || p.maxRetries === undefined ? '' : ` of ${p.maxRetries}`}`)
      : null
    replaceChildren(this.#problem,
      h('div', { class: 'grow' }, title, title === null ? h('strong', {}, message) : message, retries, p.hint === '' ? null : h('div', { class: 'hint' }, p.hint)),
      h('button', { class: 'link', attrs: { type: 'button', 'aria-label': 'Dismiss' }, on: { click: () => { this.#current = null; this.#renderProblem() } } }, 'Dismiss'))
  }
}
