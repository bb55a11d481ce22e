/**
 * A one-line summary of a tool's input, for lists a person scans ("Needs
 * attention", notifications): the field that says what the tool will do
 * (a command, a path, a URL, a pattern), else the first short string field,
 * cut to a fixed length. Never the whole input: it may be a whole file.
 */

/** Fields that say what a tool will do, in the order they are looked for. */
const TELLING_FIELDS = ['command', 'file_path', 'notebook_path', 'path', 'url', 'pattern', 'query', 'description', 'prompt']

export const SUMMARY_MAX = 160

export function summariseInput (input: Record<string, unknown>, max = SUMMARY_MAX): string {
  const key = TELLING_FIELDS.find((k) => typeof input[k] === 'string' && input[k] !== '') ??
    Object.keys(input).find((k) => typeof input[k] === 'string' && input[k] !== '')
  const text = key === undefined ? '' : String(input[key]).replace(/\s+/g, ' ').trim()
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`
}
