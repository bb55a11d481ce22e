/**
 * Words for what frames carry: a tool call's one-line summary, a tool
 * result's text, a permission suggestion in plain language, a user message's
 * text. Kept apart from rendering so the transcript and the permission dialog
 * say the same thing the same way.
 */

type Json = Record<string, unknown>

const isRecord = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)

/** The one line that identifies a tool call: a command, a path, a pattern, a URL. */
export function toolSummary (name: string, input: unknown): string {
  return oneLine(toolSubject(name, input))
}

/** What a tool call acts on, whole (every line of a command): what a permission prompt shows. */
export function toolSubject (name: string, input: unknown): string {
  if (!isRecord(input)) return ''
  for (const key of ['command', 'file_path', 'notebook_path', 'path', 'pattern', 'url', 'query', 'description', 'prompt']) {
    const value = input[key]
    if (typeof value === 'string' && value !== '') return value
  }
  return name === 'TodoWrite' && Array.isArray(input.todos) ? `${input.todos.length} items` : ''
}

/** A tool result's content (a string, or text and image blocks) as text. */
export function resultText (content: unknown): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return content === undefined || content === null ? '' : JSON.stringify(content, null, 2)
  return content.map((block: unknown) => {
    if (!isRecord(block)) return ''
    if (block.type === 'text' && typeof block.text === 'string') return block.text
    if (block.type === 'image') return '[image]'
    return JSON.stringify(block)
  }).join('\n')
}

/** A user message's content as text; images and documents as placeholders. */
export function messageText (content: unknown): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  return content.map((block: unknown) => {
    if (!isRecord(block)) return ''
    if (block.type === 'text' && typeof block.text === 'string') return block.text
    if (block.type === 'image') return '[image]'
    if (block.type === 'document') return '[document]'
    return ''
  }).filter((t) => t !== '').join('\n')
}

const DESTINATIONS: Record<string, string> = {
  session: 'for this session',
  localSettings: 'in local settings',
  projectSettings: 'in project settings',
  userSettings: 'in user settings',
  cliArg: 'for this run'
}

/** A permission suggestion (`addRules`, `addDirectories`, `setMode`, …) in plain words. */
export function suggestionText (suggestion: unknown): string {
  if (!isRecord(suggestion)) return JSON.stringify(suggestion)
  const where = typeof suggestion.destination === 'string' ? ` ${DESTINATIONS[suggestion.destination] ?? `(${suggestion.destination})`}` : ''
  switch (suggestion.type) {
    case 'addRules':
    case 'replaceRules': {
      const rules = Array.isArray(suggestion.rules) ? suggestion.rules.map(ruleText).join(', ') : ''
      const behavior = typeof suggestion.behavior === 'string' ? suggestion.behavior : 'allow'
      return `${behavior === 'allow' ? 'Always allow' : behavior === 'deny' ? 'Always deny' : 'Always ask for'} ${rules}${where}`
    }
    case 'addDirectories':
      return `Allow access to ${Array.isArray(suggestion.directories) ? suggestion.directories.join(', ') : 'directories'}${where}`
    case 'setMode':
      return `Switch to ${String(suggestion.mode)} mode${where}`
    default:
      return `${String(suggestion.type)}${where}`
  }
}

function ruleText (rule: unknown): string {
  if (!isRecord(rule)) return String(rule)
  const tool = String(rule.toolName)
  return typeof rule.ruleContent === 'string' && rule.ruleContent !== '' ? `${tool}(${rule.ruleContent})` : tool
}

function oneLine (text: string): string {
  const first = text.split('\n', 1)[0] ?? ''
  return first.length > 160 ? `${first.slice(0, 160)}…` : first + (text.includes('\n') ? ' …' : '')
}
