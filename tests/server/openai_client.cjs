// The official `openai` npm client (v4) against `vega serve` on stories260K:
// chat and text completions, streaming and not; the streamed text must equal the
// non-streamed text. Run by ctest (server_openai_npm_client); scripts/setup.sh
// installs the package into build/npm. Exit 77 = skipped (no VEGA_TEST_DATA).
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const assert = require('assert');
const { data, OpenAI, serve } = require('./openai_npm.cjs');

const chatml = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + " +
               "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'vega-openai-'));
fs.writeFileSync(path.join(tmp, 'chatml.jinja'), chatml);

const srv = serve(['-m', path.join(data, 'models', 'stories260K.gguf'), '--device', 'cpu', '--parallel', '2', '-c', '256',
                   '--api-key', 'test-key', '--chat-template-file', path.join(tmp, 'chatml.jinja')]);
const server = srv.proc, ready = srv.port;

async function main() {
  const port = await ready;
  const client = new OpenAI({ apiKey: 'test-key', baseURL: `http://127.0.0.1:${port}/v1` });
  const messages = [{ role: 'system', content: 'Tell a story.' }, { role: 'user', content: 'Once upon a time' }];

  const models = await client.models.list();
  assert.strictEqual(models.data[0].id, 'stories260K.gguf');

  const chat = await client.chat.completions.create({ model: 'stories', messages, max_tokens: 24, temperature: 0 });
  assert.strictEqual(chat.object, 'chat.completion');
  assert.strictEqual(chat.choices[0].message.role, 'assistant');
  assert.strictEqual(chat.choices[0].finish_reason, 'length');
  assert.strictEqual(chat.usage.completion_tokens, 24);
  const chatText = chat.choices[0].message.content;
  assert.ok(chatText.length > 0);

  let streamed = '', finish = null, usage = null;
  const s = await client.chat.completions.create({ model: 'stories', messages, max_tokens: 24, temperature: 0,
                                                   stream: true, stream_options: { include_usage: true } });
  for await (const chunk of s) {
    if (chunk.usage) usage = chunk.usage;
    if (!chunk.choices.length) continue;
    streamed += chunk.choices[0].delta.content || '';
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
  }
  assert.strictEqual(streamed, chatText, 'streamed chat text differs from the non-streamed text');
  assert.strictEqual(finish, 'length');
  assert.strictEqual(usage.completion_tokens, 24);

  const comp = await client.completions.create({ model: 'stories', prompt: 'The little dog', max_tokens: 20, temperature: 0 });
  assert.strictEqual(comp.object, 'text_completion');
  const compText = comp.choices[0].text;
  let compStreamed = '';
  const cs = await client.completions.create({ model: 'stories', prompt: 'The little dog', max_tokens: 20, temperature: 0, stream: true });
  for await (const chunk of cs) compStreamed += chunk.choices[0].text;
  assert.strictEqual(compStreamed, compText, 'streamed completion text differs from the non-streamed text');

  // Tools: a required call (its arguments follow the schema), the same call streamed in
  // tool_calls deltas, and the round trip (null content, a tool message) accepted.
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object',
    properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'], additionalProperties: false } } }];
  const ask = { model: 'stories', messages: [{ role: 'user', content: 'Weather?' }], tools, tool_choice: 'required',
                parallel_tool_calls: false, max_tokens: 200, temperature: 1, seed: 3 };
  const tc = await client.chat.completions.create(ask);
  assert.strictEqual(tc.choices[0].finish_reason, 'tool_calls', JSON.stringify(tc));
  const call = tc.choices[0].message.tool_calls[0];
  assert.strictEqual(call.type, 'function');
  assert.strictEqual(call.function.name, 'get_weather');
  const args = JSON.parse(call.function.arguments);
  assert.ok(typeof args.city === 'string' && args.city.length <= 12, call.function.arguments);
  assert.deepStrictEqual(Object.keys(args), ['city']);
  const calls = [];
  let tcFinish = null;
  for await (const chunk of await client.chat.completions.create({ ...ask, stream: true })) {
    const c = chunk.choices[0];
    if (c.finish_reason) tcFinish = c.finish_reason;
    for (const d of c.delta.tool_calls || []) {
      if (!calls[d.index]) calls[d.index] = { id: d.id, name: d.function.name, arguments: '' };
      calls[d.index].arguments += d.function.arguments || '';
    }
  }
  assert.strictEqual(tcFinish, 'tool_calls');
  assert.strictEqual(calls.length, 1);
  assert.strictEqual(calls[0].name, 'get_weather');
  assert.strictEqual(calls[0].arguments, call.function.arguments, 'streamed arguments differ');
  const trip = await client.chat.completions.create({ model: 'stories', max_tokens: 8, temperature: 0, tools,
    messages: [{ role: 'user', content: 'Weather?' }, tc.choices[0].message,
               { role: 'tool', tool_call_id: call.id, content: '{"temp": 18}' }] });
  assert.strictEqual(trip.object, 'chat.completion');

  // logprobs: one entry per token, each <= 0, the alternatives sorted.
  const lpc = await client.chat.completions.create({ model: 'stories', messages, max_tokens: 6, temperature: 0,
                                                     logprobs: true, top_logprobs: 2 });
  const lpContent = lpc.choices[0].logprobs.content;
  assert.strictEqual(lpContent.length, 6);
  for (const t of lpContent) {
    assert.ok(t.logprob <= 0);
    assert.strictEqual(t.top_logprobs.length, 2);
    assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
  }
  assert.strictEqual(lpContent.map((t) => t.token).join(''), lpc.choices[0].message.content);

  // The client surfaces the server's error object.
  await assert.rejects(client.chat.completions.create({ model: 'stories', messages, n: 2 }),
                       (e) => e.status === 400 && /n = 1/.test(e.message));
  const bad = new OpenAI({ apiKey: 'wrong', baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e.status === 401);
  console.log(`openai npm client: chat ${JSON.stringify(chatText)}; completion ${JSON.stringify(compText)}; tool call ${call.function.arguments}; all checks passed`);
}

main().then(() => { server.kill('SIGTERM'); process.exit(0); },
            (e) => { console.error(e); console.error(srv.log()); server.kill('SIGKILL'); process.exit(1); });
