/**
 * The transcript: every recorded frame of a session turned into readable
 * entries, in seq order. User messages come from the gateway's
 * `user_message` frames (what was really written to the CLI), assistant text
 * and tool calls from the CLI's `assistant` lines, tool results from its
 * `user` lines (placed inside the call they answer), and, for a session
 * created with `include_partial_messages`, text as it streams from
 * `stream_event` frames, replaced by the final line when it comes. Thinking
 * is collapsed. Everything is text nodes (dom.ts).
 */
import type { RecordedFrame } from '../client/index.js'
import { clip, h, replaceChildren, revealed } from './dom.js'
import { messageText, resultText, toolSummary } from './describe.js'

type Json = Record<string, unknown>

const isRecord = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined)
const num = (v: unknown): number | undefined => (typeof v === 'number' ? v : undefined)

/** Longest text shown for one tool result or input before it is cut. */
const MAX_SHOWN = 20_000

/** Why a turn ended badly, by the result's subtype. */
const RESULT_ERRORS: Record<string, string> = {
  error_during_execution: 'interrupted, or failed while running',
  error_max_turns: 'reached the turn limit (max_turns)',
  error_max_budget_usd: 'reached its budget',
  error_max_structured_output_retries: 'no valid structured output'
}

/** One content block being streamed (stream_event deltas) until its final assistant line. */
interface Streaming { el: HTMLElement, text: HTMLElement, kind: string, buffer: string }

export class Transcript {
  readonly element: HTMLElement
  /** `<message id>:<block index>` → its entry, streamed or final. */
  readonly #blocks = new Map<string, HTMLElement>()
  readonly #streaming = new Map<string, Streaming>()
  /** Assistant lines seen per message id: the CLI prints one line per content block, in order. */
  readonly #linesPerMessage = new Map<string, number>()
  /** The message being streamed, per parent tool use (subagents stream their own). */
  readonly #streamMessage = new Map<string, string>()
  readonly #tools = new Map<string, HTMLElement>()
  /** request_id → tool name, to say what a permission_resolved frame was about. */
  readonly #requests = new Map<string, string>()
  #lastInit = ''
  #retryNote: HTMLElement | null = null
  #scrollPending = false

  constructor () {
    this.element = h('div', { class: 'transcript', testid: 'transcript', attrs: { role: 'log', 'aria-live': 'polite', 'aria-label': 'Transcript', tabindex: 0 } })
  }

  /** Shows a line the console itself adds (a gap in history, a model switched). */
  note (text: string, kind = 'info'): void {
    this.#append(h('div', { class: `note note-${kind}`, testid: 'msg-note' }, text))
  }

  add (frame: RecordedFrame): void {
    const f = frame as unknown as Json
    switch (f.type) {
      case 'gateway': return this.#gateway(f)
      case 'assistant': return this.#assistant(f)
      case 'user': return this.#toolResults(f)
      case 'stream_event': return this.#stream(f)
      case 'result': return this.#result(f)
      case 'system': return this.#system(f)
      case 'control_request': {
        const request = isRecord(f.request) ? f.request : {}
        if (request.subtype !== 'can_use_tool') {
          // Hook callbacks, MCP messages, elicitations: for the SDK client that registered them, not for this page.
          this.#append(h('div', { class: 'note', testid: 'msg-system' },
            `CLI request "${String(request.subtype)}" to the holder (answered by the SDK client that set it up; this page does not)`))
          return
        }
        const tool = str(request.display_name) ?? str(request.tool_name) ?? 'a tool'
        this.#requests.set(String(f.request_id), tool)
        this.#append(h('div', { class: 'note note-permission', testid: 'msg-permission' }, 'Permission asked: ', ...revealed(tool), detail(str(request.description))))
        return
      }
      default:
    }
  }

  #gateway (f: Json): void {
    switch (f.subtype) {
      case 'user_message': {
        const message = isRecord(f.message) ? f.message : {}
        this.#append(h('div', { class: 'msg msg-user', testid: 'msg-user', attrs: { 'data-seq': num(f.seq) } },
          h('div', { class: 'who' }, 'You'), textBody(messageText(message.content))))
        return
      }
      case 'status': {
        const exit = isRecord(f.exit) ? f.exit : null
        if (f.status === 'exited' || f.status === 'stopped') {
          const how = exit === null ? '' : exitText(exit)
          const tail = Array.isArray(exit?.stderr_tail) && exit.stderr_tail.length > 0 ? exit.stderr_tail.join('\n') : null
          this.#append(h('div', { class: `note note-${f.status === 'exited' && exit?.code !== 0 ? 'error' : 'info'}`, testid: 'msg-status' },
            `CLI ${String(f.status)}${how}. A new message starts it again.`,
            tail === null ? null : h('details', {}, h('summary', {}, 'Last lines of its error output'), h('pre', {}, tail))))
        }
        return
      }
      case 'request_pending':
        this.#requests.set(String(f.request_id), str(f.display_name) ?? str(f.tool_name) ?? String(f.request_subtype))
        if (f.request_subtype === 'can_use_tool') {
          this.#append(h('div', { class: 'note note-permission', testid: 'msg-permission' },
            'Permission asked: ', ...revealed(str(f.display_name) ?? str(f.tool_name) ?? 'a tool'), ' (the holder answers)', detail(str(f.description))))
        }
        return
      case 'permission_resolved': {
        const tool = this.#requests.get(String(f.request_id)) ?? 'Tool'
        const by = f.by === null ? '' : typeof f.by === 'string' && f.by.startsWith('http:') ? ' over HTTP' : ''
        const words: Record<string, string> = { allowed: 'allowed', denied: 'denied', timed_out: 'not answered in time (denied)', cancelled: 'withdrawn' }
        this.#append(h('div', { class: `note note-${f.decision === 'allowed' ? 'ok' : 'warn'}`, testid: 'msg-permission-resolved' },
          ...revealed(tool), `: ${words[String(f.decision)] ?? String(f.decision)}${by}`))
        return
      }
      case 'cli_problem': // its hint is in the banner while the problem lasts
        this.#append(h('div', { class: 'note note-error', testid: 'msg-problem' }, str(f.message) ?? 'The CLI reported a problem'))
        return
      case 'cli_output_rejected':
        this.#append(h('div', { class: 'note note-warn', testid: 'msg-rejected' },
          `The CLI printed a line the gateway could not relay (${String(f.reason)}, ${String(f.bytes)} bytes)`, detail(str(f.preview))))
        return
      default:
    }
  }

  #assistant (f: Json): void {
    const message = isRecord(f.message) ? f.message : {}
    const id = str(message.id) ?? `line-${String(f.seq)}`
    const content = Array.isArray(message.content) ? message.content : []
    const failed = typeof f.error === 'string' || f.is_api_error_message === true
    let index = this.#linesPerMessage.get(id) ?? 0
    for (const block of content) {
      const key = this.#streamedKey(id, index++, isRecord(block) ? str(block.type) : undefined)
      const el = this.#block(block, failed)
      if (el === null) continue
      const streamed = this.#blocks.get(key)
      this.#streaming.delete(key)
      if (streamed !== undefined && streamed.isConnected) streamed.replaceWith(el)
      else this.#append(el)
      this.#blocks.set(key, el)
    }
    this.#linesPerMessage.set(id, index)
  }

  /**
   * The streamed entry a final block replaces: the one at its index (the CLI prints one line per block, in
   * order), unless that one is of another kind, then the first still streaming of its kind in that message.
   */
  #streamedKey (id: string, index: number, type: string | undefined): string {
    const key = `${id}:${index}`
    const kind = type === 'redacted_thinking' ? 'thinking' : type === 'server_tool_use' || type === 'mcp_tool_use' ? 'tool_use' : type
    const atIndex = this.#streaming.get(key)
    if (atIndex === undefined || atIndex.kind === kind) return key
    for (const [other, open] of this.#streaming) if (other.startsWith(`${id}:`) && open.kind === kind) return other
    return key
  }

  #block (block: unknown, failed: boolean): HTMLElement | null {
    if (!isRecord(block)) return null
    switch (block.type) {
      case 'text':
        return h('div', { class: `msg msg-assistant${failed ? ' msg-error' : ''}`, testid: 'msg-assistant' }, h('div', { class: 'who' }, 'Claude'), textBody(str(block.text) ?? ''))
      case 'thinking':
      case 'redacted_thinking':
        return h('details', { class: 'thinking', testid: 'msg-thinking' },
          h('summary', {}, block.type === 'thinking' ? 'Thinking' : 'Thinking (redacted)'),
          h('div', { class: 'thinking-text' }, str(block.thinking) ?? ''))
      case 'tool_use':
      case 'server_tool_use':
      case 'mcp_tool_use': {
        const name = str(block.name) ?? 'tool'
        const id = str(block.id) ?? ''
        const el = this.#tools.get(id) ?? h('div', { class: 'tool', testid: 'msg-tool', attrs: { 'data-tool-use-id': id } })
        const results = el.querySelector('.tool-results') ?? h('div', { class: 'tool-results' })
        replaceChildren(el, toolHead(name, toolSummary(name, block.input)),
          h('details', { class: 'tool-input' }, h('summary', {}, 'Input'), h('pre', {}, ...revealed(clip(JSON.stringify(block.input ?? {}, null, 2), MAX_SHOWN)))),
          results)
        if (id !== '') this.#tools.set(id, el)
        return el
      }
      default:
        return null
    }
  }

  #toolResults (f: Json): void {
    const message = isRecord(f.message) ? f.message : {}
    if (!Array.isArray(message.content)) return
    for (const block of message.content) {
      if (!isRecord(block) || block.type !== 'tool_result') continue
      const failed = block.is_error === true
      const text = resultText(block.content)
      const el = h('details', { class: `tool-result${failed ? ' tool-error' : ''}`, testid: 'msg-tool-result', attrs: { open: failed || text.length < 400 } },
        h('summary', {}, failed ? 'Error' : 'Result', text === '' ? ' (empty)' : ''),
        h('pre', {}, clip(text, MAX_SHOWN)))
      const tool = this.#tools.get(String(block.tool_use_id))
      const results = tool?.querySelector('.tool-results')
      if (results !== null && results !== undefined) {
        results.appendChild(el)
        this.#scroll()
      } else {
        this.#append(el)
      }
    }
  }

  #stream (f: Json): void {
    const event = isRecord(f.event) ? f.event : {}
    const parent = str(f.parent_tool_use_id) ?? ''
    if (event.type === 'message_start') {
      const message = isRecord(event.message) ? event.message : {}
      const id = str(message.id)
      if (id !== undefined) this.#streamMessage.set(parent, id)
      return
    }
    const id = this.#streamMessage.get(parent)
    const index = num(event.index)
    if (id === undefined || index === undefined) return
    const key = `${id}:${index}`
    if (event.type === 'content_block_start') {
      if (this.#blocks.has(key)) return // the final line came first (a replay can hold both)
      const block = isRecord(event.content_block) ? event.content_block : {}
      const kind = str(block.type) ?? 'text'
      let el: HTMLElement
      let text: HTMLElement
      if (kind === 'tool_use') {
        text = h('pre', {})
        el = h('div', { class: 'tool streaming', testid: 'msg-tool' }, toolHead(str(block.name) ?? 'tool', '…'), text)
      } else if (kind === 'thinking') {
        text = h('div', { class: 'thinking-text' })
        el = h('details', { class: 'thinking streaming', testid: 'msg-thinking' }, h('summary', {}, 'Thinking…'), text)
      } else {
        text = h('div', { class: 'text' })
        el = h('div', { class: 'msg msg-assistant streaming', testid: 'msg-assistant', attrs: { 'aria-busy': 'true' } }, h('div', { class: 'who' }, 'Claude'), text)
      }
      this.#blocks.set(key, el)
      this.#streaming.set(key, { el, text, kind, buffer: '' })
      this.#append(el)
      return
    }
    const open = this.#streaming.get(key)
    if (open === undefined || event.type !== 'content_block_delta' || !isRecord(event.delta)) return
    const delta = event.delta
    const piece = str(delta.text) ?? str(delta.partial_json) ?? str(delta.thinking) ?? ''
    open.buffer += piece
    // A tool's input is drawn as its final line draws it (hidden characters named, cut when huge): the final
    // line may never come (an interrupt), and until it does this is what the person reads of the command.
    if (open.kind === 'tool_use') replaceChildren(open.text, ...revealed(clip(open.buffer, MAX_SHOWN)))
    else open.text.textContent = open.buffer
    this.#scroll()
  }

  #result (f: Json): void {
    // Whatever still streams ended with the turn (an interrupt cuts a message short): shown as it got.
    for (const open of this.#streaming.values()) {
      open.el.classList.remove('streaming')
      open.el.removeAttribute('aria-busy')
    }
    this.#streaming.clear()
    this.#retryNote = null
    const parts: string[] = []
    const ms = num(f.duration_ms)
    if (ms !== undefined) parts.push(`${(ms / 1000).toFixed(1)} s`)
    const turns = num(f.num_turns)
    if (turns !== undefined) parts.push(`${turns} turn${turns === 1 ? '' : 's'}`)
    const cost = num(f.total_cost_usd)
    if (cost !== undefined) parts.push(`$${cost.toFixed(4)}`)
    // CLI 2.1.332 says an interrupt ended the turn in `terminal_reason` (aborted_streaming, aborted_tools, …).
    const interrupted = str(f.terminal_reason)?.startsWith('aborted') === true
    const failed = f.is_error === true && !interrupted
    const why = failed ? (f.subtype === 'success' ? str(f.result) ?? 'error' : RESULT_ERRORS[String(f.subtype)] ?? String(f.subtype).replace(/_/g, ' ')) : null
    this.#append(h('div', { class: `note note-${failed ? 'error' : 'done'}`, testid: 'msg-result' },
      interrupted ? 'Turn interrupted' : failed ? `Turn ended with an error: ${why ?? ''}` : 'Turn finished', parts.length > 0 ? ` · ${parts.join(' · ')}` : ''))
  }

  #system (f: Json): void {
    switch (f.subtype) {
      case 'init': {
        // The CLI prints one per turn: shown when what it says changed.
        const text = `Model ${str(f.model) ?? '?'} · ${str(f.permissionMode) ?? '?'} mode · ${str(f.cwd) ?? ''}`
        if (text !== this.#lastInit) this.#append(h('div', { class: 'note', testid: 'msg-system' }, text))
        this.#lastInit = text
        return
      }
      case 'api_retry': {
        // One line per run of retries, kept current: a CLI may retry ten times and more.
        const text = `API request failed${f.error_status === null || f.error_status === undefined ? '' : ` (HTTP ${String(f.error_status)})`}; retry ${String(f.attempt)} of ${String(f.max_retries)}`
        if (this.#retryNote !== null && this.element.lastElementChild === this.#retryNote) {
          this.#retryNote.textContent = text
        } else {
          this.#retryNote = h('div', { class: 'note note-warn', testid: 'msg-system' }, text)
          this.#append(this.#retryNote)
        }
        return
      }
      case 'compact_boundary':
        this.#append(h('div', { class: 'note', testid: 'msg-system' }, 'Conversation compacted'))
        return
      case 'permission_denied':
        this.#append(h('div', { class: 'note note-warn', testid: 'msg-system' }, str(f.message) ?? `${String(f.tool_name)} was denied`))
        return
      default:
    }
  }

  #append (el: HTMLElement): void {
    this.#scroll()
    this.element.appendChild(el)
  }

  /**
   * Keeps a reader who is at the end there, once per animation frame: reading the layout for every frame
   * of a replay (thousands) would lay the page out thousands of times. Whether to follow is decided
   * before this frame's additions, so a reader who scrolled up stays where they are.
   */
  #scroll (): void {
    if (this.#scrollPending) return
    this.#scrollPending = true
    const follow = this.#nearBottom()
    requestAnimationFrame(() => {
      this.#scrollPending = false
      if (follow) this.element.scrollTop = this.element.scrollHeight
    })
  }

  /** Whether the reader is at the end (then new entries keep it there); scrolled up, they do not move the view. */
  #nearBottom (slack = 160): boolean {
    const el = this.element
    return el.scrollHeight - el.scrollTop - el.clientHeight < slack
  }
}

function toolHead (name: string, summary: string): HTMLElement {
  return h('div', { class: 'tool-head' }, h('span', { class: 'tool-name' }, ...revealed(name)), summary === '' ? null : h('code', { class: 'tool-summary' }, ...revealed(summary)))
}

function detail (text: string | undefined): HTMLElement | null {
  return text === undefined || text === '' ? null : h('div', { class: 'note-detail' }, ...revealed(text, false))
}

/** Text with fenced code blocks (```) set apart as preformatted. */
function textBody (text: string): HTMLElement {
  const body = h('div', { class: 'text' })
  const parts = text.split(/^```[^\n]*\n?/m)
  parts.forEach((part, i) => {
    if (part === '') return
    body.appendChild(i % 2 === 1 ? h('pre', { class: 'code' }, part.replace(/\n$/, '')) : h('div', { class: 'prose' }, part.replace(/^\n+|\n+$/g, '')))
  })
  return body
}

function exitText (exit: Json): string {
  const parts: string[] = []
  if (exit.code !== null && exit.code !== undefined) parts.push(`code ${String(exit.code)}`)
  if (typeof exit.signal === 'string') parts.push(exit.signal)
  if (typeof exit.reason === 'string' && exit.reason !== 'exited' && exit.reason !== 'stopped') parts.push(exit.reason.replace(/_/g, ' '))
  if (typeof exit.error === 'string') parts.push(exit.error)
  return parts.length === 0 ? '' : ` (${parts.join(', ')})`
}
