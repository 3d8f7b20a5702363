// ONNX Runtime's CPU forward passes over one model, for inference_vs_peers.py (onnxruntime-node, installed in this
// folder with `npm install --ignore-scripts`: the package's install script fetches GPU binaries; the CPU ones are
// in the package).
//
//   node ort_worker.js MODEL.onnx THREADS ITERATIONS NAME=D0xD1x...  [NAME=...]
//
// Prints {"forward": mean milliseconds of one run} after two untimed runs (session set-up, first allocations).
"use strict";

const ort = require("onnxruntime-node");

async function main() {
  const [model, threads, iterations, ...inputs] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads),
    interOpNumThreads: 1,
    executionMode: "sequential",
    graphOptimizationLevel: "all",
  });
  const feeds = {};
  let seed = 1;
  for (const input of inputs) {
    const [name, dims] = input.split("=");
    const shape = dims.split("x").map(Number);
    const values = new Float32Array(shape.reduce((a, b) => a * b, 1));
    for (let i = 0; i < values.length; ++i) {
      seed = (seed * 1103515245 + 12345) % 2147483648;  // a fixed sequence, uniform in [-1, 1)
      values[i] = seed / 1073741824 - 1;
    }
    feeds[name] = new ort.Tensor("float32", values, shape);
  }
  for (let i = 0; i < 2; ++i) await session.run(feeds);
  const start = process.hrtime.bigint();
  for (let i = 0; i < Number(iterations); ++i) await session.run(feeds);
  const ms = Number(process.hrtime.bigint() - start) / 1e6 / Number(iterations);
  console.log(JSON.stringify({ forward: ms }));
}

main().catch((error) => {
  console.error(String(error));
  process.exit(1);
});
