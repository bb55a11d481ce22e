/**
 * One open session: its header (state, connection, role, take over, model,
 * interrupt, stop), the banners that explain what is wrong (event store
 * degraded, the CLI's own problems, refused frames), the transcript, the
 * permission prompt and the composer. It attaches with `after=0`, so a
 * stopped session shows its whole history from the store and a running one
 * its history, then live frames. It attaches as controller only when nobody
 * holds the session: taking it from another client (an SDK, another tab)
 * is the explicit "Take over". A tab that held a session takes it again
 * after a reload (remembered in sessionStorage).
 */
import type { GatewayClient, PermissionDecision, PermissionRequest, RecordedFrame, Role, SessionConnection, SessionInfo } from '../client/index.js'
import { h, shortId } from './dom.js'
import { Banners } from './banners.js'
import { permissionFromControlRequest } from '../client/permissions.js'
import { PermissionDialog, type ShownRequest } from './permission-dialog.js'
import { Transcript } from './transcript.js'

type Json = Record<string, unknown>

/** Aliases the CLI resolves to its current models (`--model`, `set_model`). */
const MODEL_ALIASES = ['sonnet', 'opus', 'haiku']

/** How long an observed prompt's input waits to be fetched, so prompts opened together are fetched at once. */
const OBSERVE_AFTER_MS = 100

const CONNECTION_LABELS: Record<string, string> = { connecting: 'Connecting…', open: 'Connected', reconnecting: 'Reconnecting…', closed: 'Disconnected' }

export interface SessionViewOptions {
  client: GatewayClient
  info: SessionInfo
  /** How to attach; default: controller when nobody holds the session, else observer. */
  role?: Role
  /** Something changed that the sidebar shows (status, turn, a prompt opened or answered, a stop). */
  onChanged: () => void
  /** The session state as the header shows it (`data-state` of session-state), on every change. */
  onState?: (state: string) => void
}

export class SessionView {
  readonly element: HTMLElement
  readonly #client: GatewayClient
  readonly #info: SessionInfo
  readonly #conn: SessionConnection
  readonly #transcript = new Transcript()
  readonly #banners = new Banners()
  readonly #dialog: PermissionDialog
  readonly #stateBadge = h('span', { class: 'badge', testid: 'session-state', attrs: { role: 'status' } })
  readonly #connBadge = h('span', { class: 'badge', testid: 'connection-state' })
  readonly #roleBadge = h('span', { class: 'badge', testid: 'role' })
  readonly #takeOver = h('button', { testid: 'take-over', attrs: { type: 'button' } }, 'Take over')
  readonly #interrupt = h('button', { class: 'danger', testid: 'interrupt', attrs: { type: 'button' } }, 'Interrupt')
  readonly #stop = h('button', { testid: 'stop-session', attrs: { type: 'button' } }, 'Stop')
  readonly #model = h('select', { testid: 'model-select', attrs: { 'aria-label': 'Model' } })
  readonly #input = h('textarea', { testid: 'prompt-input', attrs: { rows: 3, placeholder: 'Message Claude…  (Enter sends, Shift+Enter for a new line)', 'aria-label': 'Message' } })
  readonly #send = h('button', { class: 'primary', testid: 'prompt-send', attrs: { type: 'submit' } }, 'Send')
  readonly #hint = h('span', { class: 'muted composer-hint' })
  readonly #folder = h('span', { class: 'muted', testid: 'session-folder' })
  #currentModel: string | null
  readonly #onState: ((state: string) => void) | undefined
  #unsubscribe: Array<() => void> = []
  /** Prompts this tab observes, in full from the HTTP API (their request_pending has no input); a string: why not (yet). */
  readonly #observed = new Map<string, PermissionRequest | string>()
  #observeTimer: ReturnType<typeof setTimeout> | null = null
  readonly #asked: Role

  constructor (options: SessionViewOptions) {
    this.#client = options.client
    this.#info = options.info
    this.#onState = options.onState
    this.#currentModel = typeof options.info.options.model === 'string' ? options.info.options.model : null
    this.#dialog = new PermissionDialog({ answer: (request, decision) => { this.#answer(request, decision) } })
    const cwd = typeof options.info.options.cwd === 'string' ? options.info.options.cwd : null
    // Without `cwd` the CLI runs in a folder of its own, named by the session id (docs/API.md).
    this.#folder.textContent = cwd ?? 'its own folder'

    this.#takeOver.addEventListener('click', () => { this.#conn.takeOver() })
    this.#interrupt.addEventListener('click', () => {
      this.#interrupt.disabled = true
      this.#conn.interrupt().catch((err: unknown) => { this.#banners.error(err) }).finally(() => { this.#render() })
    })
    this.#stop.addEventListener('click', () => {
      this.#stop.disabled = true
      this.#client.stopSession(this.#info.id).then(() => { options.onChanged() }, (err: unknown) => { this.#banners.error(err) }).finally(() => { this.#render() })
    })
    this.#model.addEventListener('change', () => { this.#setModel(this.#model.value) })
    this.#input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault()
        this.#submit()
      }
    })
    const composer = h('form', { class: 'composer', on: { submit: (e) => { e.preventDefault(); this.#submit() } } },
      this.#input, h('div', { class: 'composer-row' }, this.#hint, h('span', { class: 'spacer' }), this.#send))

    this.element = h('section', { class: 'session', attrs: { 'aria-label': `Session ${options.info.id}`, 'data-session-id': options.info.id } },
      h('header', { class: 'session-head' },
        h('div', { class: 'session-title' },
          h('h2', { attrs: { title: options.info.id } }, `Session ${shortId(options.info.id)}`),
          this.#folder),
        h('div', { class: 'session-badges' }, this.#stateBadge, this.#connBadge, this.#roleBadge, this.#takeOver),
        h('div', { class: 'session-actions' }, this.#model, this.#interrupt, this.#stop)),
      this.#banners.element,
      this.#transcript.element,
      this.#dialog.element,
      composer)

    // This tab held it before a reload: take it back (the gateway may not have seen the old socket go yet).
    const role = options.role ?? (options.info.holder === null || heldHere(options.info.id) ? 'controller' : 'observer')
    this.#asked = role
    this.#conn = options.client.connect(options.info.id, { role, after: 0, auth: 'subprotocol' })
    const c = this.#conn
    this.#unsubscribe = [
      c.on('frame', (frame) => { this.#transcript.add(frame); this.#watch(frame) }),
      c.on('state', () => { this.#render() }),
      c.on('role', ({ role }) => { rememberHeld(options.info.id, role === 'controller'); this.#render(); this.#renderPermissions() }),
      c.on('status', () => { this.#render(); options.onChanged() }),
      c.on('turn', () => { this.#render(); options.onChanged() }),
      c.on('store', (state) => { this.#banners.store(state) }),
      c.on('permission', () => { this.#renderPermissions(); options.onChanged() }),
      c.on('permissionResolved', () => { this.#renderPermissions(); options.onChanged() }),
      c.on('gap', ({ missing }) => {
        this.#transcript.note(`History no longer holds ${missing.map(([a, b]) => (a === b ? `#${a}` : `#${a}–#${b}`)).join(', ')} (trimmed, expired or lost while the store was down).`, 'warn')
      }),
      c.on('error', (err) => {
        const requestId = (err as { request_id?: unknown }).request_id
        if (typeof requestId === 'string' && this.#conn.pending.has(requestId)) this.#dialog.refused(requestId, (err as Error).message)
        else this.#banners.error(err)
      })
    ]
    this.#render()
  }

  /** The role it has (or, before the gateway said, the role it asked for). */
  get role (): Role {
    return this.#conn.role ?? this.#asked
  }

  /** Whether its connection ended for good (a close the client does not come back from, or close()). */
  get closed (): boolean {
    return this.#conn.state === 'closed'
  }

  /** Puts the cursor in the composer. */
  focus (): void {
    this.#input.focus()
  }

  close (): void {
    if (this.#observeTimer !== null) clearTimeout(this.#observeTimer)
    for (const off of this.#unsubscribe) off()
    this.#conn.close()
  }

  #submit (): void {
    const text = this.#input.value
    if (text.trim() === '' || this.#conn.role !== 'controller') return
    try {
      this.#conn.send(text)
      this.#input.value = ''
      this.#banners.clearError()
    } catch (err) {
      this.#banners.error(err)
    }
  }

  #answer (shown: PermissionRequest, decision: PermissionDecision): void {
    // As the connection knows it now: a take-over since it was shown makes it answerable here.
    const request = this.#conn.pending.get(shown.requestId) ?? shown
    if (request.canAnswer) {
      if (decision.behavior === 'deny') this.#conn.deny(request.requestId, decision.message, { interrupt: decision.interrupt ?? false })
      else this.#conn.allow(request.requestId, decision.updatedPermissions === undefined ? {} : { updatedPermissions: decision.updatedPermissions })
      return
    }
    this.#client.answerPermission(this.#info.id, request.requestId, decision)
      .catch((err: unknown) => { this.#dialog.refused(request.requestId, err instanceof Error ? err.message : String(err)) })
  }

  #setModel (model: string): void {
    const previous = this.#currentModel
    this.#model.disabled = true
    this.#conn.setModel(model).then(() => {
      this.#currentModel = model
      this.#transcript.note(`Model set to ${model}`)
    }, (err: unknown) => {
      this.#banners.error(err)
      this.#currentModel = previous
    }).finally(() => { this.#render() })
  }

  /** What frames say beyond the transcript: the model in use, the CLI's problems and their end. */
  #watch (frame: RecordedFrame): void {
    const f = frame as unknown as Json
    if (f.type === 'system' && f.subtype === 'init' && typeof f.model === 'string') {
      this.#currentModel = f.model
      this.#renderModels()
      if (typeof f.cwd === 'string') this.#folder.title = f.cwd
    }
    this.#banners.observe(f)
  }

  #renderPermissions (): void {
    const pending = [...this.#conn.pending.values()]
    // One fetch for a burst: a replay opens and resolves its old prompts within moments.
    if (this.#observeTimer === null && pending.some((r) => !r.canAnswer && !this.#observed.has(r.requestId))) {
      this.#observeTimer = setTimeout(() => { this.#observeTimer = null; this.#fetchObserved() }, OBSERVE_AFTER_MS)
    }
    this.#dialog.show(pending.map((r): ShownRequest => {
      if (r.canAnswer) return r
      const full = this.#observed.get(r.requestId)
      if (full === undefined || typeof full === 'string') return { ...r, unknownInput: full ?? 'Loading what it asks…' }
      return { ...r, input: full.input, ...(full.blockedPath === undefined ? {} : { blockedPath: full.blockedPath }) }
    }))
  }

  /** An observer allows only what it was shown: the prompts' input, which the holder alone gets on its WebSocket. */
  #fetchObserved (): void {
    const ids = [...this.#conn.pending.values()].filter((r) => !r.canAnswer && !this.#observed.has(r.requestId)).map((r) => r.requestId)
    if (ids.length === 0) return
    for (const id of ids) this.#observed.set(id, 'Loading what it asks…')
    this.#client.pendingRequests(this.#info.id).then((requests) => {
      for (const p of requests) {
        const full = permissionFromControlRequest({ seq: p.seq, request_id: p.request_id, request: p.request }, false)
        if (full !== null && ids.includes(full.requestId)) this.#observed.set(full.requestId, full)
      }
      // Not listed: answered meanwhile (its permission_resolved is on the way), or the gateway lost it.
      for (const id of ids) if (typeof this.#observed.get(id) === 'string') this.#observed.set(id, 'The gateway no longer lists this prompt.')
    }, (err: unknown) => {
      const why = `Could not load what it asks (${err instanceof Error ? err.message : String(err)}): take over to see it.`
      for (const id of ids) this.#observed.set(id, why)
    }).finally(() => { this.#renderPermissions() })
  }

  #render (): void {
    const c = this.#conn
    const status = c.status ?? this.#info.status
    const turn = c.turnState
    const stopped = status === 'stopped' || status === 'exited'
    const state = stopped || status === 'starting' || status === 'stopping' ? status : (turn ?? 'idle')
    const labels: Record<string, string> = { running: 'Running', requires_action: 'Waiting for you', idle: 'Idle', starting: 'Starting', stopping: 'Stopping', stopped: 'Stopped', exited: 'Exited' }
    this.#stateBadge.textContent = labels[state] ?? state
    if (this.#stateBadge.dataset.state !== state) this.#onState?.(state)
    this.#stateBadge.dataset.state = state
    this.#stateBadge.title = stopped ? 'The CLI is not running; a message starts it again with the conversation' : `CLI ${status}`

    this.#connBadge.textContent = CONNECTION_LABELS[c.state] ?? c.state
    this.#connBadge.dataset.state = c.state
    const holder = c.role === 'controller'
    this.#roleBadge.textContent = c.role === null ? '…' : holder ? 'Holder' : 'Observer'
    this.#roleBadge.dataset.role = c.role === null ? 'none' : holder ? 'holder' : 'observer'
    this.#roleBadge.title = holder ? 'You hold this session: you send and answer prompts' : 'Another client (or nobody) holds this session; you watch'
    this.#takeOver.hidden = holder || c.state === 'closed'

    this.#interrupt.disabled = !holder || stopped || (turn !== 'running' && turn !== 'requires_action')
    this.#stop.disabled = stopped || status === 'stopping'
    this.#send.disabled = !holder || c.state === 'closed'
    this.#input.disabled = c.state === 'closed'
    this.#model.disabled = !holder || stopped
    this.#hint.textContent = c.state === 'closed'
      ? 'Disconnected: choose the session on the left to attach again.'
      : !holder
      ? 'You are observing: take over to send.'
      : stopped ? 'The CLI is stopped: your message starts it again.' : ''
    this.#renderModels()
  }

  #renderModels (): void {
    const current = this.#currentModel
    const names = current === null || MODEL_ALIASES.includes(current) ? MODEL_ALIASES : [current, ...MODEL_ALIASES]
    const options = [h('option', { attrs: { value: '', disabled: true, selected: current === null } }, 'Model…'),
      ...names.map((name) => h('option', { attrs: { value: name, selected: name === current } }, name))]
    this.#model.replaceChildren(...options)
  }
}

const HELD_PREFIX = 'claude-gateway.held.'

/** Whether this tab held the session when it last had it open (sessionStorage: this tab only, kept across reloads). */
function heldHere (id: string): boolean {
  try {
    return sessionStorage.getItem(HELD_PREFIX + id) !== null
  } catch {
    return false
  }
}

function rememberHeld (id: string, held: boolean): void {
  try {
    if (held) sessionStorage.setItem(HELD_PREFIX + id, '1')
    else sessionStorage.removeItem(HELD_PREFIX + id)
  } catch { /* storage disabled: a reload attaches by the usual rule */ }
}
