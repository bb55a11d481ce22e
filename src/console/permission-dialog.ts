/**
 * The permission prompt of the open session: what the CLI wants to do (tool,
 * description, input), and the three answers: allow once, allow always (the
 * CLI's own suggestions, each one chosen or not), deny with a message
 * (optionally stopping the turn). Several waiting prompts are answered one
 * after the other, oldest first. A holder answers on its WebSocket; an
 * observer answers over HTTP, once only (no suggestions to grant), and may
 * allow only once it is shown what it allows: its `request_pending` has no
 * input, which session-view.ts fetches (`unknownInput` until then). A
 * prompt's Allow buttons take clicks only a moment after it is drawn: the
 * next prompt comes milliseconds after an answer, in the same place, and a
 * click meant for the last one (a double click) must not allow it unseen;
 * nor may a key held down on the last one (its repeats are ignored). A
 * prompt answered is not answered again (a double click) unless refused.
 */
import type { PermissionDecision, PermissionRequest } from '../client/index.js'
import { clip, h, replaceChildren, revealed } from './dom.js'
import { suggestionText, toolSubject } from './describe.js'

/** A prompt as shown; `unknownInput` says why its input is not known (yet): then it can be denied, not allowed. */
export type ShownRequest = PermissionRequest & { unknownInput?: string }

/** How long a prompt just drawn waits before it can be allowed: more than a double click takes. */
const ARM_MS = 700

export interface PermissionAnswerer {
  answer: (request: PermissionRequest, decision: PermissionDecision) => void
}

export class PermissionDialog {
  readonly element: HTMLElement
  #shownId: string | null = null
  #shownCanAnswer = false
  #shownUnknown: string | undefined
  #error: string | null = null
  /** The prompt an answer was sent for, until the gateway refuses it: a second click (a double click) sends no second answer. */
  #answeredId: string | null = null
  #armTimer: ReturnType<typeof setTimeout> | null = null

  constructor (private readonly answerer: PermissionAnswerer) {
    this.element = h('section', { class: 'permission', testid: 'permission-dialog', attrs: { role: 'alertdialog', 'aria-labelledby': 'permission-title', hidden: true } })
  }

  /** Shows the oldest of `requests` (hidden when there are none); the form is kept while the same prompt stays first. */
  show (requests: ShownRequest[]): void {
    const first = requests.slice().sort((a, b) => a.seq - b.seq)[0]
    if (first === undefined) {
      this.#disarm()
      this.#shownId = null
      this.#error = null
      this.element.hidden = true
      replaceChildren(this.element)
      return
    }
    const count = this.element.querySelector('.permission-count')
    // The same prompt stays as it is (what was typed in it too), unless it became answerable here (a take-over) or its input came.
    if (first.requestId === this.#shownId && first.canAnswer === this.#shownCanAnswer && first.unknownInput === this.#shownUnknown) {
      if (count !== null) count.textContent = requests.length > 1 ? `1 of ${requests.length} waiting` : ''
      return
    }
    this.#shownId = first.requestId
    this.#shownCanAnswer = first.canAnswer
    this.#shownUnknown = first.unknownInput
    this.#error = null
    this.#render(first, requests.length)
    this.element.hidden = false
  }

  #disarm (): void {
    if (this.#armTimer !== null) clearTimeout(this.#armTimer)
    this.#armTimer = null
  }

  /** An answer the gateway refused (bypass_not_allowed, permission_update_not_allowed): the prompt stays. */
  refused (requestId: string | undefined, message: string): void {
    if (requestId !== undefined && requestId !== this.#shownId) return
    this.#answeredId = null
    this.#error = message
    const slot = this.element.querySelector('.permission-error')
    if (slot !== null) {
      slot.textContent = message
      ;(slot as HTMLElement).hidden = false
    }
  }

  #render (request: ShownRequest, waiting: number): void {
    const tool = request.displayName ?? request.toolName
    // Whole, and with what would not be drawn named: what is approved is what runs, not its first line.
    const summary = clip(toolSubject(request.toolName, request.input), 20_000)
    const hasInput = Object.keys(request.input).length > 0
    const choices = request.suggestions.map((suggestion, i) => {
      const id = `suggestion-${i}`
      const box = h('input', { attrs: { type: 'checkbox', id, checked: true }, testid: 'permission-suggestion' })
      return { suggestion, box, row: h('label', { class: 'choice', attrs: { for: id } }, box, ' ', ...revealed(suggestionText(suggestion))) }
    })
    const message = h('input', { class: 'grow', testid: 'permission-deny-message', attrs: { type: 'text', placeholder: 'Why not? (the model reads this)', 'aria-label': 'Message for the model' } })
    const stop = h('input', { attrs: { type: 'checkbox', id: 'permission-stop' }, testid: 'permission-deny-interrupt' })
    const answer = (decision: PermissionDecision): void => {
      if (this.#answeredId === request.requestId) return
      this.#answeredId = request.requestId
      this.answerer.answer(request, decision)
    }
    const always = (): void => {
      const chosen = choices.filter((c) => c.box.checked).map((c) => c.suggestion)
      answer({ behavior: 'allow', updatedPermissions: chosen })
    }
    const deny = (): void => {
      answer({ behavior: 'deny', message: message.value.trim() === '' ? 'The user denied this tool use.' : message.value.trim(), interrupt: stop.checked })
    }
    message.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); deny() } })
    const allowOnce = h('button', { class: 'primary', testid: 'permission-allow', attrs: { type: 'button', disabled: true }, on: { click: () => answer({ behavior: 'allow' }), keydown: heldKey } }, 'Allow once')
    const allowAlways = h('button', { testid: 'permission-always', attrs: { type: 'button', disabled: true, title: choices.length === 0 ? 'The CLI suggested nothing to remember' : null }, on: { click: always, keydown: heldKey } }, 'Allow always')
    this.#disarm()
    this.#armTimer = setTimeout(() => {
      this.#armTimer = null
      allowOnce.disabled = request.unknownInput !== undefined
      allowAlways.disabled = choices.length === 0
      // Focus moves to the prompt only from nowhere: someone typing elsewhere must not answer it with their next Enter.
      if (document.activeElement === null || document.activeElement === document.body) allowOnce.focus()
    }, ARM_MS)

    replaceChildren(this.element,
      h('div', { class: 'permission-top' },
        h('h2', { attrs: { id: 'permission-title' } }, 'Allow ', ...revealed(tool), '?'),
        h('span', { class: 'permission-count' }, waiting > 1 ? `1 of ${waiting} waiting` : '')),
      request.description === undefined ? null : h('p', { class: 'permission-description' }, ...revealed(request.description, false)),
      summary === '' ? null : h('pre', { class: 'permission-summary', testid: 'permission-summary' }, ...revealed(summary)),
      request.blockedPath === undefined ? null : h('p', { class: 'muted' }, 'Path: ', ...revealed(request.blockedPath)),
      hasInput ? h('details', {}, h('summary', {}, 'Full input'), h('pre', {}, ...revealed(clip(JSON.stringify(request.input, null, 2), 20_000)))) : null,
      request.canAnswer ? null : h('p', { class: 'muted' }, 'Another client holds this session; your answer goes over HTTP.'),
      request.unknownInput === undefined ? null : h('p', { class: 'permission-unknown' }, request.unknownInput),
      choices.length === 0 ? null : h('fieldset', { class: 'choices' }, h('legend', {}, 'Allow always grants'), ...choices.map((c) => c.row)),
      h('p', { class: 'permission-error', attrs: { role: 'alert', hidden: this.#error === null } }, this.#error ?? ''),
      h('div', { class: 'permission-actions' },
        allowOnce,
        allowAlways,
        h('span', { class: 'spacer' }),
        message,
        h('label', { class: 'choice', attrs: { for: 'permission-stop' } }, stop, ' and stop'),
        h('button', { class: 'danger', testid: 'permission-deny', attrs: { type: 'button' }, on: { click: deny } }, 'Deny')))
  }
}

/**
 * A key held down (the keyboard repeating it) presses no Allow: it went down on the prompt before, whose
 * answer put this one in its place (and its Allow in focus once armed), so it was not pressed for this one.
 */
function heldKey (event: KeyboardEvent): void {
  if (event.repeat && (event.key === 'Enter' || event.key === ' ')) event.preventDefault()
}
