// Agents through the official `openai` npm client (v4), issue 29: `vega serve` on a
// random-weight `vega synth` model (a random model writes JSON or calls only through the
// grammar) with real chat templates from $VEGA_TEST_DATA/templates:
//   - json_schema answers on 50 prompts at temperature 1 parse and validate against their
//     schema (every keyword the schema uses is checked here, independently of the server);
//   - tool_choice required and a named function give calls whose arguments validate, the
//     streamed call reassembles to the same call, and the tool round trip renders;
//   - logprobs: top_logprobs sorted, every logprob <= 0.
// Run by ctest (server_openai_agents); scripts/setup.sh installs the package into build/npm.
// Exit 77 = skipped (no VEGA_TEST_DATA).
'use strict';
const { execFileSync } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');
const assert = require('assert');
const { data, OpenAI, serve: serveArgs } = require('./openai_npm.cjs');

const vega = process.env.VEGA_BINARY;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'vega-agents-'));
const model = path.join(tmp, 'qwen3-tiny.gguf');
execFileSync(vega, ['synth', '--shape', 'qwen3-tiny', '--type', 'Q8_0', '-o', model], { stdio: 'ignore' });

// A JSON Schema check for the keywords used below (type, enum, properties, required,
// additionalProperties false, items, minItems/maxItems, minLength/maxLength in code points,
// minimum/maximum). Returns the first violation, or null.
function violation(s, v, at = '$') {
  const kind = v === null ? 'null' : Array.isArray(v) ? 'array' : Number.isInteger(v) ? 'integer' : typeof v;
  if (s.type) {
    const types = Array.isArray(s.type) ? s.type : [s.type];
    if (!types.includes(kind) && !(kind === 'integer' && types.includes('number'))) return `${at}: ${kind}, not ${types}`;
  }
  if (s.enum && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(v))) return `${at}: ${JSON.stringify(v)} not in enum`;
  if (kind === 'string') {
    const n = [...v].length;
    if (s.minLength !== undefined && n < s.minLength) return `${at}: shorter than ${s.minLength}`;
    if (s.maxLength !== undefined && n > s.maxLength) return `${at}: longer than ${s.maxLength}`;
  }
  if (kind === 'integer' || kind === 'number') {
    if (s.minimum !== undefined && v < s.minimum) return `${at}: below ${s.minimum}`;
    if (s.maximum !== undefined && v > s.maximum) return `${at}: above ${s.maximum}`;
  }
  if (kind === 'array') {
    if (s.minItems !== undefined && v.length < s.minItems) return `${at}: fewer than ${s.minItems} items`;
    if (s.maxItems !== undefined && v.length > s.maxItems) return `${at}: more than ${s.maxItems} items`;
    for (let i = 0; s.items && i < v.length; ++i) {
      const e = violation(s.items, v[i], `${at}[${i}]`);
      if (e) return e;
    }
  }
  if (kind === 'object') {
    for (const k of s.required || []) if (!(k in v)) return `${at}: '${k}' missing`;
    for (const [k, x] of Object.entries(v)) {
      const p = (s.properties || {})[k];
      if (!p) {
        if (s.additionalProperties === false) return `${at}: '${k}' is not allowed`;
        continue;
      }
      const e = violation(p, x, `${at}.${k}`);
      if (e) return e;
    }
  }
  return null;
}

const schema = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 10 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    ok: { type: 'boolean' },
    pet: { enum: ['cat', 'dog', null] },
    tags: { type: 'array', items: { type: 'string', maxLength: 6 }, maxItems: 3 },
    where: { type: 'object', properties: { city: { type: 'string', maxLength: 8 }, zip: { type: ['integer', 'null'] } },
             required: ['city'], additionalProperties: false },
  },
  required: ['name', 'age', 'ok', 'where'],
  additionalProperties: false,
};
// The checker can fail: it refuses what the schema forbids.
assert.ok(violation(schema, { name: '', age: 1, ok: true, where: { city: 'x' } }));
assert.ok(violation(schema, { name: 'a', age: 121, ok: true, where: { city: 'x' } }));
assert.ok(violation(schema, { name: 'a', age: 1, ok: true, where: { city: 'x' }, more: 1 }));
assert.ok(violation(schema, { name: 'a', age: 1, ok: 'yes', where: { city: 'x' } }));
assert.ok(violation(schema, { name: 'a', age: 1, ok: true, tags: ['a', 'b', 'c', 'd'], where: { city: 'x' } }));
assert.strictEqual(violation(schema, { name: 'ab', age: 3, ok: false, pet: null, tags: ['x'], where: { city: 'Oslo', zip: null } }), null);

const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', minLength: 1, maxLength: 12 },
      unit: { enum: ['celsius', 'fahrenheit'] } }, required: ['city'], additionalProperties: false } } },
  { type: 'function', function: { name: 'add', description: 'Adds two numbers',
    parameters: { type: 'object', properties: { a: { type: 'integer', minimum: 0, maximum: 99 },
      b: { type: 'integer', minimum: 0, maximum: 99 } }, required: ['a', 'b'], additionalProperties: false } } },
];
const toolSchema = Object.fromEntries(tools.map((t) => [t.function.name, t.function.parameters]));

function serve(templateName) {
  const t = JSON.parse(fs.readFileSync(path.join(data, 'templates', templateName), 'utf8'));
  const file = path.join(tmp, templateName.replace(/\.json$/, '.jinja'));
  fs.writeFileSync(file, t.template);
  return serveArgs(['-m', model, '--device', 'cpu', '-t', '2', '--parallel', '4', '-c', '2048', '--chat-template-file', file]);
}

async function jsonSchemaAnswers(client, n) {
  const prompts = ['Describe a person', 'Who lives here?', 'A record, please', 'Tell me about Ana', 'Fill the form'];
  let done = 0;
  for (let b = 0; b < n; b += 10) {
    await Promise.all(Array.from({ length: Math.min(10, n - b) }, async (_, j) => {
      const i = b + j;
      const r = await client.chat.completions.create({
        model: 'm', messages: [{ role: 'user', content: `${prompts[i % prompts.length]} (${i})` }],
        max_tokens: 400, temperature: 1, seed: 100 + i,
        response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema } } });
      const c = r.choices[0];
      assert.strictEqual(c.finish_reason, 'stop', `prompt ${i}: ${JSON.stringify(r)}`);
      let v;
      assert.doesNotThrow(() => { v = JSON.parse(c.message.content); }, `prompt ${i}: not JSON: ${c.message.content}`);
      const e = violation(schema, v);
      assert.strictEqual(e, null, `prompt ${i}: ${e}: ${c.message.content}`);
      ++done;
    }));
  }
  return done;
}

async function forcedCalls(client, label) {
  const checked = [];
  for (const [seed, choice] of [[1, 'required'], [2, { type: 'function', function: { name: 'add' } }],
                                [3, { type: 'function', function: { name: 'get_weather' } }]]) {
    const ask = { model: 'm', messages: [{ role: 'user', content: 'Weather in Paris, and 2 + 3?' }], tools,
                  tool_choice: choice, parallel_tool_calls: false, max_tokens: 300, temperature: 1, seed };
    const r = await client.chat.completions.create(ask);
    const c = r.choices[0];
    assert.strictEqual(c.finish_reason, 'tool_calls', `${label} seed ${seed}: ${JSON.stringify(r)}`);
    assert.strictEqual(c.message.tool_calls.length, 1, `${label}: ${JSON.stringify(r)}`);
    const call = c.message.tool_calls[0];
    assert.strictEqual(call.type, 'function');
    assert.match(call.id, /^[A-Za-z0-9]{9}$/);
    if (typeof choice === 'object') assert.strictEqual(call.function.name, choice.function.name);
    const args = JSON.parse(call.function.arguments);
    const e = violation(toolSchema[call.function.name], args);
    assert.strictEqual(e, null, `${label} seed ${seed}: ${e}: ${call.function.arguments}`);
    // Streamed: the tool_calls deltas reassemble to the same call.
    const parts = [];
    let finish = null;
    for await (const chunk of await client.chat.completions.create({ ...ask, stream: true })) {
      if (!chunk.choices.length) continue;
      const ch = chunk.choices[0];
      if (ch.finish_reason) finish = ch.finish_reason;
      for (const d of ch.delta.tool_calls || []) {
        if (!parts[d.index]) parts[d.index] = { name: d.function.name, arguments: '' };
        parts[d.index].arguments += d.function.arguments || '';
      }
    }
    assert.strictEqual(finish, 'tool_calls', label);
    assert.strictEqual(parts.length, 1, label);
    assert.strictEqual(parts[0].name, call.function.name, label);
    assert.strictEqual(parts[0].arguments, call.function.arguments, `${label}: streamed arguments differ`);
    // The round trip: the assistant message as the client got it (null content), then the tool's answer.
    const trip = await client.chat.completions.create({ model: 'm', max_tokens: 4, temperature: 0, tools,
      messages: [...ask.messages, c.message, { role: 'tool', tool_call_id: call.id, content: '{"ok": true}' }] });
    assert.strictEqual(trip.object, 'chat.completion', label);
    checked.push(`${call.function.name}(${call.function.arguments})`);
  }
  return checked;
}

async function logprobs(client) {
  const r = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Hi' }],
                                                   max_tokens: 8, temperature: 1, seed: 4, logprobs: true, top_logprobs: 5 });
  const content = r.choices[0].logprobs.content;
  assert.strictEqual(content.length, r.usage.completion_tokens);
  for (const t of content) {
    assert.ok(t.logprob <= 0, JSON.stringify(t));
    assert.strictEqual(t.top_logprobs.length, 5);
    for (let i = 1; i < 5; ++i) assert.ok(t.top_logprobs[i - 1].logprob >= t.top_logprobs[i].logprob, JSON.stringify(t));
    for (const a of t.top_logprobs) assert.ok(a.logprob <= 0);
  }
}

async function main() {
  const summary = [];
  // (template, json_schema prompts): Qwen3 (Hermes calls), Llama 3.1 (its own JSON calls),
  // gpt-oss (harmony channels; its template needs each tool's description).
  for (const [name, n] of [['Qwen-Qwen3-0.6B.json', 50], ['meta-llama-Llama-3.1-8B-Instruct.json', 5],
                           ['openai-gpt-oss-120b.json', 5]]) {
    const s = serve(name);
    try {
      const port = await s.port;
      const client = new OpenAI({ apiKey: 'none', baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0, timeout: 120000 });
      const answers = await jsonSchemaAnswers(client, n);
      const calls = await forcedCalls(client, name);
      await logprobs(client);
      summary.push(`${name}: ${answers} json_schema answers valid; calls ${calls.join(', ')}`);
    } catch (e) {
      console.error(s.log());
      throw e;
    } finally {
      s.proc.kill('SIGTERM');
    }
  }
  console.log(`openai npm client, agents:\n  ${summary.join('\n  ')}\nall checks passed`);
}

main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });
