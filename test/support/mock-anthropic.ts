// Local stand-in for the Anthropic Messages API, for running the real `claude`
// CLI fully offline in tests and in scripts/record.ts.
//
//   const mock = await startMockAnthropic()            // default scripting
//   mock.script('first answer', { content: [toolUse('Bash', { command: 'ls' })], stopReason: 'tool_use' })
//   const env = claudeEnv({ home, baseUrl: mock.url })
//   ...
//   mock.messageRequests()[0].body                      // what the CLI sent
//   await mock.close()
//
// Streaming POST /v1/messages requests take their reply from the scripted
// queue first, then from the handler (options.handler ?? defaultHandler).
// Non-streaming POSTs (side requests) never consume the queue: they are
// answered by the handler with a plain message JSON.
import http from 'node:http'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, statSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { gunzipSync, inflateSync, brotliDecompressSync } from 'node:zlib'

// ---------------------------------------------------------------- types

export type StopReason = 'end_turn' | 'tool_use' | 'max_tokens' | 'stop_sequence' | 'pause_turn' | 'refusal'

export interface TextBlockSpec {
  type: 'text'
  text: string
  /** Split into this many text_delta events, or give the pieces. Default: one delta. */
  chunks?: number | string[]
}

export interface ToolUseBlockSpec {
  type: 'tool_use'
  name: string
  input: Record<string, unknown>
  /** Default: a fresh `toolu_…` id. */
  id?: string
  /** Split the input JSON into this many input_json_delta events. Default 1. */
  chunks?: number
}

export interface ThinkingBlockSpec {
  type: 'thinking'
  thinking: string
  signature?: string
}

export type BlockSpec = TextBlockSpec | ToolUseBlockSpec | ThinkingBlockSpec

export interface ApiErrorSpec {
  /** HTTP status, e.g. 400, 429, 500, 529. Note the CLI retries 429/5xx with backoff. */
  status: number
  type: string
  message: string
}

export interface MockReply {
  content: BlockSpec[]
  /** Default: 'tool_use' if any tool_use block is present, else 'end_turn'. */
  stopReason?: StopReason
  /** Model echoed in the reply. Default: the model of the request. */
  model?: string
  usage?: { input_tokens?: number; output_tokens?: number }
  /**
   * Awaited after each SSE event but the last, with the event and its data:
   * the stream's pace (a demo's scripted model paces it for people watching)
   * or a gate a test controls (hold the stream once it has said enough). A
   * client that goes away ends the wait.
   */
  pace?: (event: string, data: unknown) => Promise<unknown>
  /**
   * Pause the stream after the first content delta until this settles
   * (lets a test interrupt mid-stream deterministically).
   */
  hold?: Promise<unknown>
  /** Answer with an HTTP error instead of a message. */
  error?: ApiErrorSpec
  /** Send an SSE `error` event after message_start and end the stream. */
  streamError?: { type: string; message: string }
}

/** A reply; a bare string is a single text block with stop_reason end_turn. */
export type ReplyInput = MockReply | string

export interface MessageParam {
  role: string
  content: string | ContentBlockParam[]
}

export interface ContentBlockParam {
  type: string
  text?: string
  id?: string
  name?: string
  input?: unknown
  tool_use_id?: string
  content?: string | ContentBlockParam[]
  is_error?: boolean
  [key: string]: unknown
}

export interface MessagesBody {
  model?: string
  messages?: MessageParam[]
  system?: string | ContentBlockParam[]
  tools?: Array<{ name: string; [key: string]: unknown }>
  stream?: boolean
  max_tokens?: number
  [key: string]: unknown
}

export type RequestKind = 'messages' | 'count_tokens' | 'head' | 'other'

export interface RecordedRequest {
  /** 1-based order of arrival. */
  seq: number
  /** Date.now() at arrival. */
  at: number
  method: string
  /** Pathname without query, e.g. /v1/messages. */
  path: string
  /** Path with query, as sent. */
  url: string
  query: Record<string, string>
  /** Request headers with x-api-key / authorization removed. */
  headers: Record<string, string | string[] | undefined>
  /** The x-api-key and authorization headers as received (the credential the CLI, or a proxy for it, sent). */
  credential: { apiKey?: string; authorization?: string }
  /** Parsed JSON body (or the raw text if not JSON, undefined if empty). */
  body: unknown
  kind: RequestKind
  stream: boolean
  /** For messages requests: what the stand-in answered. */
  reply?: { messageId: string; stopReason: StopReason | null; content: BlockSpec[]; error?: ApiErrorSpec; source: 'queue' | 'handler' }
  /** The client went away before the reply was complete (e.g. interrupt). */
  aborted?: boolean
}

export interface HandlerContext {
  request: RecordedRequest
  /** Number of messages requests seen so far, this one included. */
  turn: number
  mock: MockAnthropic
  /** The built-in scripting, for handlers that only override some prompts. */
  fallback: (body: MessagesBody) => ReplyInput
}

export type MockHandler = (body: MessagesBody, ctx: HandlerContext) => ReplyInput | Promise<ReplyInput>

export interface MockAnthropicOptions {
  /** Answers messages requests when the script queue is empty. Default: defaultHandler. */
  handler?: MockHandler
  host?: string
  port?: number
  /** Model used when a request names none. */
  defaultModel?: string
  /** Called for every request (debugging). */
  onRequest?: (req: RecordedRequest) => void
}

export interface MockAnthropic {
  /** Base URL for ANTHROPIC_BASE_URL, e.g. http://127.0.0.1:41234 */
  readonly url: string
  readonly port: number
  /** Every request, in order of arrival. */
  readonly requests: RecordedRequest[]
  /** Only POST /v1/messages requests (streaming and not). */
  messageRequests(): RecordedRequest[]
  /** Queue replies (or per-request functions) for the next streaming messages requests. */
  script(...replies: Array<ReplyInput | MockHandler>): void
  /** Replies still queued. */
  pending(): number
  setHandler(handler: MockHandler | undefined): void
  /** Resolve with the first recorded request matching pred (already seen or future). */
  waitForRequest(pred: (r: RecordedRequest) => boolean, timeoutMs?: number): Promise<RecordedRequest>
  /** Forget recorded requests and queued replies. */
  reset(): void
  close(): Promise<void>
}

// ---------------------------------------------------------------- ids

const ID_ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz'

function randomId(prefix: string, len = 22): string {
  const bytes = randomBytes(len)
  let out = ''
  for (const b of bytes) out += ID_ALPHABET[b % ID_ALPHABET.length]
  return `${prefix}${out}`
}

export const newMessageId = (): string => randomId('msg_01')
export const newToolUseId = (): string => randomId('toolu_01')
export const newRequestId = (): string => randomId('req_01')

// ---------------------------------------------------------------- reply builders

export function text(textValue: string, chunks?: number | string[]): TextBlockSpec {
  return chunks === undefined ? { type: 'text', text: textValue } : { type: 'text', text: textValue, chunks }
}

export function toolUse(name: string, input: Record<string, unknown>, id?: string): ToolUseBlockSpec {
  return id === undefined ? { type: 'tool_use', name, input } : { type: 'tool_use', name, input, id }
}

export function textReply(textValue: string, chunks?: number | string[]): MockReply {
  return { content: [text(textValue, chunks)], stopReason: 'end_turn' }
}

export function toolUseReply(...blocks: BlockSpec[]): MockReply {
  return { content: blocks, stopReason: 'tool_use' }
}

/** A long answer made of `lines` lines, streamed as one text_delta per line. */
export function longTextReply(lines = 20, prefix = 'Line'): MockReply {
  const pieces = Array.from({ length: lines }, (_, i) => `${prefix} ${i + 1} of a long streamed answer.\n`)
  return { content: [{ type: 'text', text: pieces.join(''), chunks: pieces }], stopReason: 'end_turn' }
}

export interface Deferred<T = void> {
  promise: Promise<T>
  resolve: (value: T) => void
  reject: (err: unknown) => void
}

/** A promise with its resolve function: handy as MockReply.hold. */
export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void
  let reject!: (err: unknown) => void
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

// ---------------------------------------------------------------- request helpers

const SYSTEM_REMINDER_RE = /<system-reminder>[\s\S]*?<\/system-reminder>/g

function asBody(body: unknown): MessagesBody {
  return body !== null && typeof body === 'object' ? (body as MessagesBody) : {}
}

function blocksOf(msg: MessageParam): ContentBlockParam[] {
  if (typeof msg.content === 'string') return [{ type: 'text', text: msg.content }]
  return Array.isArray(msg.content) ? msg.content : []
}

/** The last `role: "user"` message (the list may end with a `role: "system"` entry). */
export function lastUserMessage(body: unknown): MessageParam | undefined {
  const messages = asBody(body).messages ?? []
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]
    if (m && m.role === 'user') return m
  }
  return undefined
}

/** The user's own text in a message: text blocks minus <system-reminder> blocks, trimmed. */
export function messageText(msg: MessageParam | undefined): string {
  if (!msg) return ''
  const parts: string[] = []
  for (const block of blocksOf(msg)) {
    if (block.type !== 'text' || typeof block.text !== 'string') continue
    const stripped = block.text.replace(SYSTEM_REMINDER_RE, '').trim()
    if (stripped) parts.push(stripped)
  }
  return parts.join('\n')
}

/** Text of the last user message, <system-reminder> blocks skipped. */
export function lastUserText(body: unknown): string {
  return messageText(lastUserMessage(body))
}

/** Texts of every user message, in order (reminders skipped, empty ones dropped). */
export function allUserTexts(body: unknown): string[] {
  return (asBody(body).messages ?? [])
    .filter((m) => m.role === 'user')
    .map((m) => messageText(m))
    .filter((t) => t !== '')
}

export interface FoundToolResult {
  toolUseId: string
  /** The result flattened to text. */
  content: string
  isError: boolean
  /** Index in body.messages. */
  messageIndex: number
}

function flattenContent(content: unknown): string {
  if (typeof content === 'string') return content
  if (Array.isArray(content)) {
    return content
      .map((c: ContentBlockParam) => (c && c.type === 'text' && typeof c.text === 'string' ? c.text : ''))
      .filter(Boolean)
      .join('\n')
  }
  return ''
}

/** tool_result blocks of the request: of every message, or only of the last user message. */
export function findToolResults(body: unknown, opts: { lastOnly?: boolean } = {}): FoundToolResult[] {
  const messages = asBody(body).messages ?? []
  const last = lastUserMessage(body)
  const out: FoundToolResult[] = []
  messages.forEach((m, i) => {
    if (m.role !== 'user' || (opts.lastOnly && m !== last)) return
    for (const block of blocksOf(m)) {
      if (block.type !== 'tool_result') continue
      out.push({
        toolUseId: String(block.tool_use_id ?? ''),
        content: flattenContent(block.content),
        isError: block.is_error === true,
        messageIndex: i
      })
    }
  })
  return out
}

/** tool_use blocks the assistant sent earlier in the conversation. */
export function findToolUses(body: unknown): Array<{ id: string; name: string; input: unknown; messageIndex: number }> {
  const out: Array<{ id: string; name: string; input: unknown; messageIndex: number }> = []
  ;(asBody(body).messages ?? []).forEach((m, i) => {
    if (m.role !== 'assistant') return
    for (const b of blocksOf(m)) {
      if (b.type === 'tool_use') out.push({ id: String(b.id ?? ''), name: String(b.name ?? ''), input: b.input, messageIndex: i })
    }
  })
  return out
}

/** The CLI's working directory, as stated in its environment section ("Primary working directory: …"). */
export function cwdFromRequest(body: unknown): string | undefined {
  const b = asBody(body)
  const texts: string[] = []
  const collect = (c: unknown): void => {
    if (typeof c === 'string') texts.push(c)
    else if (Array.isArray(c)) for (const x of c as ContentBlockParam[]) if (x && typeof x.text === 'string') texts.push(x.text)
  }
  collect(b.system)
  for (const m of b.messages ?? []) collect(m.content)
  for (const t of texts) {
    const m = /Primary working directory:\s*(\S+)/.exec(t) ?? /Working directory:\s*(\S+)/.exec(t)
    if (m && m[1]) return m[1]
  }
  return undefined
}

// ---------------------------------------------------------------- default scripting

export const DEFAULT_BASH_COMMAND = 'touch created-by-tool.txt && echo hello-from-tool'

/**
 * Built-in scripting, driven by the last user message:
 * - it carries tool_result blocks → "Tool finished: <content>" (several joined with " | ")
 * - `RUN_BASH <cmd>` → text + tool_use Bash {command: cmd} (empty cmd: DEFAULT_BASH_COMMAND)
 * - `TWO_TOOLS` → text + two Bash tool_uses (touch one.txt / touch two.txt)
 * - `WRITE_FILE <path> <content…>` → tool_use Write (relative paths resolved against the CLI's cwd)
 * - `READ_FILE <path>` → tool_use Read
 * - `LONG_ANSWER [n]` → n lines (default 20) streamed as n text deltas
 * - `MCP_TOOL <server> <tool> [json]` → text + tool_use `mcp__<server>__<tool>` with that input (default {})
 * - `STRUCTURED <json>` → tool_use StructuredOutput with that input (what the CLI offers for a JSON schema output format)
 * - anything else → "Echo: <prompt>"
 */
export function defaultHandler(body: MessagesBody): MockReply {
  const results = findToolResults(body, { lastOnly: true })
  if (results.length > 0) {
    return textReply(`Tool finished: ${results.map((r) => r.content).join(' | ')}`)
  }
  const prompt = lastUserText(body)
  const cmd = (name: string): string | undefined => {
    const m = new RegExp(`(?:^|\\n)\\s*${name}(?:[ \\t]+([^\\n]*))?(?:\\n|$)`).exec(prompt)
    return m ? (m[1] ?? '').trim() : undefined
  }
  const bash = cmd('RUN_BASH')
  if (bash !== undefined) {
    return toolUseReply(text('I will run a tool.'), toolUse('Bash', { command: bash || DEFAULT_BASH_COMMAND }))
  }
  if (cmd('TWO_TOOLS') !== undefined) {
    return toolUseReply(
      text('I will run two tools.'),
      toolUse('Bash', { command: 'touch one.txt && echo one', description: 'Create one.txt' }),
      toolUse('Bash', { command: 'touch two.txt && echo two', description: 'Create two.txt' })
    )
  }
  const write = cmd('WRITE_FILE')
  if (write !== undefined) {
    const [file = 'written-by-tool.txt', ...rest] = write.split(/\s+/)
    const cwd = cwdFromRequest(body)
    const filePath = path.isAbsolute(file) || !cwd ? file : path.join(cwd, file)
    return toolUseReply(text('I will write a file.'), toolUse('Write', { file_path: filePath, content: rest.join(' ') || 'hello\n' }))
  }
  const read = cmd('READ_FILE')
  if (read !== undefined) {
    const cwd = cwdFromRequest(body)
    const filePath = path.isAbsolute(read) || !cwd ? read : path.join(cwd, read)
    return toolUseReply(text('I will read a file.'), toolUse('Read', { file_path: filePath }))
  }
  const mcp = cmd('MCP_TOOL')
  if (mcp !== undefined) {
    const [server = 'server', toolName = 'tool', ...json] = mcp.split(/\s+/)
    return toolUseReply(text('I will call an MCP tool.'), toolUse(`mcp__${server}__${toolName}`, parseJsonObject(json.join(' '))))
  }
  const structured = cmd('STRUCTURED')
  if (structured !== undefined) return toolUseReply(toolUse('StructuredOutput', parseJsonObject(structured)))
  const long = cmd('LONG_ANSWER')
  if (long !== undefined) {
    const n = Number.parseInt(long, 10)
    return longTextReply(Number.isFinite(n) && n > 0 ? n : 20)
  }
  return textReply(`Echo: ${prompt}`)
}

/** A JSON object from prompt text; {} when empty or not an object. */
function parseJsonObject(textValue: string): Record<string, unknown> {
  if (textValue.trim() === '') return {}
  try {
    const v: unknown = JSON.parse(textValue)
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {}
  } catch {
    return {}
  }
}

// ---------------------------------------------------------------- SSE encoding

function normalizeReply(input: ReplyInput): MockReply {
  return typeof input === 'string' ? textReply(input) : input
}

function splitString(s: string, n: number): string[] {
  if (n <= 1 || s.length <= 1) return [s]
  const size = Math.ceil(s.length / n)
  const out: string[] = []
  for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size))
  return out
}

function estimateTokens(s: string): number {
  return Math.max(1, Math.ceil(s.length / 4))
}

interface ResolvedBlock {
  spec: BlockSpec
  final: Record<string, unknown>
  start: Record<string, unknown>
  deltas: Array<Record<string, unknown>>
}

function resolveBlocks(blocks: BlockSpec[]): ResolvedBlock[] {
  return blocks.map((b) => {
    if (b.type === 'text') {
      const pieces = Array.isArray(b.chunks) ? b.chunks : splitString(b.text, b.chunks ?? 1)
      const full = Array.isArray(b.chunks) ? b.chunks.join('') : b.text
      return {
        spec: b,
        final: { type: 'text', text: full },
        start: { type: 'text', text: '' },
        deltas: pieces.map((p) => ({ type: 'text_delta', text: p }))
      }
    }
    if (b.type === 'tool_use') {
      const id = b.id ?? newToolUseId()
      const json = JSON.stringify(b.input)
      return {
        spec: { ...b, id },
        final: { type: 'tool_use', id, name: b.name, input: b.input },
        start: { type: 'tool_use', id, name: b.name, input: {} },
        deltas: [{ type: 'input_json_delta', partial_json: '' }, ...splitString(json, b.chunks ?? 1).map((p) => ({ type: 'input_json_delta', partial_json: p }))]
      }
    }
    const signature = b.signature ?? randomBytes(32).toString('base64')
    return {
      spec: { ...b, signature },
      final: { type: 'thinking', thinking: b.thinking, signature },
      start: { type: 'thinking', thinking: '', signature: '' },
      deltas: [
        { type: 'thinking_delta', thinking: b.thinking },
        { type: 'signature_delta', signature }
      ]
    }
  })
}

export interface EncodedReply {
  messageId: string
  stopReason: StopReason
  /** The reply's blocks with generated ids filled in. */
  content: BlockSpec[]
  /** The message as a non-streaming response would carry it. */
  message: Record<string, unknown>
  /** SSE events [event name, data] in order. */
  events: Array<[string, Record<string, unknown>]>
}

/** Turn a reply into the exact message JSON / SSE event list the real API would send. */
export function encodeReply(input: ReplyInput, model: string): EncodedReply {
  const reply = normalizeReply(input)
  const blocks = resolveBlocks(reply.content)
  const stopReason: StopReason = reply.stopReason ?? (reply.content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn')
  const messageId = newMessageId()
  const outText = blocks.map((b) => JSON.stringify(b.final)).join('')
  const inputTokens = reply.usage?.input_tokens ?? 12
  const outputTokens = reply.usage?.output_tokens ?? estimateTokens(outText)
  const usage = {
    input_tokens: inputTokens,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
    output_tokens: outputTokens,
    service_tier: 'standard'
  }
  const message = {
    id: messageId,
    type: 'message',
    role: 'assistant',
    model: reply.model ?? model,
    content: blocks.map((b) => b.final),
    stop_reason: stopReason,
    stop_sequence: null,
    usage
  }
  const events: Array<[string, Record<string, unknown>]> = []
  events.push([
    'message_start',
    {
      type: 'message_start',
      message: { ...message, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } }
    }
  ])
  events.push(['ping', { type: 'ping' }])
  blocks.forEach((b, index) => {
    events.push(['content_block_start', { type: 'content_block_start', index, content_block: b.start }])
    for (const delta of b.deltas) events.push(['content_block_delta', { type: 'content_block_delta', index, delta }])
    events.push(['content_block_stop', { type: 'content_block_stop', index }])
  })
  events.push([
    'message_delta',
    {
      type: 'message_delta',
      delta: { stop_reason: stopReason, stop_sequence: null },
      usage: { input_tokens: inputTokens, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: outputTokens }
    }
  ])
  events.push(['message_stop', { type: 'message_stop' }])
  return { messageId, stopReason, content: blocks.map((b) => b.spec), message, events }
}

export function sseFrame(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`
}

// ---------------------------------------------------------------- server

function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => resolve(Buffer.concat(chunks)))
    req.on('error', reject)
  })
}

function decodeBody(raw: Buffer, encoding: string | undefined): string {
  let buf = raw
  try {
    if (encoding === 'gzip') buf = gunzipSync(raw)
    else if (encoding === 'deflate') buf = inflateSync(raw)
    else if (encoding === 'br') buf = brotliDecompressSync(raw)
  } catch {
    buf = raw
  }
  return buf.toString('utf8')
}

function errorJson(type: string, message: string): string {
  return JSON.stringify({ type: 'error', error: { type, message }, request_id: newRequestId() })
}

class MockAnthropicServer implements MockAnthropic {
  readonly requests: RecordedRequest[] = []
  private queue: Array<ReplyInput | MockHandler> = []
  private handler: MockHandler | undefined
  private seq = 0
  private turns = 0
  private waiters: Array<{ pred: (r: RecordedRequest) => boolean; resolve: (r: RecordedRequest) => void }> = []
  private readonly server: http.Server
  private readonly opts: MockAnthropicOptions
  url = ''
  port = 0

  constructor(opts: MockAnthropicOptions) {
    this.opts = opts
    this.handler = opts.handler
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        if (!res.headersSent) {
          res.writeHead(500, { 'content-type': 'application/json' })
          res.end(errorJson('api_error', `mock-anthropic handler failed: ${String(err)}`))
        } else {
          res.destroy()
        }
      })
    })
    this.server.keepAliveTimeout = 1000
  }

  listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject)
      this.server.listen(this.opts.port ?? 0, this.opts.host ?? '127.0.0.1', () => {
        const addr = this.server.address()
        if (addr === null || typeof addr === 'string') return reject(new Error('mock-anthropic: no address'))
        this.port = addr.port
        this.url = `http://${this.opts.host ?? '127.0.0.1'}:${addr.port}`
        resolve()
      })
    })
  }

  messageRequests(): RecordedRequest[] {
    return this.requests.filter((r) => r.kind === 'messages')
  }

  script(...replies: Array<ReplyInput | MockHandler>): void {
    this.queue.push(...replies)
  }

  pending(): number {
    return this.queue.length
  }

  setHandler(handler: MockHandler | undefined): void {
    this.handler = handler
  }

  waitForRequest(pred: (r: RecordedRequest) => boolean, timeoutMs = 30_000): Promise<RecordedRequest> {
    const found = this.requests.find(pred)
    if (found) return Promise.resolve(found)
    return new Promise((resolve, reject) => {
      const waiter = {
        pred,
        resolve: (r: RecordedRequest): void => {
          clearTimeout(timer)
          resolve(r)
        }
      }
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter)
        reject(new Error(`mock-anthropic: no matching request within ${timeoutMs} ms (saw ${this.requests.length}: ${this.requests.map((r) => `${r.method} ${r.url}`).join(', ')})`))
      }, timeoutMs)
      this.waiters.push(waiter)
    })
  }

  reset(): void {
    this.requests.length = 0
    this.queue = []
    this.turns = 0
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()))
    this.server.closeAllConnections()
    await closed
  }

  private record(r: RecordedRequest): void {
    this.requests.push(r)
    this.opts.onRequest?.(r)
    const ready = this.waiters.filter((w) => w.pred(r))
    this.waiters = this.waiters.filter((w) => !ready.includes(w))
    for (const w of ready) w.resolve(r)
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const raw = await readBody(req)
    const u = new URL(req.url ?? '/', 'http://mock.invalid')
    const headers: Record<string, string | string[] | undefined> = { ...req.headers }
    const credential: RecordedRequest['credential'] = {}
    if (typeof req.headers['x-api-key'] === 'string') credential.apiKey = req.headers['x-api-key']
    if (typeof req.headers.authorization === 'string') credential.authorization = req.headers.authorization
    delete headers['x-api-key']
    delete headers['authorization']
    const rawText = raw.length > 0 ? decodeBody(raw, req.headers['content-encoding']) : ''
    let body: unknown = undefined
    if (rawText) {
      try {
        body = JSON.parse(rawText)
      } catch {
        body = rawText
      }
    }
    const method = (req.method ?? 'GET').toUpperCase()
    const pathname = u.pathname.replace(/\/+$/, '') || '/'
    let kind: RequestKind = 'other'
    if (method === 'HEAD') kind = 'head'
    else if (method === 'POST' && pathname === '/v1/messages') kind = 'messages'
    else if (method === 'POST' && pathname === '/v1/messages/count_tokens') kind = 'count_tokens'
    const mb = asBody(body)
    const rec: RecordedRequest = {
      seq: ++this.seq,
      at: Date.now(),
      method,
      path: pathname,
      url: req.url ?? '/',
      query: Object.fromEntries(u.searchParams.entries()),
      headers,
      credential,
      body,
      kind,
      stream: kind === 'messages' && mb.stream === true
    }
    const closed = new Promise<void>((resolve) => {
      res.on('close', () => {
        if (!res.writableFinished) rec.aborted = true
        resolve()
      })
    })

    if (kind === 'head') {
      res.writeHead(200, { 'content-type': 'text/plain' })
      res.end()
      this.record(rec)
      return
    }
    if (kind === 'count_tokens') {
      res.writeHead(200, { 'content-type': 'application/json', 'request-id': newRequestId() })
      res.end(JSON.stringify({ input_tokens: estimateTokens(rawText) }))
      this.record(rec)
      return
    }
    if (kind === 'other') {
      res.writeHead(404, { 'content-type': 'application/json', 'request-id': newRequestId() })
      res.end(errorJson('not_found_error', `mock-anthropic: no route for ${method} ${pathname}`))
      this.record(rec)
      return
    }

    // POST /v1/messages
    this.turns++
    const model = typeof mb.model === 'string' && mb.model ? mb.model : (this.opts.defaultModel ?? 'claude-sonnet-4-5-20250929')
    const ctx: HandlerContext = { request: rec, turn: this.turns, mock: this, fallback: (b) => defaultHandler(b) }
    let source: 'queue' | 'handler' = 'handler'
    let input: ReplyInput
    const queued = rec.stream ? this.queue.shift() : undefined
    if (queued !== undefined) {
      source = 'queue'
      input = typeof queued === 'function' ? await queued(mb, ctx) : queued
    } else {
      input = await (this.handler ?? defaultHandler)(mb, ctx)
    }
    const reply = normalizeReply(input)
    const encoded = encodeReply(reply, model)
    rec.reply = { messageId: encoded.messageId, stopReason: reply.error ? null : encoded.stopReason, content: encoded.content, source, ...(reply.error ? { error: reply.error } : {}) }
    this.record(rec)

    const requestId = newRequestId()
    if (reply.error) {
      res.writeHead(reply.error.status, { 'content-type': 'application/json', 'request-id': requestId, 'x-should-retry': 'false' })
      res.end(errorJson(reply.error.type, reply.error.message))
      return
    }
    if (!rec.stream) {
      res.writeHead(200, { 'content-type': 'application/json', 'request-id': requestId })
      res.end(JSON.stringify(encoded.message))
      return
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'request-id': requestId
    })
    let deltasSent = 0
    for (const [event, data] of encoded.events) {
      if (res.destroyed || rec.aborted) return
      if (reply.streamError && event === 'content_block_start') {
        res.write(sseFrame('error', { type: 'error', error: reply.streamError }))
        res.end()
        return
      }
      res.write(sseFrame(event, data))
      if (event === 'content_block_delta') {
        deltasSent++
        // A client that goes away (interrupt) must not leave us waiting on the hold.
        if (deltasSent === 1 && reply.hold) await Promise.race([reply.hold, closed])
      }
      if (reply.pace !== undefined && event !== 'message_stop') await Promise.race([reply.pace(event, data), closed])
    }
    res.end()
  }
}

export async function startMockAnthropic(options: MockAnthropicOptions = {}): Promise<MockAnthropic> {
  const server = new MockAnthropicServer(options)
  await server.listen()
  return server
}

// ---------------------------------------------------------------- CLI environment

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')

export interface ClaudeEnvOptions {
  /** Scratch HOME (the CLI keeps its config and session transcripts under $HOME/.claude). */
  home: string
  /** The stand-in's URL. */
  baseUrl: string
  apiKey?: string
  /** Set CLAUDE_CODE_ENTRYPOINT=sdk-ts and CLAUDE_CODE_SDK_READS_SESSION_STATE=1 like the Agent SDK (and the reference transcripts). Default true. */
  sdk?: boolean
  /**
   * TMPDIR and XDG_RUNTIME_DIR for the CLI (created, mode 0700). The CLI puts
   * fswatch probes and tool output under $TMPDIR/claude-<uid> and its
   * messaging socket under $XDG_RUNTIME_DIR/cc-socks (else /tmp/cc-socks).
   * Default: <home>/tmp. Keep it short: a unix socket path must fit in 107 bytes.
   */
  tmpDir?: string
  /** Extra variables, applied last. */
  extra?: Record<string, string>
}

/**
 * Environment for an offline run of the real CLI: the parent's environment
 * minus anything ANTHROPIC_* / CLAUDE* (so a developer's real credentials or
 * an enclosing Claude Code session can't leak in), plus the offline settings.
 */
export function claudeEnv(opts: ClaudeEnvOptions): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined) continue
    if (/^(ANTHROPIC_|CLAUDE|AWS_BEARER_TOKEN_BEDROCK|NODE_OPTIONS$|npm_)/i.test(k)) continue
    env[k] = v
  }
  Object.assign(env, {
    HOME: opts.home,
    USERPROFILE: opts.home,
    ANTHROPIC_BASE_URL: opts.baseUrl,
    ANTHROPIC_API_KEY: opts.apiKey ?? 'sk-ant-mock-key-not-a-secret',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_TELEMETRY: '1',
    DISABLE_ERROR_REPORTING: '1',
    NO_PROXY: '127.0.0.1,localhost',
    no_proxy: '127.0.0.1,localhost'
  })
  const tmp = opts.tmpDir ?? path.join(opts.home, 'tmp')
  mkdirSync(tmp, { recursive: true, mode: 0o700 })
  env.TMPDIR = tmp
  env.XDG_RUNTIME_DIR = tmp
  delete env.XDG_CONFIG_HOME
  delete env.HTTP_PROXY
  delete env.HTTPS_PROXY
  delete env.http_proxy
  delete env.https_proxy
  if (opts.sdk !== false) {
    env.CLAUDE_CODE_ENTRYPOINT = 'sdk-ts'
    env.CLAUDE_CODE_SDK_READS_SESSION_STATE = '1'
  }
  Object.assign(env, opts.extra ?? {})
  return env
}

/**
 * Path of the real CLI binary installed in this repo: CLAUDE_BIN if set, else
 * node_modules/@anthropic-ai/claude-code/bin/claude.exe (the native binary after
 * postinstall), else the platform package's binary, else node_modules/.bin/claude.
 */
export function resolveClaudeBin(repoRoot: string = REPO_ROOT): string {
  const override = process.env.CLAUDE_BIN
  if (override) {
    if (!existsSync(override)) throw new Error(`CLAUDE_BIN=${override} does not exist`)
    return override
  }
  const pkgDir = path.join(repoRoot, 'node_modules', '@anthropic-ai', 'claude-code')
  const candidates = [path.join(pkgDir, 'bin', 'claude.exe')]
  const platformPkg = `claude-code-${process.platform}-${process.arch}`
  candidates.push(path.join(repoRoot, 'node_modules', '@anthropic-ai', platformPkg, process.platform === 'win32' ? 'claude.exe' : 'claude'))
  candidates.push(path.join(repoRoot, 'node_modules', '@anthropic-ai', `${platformPkg}-musl`, 'claude'))
  candidates.push(path.join(repoRoot, 'node_modules', '.bin', process.platform === 'win32' ? 'claude.cmd' : 'claude'))
  for (const c of candidates) {
    try {
      // The wrapper ships a small placeholder at bin/claude.exe until its postinstall
      // copies the native binary over it: skip anything that small.
      if (existsSync(c) && statSync(c).size > 1_000_000) return c
    } catch {
      // unreadable: try the next one
    }
  }
  throw new Error(`@anthropic-ai/claude-code is not installed: run npm ci (looked for ${candidates.join(', ')})`)
}
