// One forward pass of an ONNX model in ONNX Runtime (CPU), for onnx_export_check.py: reads the input from a file of
// float32 values, writes each output to PREFIX.<n>.bin (in the model's output order) and prints their shapes.
//
//   node ort_outputs.js MODEL.onnx INPUT_NAME D0xD1x... INPUT.bin PREFIX
"use strict";

const fs = require("fs");
const ort = require("onnxruntime-node");

async function main() {
  const [model, name, dims, input, prefix] = process.argv.slice(2);
  const session = await ort.InferenceSession.create(model, { graphOptimizationLevel: "all" });
  const shape = dims.split("x").map(Number);
  const bytes = fs.readFileSync(input);
  const values = new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4);
  const results = await session.run({ [name]: new ort.Tensor("float32", values, shape) });
  const shapes = [];
  session.outputNames.forEach((output, n) => {
    const tensor = results[output];
    fs.writeFileSync(prefix + "." + n + ".bin", Buffer.from(tensor.data.buffer, tensor.data.byteOffset,
                                                           tensor.data.byteLength));
    shapes.push({ name: output, dims: tensor.dims });
  });
  console.log(JSON.stringify(shapes));
}

main().catch((error) => {
  console.error(String(error));
  process.exit(1);
});
