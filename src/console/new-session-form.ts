/**
 * The "New session" form: the options people pick most (model, permission
 * mode, working folder, streaming of partial messages), each one field of
 * POST /v1/sessions (docs/API.md). Anything left empty is the gateway's
 * default.
 */
import type { GatewayClient, SessionInfo } from '../client/index.js'
import { h } from './dom.js'

const MODES = [
  ['default', 'asks first'],
  ['acceptEdits', 'edits allowed'],
  ['plan', 'plans, no changes'],
  ['dontAsk', 'denies what asks'],
  ['auto', 'model decides'],
  ['bypassPermissions', 'never asks']
] as const

export function newSessionForm (client: GatewayClient, onCreated: (session: SessionInfo) => void): HTMLElement {
  const model = h('input', { testid: 'new-session-model', attrs: { id: 'new-model', type: 'text', list: 'model-aliases', placeholder: 'default', autocomplete: 'off', spellcheck: 'false' } })
  const mode = h('select', { testid: 'new-session-mode', attrs: { id: 'new-mode' } },
    ...MODES.map(([value, label]) => h('option', { attrs: { value } }, `${value} · ${label}`)))
  const cwd = h('input', { testid: 'new-session-cwd', attrs: { id: 'new-cwd', type: 'text', placeholder: 'a folder in your workspace (optional)', autocomplete: 'off', spellcheck: 'false' } })
  const partial = h('input', { testid: 'new-session-partial', attrs: { id: 'new-partial', type: 'checkbox', checked: true } })
  const submit = h('button', { class: 'primary', testid: 'new-session-submit', attrs: { type: 'submit' } }, 'Create')
  const error = h('p', { class: 'form-error', testid: 'new-session-error', attrs: { role: 'alert', hidden: true } })
  const form = h('form', { class: 'new-session', testid: 'new-session-form', attrs: { 'aria-label': 'New session' } },
    h('label', { attrs: { for: 'new-model' } }, 'Model'), model,
    h('datalist', { attrs: { id: 'model-aliases' } }, ...['sonnet', 'opus', 'haiku'].map((m) => h('option', { attrs: { value: m } }))),
    h('label', { attrs: { for: 'new-mode' } }, 'Permission mode'), mode,
    h('label', { attrs: { for: 'new-cwd' } }, 'Folder'), cwd,
    h('label', { class: 'choice', attrs: { for: 'new-partial' } }, partial, ' Stream text as it is written'),
    error, submit)
  form.addEventListener('submit', (e) => {
    e.preventDefault()
    submit.disabled = true
    error.hidden = true
    client.createSession({
      ...(model.value.trim() === '' ? {} : { model: model.value.trim() }),
      permission_mode: mode.value as (typeof MODES)[number][0],
      ...(cwd.value.trim() === '' ? {} : { cwd: cwd.value.trim() }),
      include_partial_messages: partial.checked
    }).then((session) => {
      submit.disabled = false
      onCreated(session)
    }, (err: unknown) => {
      const e = err as { code?: unknown, message?: unknown }
      error.textContent = `${typeof e.message === 'string' ? e.message : String(err)}${typeof e.code === 'string' ? ` (${e.code})` : ''}`
      error.hidden = false
      submit.disabled = false
    })
  })
  return form
}
