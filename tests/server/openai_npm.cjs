// What the openai npm client tests share (openai_client.cjs, openai_agents.cjs): the test
// data directory (exit 77, skipped, without VEGA_TEST_DATA), the openai package that
// scripts/setup.sh installs into build/npm, and `vega serve` started on a free port.
'use strict';
const { spawn } = require('child_process');
const path = require('path');

const data = process.env.VEGA_TEST_DATA && path.resolve(process.env.VEGA_TEST_DATA);
if (!data) {
  console.log('VEGA_TEST_DATA is not set; data-driven test skipped');
  process.exit(77);
}
const npmDir = path.resolve(process.env.VEGA_NPM_DIR || 'build/npm');
let OpenAI;
try {
  OpenAI = require(path.join(npmDir, 'node_modules', 'openai'));
} catch (e) {
  console.error(`the openai npm package is missing under ${npmDir}: run scripts/setup.sh ` +
                `(npm install --prefix ${npmDir} openai@4)`);
  process.exit(1);
}

// `vega serve ARGS --port 0`: { proc, port (a promise of the port it listens on), log() }.
function serve(args) {
  const proc = spawn(process.env.VEGA_BINARY, ['serve', ...args, '--port', '0']);
  let log = '';
  const port = new Promise((resolve, reject) => {
    proc.stderr.on('data', (d) => {
      log += d;
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(log);
      if (m) resolve(Number(m[1]));
    });
    proc.on('exit', (code) => reject(new Error(`vega serve exited (${code}):\n${log}`)));
    setTimeout(() => reject(new Error(`vega serve did not start:\n${log}`)), 60000);
  });
  return { proc, port, log: () => log };
}

module.exports = { data, OpenAI, serve };
